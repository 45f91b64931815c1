"""Where a judge differs from the experts: the list of disagreements with filters, and one target opened (docs/loop.md).

The dashboard's rows link here; triage and "add as few-shot" (dashboard.py) start from `disagreement_detail`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy import func
from sqlmodel import Session, select

from calibrate import lookup
from calibrate.annotation.items import marked_contexts
from calibrate.calibration import (
    Options,
    apply_order_rule,
    build_report,
    calibrated_task,
    human_gold,
)
from calibrate.datasets import sample_responses
from calibrate.errors import CalibrationError, NotFound
from calibrate.loop.testsplit import (
    DEFAULT_SPLIT,
    Says,
    dataset_splits,
    frozen_test_reason,
)
from calibrate.models import (
    Claim,
    Context,
    Dataset,
    Judge,
    Label,
    Prompt,
    PromptVersion,
    Sample,
    Task,
    Triage,
    User,
    Verdict,
    parse_target_key,
)
from calibrate.reasons import Reason
from calibrate.targets import target_name


@dataclass
class Disagreement:
    """One target where the judge's verdict differs from the human gold."""

    target: str
    sample: str
    position: int | None
    gold: str
    judge: str
    humans: dict[str, str]
    triage: str = ""
    kind: str = "claim"  # what the target is: claim, context, sample (the answer), responses (pairwise)
    text: str = ""  # the target's text (the claim, the context, the answer), for the list; whole on the detail page

    @property
    def where(self) -> str:
        """Return the target as people name it: "demo-004 · claim 1" (calibrate/targets.py)."""
        return target_name(self.sample, self.kind, self.position)

    @property
    def unanimous(self) -> bool:
        return len(set(self.humans.values())) <= 1

    @property
    def pair(self) -> str:
        return f"{self.gold}→{self.judge}"


@dataclass
class DisagreementList(Says):
    dataset: str
    judge: str
    task: str
    split: str | None
    items: list[Disagreement]
    total: int  # before the filters
    pairs: list[str]
    message: str = ""
    order_rule: str | None = None  # pairwise tasks: the rule their judge's verdicts were read by
    message_reason: dict | None = None  # the message's reason: the page words it in the reader's language


def disagreements(session: Session, dataset_name: str, judge_name: str, *, task: str = "claim_support",
                  split: str | None = DEFAULT_SPLIT, pair: str | None = None, agreement: str | None = None,
                  meta: str | None = None, order_rule: str = "consistent") -> DisagreementList:
    """Return the scored targets where the judge and the human gold differ, filtered.

    `pair` is `GOLD→JUDGE` (or `GOLD->JUDGE`); `agreement` is `unanimous` (every annotator gave
    the same label) or `split`; `meta` is `FIELD=VALUE` on the sample's metadata. Few-shot
    examples of the judge's version, unparsed verdicts and targets without gold are not listed
    (they are not scored). Raises NotFound for an unknown dataset, judge or task, CalibrationError for a split or
    a malformed filter.
    """
    calibrated_task(session, task)
    dataset_row = lookup.dataset(session, dataset_name)
    frozen = frozen_test_reason(dataset_row.name, split, dataset_splits(session, dataset_row))
    if frozen is not None:
        out = DisagreementList(dataset=dataset_name, judge=judge_name, task=task, split=split, items=[], total=0, pairs=[])
        out.say(frozen)
        return out
    if agreement not in (None, "", "unanimous", "split"):
        raise CalibrationError(Reason("agreement_unknown", agreement=agreement))
    report = build_report(session, dataset_name, judge_name, options=Options(bootstrap=100, split=split, order_rule=order_rule),
                          tasks=[task])
    section = report.data["tasks"].get(task)
    out = DisagreementList(dataset=dataset_name, judge=judge_name, task=task, split=split, items=[], total=0, pairs=[],
                           order_rule=order_rule if lookup.task(session, task).kind == "pairwise" else None)
    if section is None or "judge_note" in section:
        out.say(Reason("disagreements_no_verdicts_split", judge=judge_name, task=task, dataset=dataset_name, split=split) if split
                else Reason("disagreements_no_verdicts", judge=judge_name, task=task, dataset=dataset_name))
        return out
    task_row = lookup.task(session, task)
    kind = "responses" if task_row.kind == "pairwise" else task_row.target
    items = [Disagreement(r.target, r.sample_id, r.claim if r.claim is not None else r.context, str(r.gold), str(r.judge), r.humans,
                          kind=kind) for r in report.rows[task] if r.agree is False]

    kinds = triage_of(session, lookup.judge(session, judge_name), lookup.task(session, task))
    for d in items:
        d.triage = kinds.get(d.target, "")
    out.total = len(items)
    out.pairs = sorted({d.pair for d in items})
    if pair:
        wanted = pair.replace("->", "→")
        items = [d for d in items if d.pair == wanted]
    if agreement:
        items = [d for d in items if d.unanimous == (agreement == "unanimous")]
    if meta:
        key, sep, value = meta.partition("=")
        if not sep or not key.strip():
            raise CalibrationError(Reason("metadata_filter_shape", meta=meta))
        dataset = lookup.dataset(session, dataset_name)
        rows = session.exec(select(Sample.external_id, Sample.meta).where(Sample.dataset_id == dataset.id)).all()
        keep = {ext for ext, m in rows if isinstance(m, dict) and str(m.get(key.strip())) == value.strip()}
        items = [d for d in items if d.sample in keep]
    out.items = items
    fill_texts(session, items)
    return out


