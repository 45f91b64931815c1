"""Join human labels and a judge's verdicts into arrays, call the statistics, build the Report.

One function, `build_report`, makes the `Report` that every output renders (JSON, HTML,
Markdown, CSV, the web dashboard and `calibrate gate`), so they never disagree.

Per task and target:

- **Human gold**: the adjudicated label if there is one; else, for categorical tasks, the
  majority of the annotators' current labels (a tie gives no gold and lists the target for
  adjudication); for ordinal and continuous tasks, the mean of the annotators' values.
  Stale labels (their claim or context changed after labelling) are left out.
- **Excluded and counted**: targets whose verdict has no usable value (`n_unparsed`), targets
  with a verdict but no gold (`n_no_gold`, ties included), targets whose gold or verdict is a
  label the task excludes from statistics such as `not_applicable` (`n_excluded_label`), and
  targets used as few-shot examples of the judged prompt version (`n_fewshot`).
- **Uncertainty**: a bootstrap that resamples samples (answers), not claims, because the
  claims of one answer are not independent.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate import stats
from calibrate.models import Dataset, FewShot, Judge, Label, Sample, Task, User, Verdict
from calibrate.stats import Estimate
from calibrate.tasks import format_number


class CalibrationError(ValueError):
    """A report request naming something that does not exist (dataset, judge, task, field)."""


@dataclass
class Options:
    threshold: float = 0.75
    ci_lower: bool = False
    group_by: str | None = None
    bootstrap: int = 2000
    confidence: float = 0.95
    seed: int = 0
    ci_method: str = "percentile"
    k: int = 10
    split: str | None = None  # only the samples of this split (train, dev, test); None: every sample
    budget_half_width: float = 0.05  # the CI half-width the label budget aims at


@dataclass
class ItemRow:
    """One target of one task: what each annotator said, the gold, the judge, and whether they agree."""

    task: str
    target: str
    sample_id: str
    claim: int | None
    context: int | None
    humans: dict[str, str]
    gold: str | None
    gold_source: str
    judge: str | None
    judge_status: str
    agree: bool | None
    excluded: str = ""
    group: str | None = None


@dataclass
class Report:
    """Everything a calibration report says; `data` has exactly the JSON shape of docs/report.md.

    `rows` (one `ItemRow` per target, for the CSV and the item views) is built on first use:
    the JSON report and the gate never pay for it.
    """

    data: dict[str, Any]
    adjudication: dict[str, list[str]] = field(default_factory=dict)
    row_builders: dict[str, Any] = field(default_factory=dict, repr=False)
    _rows: dict[str, list[ItemRow]] | None = field(default=None, repr=False)

    @property
    def rows(self) -> dict[str, list[ItemRow]]:
        """Return the per-target rows of every task."""
        if self._rows is None:
            self._rows = {name: build() for name, build in self.row_builders.items()}
        return self._rows

    @property
    def passed(self) -> bool | None:
        return self.data.get("passed")


# --------------------------------------------------------------------------- loading


def resolve_dataset(session: Session, name: str) -> Dataset:
    """Return the dataset, or raise CalibrationError naming the ones that exist."""
    dataset = session.exec(select(Dataset).where(Dataset.name == name)).first()
    if dataset is None:
        names = ", ".join(session.exec(select(Dataset.name).order_by(Dataset.name)).all()) or "none"
        raise CalibrationError(f"unknown dataset {name!r} (datasets: {names})")
    return dataset


def resolve_judge(session: Session, name: str) -> Judge:
    """Return the judge, or raise CalibrationError naming the ones that exist."""
    judge = session.exec(select(Judge).where(Judge.name == name)).first()
    if judge is None:
        names = ", ".join(session.exec(select(Judge.name).order_by(Judge.name)).all()) or "none"
        raise CalibrationError(f"unknown judge {name!r} (judges: {names})")
    return judge


def _labels_frame(session: Session, dataset: Dataset, task: Task) -> pd.DataFrame:
    query = (
        sa_select(Label.target_key, Label.sample_id, _position(task), User.username,
                  Label.value, Label.adjudicated, Label.stale)
        .join(User, User.id == Label.annotator_id)
        .join(Sample, Sample.id == Label.sample_id)
        .where(Sample.dataset_id == dataset.id, Label.task_id == task.id)
    )
    query = _join_target(query, task, Label)
    frame = _frame(session, query, ["target_key", "sample_id", "position", "annotator", "value", "adjudicated", "stale"])
    return frame.astype({"adjudicated": bool, "stale": bool})


def _frame(session: Session, query, columns: list[str]) -> pd.DataFrame:  # noqa: ANN001
    """Run a Core query on the session's connection straight through the DB-API cursor.

    Reports read hundreds of thousands of rows; SQLAlchemy's per-row Result processing costs
    about ten times the query itself, and these columns need none of it.
    """
    conn = session.connection()
    compiled = query.compile(dialect=conn.dialect)
    params = compiled.construct_params()
    if compiled.positional:
        params = tuple(params[name] for name in compiled.positiontup)
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        cursor.execute(str(compiled), params)
        return pd.DataFrame(cursor.fetchall(), columns=columns)
    finally:
        cursor.close()


def _position(task: Task):  # noqa: ANN202
    """Return the column giving a target's claim index or context rank (NULL for sample targets)."""
    from sqlalchemy import literal

    from calibrate.models import Claim, Context

    if task.target == "claim":
        return Claim.index
    if task.target == "context":
        return Context.rank
    return literal(None)


def _join_target(query, task: Task, model):  # noqa: ANN001, ANN202
    from calibrate.models import Claim, Context

    if task.target == "claim":
        return query.outerjoin(Claim, Claim.id == model.claim_id)
    if task.target == "context":
        return query.outerjoin(Context, Context.id == model.context_id)
    return query


def _verdicts_frame(session: Session, dataset: Dataset, task: Task, judge: Judge) -> pd.DataFrame:
    query = (
        sa_select(Verdict.target_key, Verdict.sample_id, _position(task), Verdict.value, Verdict.status, _active(task))
        .join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.judge_id == judge.id)
    )
    query = _join_target(query, task, Verdict)
    frame = _frame(session, query, ["target_key", "sample_id", "position", "value", "status", "active"])
    # A verdict on a claim or context that an --update retired is kept, but it is not one of the
    # sample's current targets (RAG metrics leave it out).
    frame["active"] = frame["active"].fillna(True).astype(bool)
    return frame


def _active(task: Task):  # noqa: ANN202
    """Return the column saying whether a verdict's claim or context is still active (TRUE for sample targets)."""
    from sqlalchemy import true

    from calibrate.models import Claim, Context

    if task.target == "claim":
        return Claim.active
    if task.target == "context":
        return Context.active
    return true()


def _fewshot_keys(session: Session, judge: Judge | None) -> set[str]:
    if judge is None or judge.prompt_version_id is None:
        return set()
    return set(session.exec(select(FewShot.target_key).where(FewShot.version_id == judge.prompt_version_id)).all())


