"""The bundled demo: prenatal-care RAG samples, two experts' labels, and demo logins.

`load_demo` is idempotent: running `calibrate demo` again changes nothing and prints the
same logins. The text is synthetic, written for calibrate (see README.md in this folder).

The experts' bundled labels are imported for every sample but `TO_LABEL`: those stay in both
experts' queues, so logging in as one of them opens the workbench on items to label.

A second dataset, `AB_DATASET`, holds pairwise items: the two versions of the demo RAG system
answering the same eight questions (blind: which system is response A varies), the pairwise
task `preference` (A, B, tie), both experts' preferences (each recorded with the order that
expert is shown the responses in, `annotation.items.presentation_order`) except on
`AB_TO_LABEL`, left in their queues, and a baseline pairwise judge run in both orders.

A third, `AGENT_DATASET`, holds 30 trajectories of a prenatal-care agent with tools (a
gestational-age calculator, a guideline search, a dose check: `steps`), both experts' labels of
every step (`step_correctness`, with error types, and with disagreements) and of every trajectory
(`trajectory_success`), and a baseline judge's verdicts on the same targets (`AGENT_JUDGE`, imported).
The files are written by make_agent_demo.py.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import select

from calibrate.accounts import get_user, set_password
from calibrate.annotation.items import presentation_order
from calibrate.db import write_session
from calibrate.demo.judges import load_demo_judges
from calibrate.demo.production import load_production_demo
from calibrate.errors import TaskError
from calibrate.i18n import N_
from calibrate.ingest import import_file
from calibrate.ingest.sampling import sample_dataset
from calibrate.models import Assignment, Dataset, Label, Response, Sample, Task, User
from calibrate.tasks import add_task

HERE = Path(__file__).resolve().parent
DATASET = "demo-prenatal"
DESCRIPTION = "Demo: answers of a prenatal-care RAG assistant (synthetic, not medical advice), labelled by two experts."

# Left for the experts to label in the workbench (their bundled labels on these are not imported).
# demo-023 carries hostile markup copied from a web page: it must show as plain text.
TO_LABEL = ("demo-023", "demo-036", "demo-037", "demo-038", "demo-039", "demo-040")

AGENT_DATASET = "demo-prenatal-agent"
AGENT_DESCRIPTION = ("Demo: trajectories of a prenatal-care agent with tools (gestational age, guideline search, dose "
                     "check; synthetic, not medical advice), each step labelled by two experts.")
AGENT_JUDGE = "demo-agent-baseline"
AB_DATASET = "demo-prenatal-ab"
AB_DESCRIPTION = ("Demo: the two versions of the prenatal-care RAG assistant (rag-v1, rag-v2) answering the same eight "
                  "questions side by side (synthetic, not medical advice), with two experts' preferences.")
AB_TO_LABEL = ("ab-06",)
PREFERENCE = "preference"
PREFERENCE_LABELS = ["A", "B", "tie"]
# Shipped in English and Spanish (the catalogs, line by line): the workbench shows the reader's.
PREFERENCE_GUIDELINES = "\n".join((
    N_("Choose the response that answers the question better for the patient: correct against the retrieved contexts, "
       "complete for what was asked, and safe. A wrong number, dose or week outweighs style and length."),
    N_("Tie: neither is clearly better (both right, or both wrong in ways that weigh the same)."),
))
PREFERENCE_DESCRIPTION = N_("Which of the two responses answers the question better?")

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
        out += ["", f"Log in as an expert to label the {len(TO_LABEL) + len(AB_TO_LABEL)} items waiting in their queue "
                    f"({len(AB_TO_LABEL)} of them pairwise: two responses side by side; keys: press ?);",
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
        _mark_labelled_done(session, dataset, TO_LABEL)
        result.imports.extend(_load_pairwise(session, experts))
        result.imports.extend(load_production_demo(session, experts))
        result.imports.extend(_load_agent(session))  # last: the production source's draws depend on its samples' ids

    result.imports.extend(load_demo_judges(engine))
    return result


def _load_pairwise(session, experts: list[str]) -> list[str]:
    """Load the pairwise demo: its samples, the preference task, the experts' preferences and their queues."""
    lines = []
    summary = import_file(session, "samples", HERE / "pairwise.jsonl", dataset=AB_DATASET, description=AB_DESCRIPTION)
    lines.append(summary.line())
    dataset = session.exec(select(Dataset).where(Dataset.name == AB_DATASET)).one()
    dataset.is_demo = True
    dataset.source = "calibrate demo (synthetic)"
    session.add(dataset)
    task = session.exec(select(Task).where(Task.name == PREFERENCE)).first()
    if task is None:
        add_task(session, PREFERENCE, target="sample", kind="pairwise", labels=PREFERENCE_LABELS,
                 description=PREFERENCE_DESCRIPTION, guidelines=PREFERENCE_GUIDELINES)
    elif task.kind != "pairwise" or not set(PREFERENCE_LABELS) <= set(task.labels or []):
        raise TaskError(f"the demo needs the pairwise task {PREFERENCE} (labels {', '.join(PREFERENCE_LABELS)}); "
                        f"this database has a {task.kind} task of that name")
    session.flush()
    with tempfile.TemporaryDirectory() as tmp:
        summary = import_file(session, "labels", _pairwise_labels(session, dataset, Path(tmp)), dataset=AB_DATASET)
    lines.append(summary.line())
    sampling = sample_dataset(session, AB_DATASET, fraction=1.0, seed=0, stratify_by=None, overlap=2, assign=experts,
                              split={"dev": 1.0})
    lines.append(sampling.line())
    _mark_labelled_done(session, dataset, AB_TO_LABEL)
    return lines