def fill_texts(session: Session, items: list[Disagreement]) -> None:
    """Give each listed disagreement its target's text: the claim, the context or the answer (pairwise: none)."""
    ids: dict[str, list[int]] = {}
    for d in items:
        parsed = parse_target_key(d.target)
        if parsed is not None:
            ids.setdefault(parsed[0], []).append(parsed[1])
    texts: dict[str, str] = {}
    for kind, model, column in (("claim", Claim, Claim.text), ("context", Context, Context.text), ("sample", Sample, Sample.answer)):
        wanted = ids.get(kind)
        for start in range(0, len(wanted or []), 500):  # bounded IN lists
            rows = session.exec(select(model.id, column).where(model.id.in_(wanted[start:start + 500]))).all()
            texts.update({f"{kind}:{row_id}": text for row_id, text in rows})
    for d in items:
        d.text = "" if d.kind == "responses" else texts.get(d.target, "")


@dataclass
class HumanLabel:
    annotator: str
    value: str
    rationale: str
    adjudicated: bool
    evidence: list | None = None  # Label.evidence: context ranks and sentences


@dataclass
class DisagreementDetail:
    """One target as the engineer opens it: the item, the humans, the judge's verdict and raw response."""

    dataset: str
    judge: Judge
    task: Task
    target: str
    sample: Sample
    target_text: str
    position: int | None
    labels: list[HumanLabel]
    gold: str | None
    gold_rationale: str
    verdict: Verdict | None
    prompt: str | None  # the judge's prompt, when it is a prompt version (few-shots can be added)
    fewshot_refusal: str = ""  # why this target cannot become a few-shot example, if it cannot
    triage: str = ""
    # Pairwise tasks: the sample's responses (import order), the judge's verdict in each presentation
    # order, the verdict the order rule makes of them, and the order each annotator saw.
    responses: list = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    judge_value: str | None = None
    order_rule: str = ""
    orders_seen: dict[str, list[str]] = field(default_factory=dict)
    # The sample's retrieved contexts, each with the evidence the experts marked in it (annotation.items.marked_contexts).
    contexts: list = field(default_factory=list)

    @property
    def where(self) -> str:
        """Return the target as people name it: "demo-004 · claim 1" (calibrate/targets.py)."""
        kind = "responses" if self.responses else self.task.target
        return target_name(self.sample.external_id, kind, self.position)


