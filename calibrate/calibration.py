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
        sa_select(Verdict.target_key, Verdict.sample_id, _position(task), Verdict.value, Verdict.status)
        .join(Sample, Sample.id == Verdict.sample_id)
        .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.judge_id == judge.id)
    )
    query = _join_target(query, task, Verdict)
    return _frame(session, query, ["target_key", "sample_id", "position", "value", "status"])


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


def _decide(alignment: dict, options: Options) -> bool | None:
    value = alignment.get("value")
    if value is None:
        return None
    if options.ci_lower:
        ci = alignment.get("ci")
        return ci is not None and ci[0] >= options.threshold
    return value >= options.threshold


# --------------------------------------------------------------------------- per task


def _categorical_section(task: Task, labels: pd.DataFrame, verdicts: pd.DataFrame | None, fewshot: set[str],
                         groups: dict[int, str | None] | None, options: Options) -> tuple[dict, pd.DataFrame]:
    stat_labels = [lab for lab in (task.labels or []) if lab not in (task.excluded or [])]
    excluded_labels = set(task.excluded or [])
    gold = categorical_gold(labels)
    section: dict[str, Any] = {"kind": task.kind, "target": task.target}
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
    merged.loc[(merged["excluded"] == "") & has_verdict & ~usable, "excluded"] = "unparsed"
    merged.loc[(merged["excluded"] == "") & usable & ~has_gold, "excluded"] = "no_gold"
    na = merged["gold"].isin(excluded_labels) | merged["judge"].isin(excluded_labels)
    merged.loc[(merged["excluded"] == "") & usable & has_gold & na, "excluded"] = "excluded_label"
    scored = merged[(merged["excluded"] == "") & usable & has_gold]

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
                     groups: dict[int, str | None] | None, options: Options) -> tuple[dict, pd.DataFrame]:
    gold = numeric_gold(labels)
    section: dict[str, Any] = {"kind": task.kind, "target": task.target}
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
    merged.loc[(merged["excluded"] == "") & has_verdict & ~usable, "excluded"] = "unparsed"
    merged.loc[(merged["excluded"] == "") & usable & ~has_gold, "excluded"] = "no_gold"
    scored = merged[(merged["excluded"] == "") & usable & has_gold]
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
        else:
            rho = stats.cluster_bootstrap_corr(x, y, clusters, method="spearman", **boot)
            tau = stats.cluster_bootstrap_corr(x, y, clusters, method="kendall", **boot)
            r = stats.pearson_r(x, y)
            point_rho, point_tau = stats.spearman_rho(x, y), stats.kendall_tau_b(x, y)
            rho = _with_p(rho, point_rho)
            tau = _with_p(tau, point_tau)
        section["spearman_rho"] = _estimate_dict(rho, keep=("value", "ci", "p_value", "status", "note"))
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


def _faithfulness(merged: pd.DataFrame, excluded: set[str]) -> dict:
    """Faithfulness per sample (supported / claims with a usable label) from gold and from the judge."""
    def per_sample(column: str) -> pd.Series:
        part = merged[merged[column].notna() & ~merged[column].isin(excluded) & (merged["excluded"] != "fewshot")]
        return (part[column] == "supported").groupby(part["sample_id"]).mean().astype(float)

    return _human_vs_judge(merged, per_sample)


def _human_vs_judge(merged: pd.DataFrame, per_sample) -> dict:  # noqa: ANN001
    """Return the per-sample metric's mean from gold and from the judge, and their Spearman correlation."""
    human = per_sample("gold")
    out: dict[str, Any] = {"human_mean": float(human.mean()) if len(human) else None, "n_human": int(len(human))}
    if "judge" in merged and merged["judge"].notna().any():
        judge = per_sample("judge")
        both = human.index.intersection(judge.index)
        out["judge_mean"] = float(judge.mean()) if len(judge) else None
        out["n_judge"] = int(len(judge))
        est = stats.spearman_rho(human[both].to_numpy(), judge[both].to_numpy()) if len(both) else Estimate.no_data("no sample has both")
        out["spearman_rho"] = _estimate_dict(est, keep=("value", "p_value", "status", "note")) | {"n": est.n}
    return out


def _context_precision(merged: pd.DataFrame, positions: dict[str, int]) -> dict:
    """Rank-weighted context precision per sample, (1/R) Σ_k precision@k · rel_k, from gold and judge.

    A sample with no relevant context scores 0 (nothing useful was retrieved).
    """
    def per_sample(column: str) -> pd.Series:
        part = merged[merged[column].notna() & (merged["excluded"] != "fewshot")].copy()
        part["rank"] = part["target_key"].map(positions)
        part = part.sort_values(["sample_id", "rank"])
        rel = (part[column] == "relevant").astype(float)
        by = part["sample_id"]
        hits = rel.groupby(by).cumsum()
        k = rel.groupby(by).cumcount() + 1
        weighted = (hits / k * rel).groupby(by).sum()
        relevant = rel.groupby(by).sum()
        return (weighted / relevant.where(relevant > 0)).fillna(0.0).astype(float)

    return _human_vs_judge(merged, per_sample)


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
    report = Report(data=data)
    for task in all_tasks:
        labels = _labels_frame(session, dataset, task)
        verdicts = _verdicts_frame(session, dataset, task, judge) if judge else None
        if labels.empty and (verdicts is None or verdicts.empty):
            continue  # a task with no data in this dataset gets no section
        no_verdicts = verdicts is not None and verdicts.empty
        if no_verdicts:
            verdicts = None  # the judge did not judge this task: human-only section, not a failure
        if task.kind == "categorical":
            section, merged = _categorical_section(task, labels, verdicts, fewshot, groups, options)
        else:
            section, merged = _numeric_section(task, labels, verdicts, fewshot, groups, options)
        if no_verdicts:
            section["judge_note"] = f"judge {judge.name} has no verdicts for this task"
        data["tasks"][task.name] = section
        report.row_builders[task.name] = functools.partial(_item_rows, task, labels, verdicts, merged, external, groups)
        report.adjudication[task.name] = sorted(merged.loc[merged.get("gold_source") == "tie", "target_key"].tolist()) if "gold_source" in merged else []
        if task.name == "claim_support":
            data["rag"]["faithfulness"] = _faithfulness(merged, set(task.excluded or []))
        if task.name == "context_relevance":
            data["rag"]["context_precision"] = _context_precision(merged, _positions(labels, verdicts))
    decisions = [s.get("passed") for s in data["tasks"].values() if "passed" in s]
    if judge is not None:
        data["passed"] = all(d is True for d in decisions) if decisions else False
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
