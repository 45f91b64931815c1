"""The bundled demo: prenatal-care RAG samples, two experts' labels, and demo logins.

`load_demo` is idempotent: running `calibrate demo` again changes nothing and prints the
same logins. The text is synthetic, written for calibrate (see README.md in this folder).

The experts' bundled labels are imported for every sample but `TO_LABEL`: those stay in both
experts' queues, so logging in as one of them opens the workbench on items to label.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import select

from calibrate.accounts import get_user, set_password
from calibrate.db import write_session
from calibrate.demo.judges import load_demo_judges
from calibrate.ingest import import_file
from calibrate.ingest.sampling import sample_dataset
from calibrate.models import Assignment, Dataset, Label, Sample, User

HERE = Path(__file__).resolve().parent
DATASET = "demo-prenatal"
DESCRIPTION = "Demo: answers of a prenatal-care RAG assistant (synthetic, not medical advice), labelled by two experts."

# Left for the experts to label in the workbench (their bundled labels on these are not imported).
# demo-023 carries hostile markup copied from a web page: it must show as plain text.
TO_LABEL = ("demo-023", "demo-036", "demo-037", "demo-038", "demo-039", "demo-040")

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
        out += ["", f"Log in as an expert to label the {len(TO_LABEL)} items waiting in their queue (keys: press ?);",
                "as engineer or admin for adjudication, guidelines and the team."]
        return out


def load_demo(engine: Engine) -> DemoResult:
    """Load the demo dataset, labels, users and queue into the database (idempotent)."""

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
        with tempfile.TemporaryDirectory() as tmp:
            summary = import_file(session, "labels", _bundled_labels(Path(tmp)), dataset=DATASET)
        result.imports.append(summary.line())
        experts = [name for name, role, _, _ in DEMO_USERS if role == "annotator"]
        sampling = sample_dataset(session, DATASET, fraction=1.0, seed=0, stratify_by=None,
                                  overlap=2, assign=experts, split={"train": 0.2, "dev": 0.5, "test": 0.3})
        result.imports.append(sampling.line())
        _mark_labelled_done(session, dataset)

    result.imports.extend(load_demo_judges(engine))
    return result


def _bundled_labels(folder: Path) -> Path:
    """Write the bundled labels minus those on `TO_LABEL` into `folder`; return the file."""
    path = folder / "labels.jsonl"
    lines = (HERE / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(line for line in lines if line.strip() and json.loads(line)["sample_id"] not in TO_LABEL) + "\n",
                    encoding="utf-8")
    return path


def _mark_labelled_done(session, dataset: Dataset) -> None:
    """Mark the experts' assignments done where the bundled labels cover the sample (never `TO_LABEL`)."""

    labelled = set(
        session.exec(
            select(Label.sample_id, Label.annotator_id).join(Sample)
            .where(Sample.dataset_id == dataset.id, Sample.external_id.not_in(TO_LABEL), Label.source == "import")
        ).all()
    )
    assignments = session.exec(
        select(Assignment).join(Sample).where(Sample.dataset_id == dataset.id, Assignment.status == "pending")
    ).all()
    for assignment in assignments:
        if (assignment.sample_id, assignment.user_id) in labelled:
            assignment.status = "done"
            session.add(assignment)