def disagreement_detail(session: Session, dataset_name: str, judge_name: str, target: str,
                        *, task: str = "claim_support", options: Options | None = None) -> DisagreementDetail:
    """Return one target of a dataset with its human labels, the gold and the judge's verdict."""

    dataset = lookup.dataset(session, dataset_name)
    judge = lookup.judge(session, judge_name)
    task_row = calibrated_task(session, task)
    parsed = parse_target_key(target)
    if parsed is None and target.partition(":")[0] == task_row.target and target.partition(":")[2].isdigit():
        raise NotFound(Reason("no_such_target", target=target, dataset=dataset.name))  # an id larger than any row can have
    if parsed is None or parsed[0] != task_row.target:
        raise CalibrationError(Reason("target_wrong_kind", target=target, target2=task_row.target, task_row=task_row.name))
    kind, target_id = parsed
    position, text, sample = None, "", None
    if kind == "claim":
        claim = session.get(Claim, target_id)
        sample = session.get(Sample, claim.sample_id) if claim else None
        position, text = (claim.index, claim.text) if claim else (None, "")
    elif kind == "context":
        context = session.get(Context, target_id)
        sample = session.get(Sample, context.sample_id) if context else None
        position, text = (context.rank, context.text) if context else (None, "")
    else:
        sample = session.get(Sample, target_id)
        text = sample.answer if sample else ""
    if sample is None or sample.dataset_id != dataset.id:
        raise CalibrationError(Reason("no_such_target", target=target, dataset=dataset.name))
    rows = session.exec(
        select(Label, User.username).join(User, User.id == Label.annotator_id)
        .where(Label.task_id == task_row.id, Label.target_key == target, Label.stale.is_(False)).order_by(Label.adjudicated, User.username)
    ).all()
    labels = [HumanLabel(username, label.value, label.rationale, label.adjudicated, label.evidence) for label, username in rows]
    gold, rationale = human_gold(session, task_row, target)
    verdict = session.exec(select(Verdict).where(Verdict.judge_id == judge.id, Verdict.task_id == task_row.id,
                                                 Verdict.target_key == target, Verdict.sample_index == 0)).first()
    prompt = None
    refusal = ""
    if judge.prompt_version_id is not None:
        version = session.get(PromptVersion, judge.prompt_version_id)
        prompt = session.get(Prompt, version.prompt_id).name
    else:
        refusal = "this judge is imported, not a prompt version: there is no prompt to add an example to"
    if sample.split == "test":
        refusal = "the sample is in the test split, which is never shown to a judge"
    elif gold is None:
        refusal = f"no human gold label ({rationale})"
    detail = DisagreementDetail(dataset.name, judge, task_row, target, sample, text, position, labels, gold, rationale,
                                verdict, prompt, refusal, triage_of(session, judge, task_row).get(target, ""))
    contexts = session.exec(select(Context).where(Context.sample_id == sample.id, Context.active.is_(True))
                            .order_by(Context.rank)).all()
    detail.contexts = marked_contexts(contexts, [(h.annotator, h.evidence) for h in labels if not h.adjudicated],
                                      target_id=target_id if kind == "context" else None)
    if task_row.kind == "pairwise":
        detail.responses = sample_responses(session, sample.id)
        detail.verdicts = list(session.exec(select(Verdict).where(
            Verdict.judge_id == judge.id, Verdict.task_id == task_row.id, Verdict.target_key == target, Verdict.sample_index == 0)
            .order_by(Verdict.order_key)).all())
        detail.order_rule = (options or Options()).order_rule
        frame = pd.DataFrame([{"target_key": v.target_key, "sample_id": v.sample_id, "value": v.value, "status": v.status,
                               "order_key": v.order_key} for v in detail.verdicts],
                             columns=["target_key", "sample_id", "value", "status", "order_key"])
        by_rule, _ = apply_order_rule(task_row, frame, detail.order_rule)
        detail.judge_value = by_rule["value"].iloc[0] if len(by_rule) and by_rule["status"].iloc[0] == "ok" else None
        detail.orders_seen = {username: label.order for label, username in rows if label.order}
    return detail


def triage_counts(session: Session, dataset: Dataset, task: Task) -> dict[int, dict[str, int]]:
    """Return judge id → {triage kind: count} for a dataset and task."""

    out: dict[int, dict[str, int]] = {}
    rows = session.exec(select(Triage.judge_id, Triage.kind, func.count()).where(Triage.dataset_id == dataset.id, Triage.task_id == task.id)
                        .group_by(Triage.judge_id, Triage.kind)).all()
    for judge_id, kind, n in rows:
        out.setdefault(judge_id, {})[kind] = int(n)
    return out


def triage_of(session: Session, judge: Judge, task: Task) -> dict[str, str]:
    """Return target key → triage kind of a judge's triaged disagreements."""

    return dict(session.exec(select(Triage.target_key, Triage.kind).where(Triage.judge_id == judge.id, Triage.task_id == task.id)).all())