def _group_values(session: Session, dataset: Dataset, field_name: str) -> dict[int, str | None]:
    """Return sample id → the value of `metadata.FIELD` (or a top-level field) as text."""
    key = field_name.removeprefix("metadata.")
    if field_name.startswith("metadata."):
        rows = session.execute(sa_select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all()
        values = {sid: (None if not isinstance(meta, dict) or meta.get(key) is None else str(meta.get(key))) for sid, meta in rows}
        if all(v is None for v in values.values()):
            present = sorted({k for _, meta in rows if isinstance(meta, dict) for k in meta})
            raise CalibrationError(
                f"no sample of {dataset.name} has {field_name} (metadata fields: {', '.join('metadata.' + k for k in present) or 'none'})"
            )
        return values
    if field_name in ("split", "feedback"):
        column = getattr(Sample, field_name)
        rows = session.execute(sa_select(Sample.id, column).where(Sample.dataset_id == dataset.id)).all()
        return {sid: (None if v is None else str(v)) for sid, v in rows}
    raise CalibrationError(f"cannot group by {field_name!r}: use metadata.FIELD, split or feedback")


def _external_ids(session: Session, dataset: Dataset) -> dict[int, str]:
    return dict(session.execute(sa_select(Sample.id, Sample.external_id).where(Sample.dataset_id == dataset.id)).all())


# --------------------------------------------------------------------------- gold


def categorical_gold(labels: pd.DataFrame) -> pd.DataFrame:
    """Return per target: gold value (or None on a tie), its source, and the annotators' labels.

    Columns: target_key, sample_id, gold, gold_source ("adjudicated" | "majority" | "tie").
    """
    if labels.empty:
        return pd.DataFrame(columns=["target_key", "sample_id", "gold", "gold_source"])
    current = labels[~labels["stale"]]
    adjudicated = current[current["adjudicated"]].drop_duplicates("target_key", keep="last")
    votes = current[~current["adjudicated"]]
    counts = votes.groupby(["target_key", "value"], sort=False).size().rename("votes").reset_index()
    top = counts.groupby("target_key")["votes"].transform("max")
    best = counts[counts["votes"] == top]
    n_best = best.groupby("target_key")["value"].transform("size")
    majority = best[n_best == 1][["target_key", "value"]].rename(columns={"value": "gold"})
    majority["gold_source"] = "majority"
    ties = best[n_best > 1].drop_duplicates("target_key")[["target_key"]].assign(gold=None, gold_source="tie")
    adj = adjudicated[["target_key", "value"]].rename(columns={"value": "gold"}).assign(gold_source="adjudicated")
    gold = pd.concat([adj, majority[~majority["target_key"].isin(adj["target_key"])],
                      ties[~ties["target_key"].isin(adj["target_key"])]], ignore_index=True)
    samples = current.drop_duplicates("target_key").set_index("target_key")["sample_id"]
    gold["sample_id"] = gold["target_key"].map(samples)
    return gold


def numeric_gold(labels: pd.DataFrame) -> pd.DataFrame:
    """Return per target: the adjudicated value, else the mean of the annotators' values."""
    if labels.empty:
        return pd.DataFrame(columns=["target_key", "sample_id", "gold", "gold_source"])
    current = labels[~labels["stale"]].copy()
    current["number"] = current["value"].astype(float)
    adjudicated = current[current["adjudicated"]].drop_duplicates("target_key", keep="last")
    votes = current[~current["adjudicated"]]
    mean = votes.groupby("target_key", sort=False).agg(gold=("number", "mean"), sample_id=("sample_id", "first")).reset_index()
    mean["gold_source"] = "mean"
    adj = adjudicated[["target_key", "number", "sample_id"]].rename(columns={"number": "gold"}).assign(gold_source="adjudicated")
    return pd.concat([adj, mean[~mean["target_key"].isin(adj["target_key"])]], ignore_index=True)


# --------------------------------------------------------------------------- helpers


def _estimate_dict(est: Estimate, *, keep: tuple[str, ...] = ("value", "ci", "status", "note")) -> dict:
    """Return the JSON form of an estimate with the report's keys (plus its p-value when it has one)."""
    full = est.to_dict()
    out = {k: full[k] for k in keep if k in full}
    if est.p_value is not None:
        out["p_value"] = est.p_value
    return out


def labels_needed(n: int, ci: tuple[float, float] | None, value: float | None, threshold: float) -> dict | None:
    """Estimate how many more labelled targets would settle pass/fail at `threshold`.

    Assumes the CI half-width shrinks as 1/√n around an unchanged estimate: to exclude the
    threshold the half-width must fall below |value − threshold|, so
    n_needed = n · (half_width / |value − threshold|)². Returns None when the CI already
    excludes the threshold.
    """
    if ci is None or value is None or n <= 0:
        return None
    low, high = ci
    if not (low <= threshold <= high):
        return None
    half = (high - low) / 2
    gap = abs(value - threshold)
    if gap < 1e-9:
        return {"more_targets": None, "note": "the estimate sits on the threshold: no number of labels is expected to settle it"}
    total = math.ceil(n * (half / gap) ** 2)
    if total > 100 * n:
        return {"more_targets": None,
                "note": (f"the estimate {value:.3f} is too close to the threshold {threshold} for more labels to settle it "
                         f"in practice (it would take over {100 * n} labelled targets)")}
    return {
        "more_targets": max(total - n, 0),
        "note": (f"the CI [{low:.3f}, {high:.3f}] straddles {threshold}; about {max(total - n, 0)} more labelled "
                 f"targets (n ≈ {total}) would be expected to settle it, assuming the estimate stays at "
                 f"{value:.3f} and the CI half-width shrinks as 1/√n"),
    }


BUDGET_CANDIDATES = 200

# Model name prefix → family, for the self-preference guard (a judge grading its own family's answers).
MODEL_FAMILIES = {"gpt": "openai", "chatgpt": "openai", "o1": "openai", "o3": "openai", "o4": "openai", "text-davinci": "openai",
                  "claude": "anthropic", "gemini": "google", "gemma": "google", "palm": "google", "llama": "meta",
                  "mistral": "mistral", "mixtral": "mistral", "ministral": "mistral", "codestral": "mistral",
                  "qwen": "qwen", "deepseek": "deepseek", "command": "cohere", "phi": "microsoft", "grok": "xai"}


def model_family(model: str | None) -> str | None:
    """Return the family of a model name (`openai/gpt-4o-mini` → openai, `llama-3.1-8b` → meta), or None for no model."""
    name = (model or "").strip().lower().rsplit("/", 1)[-1]
    if not name:
        return None
    for prefix in sorted(MODEL_FAMILIES, key=len, reverse=True):
        if name.startswith(prefix):
            return MODEL_FAMILIES[prefix]
    import re

    match = re.match(r"[a-z]+", name)
    return match.group(0) if match else name


def self_preference_warnings(session: Session, dataset: Dataset, judge: Judge | None, samples: set[int] | None = None) -> list[dict]:
    """Return a warning per generator model (sample `metadata.generator_model`) of the judge's own model family.

    The judge's models: its prompt version's `model` and the models of its runs on the dataset
    (imported judges name no model: nothing to compare).
    """
    from calibrate.models import JudgeRun, PromptVersion

    if judge is None:
        return []
    models = set(session.exec(select(JudgeRun.model).where(JudgeRun.judge_id == judge.id, JudgeRun.dataset_id == dataset.id)).all())
    if judge.prompt_version_id is not None:
        version = session.get(PromptVersion, judge.prompt_version_id)
        models.add(version.model if version else "")
    families = {model_family(m): m for m in sorted(models) if model_family(m)}
    if not families:
        return []
    counts: dict[str, int] = {}
    for sid, meta in session.execute(sa_select(Sample.id, Sample.meta).where(Sample.dataset_id == dataset.id)).all():
        if samples is not None and sid not in samples:
            continue
        generator = meta.get("generator_model") if isinstance(meta, dict) else None
        if generator:
            counts[str(generator)] = counts.get(str(generator), 0) + 1
    out = []
    for generator, n in sorted(counts.items()):
        family = model_family(generator)
        if family in families:
            out.append({"kind": "self_preference", "judge_model": families[family], "generator_model": generator,
                        "family": family, "n_samples": n,
                        "message": (f"the judge model {families[family]} is of the same family ({family}) as the generator "
                                    f"{generator} of {n} samples: judges tend to prefer their own family's answers, so "
                                    f"check its alignment on those samples (--group-by metadata.generator_model)")})
    return out


def label_budget(n: int, ci: tuple[float, float] | list | None, target_half_width: float,
                 candidates: list[str] | None = None) -> dict | None:
    """Estimate how many more labelled targets would bring the CI half-width under `target_half_width`.

    Assumes the half-width shrinks as 1/√n: n_needed = n · (half_width / target)². `candidates`
    (target keys the judge already judged but that have no gold, in data order) say which to label
    first; the first `more_targets` of them (at most 200) are listed. None without a CI.
    """
    if ci is None or n <= 0 or None in ci or target_half_width <= 0:
        return None
    half = (ci[1] - ci[0]) / 2
    total = n if half <= target_half_width else math.ceil(round(n * (half / target_half_width) ** 2, 9))  # round: float noise
    more = max(total - n, 0)
    candidates = candidates or []
    chosen = candidates[: min(more, BUDGET_CANDIDATES)]
    if more == 0:
        note = f"the CI half-width {half:.3f} is already within {target_half_width:g}"
    else:
        note = (f"the CI half-width is {half:.3f} with n = {n}; about {more} more labelled targets (n ≈ {total}) would be "
                f"expected to bring it under {target_half_width:g}, assuming it shrinks as 1/√n")
        if len(candidates) < more:
            note += (f"; only {len(candidates)} judged targets lack gold, so the judge must also judge "
                     f"{more - len(candidates)} more targets")
    return {"target_half_width": target_half_width, "half_width": half, "more_targets": more,
            "candidates": chosen, "n_candidates": len(candidates), "note": note}


def _budget_candidates(merged: pd.DataFrame) -> list[str]:
    """Return the targets with a usable verdict but no gold (labelling them adds to n), by sample then target."""
    mask = (merged["excluded"] == "no_gold").to_numpy()
    if not mask.any():
        return []
    pairs = zip(merged["sample_id"].to_numpy()[mask].tolist(), merged["target_key"].to_numpy()[mask].tolist(), strict=True)
    return [key for _, key in sorted(pairs, key=lambda p: (p[0], int(p[1].partition(":")[2])))]


def _decide(alignment: dict, options: Options) -> bool | None:
    value = alignment.get("value")
    if value is None:
        return None
    if options.ci_lower:
        ci = alignment.get("ci")
        return ci is not None and ci[0] >= options.threshold
    return value >= options.threshold


# --------------------------------------------------------------------------- per task


def join_verdicts(gold: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str], *,
                  excluded_labels: set[str] = frozenset()) -> pd.DataFrame:
    """Join gold and verdicts per target and say why each target is left out of the statistics.

    Column `excluded`: "" (scored: gold and a usable verdict), "fewshot", "unparsed" (the verdict
    has no usable value), "no_gold" (a verdict but no gold, ties included), "excluded_label"
    (gold or verdict is a label the task keeps out of statistics). Column `scored`: whether
    the target counts (gold and a usable verdict, not excluded).
    """
    merged = gold.copy()
    if verdicts is not None:
        merged = gold.merge(verdicts[["target_key", "sample_id", "value", "status"]].rename(columns={"value": "judge", "sample_id": "v_sample"}),
                            on="target_key", how="outer")
        merged["sample_id"] = merged["sample_id"].fillna(merged["v_sample"])
        merged = merged.drop(columns=["v_sample"])
    else:
        merged["judge"] = None
        merged["status"] = None
    merged["excluded"] = ""
    merged.loc[merged["target_key"].isin(fewshot), "excluded"] = "fewshot"
    has_verdict = merged["status"].notna()
    usable = has_verdict & merged["judge"].notna() & (merged["status"] == "ok")
    has_gold = merged["gold"].notna()
    open_ = merged["excluded"] == ""
    merged.loc[open_ & has_verdict & ~usable, "excluded"] = "unparsed"
    merged.loc[open_ & usable & ~has_gold, "excluded"] = "no_gold"
    if excluded_labels:
        na = merged["gold"].isin(excluded_labels) | merged["judge"].isin(excluded_labels)
        merged.loc[open_ & usable & has_gold & na, "excluded"] = "excluded_label"
    merged["scored"] = (merged["excluded"] == "") & usable & has_gold
    return merged