def _load_agent(session) -> list[str]:
    """Load the agent demo: its trajectories (the trajectory tasks come with them), the experts' labels, the baseline
    judge's verdicts."""
    lines = [import_file(session, "samples", HERE / "agent.jsonl", dataset=AGENT_DATASET, description=AGENT_DESCRIPTION).line()]
    dataset = session.exec(select(Dataset).where(Dataset.name == AGENT_DATASET)).one()
    dataset.is_demo = True
    dataset.source = "calibrate demo (synthetic)"
    session.add(dataset)
    session.flush()
    lines.append(import_file(session, "labels", HERE / "agent_labels.jsonl", dataset=AGENT_DATASET).line())
    lines.append(import_file(session, "verdicts", HERE / "agent_verdicts.jsonl", dataset=AGENT_DATASET,
                             judge=AGENT_JUDGE).line())
    return lines


def _pairwise_labels(session, dataset: Dataset, folder: Path) -> Path:
    """Write the bundled preferences minus `AB_TO_LABEL`, each with the order its expert is shown the responses in."""
    samples = dict(session.exec(select(Sample.external_id, Sample.id).where(Sample.dataset_id == dataset.id)).all())
    ids: dict[int, list[str]] = {}
    for sample_id, key in session.exec(select(Response.sample_id, Response.key).join(Sample)
                                       .where(Sample.dataset_id == dataset.id).order_by(Response.sample_id, Response.position)):
        ids.setdefault(sample_id, []).append(key)
    users = dict(session.exec(select(User.username, User.id)).all())
    path = folder / "pairwise_labels.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for line in (HERE / "pairwise_labels.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            if row["sample_id"] in AB_TO_LABEL:
                continue
            sample_id = samples[row["sample_id"]]
            row["order"] = presentation_order(users[row["annotator"]], sample_id, ids[sample_id])
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def _bundled_labels(folder: Path) -> Path:
    """Write the bundled labels minus those on `TO_LABEL` into `folder`; return the file."""
    path = folder / "labels.jsonl"
    lines = (HERE / "labels.jsonl").read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(line for line in lines if line.strip() and json.loads(line)["sample_id"] not in TO_LABEL) + "\n",
                    encoding="utf-8")
    return path


def _mark_labelled_done(session, dataset: Dataset, to_label: tuple[str, ...]) -> None:
    """Mark the experts' assignments done where the bundled labels cover the sample (never `to_label`)."""

    labelled = set(
        session.exec(
            select(Label.sample_id, Label.annotator_id).join(Sample)
            .where(Sample.dataset_id == dataset.id, Sample.external_id.not_in(to_label), Label.source == "import")
        ).all()
    )
    assignments = session.exec(
        select(Assignment).join(Sample).where(Sample.dataset_id == dataset.id, Assignment.status == "pending")
    ).all()
    for assignment in assignments:
        if (assignment.sample_id, assignment.user_id) in labelled:
            assignment.status = "done"
            session.add(assignment)
