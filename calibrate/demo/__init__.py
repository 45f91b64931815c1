"""The bundled demo: prenatal-care RAG samples, two experts' labels, and demo logins.

`load_demo` is idempotent: running `calibrate demo` again changes nothing and prints the
same logins. The text is synthetic, written for calibrate (see README.md in this folder).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import select

from calibrate.accounts import get_user, set_password
from calibrate.db import write_session
from calibrate.models import Assignment, Dataset, Label, User

HERE = Path(__file__).resolve().parent
DATASET = "demo-prenatal"
DESCRIPTION = "Demo: answers of a prenatal-care RAG assistant (synthetic, not medical advice), labelled by two experts."

# Demo logins are printed on purpose: this is sample data on a local machine.
DEMO_USERS = (
    ("dra.garcia", "annotator", "Dra. García (obstetra)", "demo-garcia"),
    ("matrona.ruiz", "annotator", "Matrona Ruiz", "demo-ruiz"),
    ("engineer", "engineer", "Prompt engineer", "demo-engineer"),
    ("admin", "admin", "Admin", "demo-admin"),
)


@dataclass
class DemoResult:
    url_hint: str = ""
    imports: list[str] = field(default_factory=list)
    logins: list[tuple[str, str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Return what `calibrate demo` prints."""
        out = [*self.imports, "", "Demo logins (user / password / role):"]
        out += [f"  {name:<14} {password:<15} {role}" for name, password, role in self.logins]
        return out


def load_demo(engine: Engine) -> DemoResult:
    """Load the demo dataset, labels, users and queue into the database (idempotent)."""
    from calibrate.ingest import import_file
    from calibrate.ingest.sampling import sample_dataset

    result = DemoResult()
    with write_session(engine) as session:
        for username, role, display, password in DEMO_USERS:
            user = get_user(session, username)
            if user is None:
                user = User(username=username, role=role, display_name=display)
                session.add(user)
                session.flush()
            if not user.password_hash:
                set_password(session, user, password)
            result.logins.append((username, password, role))
        summary = import_file(session, "samples", HERE / "samples.jsonl", dataset=DATASET, description=DESCRIPTION)
        result.imports.append(summary.line())
        dataset = session.exec(select(Dataset).where(Dataset.name == DATASET)).one()
        dataset.is_demo = True
        dataset.source = "calibrate demo (synthetic)"
        session.add(dataset)
        session.flush()
        summary = import_file(session, "labels", HERE / "labels.jsonl", dataset=DATASET)
        result.imports.append(summary.line())
        experts = [name for name, role, _, _ in DEMO_USERS if role == "annotator"]
        sampling = sample_dataset(session, DATASET, fraction=1.0, seed=0, stratify_by=None,
                                  overlap=2, assign=experts, split={"train": 0.2, "dev": 0.5, "test": 0.3})
        result.imports.append(sampling.line())
        _mark_labelled_done(session, dataset)
    return result


def _mark_labelled_done(session, dataset: Dataset) -> None:  # noqa: ANN001
    """Mark the experts' assignments done where the bundled labels already cover the sample."""
    from calibrate.models import Sample

    labelled = set(
        session.exec(
            select(Label.sample_id, Label.annotator_id).join(Sample).where(Sample.dataset_id == dataset.id)
        ).all()
    )
    assignments = session.exec(
        select(Assignment).join(Sample).where(Sample.dataset_id == dataset.id, Assignment.status == "pending")
    ).all()
    for assignment in assignments:
        if (assignment.sample_id, assignment.user_id) in labelled:
            assignment.status = "done"
            session.add(assignment)