def _categorical_section(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str],
                         groups: dict[int, str | None] | None, options: Options, *,
                         gold: pd.DataFrame | None = None, light: bool = False) -> tuple[dict, pd.DataFrame]:
    stat_labels = [lab for lab in (task.labels or []) if lab not in (task.excluded or [])]
    excluded_labels = set(task.excluded or [])
    gold = categorical_gold(labels) if gold is None else gold
    section: dict[str, Any] = {"kind": task.kind, "target": task.target}
    merged = join_verdicts(gold, verdicts, fewshot, excluded_labels=excluded_labels)
    scored = merged[merged["scored"]]

    section["n"] = int(len(scored))
    if task.target != "sample":
        section["n_samples"] = int(scored["sample_id"].nunique())
    section["n_unparsed"] = int((merged["excluded"] == "unparsed").sum())
    section["n_no_gold"] = int((merged["excluded"] == "no_gold").sum())
    section["n_excluded_label"] = int((merged["excluded"] == "excluded_label").sum())
    section["n_fewshot"] = int((merged["excluded"] == "fewshot").sum())
    section["n_ties"] = int((gold["gold_source"] == "tie").sum()) if not gold.empty else 0
    section["labels"] = stat_labels

    if verdicts is not None:
        gold_v, judge_v = scored["gold"].tolist(), scored["judge"].tolist()
        if scored.empty:
            note = "the judge has no usable verdicts on targets with human gold"  # (no verdicts at all: see judge_note)
            kappa = Estimate.no_data(note)
        else:
            kappa = stats.cohen_kappa(gold_v, judge_v, labels=stat_labels)  # its notes name the labels
        if kappa.status == "ok":
            index = {lab: i for i, lab in enumerate(stat_labels)}
            kappa = stats.cluster_bootstrap_kappa(
                [index[v] for v in gold_v], [index[v] for v in judge_v], scored["sample_id"].to_numpy(),
                n_labels=len(stat_labels), n_resamples=options.bootstrap, confidence=options.confidence,
                method=options.ci_method, seed=options.seed,
            )
        section["cohen_kappa"] = _estimate_dict(kappa)
        section["percent_agreement"] = stats.percent_agreement(gold_v, judge_v).value if gold_v else None
        if light:  # the alignment, its decision and the label budget only (the dashboard's rows)
            alignment = {"metric": "cohen_kappa", "value": kappa.value, "ci": list(kappa.ci) if kappa.ci else None}
            section["alignment"] = alignment
            section["passed"] = _decide(alignment, options)
            section["budget"] = label_budget(section["n"], kappa.ci, options.budget_half_width, _budget_candidates(merged))
            return section, merged
        matrix = stats.confusion_matrix(gold_v, judge_v, labels=stat_labels) if gold_v else np.zeros((len(stat_labels),) * 2, int)
        section["confusion"] = {"labels": stat_labels, "rows": "human gold", "columns": "judge", "matrix": np.asarray(matrix).tolist()}
        section["per_label"] = _per_label(gold_v, judge_v, stat_labels)
        section["per_annotator"] = _per_annotator_categorical(labels, merged, stat_labels, excluded_labels)
        if groups is not None:
            section["grouped"] = _grouped_kappa(scored, groups, stat_labels, options.group_by)
        alignment = {"metric": "cohen_kappa", "value": kappa.value, "ci": list(kappa.ci) if kappa.ci else None}
        section["alignment"] = alignment
        section["passed"] = _decide(alignment, options)
        section["labels_needed"] = labels_needed(section["n"], kappa.ci, kappa.value, options.threshold)
        section["budget"] = label_budget(section["n"], kappa.ci, options.budget_half_width, _budget_candidates(merged))
    section["human"] = _human_categorical(labels, stat_labels, excluded_labels)
    if len(merged) == 0:
        section["status"] = "no_data"
    return section, merged


def _per_label(gold: list, judge: list, labels: list[str]) -> dict:
    if not gold:
        return {lab: {"precision": None, "recall": None, "f1": None, "support": 0} for lab in labels}
    prf = stats.per_label_prf(gold, judge, labels=labels)
    return {lab: {k: prf[lab].get(k) for k in ("precision", "recall", "f1", "support")} for lab in labels}


def _human_categorical(labels: pd.DataFrame, stat_labels: list[str], excluded: set[str]) -> dict:
    current = labels[~labels["stale"] & ~labels["adjudicated"] & ~labels["value"].isin(excluded)] if not labels.empty else labels
    annotators = sorted(current["annotator"].unique().tolist()) if not current.empty else []
    multi = current.groupby("target_key")["annotator"].transform("nunique") >= 2 if not current.empty else pd.Series(dtype=bool)
    shared = current[multi] if not current.empty else current
    out: dict[str, Any] = {"n": int(shared["target_key"].nunique()) if not shared.empty else 0, "annotators": annotators}
    if shared.empty:
        out["status"] = "no_data"
        out["note"] = "no target was labelled by two or more annotators"
        out["pairwise_kappa"] = []
        out["fleiss_kappa"] = _estimate_dict(Estimate.no_data(out["note"]))
        out["krippendorff_alpha"] = {"nominal": _estimate_dict(Estimate.no_data(out["note"]))}
        return out
    out["pairwise_kappa"] = [
        {"a": a, "b": b, "n": est.n, "value": est.value, "status": est.status, "note": est.note}
        for a, b, est in _pairwise(shared, lambda x, y: stats.cohen_kappa(x, y, labels=stat_labels))
    ]
    counts = _unit_counts(shared["target_key"], shared["value"].map({lab: i for i, lab in enumerate(stat_labels)}), len(stat_labels))
    out["fleiss_kappa"] = _estimate_dict(stats.fleiss_kappa_counts(counts, labels=stat_labels))
    out["krippendorff_alpha"] = {"nominal": _estimate_dict(stats.krippendorff_alpha_counts(counts, level="nominal", values=stat_labels))}
    return out


def _unit_counts(units: pd.Series, codes: pd.Series, k: int) -> np.ndarray:
    """Return a units × k matrix counting how many raters gave each unit each code."""
    unit_index, uniques = pd.factorize(units)
    counts = np.zeros((len(uniques), k), dtype=np.int64)
    np.add.at(counts, (unit_index, codes.to_numpy(dtype=np.int64)), 1)
    return counts


def _per_annotator_categorical(labels: pd.DataFrame, merged: pd.DataFrame, stat_labels: list[str], excluded: set[str]) -> list[dict]:
    judged = merged[(merged["status"] == "ok") & merged["judge"].notna() & ~merged["judge"].isin(excluded) & (merged["excluded"] != "fewshot")]
    current = labels[~labels["stale"] & ~labels["adjudicated"] & ~labels["value"].isin(excluded)] if not labels.empty else labels
    out = []
    for annotator, group in (current.groupby("annotator") if not current.empty else []):
        pairs = group[["target_key", "value"]].merge(judged[["target_key", "judge"]], on="target_key")
        human, judge = pairs["value"].to_numpy(), pairs["judge"].to_numpy()
        est = stats.cohen_kappa(human, judge, labels=stat_labels) if len(pairs) else Estimate.no_data("no shared targets with the judge")
        out.append({"annotator": annotator, "n": est.n, "cohen_kappa": _estimate_dict(est, keep=("value", "status", "note")),
                    "percent_agreement": float((human == judge).mean()) if len(pairs) else None})
    return out


def _grouped_kappa(scored: pd.DataFrame, groups: dict[int, str | None], stat_labels: list[str], by: str | None) -> dict:
    values = scored["sample_id"].map(groups)
    used, skipped, kappas = 0, 0, []
    for _, part in scored.groupby(values, dropna=False):
        est = stats.cohen_kappa(part["gold"].tolist(), part["judge"].tolist(), labels=stat_labels)
        if est.value is None:
            skipped += 1
        else:
            used += 1
            kappas.append(est.value)
    mean = float(np.mean(kappas)) if kappas else None
    note = "" if kappas else "kappa is undefined in every group"
    return {"by": by, "groups": used, "groups_skipped": skipped,
            "cohen_kappa": {"value": mean, "status": "ok" if kappas else "undefined", "note": note}}


def _numeric_section(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str],
                     groups: dict[int, str | None] | None, options: Options, *,
                     gold: pd.DataFrame | None = None, light: bool = False) -> tuple[dict, pd.DataFrame]:
    gold = numeric_gold(labels) if gold is None else gold
    section: dict[str, Any] = {"kind": task.kind, "target": task.target}
    merged = join_verdicts(gold, verdicts, fewshot)
    scored = merged[merged["scored"]]
    section["n"] = int(len(scored))
    if task.target != "sample":
        section["n_samples"] = int(scored["sample_id"].nunique())
    section["n_unparsed"] = int((merged["excluded"] == "unparsed").sum())
    section["n_no_gold"] = int((merged["excluded"] == "no_gold").sum())
    section["n_fewshot"] = int((merged["excluded"] == "fewshot").sum())
    if task.scale_min is not None:
        section["scale"] = [_plain_number(task.scale_min), _plain_number(task.scale_max)]
    if verdicts is not None:
        x = scored["gold"].astype(float).to_numpy()
        y = scored["judge"].astype(float).to_numpy()
        clusters = scored["sample_id"].to_numpy()
        boot = dict(n_resamples=options.bootstrap, confidence=options.confidence, ci_method=options.ci_method, seed=options.seed)
        if scored.empty:
            note = "the judge has no usable verdicts on targets with human gold"  # (no verdicts at all: see judge_note)
            rho = tau = Estimate.no_data(note)
            r = Estimate.no_data(note)
        elif light:  # the alignment and its decision only (the dashboard's rows)
            rho = _with_p(stats.cluster_bootstrap_corr(x, y, clusters, method="spearman", **boot), stats.spearman_rho(x, y))
        else:
            rho = stats.cluster_bootstrap_corr(x, y, clusters, method="spearman", **boot)
            tau = stats.cluster_bootstrap_corr(x, y, clusters, method="kendall", **boot)
            r = stats.pearson_r(x, y)
            point_rho, point_tau = stats.spearman_rho(x, y), stats.kendall_tau_b(x, y)
            rho = _with_p(rho, point_rho)
            tau = _with_p(tau, point_tau)
        section["spearman_rho"] = _estimate_dict(rho, keep=("value", "ci", "p_value", "status", "note"))
        if light:
            alignment = {"metric": "spearman_rho", "value": rho.value, "ci": list(rho.ci) if rho.ci else None}
            section["alignment"] = alignment
            section["passed"] = _decide(alignment, options)
            section["budget"] = label_budget(section["n"], rho.ci, options.budget_half_width, _budget_candidates(merged))
            return section, merged
        section["kendall_tau"] = _estimate_dict(tau, keep=("value", "ci", "p_value", "status", "note"))
        section["pearson_r"] = _estimate_dict(r, keep=("value", "p_value", "status", "note"))
        section["weighted_kappa"] = _weighted_kappa(task, x, y, labels, scored)
        section["per_annotator"] = _per_annotator_numeric(labels, merged)
        if groups is not None:
            gvals = scored["sample_id"].map(groups).tolist()
            grouped = {"by": options.group_by}
            for name, method in (("spearman_rho", "spearman"), ("kendall_tau", "kendall"), ("pearson_r", "pearson")):
                est = stats.grouped_correlation(x, y, gvals, method=method) if len(x) else Estimate.no_data("no scored targets")
                grouped[name] = _estimate_dict(est, keep=("value", "status", "note"))
                grouped.setdefault("groups", est.extra.get("groups", 0))
                grouped.setdefault("groups_skipped", est.extra.get("groups_skipped", 0))
            section["grouped"] = grouped
        alignment = {"metric": "spearman_rho", "value": rho.value, "ci": list(rho.ci) if rho.ci else None}
        section["alignment"] = alignment
        section["passed"] = _decide(alignment, options)
        section["labels_needed"] = labels_needed(section["n"], rho.ci, rho.value, options.threshold)
        section["budget"] = label_budget(section["n"], rho.ci, options.budget_half_width, _budget_candidates(merged))
    section["human"] = _human_numeric(labels)
    if len(merged) == 0:
        section["status"] = "no_data"
    return section, merged


def _with_p(boot: Estimate, point: Estimate) -> Estimate:
    if boot.status != "ok" or point.p_value is None:
        return boot
    return Estimate(value=boot.value, n=boot.n, ci=boot.ci, status=boot.status, note=boot.note, p_value=point.p_value, extra=boot.extra)


def _weighted_kappa(task: Task, x: np.ndarray, y: np.ndarray, labels: pd.DataFrame, scored: pd.DataFrame) -> dict:
    """Quadratic weighted kappa between gold and judge on the task's integer scale.

    When the gold is fractional (a mean of annotators who differ), kappa against it is not
    defined; the value is then the mean of each annotator's weighted kappa with the judge.
    """
    if len(x) == 0:
        return _estimate_dict(Estimate.no_data("no scored targets"), keep=("value", "status", "note"))
    if task.scale_min is None or task.scale_max is None:
        return {"value": None, "status": "undefined", "note": "the task has no scale"}
    if not np.all(np.mod(y, 1) == 0):
        return {"value": None, "status": "undefined", "note": "quadratic weighted kappa needs integer scores; the judge gave fractional ones"}
    scale = list(range(int(task.scale_min), int(task.scale_max) + 1))
    if np.all(np.mod(x, 1) == 0):
        est = stats.cohen_kappa(x.astype(int).tolist(), y.astype(int).tolist(), labels=scale, weights="quadratic")
        return _estimate_dict(est, keep=("value", "status", "note")) | {"weights": "quadratic", "against": "gold"}
    judge_of = dict(zip(scored["target_key"], y, strict=True))
    current = labels[~labels["stale"] & ~labels["adjudicated"]]
    values = []
    for _, group in current.groupby("annotator"):
        pairs = [(float(v), judge_of[k]) for k, v in zip(group["target_key"], group["value"], strict=True) if k in judge_of]
        if len(pairs) >= 2 and all(float(h).is_integer() for h, _ in pairs):
            est = stats.cohen_kappa([int(h) for h, _ in pairs], [int(j) for _, j in pairs], labels=scale, weights="quadratic")
            if est.value is not None:
                values.append(est.value)
    if not values:
        return {"value": None, "status": "undefined", "note": "the gold is fractional (a mean of annotators) and no annotator has enough integer labels"}
    return {"value": float(np.mean(values)), "status": "ok", "weights": "quadratic", "against": "each annotator",
            "note": f"the gold is a mean of annotators (fractional), so this is the mean of {len(values)} annotators' weighted kappa with the judge"}


def _plain_number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _human_numeric(labels: pd.DataFrame) -> dict:
    current = labels[~labels["stale"] & ~labels["adjudicated"]] if not labels.empty else labels
    annotators = sorted(current["annotator"].unique().tolist()) if not current.empty else []
    multi = current.groupby("target_key")["annotator"].transform("nunique") >= 2 if not current.empty else pd.Series(dtype=bool)
    shared = current[multi] if not current.empty else current
    out: dict[str, Any] = {"n": int(shared["target_key"].nunique()) if not shared.empty else 0, "annotators": annotators}
    if shared.empty:
        note = "no target was labelled by two or more annotators"
        out.update(status="no_data", note=note, krippendorff_alpha={
            "ordinal": _estimate_dict(Estimate.no_data(note)), "interval": _estimate_dict(Estimate.no_data(note))})
        out["pairwise_spearman"] = []
        return out
    numbers = shared["value"].astype(float)
    domain = np.sort(numbers.unique())
    counts = _unit_counts(shared["target_key"], pd.Series(np.searchsorted(domain, numbers.to_numpy())), len(domain))
    values = domain.tolist()
    out["krippendorff_alpha"] = {
        "ordinal": _estimate_dict(stats.krippendorff_alpha_counts(counts, level="ordinal", values=values)),
        "interval": _estimate_dict(stats.krippendorff_alpha_counts(counts, level="interval", values=values)),
    }
    out["pairwise_spearman"] = [
        {"a": a, "b": b, "n": est.n, "value": est.value, "status": est.status, "note": est.note}
        for a, b, est in _pairwise(shared, lambda x, y: stats.spearman_rho(x.astype(float), y.astype(float)))
    ]
    return out


def _pairwise(labels: pd.DataFrame, statistic):  # noqa: ANN001, ANN202
    """Yield (a, b, estimate) for every pair of annotators over the targets both labelled."""
    by_annotator = {a: g[["target_key", "value"]] for a, g in labels.groupby("annotator")}
    for a, b in itertools.combinations(sorted(by_annotator), 2):
        both = by_annotator[a].merge(by_annotator[b], on="target_key", suffixes=("_a", "_b"))
        if both.empty:
            yield a, b, Estimate.no_data(f"no targets labelled by both {a} and {b}")
        else:
            yield a, b, statistic(both["value_a"].to_numpy(), both["value_b"].to_numpy())


def _per_annotator_numeric(labels: pd.DataFrame, merged: pd.DataFrame) -> list[dict]:
    judged = merged[(merged["status"] == "ok") & merged["judge"].notna() & (merged["excluded"] != "fewshot")]
    current = labels[~labels["stale"] & ~labels["adjudicated"]] if not labels.empty else labels
    out = []
    for annotator, group in (current.groupby("annotator") if not current.empty else []):
        pairs = group[["target_key", "value"]].merge(judged[["target_key", "judge"]], on="target_key")
        est = (stats.spearman_rho(pairs["value"].astype(float).to_numpy(), pairs["judge"].astype(float).to_numpy())
               if len(pairs) else Estimate.no_data("no shared targets with the judge"))
        out.append({"annotator": annotator, "n": est.n, "spearman_rho": _estimate_dict(est, keep=("value", "status", "note"))})
    return out


# --------------------------------------------------------------------------- RAG metrics from the same labels
#
# Per-sample values from one side (the human gold or the judge's verdicts), computed by the pure
# functions of stats.rag and stats.retrieval. `build_report` uses them on the frames it has
# already read; `sample_metric` (the A/B test's entry point) reads what one metric needs.

RAG_METRICS = ("faithfulness", "context_precision")
RETRIEVAL_METRICS = {"recall": "recall", "precision": "precision", "f1": "f1", "ndcg": "ndcg", "mrr": "rr"}
RETRIEVAL_SOURCES = {
    "ids": "the samples' retrieved_ids (ranked) and relevant_ids",
    "context_relevance_gold": ("the human gold of context_relevance: each sample's retrieved contexts in rank order, "
                               "gold 'relevant' as relevant (a context without gold counts as not relevant); recall "
                               "is relative to the relevant contexts that were retrieved, the only ones known"),
    "context_relevance_judge": ("the judge's context_relevance verdicts: each sample's retrieved contexts in rank "
                                "order, verdict 'relevant' as relevant (no usable verdict counts as not relevant)"),
}


def _claim_totals(session: Session, dataset: Dataset) -> pd.Series:
    """Return sample id → number of active claims (the denominator of faithfulness)."""
    from sqlalchemy import func

    from calibrate.models import Claim

    query = (sa_select(Claim.sample_id, func.count())
             .join(Sample, Sample.id == Claim.sample_id)
             .where(Sample.dataset_id == dataset.id, Claim.active.is_(True))
             .group_by(Claim.sample_id))
    frame = _frame(session, query, ["sample_id", "n"])
    return pd.Series(frame["n"].to_numpy(dtype=np.int64), index=frame["sample_id"].to_numpy(dtype=np.int64))


def _per_sample(sample_ids: np.ndarray, values: np.ndarray) -> pd.Series:
    """Return the values by sample id, in id order.

    The order rows come back in is the database's (PostgreSQL's hash joins differ from
    SQLite's loops); sorting here keeps means and correlations identical to the last digit.
    """
    series = pd.Series(np.asarray(values, dtype=float), index=pd.Index(np.asarray(sample_ids, dtype=np.int64), name="sample_id"))
    return series.sort_index()


def human_faithfulness(gold: pd.DataFrame, totals: pd.Series, *, excluded: set[str], skip: set[str] = frozenset()) -> tuple[pd.Series, int]:
    """Return the gold faithfulness per sample and the claims of those samples left without gold.

    Per sample with any gold row (ties included): supported / claims with a gold label,
    leaving out claims whose gold is an excluded label (not_applicable) and the keys in
    `skip` (few-shot examples). A claim without gold (a tie, or not labelled) is unknown, not
    unsupported: it is left out and counted.
    """
    if gold.empty:
        return _per_sample(np.zeros(0), np.zeros(0)), 0
    rows = gold[~gold["target_key"].isin(skip)] if skip else gold
    samples = pd.unique(gold["sample_id"]).astype(np.int64)
    has_gold = rows["gold"].notna().to_numpy()
    counted = has_gold & ~rows["gold"].isin(excluded).to_numpy()
    supported = (rows["gold"] == "supported").to_numpy() & counted
    codes = pd.Index(samples).get_indexer(rows["sample_id"].to_numpy(dtype=np.int64))
    s, c = stats.faithfulness_counts(codes, supported, counted, n_groups=len(samples))
    with_gold = np.bincount(codes, weights=has_gold.astype(float), minlength=len(samples))
    claims = totals.reindex(samples, fill_value=0).to_numpy()
    n_no_gold = int(np.clip(claims - with_gold - _skipped_per(gold, skip, samples), 0, None).sum())
    return _per_sample(samples, stats.faithfulness(s, c)), n_no_gold


def _skipped_per(frame: pd.DataFrame, skip: set[str], samples: np.ndarray) -> np.ndarray:
    """Return per sample how many of its targets are in `skip` (few-shot examples)."""
    if not skip:
        return np.zeros(len(samples))
    part = frame[frame["target_key"].isin(skip)].drop_duplicates("target_key")
    codes = pd.Index(samples).get_indexer(part["sample_id"].to_numpy(dtype=np.int64))
    return np.bincount(codes[codes >= 0], minlength=len(samples)).astype(float)


def judge_faithfulness(verdicts: pd.DataFrame, totals: pd.Series, *, excluded: set[str],
                       skip: set[str] = frozenset()) -> tuple[pd.Series, int]:
    """Return the judge's faithfulness per sample and the claims counted without a usable verdict.

    Per sample with any verdict: supported verdicts / the sample's active claims, less the
    claims the judge called an excluded label (not_applicable) and few-shot examples (`skip`).
    The division is by the claims, not by the verdicts returned: a claim whose verdict
    failed, could not be parsed, or was never given counts as not supported.
    """
    if verdicts.empty:
        return _per_sample(np.zeros(0), np.zeros(0)), 0
    rows = verdicts[verdicts["active"].astype(bool)] if "active" in verdicts else verdicts
    samples = pd.unique(rows["sample_id"]).astype(np.int64)
    rows = rows[~rows["target_key"].isin(skip)] if skip else rows
    ok = (rows["status"] == "ok").to_numpy() & rows["value"].notna().to_numpy()
    excluded_rows = ok & rows["value"].isin(excluded).to_numpy()
    usable = ok & ~excluded_rows
    supported = usable & (rows["value"] == "supported").to_numpy()
    codes = pd.Index(samples).get_indexer(rows["sample_id"].to_numpy(dtype=np.int64))
    n = len(samples)
    claims = totals.reindex(samples, fill_value=0).to_numpy(dtype=float)
    counted = np.clip(claims - _skipped_per(verdicts, skip, samples)
                      - np.bincount(codes, weights=excluded_rows.astype(float), minlength=n), 0, None)
    hits = np.bincount(codes, weights=supported.astype(float), minlength=n)
    valued = np.bincount(codes, weights=usable.astype(float), minlength=n)
    counted = np.maximum(counted, valued)  # verdicts on claims the totals do not know (never expected)
    return _per_sample(samples, stats.faithfulness(hits, counted)), int((counted - valued).sum())


def relevance_by_sample(frame: pd.DataFrame, relevant: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the sample ids and their rank-ordered relevance matrix (samples × ranks, bool).

    `frame` has one row per judged context (`sample_id`), `relevant` says whether each is
    relevant and `ranks` gives its 0-based rank; ranks without a row are not relevant.
    """
    keep = ~pd.isna(ranks)
    sample_col = frame["sample_id"].to_numpy(dtype=np.int64)
    samples = pd.unique(sample_col).astype(np.int64)
    codes = pd.Index(samples).get_indexer(sample_col[keep])
    matrix = stats.ranked_matrix(codes, np.asarray(ranks[keep], dtype=np.int64), np.asarray(relevant, dtype=float)[keep],
                                 n_groups=len(samples))
    return samples, matrix.astype(bool)


def _gold_rows(merged: pd.DataFrame) -> pd.DataFrame:
    """Return the targets of a merged frame that have human gold rows (ties included, gold None)."""
    return merged[merged["gold_source"].notna()] if "gold_source" in merged else merged.iloc[:0]


def _gold_relevance(gold: pd.DataFrame, positions: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    ranks = gold["target_key"].map(positions).to_numpy(dtype=float)
    return relevance_by_sample(gold, (gold["gold"] == "relevant").to_numpy(), ranks)


def _judge_relevance(verdicts: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    rows = verdicts[verdicts["active"].astype(bool)] if "active" in verdicts else verdicts
    relevant = ((rows["status"] == "ok") & (rows["value"] == "relevant")).to_numpy()
    return relevance_by_sample(rows, relevant, rows["position"].to_numpy(dtype=float))


def _human_vs_judge(human: pd.Series, judge: pd.Series | None) -> dict:
    """Return the per-sample metric's mean from gold and from the judge, and their Spearman correlation."""
    human = human[np.isfinite(human.to_numpy())]
    out: dict[str, Any] = {"human_mean": float(human.mean()) if len(human) else None, "n_human": len(human)}
    if judge is not None:
        judge = judge[np.isfinite(judge.to_numpy())]
        both = human.index.intersection(judge.index)
        out["judge_mean"] = float(judge.mean()) if len(judge) else None
        out["n_judge"] = len(judge)
        est = stats.spearman_rho(human[both].to_numpy(), judge[both].to_numpy()) if len(both) else Estimate.no_data("no sample has both")
        out["spearman_rho"] = _estimate_dict(est, keep=("value", "p_value", "status", "note")) | {"n": est.n}
    return out


def _faithfulness(gold: pd.DataFrame, verdicts: pd.DataFrame | None, totals: pd.Series, excluded: set[str], fewshot: set[str],
                  metric: pd.Series | None = None) -> dict:
    """Faithfulness per sample (supported / claims) from the gold and from the judge.

    `metric`: the judge's per-sample scores when it is a faithfulness metric judge (no
    claim_support verdicts of its own).
    """
    human, no_gold = human_faithfulness(gold, totals, excluded=excluded, skip=fewshot)
    judge, no_verdict = (judge_faithfulness(verdicts, totals, excluded=excluded, skip=fewshot)
                         if verdicts is not None else (metric, 0))
    out = _human_vs_judge(human, judge)
    out["n_claims_no_gold"] = no_gold
    if verdicts is not None:
        out["n_claims_no_verdict"] = no_verdict
    return out


def _context_precision(gold_relevance: tuple[np.ndarray, np.ndarray], verdicts: pd.DataFrame | None,
                       metric: pd.Series | None = None) -> dict:
    """Rank-weighted context precision per sample, (1/R) Σ_k precision@k · rel_k, from gold and judge.

    Contexts keep their retrieval rank; one without gold (or without a usable verdict) counts
    as not relevant at its rank. A sample with no relevant context scores 0. `metric`: the
    judge's per-sample scores when it is a context_precision metric judge.
    """
    samples, rel = gold_relevance
    human = _per_sample(samples, stats.context_precision(rel))
    judge = metric
    if verdicts is not None:
        j_samples, j_rel = _judge_relevance(verdicts)
        judge = _per_sample(j_samples, stats.context_precision(j_rel))
    return _human_vs_judge(human, judge)


def _id_lists(session: Session, dataset: Dataset) -> tuple[np.ndarray, list, list, int]:
    """Return the samples carrying both id lists (ids, retrieved lists, relevant lists) and how many lack them."""
    import json

    frame = _frame(session, sa_select(Sample.id, Sample.retrieved_ids, Sample.relevant_ids).where(Sample.dataset_id == dataset.id),
                   ["sample_id", "retrieved", "relevant"])
    ids, retrieved, relevant = [], [], []
    for sid, ret, rel in zip(frame["sample_id"], frame["retrieved"], frame["relevant"], strict=True):
        # SQLite hands JSON columns over as text (JSON null included); other drivers parse them.
        ret = json.loads(ret) if isinstance(ret, str) else ret
        rel = json.loads(rel) if isinstance(rel, str) else rel
        if isinstance(ret, list) and isinstance(rel, list):
            ids.append(sid)
            retrieved.append(ret)
            relevant.append(rel)
    return np.asarray(ids, dtype=np.int64), retrieved, relevant, len(frame) - len(ids)


def _retrieval_section(k: int, source: str, samples: np.ndarray, rel: np.ndarray, n_relevant: np.ndarray,
                       n_skipped: int) -> dict:
    per_query = stats.per_query_metrics(rel, n_relevant, k=k)
    means = stats.retrieval.summarize(per_query, n_relevant)
    n_no_relevant = int(np.count_nonzero(n_relevant <= 0))
    section: dict[str, Any] = {
        "k": k, "source": source, "n": len(samples) - n_no_relevant, "n_no_relevant": n_no_relevant,
        "n_skipped": n_skipped,
    }
    for key, name in (("recall_at_k", "recall"), ("precision_at_k", "precision"), ("f1_at_k", "f1"), ("mrr", "rr"),
                      ("ndcg_at_k", "ndcg")):
        section[key] = means[name].value
    notes = [RETRIEVAL_SOURCES[source]]
    if n_no_relevant:
        notes.append(f"{n_no_relevant} sample(s) without a relevant document are left out of the means")
    if section["n"] == 0:
        notes.append("no sample has a relevant document: every metric is undefined")
    section["note"] = "; ".join(notes)
    return section


def _retrieval(session: Session, dataset: Dataset, k: int, gold_relevance: tuple[np.ndarray, np.ndarray] | None,
               n_samples: int) -> dict | None:
    """Return the report's retrieval section: from the samples' id lists, else from context_relevance gold."""
    ids, retrieved, relevant, skipped = _id_lists(session, dataset)
    if len(ids):
        rel, n_relevant = stats.relevance_matrix(retrieved, relevant)
        return _retrieval_section(k, "ids", ids, rel, n_relevant, skipped)
    if gold_relevance is not None and len(gold_relevance[0]):
        samples, rel = gold_relevance
        return _retrieval_section(k, "context_relevance_gold", samples, rel, rel.sum(axis=1), n_samples - len(samples))
    return None


@dataclass
class SampleValues:
    """One metric per sample (index: sample primary key; NaN where undefined) and where it came from."""

    values: pd.Series
    source: str
    note: str = ""


def sample_field_values(session: Session, dataset: Dataset, field_name: str) -> dict[int, str | None]:
    """Return sample id → the value of `metadata.FIELD`, `split` or `feedback` as text (CalibrationError if unknown)."""
    return _group_values(session, dataset, field_name)


def _task_named(session: Session, name: str) -> Task:
    task = session.exec(select(Task).where(Task.name == name)).first()
    if task is None:
        raise CalibrationError(f"unknown task {name!r}")
    return task


def sample_metric(session: Session, dataset: Dataset, metric: str, *, judge: Judge | None = None, k: int = 10) -> SampleValues:
    """Return a metric per sample from the human gold (judge None) or from a judge's verdicts.

    `metric`: "faithfulness", "context_precision", a retrieval metric ("recall", "precision",
    "f1", "ndcg" at cut-off `k`, or "mrr"), or the name of an ordinal or continuous task on
    whole samples (such as answer_quality: the gold mean or adjudicated value, or the judge's
    score). Retrieval metrics from the human side use the samples' retrieved_ids and
    relevant_ids when any sample carries both, else the context_relevance gold; from a judge,
    its context_relevance verdicts. A metric judge of faithfulness or context_precision gives
    its own per-sample scores. The human faithfulness and context precision are `task_gold`'s,
    the gold the report calibrates metric judges against (direct expert values first, else
    derived), so an A/B test and a report never disagree on a sample's human value.
    """
    side = f"judge {judge.name}" if judge is not None else "the human gold"
    if judge is not None and metric in DERIVED_GOLD:
        scores = _metric_scores(session, dataset, judge, metric, None)
        if scores is not None:  # a metric judge: its own per-sample scores
            return SampleValues(scores, f"{metric}: {side} (metric judge)")
    if judge is None and metric in DERIVED_GOLD:
        task = _task_named(session, metric)
        gold = task_gold(session, dataset, task, _labels_frame(session, dataset, task))
        direct = int((gold["gold_source"] != f"derived:{DERIVED_GOLD[metric]}").sum()) if len(gold) else 0
        return SampleValues(_per_sample(gold["sample_id"].to_numpy(dtype=np.int64), gold["gold"].astype(float).to_numpy()),
                            f"{DERIVED_GOLD[metric]}: {side}" + (f" (direct {metric} values for {direct} samples)" if direct else ""))
    if metric == "faithfulness":
        task = _task_named(session, "claim_support")
        totals = _claim_totals(session, dataset)
        excluded = set(task.excluded or [])
        values, _ = judge_faithfulness(_require_verdicts(session, dataset, task, judge), totals, excluded=excluded,
                                       skip=_fewshot_keys(session, judge))
        return SampleValues(values, f"claim_support: {side}")
    if metric == "context_precision" or metric in RETRIEVAL_METRICS:
        if metric in RETRIEVAL_METRICS and judge is None:
            ids, retrieved, relevant, _ = _id_lists(session, dataset)
            if len(ids):
                rel, n_relevant = stats.relevance_matrix(retrieved, relevant)
                per_query = stats.per_query_metrics(rel, n_relevant, k=k)
                return SampleValues(_per_sample(ids, per_query[RETRIEVAL_METRICS[metric]]), "ids", RETRIEVAL_SOURCES["ids"])
        task = _task_named(session, "context_relevance")
        if judge is None:
            labels = _labels_frame(session, dataset, task)
            samples, rel = _gold_relevance(categorical_gold(labels), _positions(labels, None))
            source = "context_relevance_gold"
        else:
            samples, rel = _judge_relevance(_require_verdicts(session, dataset, task, judge))
            source = "context_relevance_judge"
        if metric == "context_precision":
            return SampleValues(_per_sample(samples, stats.context_precision(rel)), f"context_relevance: {side}")
        per_query = stats.per_query_metrics(rel, rel.sum(axis=1), k=k)
        return SampleValues(_per_sample(samples, per_query[RETRIEVAL_METRICS[metric]]), source, RETRIEVAL_SOURCES[source])
    task = session.exec(select(Task).where(Task.name == metric)).first()
    if task is None or task.target != "sample" or task.kind == "categorical":
        scored = ", ".join(name for name in session.exec(select(Task.name).where(Task.target == "sample", Task.kind != "categorical")
                                                         .order_by(Task.id)).all() if name not in DERIVED_GOLD)
        raise CalibrationError(f"unknown metric {metric!r} (metrics: faithfulness, context_precision, ndcg@K, recall@K, "
                               f"precision@K, f1@K, mrr{', ' + scored if scored else ''})")
    if judge is None:
        gold = numeric_gold(_labels_frame(session, dataset, task))
        return SampleValues(_per_sample(gold["sample_id"].to_numpy(dtype=np.int64), gold["gold"].astype(float).to_numpy()),
                            f"{task.name}: {side} (adjudicated value, else the mean of the annotators)")
    verdicts = _require_verdicts(session, dataset, task, judge)
    usable = verdicts[(verdicts["status"] == "ok") & verdicts["value"].notna()]
    return SampleValues(_per_sample(usable["sample_id"].to_numpy(dtype=np.int64), usable["value"].astype(float).to_numpy()),
                        f"{task.name}: {side}")


def _split_samples(session: Session, dataset: Dataset, split: str) -> set[int]:
    """Return the ids of the dataset's samples in `split` (CalibrationError naming the splits if none)."""
    rows = session.execute(sa_select(Sample.id, Sample.split).where(Sample.dataset_id == dataset.id)).all()
    ids = {sid for sid, value in rows if value == split}
    if not ids:
        present = sorted({value for _, value in rows if value})
        raise CalibrationError(f"no sample of {dataset.name} is in split {split!r} (splits: {', '.join(present) or 'none'})")
    return ids


def alignment_sections(session: Session, dataset_name: str, task_name: str, judge_names: list[str],
                       options: Options | None = None) -> dict[str, dict | None]:
    """Return judge name → its task section reduced to n, the excluded counts, the alignment and `passed`
    (None for a judge without verdicts for the task), each computed exactly as `build_report` does.

    The labels and the gold are loaded once for all judges: this is what the dashboard of many
    prompt versions needs, without the per-label, per-annotator and human–human parts.
    """
    options = options or Options()
    dataset = resolve_dataset(session, dataset_name)
    task = _task_named(session, task_name)
    in_split = _split_samples(session, dataset, options.split) if options.split else None
    labels = _labels_frame(session, dataset, task)
    if in_split is not None:
        labels = labels[labels["sample_id"].isin(in_split)].reset_index(drop=True)
    categorical = task.kind == "categorical"
    gold = task_gold(session, dataset, task, labels, in_split)
    section_of = _categorical_section if categorical else _numeric_section
    judges = [resolve_judge(session, name) for name in judge_names]
    # One query for every judge's verdicts (the columns of _verdicts_frame, plus the judge).
    query = (
        sa_select(Verdict.judge_id, Verdict.target_key, Verdict.sample_id, _position(task), Verdict.value, Verdict.status, _active(task))
        .join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id)
    )  # every judge's: _frame's raw cursor cannot expand an IN list, and the unwanted ones are dropped by the groupby
    every = _frame(session, _join_target(query, task, Verdict), ["judge_id", "target_key", "sample_id", "position", "value", "status", "active"])
    every["active"] = every["active"].fillna(True).astype(bool)
    if in_split is not None:
        every = every[every["sample_id"].isin(in_split)]
    by_judge = {judge_id: frame.drop(columns=["judge_id"]).reset_index(drop=True) for judge_id, frame in every.groupby("judge_id", sort=False)}
    out: dict[str, dict | None] = {}
    for judge in judges:
        verdicts = by_judge.get(judge.id)
        if verdicts is None or verdicts.empty:
            out[judge.name] = None
            continue
        out[judge.name], _ = section_of(task, labels, verdicts, _fewshot_keys(session, judge), None, options, gold=gold, light=True)
    return out


# --------------------------------------------------------------------------- gold of metric tasks

# Metric tasks whose human gold is derived from another task's labels, per sample, with the same
# computation as the report's `rag` section (human_faithfulness, stats.context_precision).
DERIVED_GOLD = {"faithfulness": "claim_support", "context_precision": "context_relevance"}


def task_gold(session: Session, dataset: Dataset, task: Task, labels: pd.DataFrame,
              in_split: set[int] | None = None) -> pd.DataFrame:
    """Return the gold of a task per target, as `categorical_gold`/`numeric_gold` do.

    For the metric tasks faithfulness and context_precision (DERIVED_GOLD), a sample's gold is
    its direct human value where experts gave one (adjudicated, else their mean: they judged
    the metric itself), else the metric computed from the claim_support or context_relevance
    gold exactly as the report's `rag` section does (gold_source "derived:TASK"); samples whose
    derived value is undefined (no countable claim with gold) have none. Other metric tasks
    have direct labels only.
    """
    if task.kind == "categorical":
        return categorical_gold(labels)
    direct = numeric_gold(labels)
    source_name = DERIVED_GOLD.get(task.name)
    if source_name is None:
        return direct
    source, source_labels, totals = _metric_source(session, dataset, source_name, in_split)
    values = _derived_metric(source, categorical_gold(source_labels), totals, _positions(source_labels, None))
    keys = [f"sample:{sid}" for sid in values.index]
    derived = pd.DataFrame({"target_key": keys, "sample_id": values.index.to_numpy(dtype=np.int64),
                            "gold": values.to_numpy(), "gold_source": f"derived:{source_name}"})
    # Metric tasks judge whole samples: a sample with a direct value keeps only that. (By sample id,
    # not key: callers such as compare key targets by integer id, derived rows by "sample:ID".)
    derived = derived[~derived["sample_id"].isin(direct["sample_id"])]
    return pd.concat([direct, derived], ignore_index=True) if len(direct) else derived.reset_index(drop=True)


def _metric_source(session: Session, dataset: Dataset, source_name: str,
                   in_split: set[int] | None) -> tuple[Task, pd.DataFrame, pd.Series | None]:
    """Return the source task of a derived metric, its labels (in the split) and, for
    claim_support, the claims per sample (faithfulness's denominator)."""
    source = _task_named(session, source_name)
    source_labels = _labels_frame(session, dataset, source)
    if in_split is not None:
        source_labels = source_labels[source_labels["sample_id"].isin(in_split)].reset_index(drop=True)
    totals = _claim_totals(session, dataset) if source_name == "claim_support" else None
    return source, source_labels, totals


def _derived_metric(source: Task, gold: pd.DataFrame, totals: pd.Series | None, positions: dict[str, int]) -> pd.Series:
    """Return the defined per-sample metric computed from a gold frame of its source task
    (faithfulness from claim_support, context precision from context_relevance)."""
    if source.name == "claim_support":
        values, _ = human_faithfulness(gold, totals, excluded=set(source.excluded or []))
    else:
        samples, rel = _gold_relevance(gold, positions)
        values = _per_sample(samples, stats.context_precision(rel))
    return values[np.isfinite(values.to_numpy())]


def annotator_metric_labels(session: Session, dataset: Dataset, task: Task, labels: pd.DataFrame,
                            in_split: set[int] | None = None) -> pd.DataFrame:
    """Return a derived-gold metric task's labels plus each annotator's own value per sample.

    An annotator's faithfulness (or context precision) of a sample is the metric computed from
    their own claim_support (context_relevance) labels, as the gold is from everyone's: the
    human–human agreement and the per-annotator rows of a metric task then compare experts on
    the metric itself, and the dashboard has its ceiling. A direct label of the annotator on the
    sample takes precedence, as in `task_gold`. Other tasks: `labels` unchanged.
    """
    source_name = DERIVED_GOLD.get(task.name)
    if source_name is None:
        return labels
    source, source_labels, totals = _metric_source(session, dataset, source_name, in_split)
    current = source_labels[~source_labels["stale"] & ~source_labels["adjudicated"]]
    positions = _positions(source_labels, None)
    direct = set(zip(labels["annotator"], labels["target_key"])) if len(labels) else set()
    frames = [labels] if len(labels) else []
    for annotator, own in current.groupby("annotator", sort=True):
        values = _derived_metric(source, own[["target_key", "sample_id"]].assign(gold=own["value"].to_numpy()), totals, positions)
        keys = [f"sample:{sid}" for sid in values.index]
        frame = pd.DataFrame({"target_key": keys, "sample_id": values.index.to_numpy(dtype=np.int64), "position": None,
                              "annotator": annotator, "value": [format_number(v) for v in values.to_numpy()],
                              "adjudicated": False, "stale": False})
        frames.append(frame[[(annotator, key) not in direct for key in keys]])
    if not frames:
        return labels
    return pd.concat(frames, ignore_index=True).astype({"adjudicated": bool, "stale": bool})


def _metric_scores(session: Session, dataset: Dataset, judge: Judge | None, name: str,
                   in_split: set[int] | None) -> pd.Series | None:
    """Return a metric judge's usable per-sample scores of metric task `name` (None: it has none)."""
    if judge is None:
        return None
    task = _task_named(session, name)
    verdicts = _verdicts_frame(session, dataset, task, judge)
    if in_split is not None:
        verdicts = verdicts[verdicts["sample_id"].isin(in_split)]
    usable = verdicts[(verdicts["status"] == "ok") & verdicts["value"].notna()]
    if usable.empty:
        return None
    return _per_sample(usable["sample_id"].to_numpy(dtype=np.int64), usable["value"].astype(float).to_numpy())


def missing_gold_note(task: Task) -> str:
    """Return what a report says when a task has verdicts but no human gold at all."""
    how = f"import experts' values with `calibrate import labels` (task {task.name}, a value in 0–1)"
    if task.name in DERIVED_GOLD:
        return (f"no human gold for {task.name}: it is derived per sample from the {DERIVED_GOLD[task.name]} labels, "
                f"and none of those samples has any; label {DERIVED_GOLD[task.name]} or {how}")
    return f"no human gold for {task.name}: annotators do not label it on the item page; {how}"


def _require_verdicts(session: Session, dataset: Dataset, task: Task, judge: Judge) -> pd.DataFrame:
    verdicts = _verdicts_frame(session, dataset, task, judge)
    if verdicts.empty:
        raise CalibrationError(f"judge {judge.name} has no {task.name} verdicts in {dataset.name}")
    return verdicts


# --------------------------------------------------------------------------- the report


def build_report(session: Session, dataset_name: str, judge_name: str | None = None, *,
                 options: Options | None = None, tasks: list[str] | None = None) -> Report:
    """Build the calibration report of a judge (or, without one, the human-only parts) on a dataset."""
    options = options or Options()
    dataset = resolve_dataset(session, dataset_name)
    judge = resolve_judge(session, judge_name) if judge_name else None
    all_tasks = list(session.exec(select(Task).order_by(Task.id)).all())
    if tasks:
        known = {t.name: t for t in all_tasks}
        unknown = [t for t in tasks if t not in known]
        if unknown:
            raise CalibrationError(f"unknown task {unknown[0]!r} (tasks: {', '.join(known)})")
        all_tasks = [known[t] for t in tasks]
    groups = _group_values(session, dataset, options.group_by) if options.group_by else None
    fewshot = _fewshot_keys(session, judge)
    external = _external_ids(session, dataset)
    in_split = _split_samples(session, dataset, options.split) if options.split else None

    from datetime import datetime, timezone

    from calibrate import __version__

    data: dict[str, Any] = {
        "dataset": dataset.name,
        "judge": judge.name if judge else None,
        "threshold": options.threshold,
        "ci_lower": options.ci_lower,
        "passed": None,
        "tasks": {},
        "rag": {},
        "method": {
            "bootstrap": {"n_resamples": options.bootstrap, "confidence": options.confidence, "seed": options.seed,
                          "method": options.ci_method, "resampled_unit": "sample"},
            "gold": "adjudicated label, else the majority of annotators (ties: no gold), else for scores the mean of annotators",
            "alignment": {"categorical": "cohen_kappa", "ordinal": "spearman_rho", "continuous": "spearman_rho"},
        },
        "generated_at": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "calibrate_version": __version__,
        "provenance": {"source": dataset.source, "description": dataset.description, "is_demo": dataset.is_demo,
                       "n_samples": len(external), "judge_kind": judge.kind if judge else None},
    }
    if options.split:
        data["provenance"]["split"] = options.split  # the judge and human statistics cover this split only
    report = Report(data=data)
    gold_relevance = None
    for task in all_tasks:
        labels = _labels_frame(session, dataset, task)
        verdicts = _verdicts_frame(session, dataset, task, judge) if judge else None
        if in_split is not None:
            labels = labels[labels["sample_id"].isin(in_split)].reset_index(drop=True)
            if verdicts is not None:
                verdicts = verdicts[verdicts["sample_id"].isin(in_split)].reset_index(drop=True)
        direct_labels = labels
        if task.name in DERIVED_GOLD and ((tasks and task.name in tasks) or (verdicts is not None and not verdicts.empty)):
            # asked for, or judged: compare the experts on the metric too (each from their own labels)
            labels = annotator_metric_labels(session, dataset, task, labels, in_split)
        if labels.empty and (verdicts is None or verdicts.empty):
            continue  # a task with no data in this dataset gets no section
        no_verdicts = verdicts is not None and verdicts.empty
        if no_verdicts:
            verdicts = None  # the judge did not judge this task: human-only section, not a failure
        if task.kind == "categorical":
            section, merged = _categorical_section(task, labels, verdicts, fewshot, groups, options)
        else:
            gold = task_gold(session, dataset, task, direct_labels, in_split)
            section, merged = _numeric_section(task, labels, verdicts, fewshot, groups, options, gold=gold)
            if gold.empty and verdicts is not None:
                section["gold_note"] = section["spearman_rho"]["note"] = missing_gold_note(task)
        if no_verdicts:
            section["judge_note"] = f"judge {judge.name} has no verdicts for this task"
        data["tasks"][task.name] = section
        report.row_builders[task.name] = functools.partial(_item_rows, task, labels, verdicts, merged, external, groups)
        report.adjudication[task.name] = sorted(merged.loc[merged.get("gold_source") == "tie", "target_key"].tolist()) if "gold_source" in merged else []
        if task.name == "claim_support":
            metric = _metric_scores(session, dataset, judge, "faithfulness", in_split) if verdicts is None else None
            data["rag"]["faithfulness"] = _faithfulness(
                _gold_rows(merged), verdicts, _claim_totals(session, dataset), set(task.excluded or []), fewshot, metric)
        if task.name == "context_relevance":
            gold_relevance = _gold_relevance(_gold_rows(merged), _positions(labels, verdicts))
            metric = _metric_scores(session, dataset, judge, "context_precision", in_split) if verdicts is None else None
            data["rag"]["context_precision"] = _context_precision(gold_relevance, verdicts, metric)
    data["warnings"] = self_preference_warnings(session, dataset, judge, in_split)
    decisions = [s.get("passed") for s in data["tasks"].values() if "passed" in s]
    if judge is not None:
        data["passed"] = all(d is True for d in decisions) if decisions else False
    retrieval = _retrieval(session, dataset, options.k, gold_relevance, len(external))
    if retrieval is not None:
        # `retrieval` follows `rag` in the JSON (docs/report.md lists the keys in order).
        items = list(data.items())
        data.clear()
        for key, value in items:
            data[key] = value
            if key == "rag":
                data["retrieval"] = retrieval
    return report


def _item_rows(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, merged: pd.DataFrame,
               external: dict[int, str], groups: dict[int, str | None] | None) -> list[ItemRow]:
    positions = _positions(labels, verdicts)
    humans: dict[str, dict[str, str]] = {}
    if not labels.empty:
        current = labels[~labels["stale"] & ~labels["adjudicated"]]
        for key, annotator, value in zip(current["target_key"], current["annotator"], current["value"], strict=True):
            humans.setdefault(key, {})[annotator] = value
    rows = []
    numeric = task.kind != "categorical"
    for rec in merged.sort_values(["sample_id", "target_key"]).itertuples(index=False):
        gold = None if pd.isna(rec.gold) else rec.gold
        judge = None if rec.judge is None or (isinstance(rec.judge, float) and math.isnan(rec.judge)) else rec.judge
        status = rec.status if isinstance(rec.status, str) else "none"
        if numeric and gold is not None:
            gold = _fmt_number(float(gold))
        agree = None
        if gold is not None and judge is not None and rec.excluded == "":
            agree = (abs(float(gold) - float(judge)) < 0.5) if numeric else (gold == judge)
        sample_id = int(rec.sample_id)
        pos = positions.get(rec.target_key)
        rows.append(ItemRow(
            task=task.name, target=rec.target_key, sample_id=external.get(sample_id, str(sample_id)),
            claim=pos if task.target == "claim" else None, context=pos if task.target == "context" else None,
            humans=humans.get(rec.target_key, {}), gold=gold,
            gold_source=rec.gold_source if isinstance(rec.gold_source, str) else "none",
            judge=judge, judge_status=status, agree=agree, excluded=rec.excluded,
            group=groups.get(sample_id) if groups else None,
        ))
    return rows


def _positions(labels: pd.DataFrame, verdicts: pd.DataFrame | None) -> dict[str, int]:
    """Return target_key → claim index or context rank."""
    out: dict[str, int] = {}
    for frame in (labels, verdicts):
        if frame is not None and not frame.empty and frame["position"].notna().any():
            out.update(zip(frame["target_key"], frame["position"].astype("Int64"), strict=True))
    return out


def _fmt_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


def gate_lines(report: Report, *, min_kappa: float, min_rho: float, ci_lower: bool,
               required: list[str] | None = None) -> tuple[bool, list[str]]:
    """Return whether every checked task passes its threshold, and one line per task.

    Checked: the tasks in `required` when given (a task without verdicts then fails), else
    every task the judge has verdicts for.
    """
    lines, ok, checked = [], True, 0
    for name, section in report.data["tasks"].items():
        alignment = section.get("alignment")
        if alignment is None:
            if required and name in required:
                lines.append(f"FAIL {name}: {section.get('judge_note', 'no judge verdicts')}")
                ok = False
                checked += 1
            continue
        threshold = min_kappa if alignment["metric"] == "cohen_kappa" else min_rho
        value, ci = alignment.get("value"), alignment.get("ci")
        n = section.get("n", 0)
        if value is None:
            note = section.get(alignment["metric"], {}).get("note", "")
            lines.append(f"FAIL {name}: {alignment['metric']} undefined (n={n}): {note}")
            ok = False
            checked += 1
            continue
        measured = ci[0] if ci_lower and ci else value
        passed = measured >= threshold if not (ci_lower and ci is None) else False
        ci_text = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
        rule = "CI lower bound" if ci_lower else "estimate"
        lines.append(f"{'PASS' if passed else 'FAIL'} {name}: {alignment['metric']} {value:.3f}{ci_text} n={n}, "
                     f"{rule} {'≥' if passed else '<'} {threshold}")
        ok = ok and passed
        checked += 1
    if checked == 0:
        lines.append(f"FAIL: judge {report.data['judge']} has no verdicts on labelled targets of {report.data['dataset']}")
        ok = False
    return ok, lines
