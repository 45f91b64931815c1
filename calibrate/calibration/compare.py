"""Compare two judges on the same targets: did B's changes help, and where?

For each task both judges have verdicts on, the comparison uses the *common* targets, by the
one rule of the dashboard and `report --versions` (`common.common_targets`): those both judges
were run on (a verdict, usable or not), with human gold (for labels: a gold the statistics
use), and not a few-shot example of either judge's prompt version (a target shown to a judge as
an example is never scored for it). A judge's unusable verdict or abstention on one of them is
a miss for that judge (`common.judge_misses`: the category "(no usable verdict)" for labels,
the far end of the scale for scores), counted in `n_unparsed` and `n_abstained` per judge. On
those targets:

- the alignment of each judge (Cohen's kappa for categorical tasks, Spearman's rho for
  scores) and the difference B − A with a paired cluster-bootstrap CI (both statistics on
  the same resampled samples);
- categorical tasks: McNemar's exact test on per-target correctness (b01 = targets A got
  wrong and B right, "fixed"; b10 = A right and B wrong, "broken");
- scores: the paired t-test and Wilcoxon's signed-rank test on per-sample absolute error
  (A's error minus B's error: positive means B is closer to the gold);
- the targets that flipped, by readable id ("demo-001/claim/2").

A pairwise task's judges are compared on one verdict per target each, made from their
presentation orders by `Options.order_rule` (calibration/pairwise.py), as in the report.

With `Options.split` every number — the gold, both judges' verdicts, the flips — comes from
the samples of that split only, as in `calibrate report --split`.

Speed: per task, the labels (only the columns the gold needs) are read once and the gold is
formed once for both judges, both judges' verdicts come from one query, rows are joined and
grouped by integer target ids rather than key strings, and the split is a SQL condition, so
rows outside it are never read (bench/results/compare.md).
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import or_
from sqlalchemy import select as sa_select
from sqlmodel import Session, select

from calibrate import lookup, stats
from calibrate.calibration.common import common_targets, judge_misses, miss_labels, score_scale
from calibrate.calibration.decision import decide, rule_of
from calibrate.calibration.frames import (
    adjudication_order,
    fewshot_keys,
)
from calibrate.calibration.options import Options
from calibrate.calibration.pairwise import apply_order_rule
from calibrate.calibration.rag import (
    DERIVED_GOLD,
    task_gold,
)
from calibrate.calibration.sections import score_agrees, score_tolerance
from calibrate.datasets import split_samples
from calibrate.db import read_frame
from calibrate.errors import CalibrationError
from calibrate.judged import judging
from calibrate.models import (
    Dataset,
    FewShot,
    Judge,
    Label,
    PromptVersion,
    Sample,
    Task,
    Verdict,
    target_key,
)
from calibrate.reasons import Reason, join, noted
from calibrate.stats import Estimate
from calibrate.targets import target_names

MAX_FLIPS_LISTED = 500


def _est(est: Estimate, keys=("value", "ci", "p_value", "status", "note")) -> dict:
    full = est.to_dict()
    out = {k: full.get(k) for k in keys if k in full or k == "p_value"}
    if "note" in keys and "reason" in full:
        out["reason"] = full["reason"]
    return out


def _readable_ids(session: Session, task: Task, frame: pd.DataFrame) -> list[str]:
    """Return "EXTERNAL_ID[/claim/N | /context/R | /step/S]" for each row of `frame` (only the flipped few).

    The part's position (TargetKind.positions) is looked up here, for these targets only, rather than
    joined into the 100,000-row reads.
    """
    kind = judging(task).target
    external: dict[int, str] = {}
    samples = sorted({int(x) for x in frame["sample_id"]})
    for start in range(0, len(samples), 10_000):
        chunk = samples[start:start + 10_000]
        external.update(session.execute(select(Sample.id, Sample.external_id).where(Sample.id.in_(chunk))).all())
    positions = kind.positions(session, [int(x) for x in frame["target_key"]])
    out = []
    for target_id, sample_id in zip(frame["target_key"], frame["sample_id"], strict=True):
        base = external.get(int(sample_id), str(sample_id))
        out.append(f"{base}/{kind.name}/{positions[int(target_id)]}" if int(target_id) in positions else base)
    return out


def _target_id(task: Task, model):
    """Return the column holding a label's or verdict's target id (its key is "TARGET:ID", models.target_key).

    The comparison joins and groups on these integers rather than on the key strings: reading
    and hashing 400,000 short strings was most of its time.
    """
    return judging(task).target.column(model)


def _as_ids(keys: pd.Series) -> pd.Series:
    """Return target ids for a column of ids or of "TARGET:ID" keys (derived gold comes keyed by string)."""
    if pd.api.types.is_integer_dtype(keys.dtype):  # (pandas 3 reads strings as dtype "str", not object)
        return keys.astype(np.int64)
    return keys.map(lambda k: int(k.rsplit(":", 1)[1]) if isinstance(k, str) else int(k)).astype(np.int64)


def _in_split(query, split: str | None):
    """Keep only the rows of samples in `split` (every sample when None): filtered in SQL, before any row is read."""
    return query if split is None else query.where(Sample.split == split)


def _gold(session: Session, dataset: Dataset, task: Task, split: str | None) -> pd.DataFrame:
    """Return the human gold of the task's targets (on one split), read once and shared by both judges.

    Only the columns the gold needs (no annotator names, no target positions): reading rows is
    most of the comparison's time.
    """
    # Stale labels never count towards the gold: they are left out in SQL rather than read and dropped.
    query = _in_split(sa_select(_target_id(task, Label), Label.sample_id, Label.value, Label.adjudicated, *adjudication_order())
                      .join(Sample, Sample.id == Label.sample_id)
                      .where(Sample.dataset_id == dataset.id, Label.task_id == task.id, Label.stale.is_(False)), split)
    labels = read_frame(session, query, ["target_key", "sample_id", "value", "adjudicated", "updated_at", "label_id"]
                        ).astype({"adjudicated": bool})
    labels["stale"] = False
    # Metric tasks (faithfulness, context_precision) add gold derived from claim or context labels.
    in_split = split_samples(session, dataset, split) if split and task.name in DERIVED_GOLD else None
    gold = task_gold(session, dataset, task, labels, in_split)
    gold = gold[gold["gold"].notna()]
    return gold.assign(target_key=_as_ids(gold["target_key"]))


def _verdict_pair(session: Session, dataset: Dataset, task: Task, a: Judge, b: Judge, split: str | None,
                  order_rule: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return both judges' verdicts on the task (on one split), read in one query (no target join: see _readable_ids).

    A pairwise task's verdicts come one per target, by the order rule.
    """
    pairwise = judging(task).kind.orders
    columns = [Verdict.judge_id, _target_id(task, Verdict), Verdict.sample_id, Verdict.value, Verdict.status]
    query = (sa_select(*columns, *([Verdict.order_key] if pairwise else []))
             .join(Sample, Sample.id == Verdict.sample_id)
             .where(Sample.dataset_id == dataset.id, Verdict.task_id == task.id, Verdict.sample_index == 0,
                    or_(Verdict.judge_id == a.id, Verdict.judge_id == b.id)))
    names = ["judge_id", "target_key", "sample_id", "value", "status", *(["order_key"] if pairwise else [])]
    frame = read_frame(session, _in_split(query, split), names)
    is_a = (frame["judge_id"] == a.id).to_numpy()
    va, vb = frame[is_a].reset_index(drop=True), frame[~is_a].reset_index(drop=True)
    if pairwise:
        va, vb = (apply_order_rule(task, v, order_rule)[0] if len(v) else v.drop(columns=["order_key"]) for v in (va, vb))
    return va, vb


def _common(task: Task, gold: pd.DataFrame, va: pd.DataFrame, vb: pd.DataFrame, excluded_keys: set[int]
            ) -> tuple[pd.DataFrame, dict[str, int]]:
    """Return the common targets (`common.common_targets`) with the gold and both judges' values, misses scored
    (`common.judge_misses`), by sample then target; and each judge's unparsed verdicts and abstentions among them."""
    labels = stat_labels_of(task) if judging(task).kind.labels else None
    keys = common_targets(gold, [va["target_key"], vb["target_key"]], excluded_keys, stat_labels=labels).keys
    common = gold.drop_duplicates("target_key").set_index("target_key").loc[keys].reset_index()
    common = common.sort_values(["sample_id", "target_key"]).reset_index(drop=True)
    scale = None if labels is not None else score_scale(task, common, [va, vb])
    counts = {}
    for side, verdicts in (("a", va), ("b", vb)):
        own = verdicts.drop_duplicates("target_key").set_index("target_key").reindex(common["target_key"])
        values = own["value"].to_numpy(dtype=object)
        usable = (own["status"] == "ok").to_numpy() & pd.notna(values)
        common[side], counts[f"n_unparsed_{side}"], counts[f"n_abstained_{side}"] = judge_misses(
            task, common["gold"].to_numpy(dtype=object), values, usable, labels or [], scale)
    return common, counts


def stat_labels_of(task: Task) -> list[str]:
    """Return the labels a categorical task's statistics use: its labels minus the excluded ones."""
    return [lab for lab in (task.labels or []) if lab not in (task.excluded or [])]


def _compare_task(session: Session, task: Task, common: pd.DataFrame, options: Options,
                  counts: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": task.kind, "target": task.target, "common_n": int(len(common)),
                           "n_samples": int(common["sample_id"].nunique()), **counts}
    boot = dict(n_resamples=options.bootstrap, confidence=options.confidence, method=options.ci_method, seed=options.seed)
    clusters = common["sample_id"].to_numpy()
    if judging(task).kind.labels:
        labels = miss_labels(stat_labels_of(task), common["a"], common["b"])  # a miss: a category the gold never takes
        index = {lab: i for i, lab in enumerate(labels)}
        gold, a, b = (common[c].map(index).to_numpy() for c in ("gold", "a", "b"))
        ka = stats.cohen_kappa(common["gold"].tolist(), common["a"].tolist(), labels=labels)
        kb = stats.cohen_kappa(common["gold"].tolist(), common["b"].tolist(), labels=labels)
        out["metric"] = "cohen_kappa"
        if ka.status == "ok":
            ka = stats.cluster_bootstrap_kappa(gold, a, clusters, n_labels=len(labels), **boot)
        if kb.status == "ok":
            kb = stats.cluster_bootstrap_kappa(gold, b, clusters, n_labels=len(labels), **boot)
        out["a"] = _decided(ka, options)
        out["b"] = _decided(kb, options)
        diff = stats.paired_cluster_bootstrap_diff((gold, b), (gold, a), clusters, statistic="kappa", n_labels=len(labels), **boot) \
            if len(common) else Estimate.no_data(Reason("no_common_targets"))
        right_a, right_b = a == gold, b == gold
        b01, b10, n = stats.discordant_counts(right_a, right_b)
        mc = stats.mcnemar_exact(b01, b10, n=n)
        out["mcnemar"] = {"b01": b01, "b10": b10, "p_value": mc.p_value, "status": mc.status, **mc.note_fields()}
        out["ttest"] = {"t": None, "p_value": None, "status": "not_applicable", **noted(Reason("see_mcnemar"))}
        out["wilcoxon"] = {"statistic": None, "p_value": None, "status": "not_applicable", **noted(Reason("see_mcnemar"))}
        out["accuracy"] = {"a": float(right_a.mean()) if n else None, "b": float(right_b.mean()) if n else None}
    else:
        gold, a, b = (common[c].astype(float).to_numpy() for c in ("gold", "a", "b"))
        ra, rb = stats.spearman_rho(gold, a), stats.spearman_rho(gold, b)
        out["metric"] = "spearman_rho"
        corr_boot = dict(n_resamples=options.bootstrap, confidence=options.confidence, ci_method=options.ci_method, seed=options.seed)
        if ra.status == "ok":
            ra = stats.cluster_bootstrap_corr(gold, a, clusters, method="spearman", **corr_boot)
        if rb.status == "ok":
            rb = stats.cluster_bootstrap_corr(gold, b, clusters, method="spearman", **corr_boot)
        out["a"] = _decided(ra, options)
        out["b"] = _decided(rb, options)
        diff = stats.paired_cluster_bootstrap_diff((gold, b), (gold, a), clusters, statistic="spearman", **boot) \
            if len(common) else Estimate.no_data(Reason("no_common_targets"))
        errors = pd.DataFrame({"sample_id": common["sample_id"], "ea": np.abs(a - gold), "eb": np.abs(b - gold)})
        per_sample = errors.groupby("sample_id")[["ea", "eb"]].mean()
        # a − b of errors, written as "b − a" of closeness so positive means B is better
        t = stats.paired_t_test(per_sample["eb"].to_numpy(), per_sample["ea"].to_numpy())
        w = stats.wilcoxon_signed_rank(per_sample["eb"].to_numpy(), per_sample["ea"].to_numpy())
        out["ttest"] = {"t": t.value, "p_value": t.p_value, "n": t.n, "status": t.status, **t.note_fields()}
        out["wilcoxon"] = {"statistic": w.value, "p_value": w.p_value, "n": w.n, "status": w.status, **w.note_fields()}
        out["mean_abs_error"] = {"a": float(errors["ea"].mean()) if len(errors) else None,
                                 "b": float(errors["eb"].mean()) if len(errors) else None}
        tolerance = score_tolerance(task, gold)
        right_a, right_b = score_agrees(task, gold, a, tolerance), score_agrees(task, gold, b, tolerance)
        out["tolerance"] = tolerance  # how close a score must be to count as right (fixed / broken)
        out["mcnemar"] = {"b01": None, "b10": None, "p_value": None, "status": "not_applicable", **noted(Reason("see_ttest"))}
    out["difference"] = {"value": diff.value, "ci": list(diff.ci) if diff.ci else None, "p_value": diff.p_value,
                         "status": diff.status, **diff.note_fields(), "direction": "b minus a"}
    out["reconciliation"] = reconcile(out, 1 - options.confidence)
    fixed_rows, broken_rows = common[~right_a & right_b], common[right_a & ~right_b]
    fixed_rows, broken_rows = fixed_rows.head(MAX_FLIPS_LISTED), broken_rows.head(MAX_FLIPS_LISTED)
    readable = _readable_ids(session, task, pd.concat([fixed_rows, broken_rows]))
    out["flips"] = {"fixed": readable[:len(fixed_rows)], "broken": readable[len(fixed_rows):],
                    "n_fixed": int((~right_a & right_b).sum()), "n_broken": int((right_a & ~right_b).sum()),
                    # the same targets by key (claim:ID …): what the disagreement pages are addressed by
                    "fixed_keys": [target_key(task.target, int(i)) for i in fixed_rows["target_key"]],
                    "broken_keys": [target_key(task.target, int(i)) for i in broken_rows["target_key"]]}
    return out


def _decided(est: Estimate, options: Options) -> dict:
    """Return a judge's alignment on the common targets with its CI and its decision against the threshold."""
    out = _est(est, ("value", "ci", "status", "note"))
    decided = decide(est.value, est.ci, options.threshold, rule=rule_of(options.ci_lower))
    return out | {"decision": decided.decision, "rule": decided.rule, "passed": decided.passed}


def _excludes_zero(ci: list | None) -> bool | None:
    return None if not ci or None in ci else (ci[0] > 0 or ci[1] < 0)


def reconcile(section: dict, alpha: float) -> str | None:
    """Return one sentence when the paired-bootstrap CI of B − A and the paired test point different ways, else None.

    Categorical tasks: McNemar's exact test on per-target correctness. Scores: the paired t-test
    on per-sample absolute error. They can disagree because they ask different things: the CI is
    about the difference in κ (or ρ), the test about how many targets each judge got right (or
    how close each came); with few discordant targets a κ gain can look sure while the test
    cannot tell it from chance, and the other way round.
    """
    diff = section.get("difference") or {}
    excludes = _excludes_zero(diff.get("ci"))
    if section.get("metric") == "cohen_kappa":
        test = section.get("mcnemar") or {}
        name = "McNemar's exact test"
        detail = f"B fixed {test.get('b01')} targets and broke {test.get('b10')}"
    else:
        test = section.get("ttest") or {}
        name = "the paired t-test on absolute error"
        detail = f"t = {test.get('t'):.2f}" if isinstance(test.get("t"), float) else "on per-sample absolute error"
    p = test.get("p_value")
    if excludes is None or p is None:
        return None
    significant = p < alpha
    p_text = "< 0.001" if p < 0.001 else f"{p:.3f}"
    symbol = "κ" if section.get("metric") == "cohen_kappa" else "ρ"
    if excludes and not significant:
        change = "gain" if diff["ci"][0] > 0 else "loss"
        return (f"The bootstrap CI of the difference excludes 0 but {name} is not significant (p = {p_text}; {detail}): "
                f"the {change} rests on few discordant targets; treat it as unproven.")
    if significant and not excludes:
        return (f"{name[0].upper()}{name[1:]} is significant (p = {p_text}; {detail}) but the bootstrap CI of the difference "
                f"in {symbol} includes 0: the judges differ target by target, but the change in {symbol} is not settled; "
                "label more targets before crediting it.")
    return None


def changed_fields(session: Session, a: Judge, b: Judge) -> tuple[list[str] | None, Reason | None]:
    """Return the fields that differ between two prompt-version judges, in the order template, system, model,
    params, few_shots; None and a note when either judge is imported (it has no prompt version)."""
    imported = [j.name for j in (a, b) if j.prompt_version_id is None]
    if imported:
        return None, Reason("imported_judge" if len(imported) == 1 else "imported_judges", judges=" and ".join(imported))
    va, vb = session.get(PromptVersion, a.prompt_version_id), session.get(PromptVersion, b.prompt_version_id)
    pairs = {"template": (va.template, vb.template), "system": (va.system or "", vb.system or ""),
             "model": (va.model, vb.model), "params": (va.params or {}, vb.params or {}),
             "few_shots": (_shots(session, va), _shots(session, vb))}
    return [name for name, (x, y) in pairs.items() if x != y], None


def _shots(session: Session, version: PromptVersion) -> list[str]:
    """Return a version's few-shot examples as people read them: "demo-004 · claim 5 → unsupported: why"."""
    rows = session.exec(select(FewShot).where(FewShot.version_id == version.id).order_by(FewShot.order)).all()
    names = target_names(session, [row.target_key for row in rows])
    return [f"{names.get(row.target_key, row.target_key)} → {row.value}: {row.rationale}" for row in rows]



def params_diff(a: dict | None, b: dict | None) -> list[dict]:
    """Return the parameters that differ, key by key (sorted): `{key, a, b}`, `null` on the side that lacks the key."""
    a, b = a or {}, b or {}
    keys = sorted(set(a) | set(b), key=str)
    return [{"key": key, "a": a.get(key), "b": b.get(key)} for key in keys if key not in a or key not in b or a[key] != b[key]]


def version_diff(session: Session, a: Judge, b: Judge) -> dict[str, Any] | None:
    """Return the unified diff of two prompt-version judges' templates, system texts and few-shots."""
    if a.prompt_version_id is None or b.prompt_version_id is None:
        return None
    va, vb = session.get(PromptVersion, a.prompt_version_id), session.get(PromptVersion, b.prompt_version_id)

    def shots(version: PromptVersion) -> list[str]:
        return _shots(session, version)

    def diff(x: str, y: str, name: str) -> list[str]:
        return list(difflib.unified_diff(x.splitlines(), y.splitlines(), f"{a.name} {name}", f"{b.name} {name}", lineterm=""))

    return {
        "template": diff(va.template, vb.template, "template"),
        "system": diff(va.system or "", vb.system or "", "system"),
        "few_shots": diff("\n".join(shots(va)), "\n".join(shots(vb)), "few-shots"),
        "model": [va.model, vb.model],
        "params": [va.params, vb.params],
        "params_diff": params_diff(va.params, vb.params),
    }


def compare_judges(session: Session, dataset_name: str, judge_a: str, judge_b: str, *, task: str | None = None,
                   options: Options | None = None) -> dict[str, Any]:
    """Compare judge B against judge A on the same targets (of `options.split` when set).

    Raise CalibrationError when there is nothing to compare, naming what is missing.
    """
    options = options or Options()
    dataset = lookup.dataset(session, dataset_name)
    a, b = lookup.judge(session, judge_a), lookup.judge(session, judge_b)
    if a.id == b.id:
        raise CalibrationError(Reason("compare_same_judge"))
    tasks = [t for t in session.exec(select(Task).order_by(Task.id)).all() if not judging(t).kind.extraction]
    if task:
        tasks = [t for t in tasks if t.name == task]
        if not tasks:
            names = list(session.exec(select(Task.name).order_by(Task.id)).all())
            raise CalibrationError(lookup.not_found("task", task, names).reason)
    split = options.split
    if split:
        split_samples(session, dataset, split)  # a split without samples: an error naming the splits
    in_split = {"split": split} if split else {}  # the detail's reasons say the split when there is one
    suffix = "_split" if split else ""
    excluded = fewshot_keys(session, a) | fewshot_keys(session, b)
    result: dict[str, Any] = {"dataset": dataset.name, "judge_a": a.name, "judge_b": b.name, "split": split,
                              "threshold": options.threshold, "rule": rule_of(options.ci_lower), "tasks": {}}
    missing = []
    for t in tasks:
        va, vb = _verdict_pair(session, dataset, t, a, b, split, options.order_rule)
        if options.sample_ids is not None:  # --golden: only its members' targets
            va, vb = (v[v["sample_id"].isin(options.sample_ids)].reset_index(drop=True) for v in (va, vb))
        if va.empty or vb.empty:
            if not (va.empty and vb.empty):
                missing.append(Reason("compare_verdict_counts" + suffix, task=t.name, a=a.name, n_a=len(va), b=b.name,
                                      n_b=len(vb), **in_split))
            continue
        fewshot = {int(key.split(":", 1)[1]) for key in excluded if key.split(":", 1)[0] == t.target}
        common, misses = _common(t, _gold(session, dataset, t, split), va, vb, fewshot)
        shown = fewshot & (set(va["target_key"]) | set(vb["target_key"])) if fewshot else set()
        counts = {"n_a": int(len(va)), "n_b": int(len(vb)), "n_fewshot": len(shown), **misses}
        if common.empty:
            missing.append(Reason("compare_no_common" + suffix, task=t.name, **in_split))
            continue
        result["tasks"][t.name] = _compare_task(session, t, common, options, counts)
    if not result["tasks"]:
        detail = join(missing) or Reason("compare_no_verdicts" + suffix, a=a.name, b=b.name, dataset=dataset.name, **in_split)
        raise CalibrationError(Reason("nothing_to_compare", a=a.name, b=b.name, dataset=dataset.name, detail=detail))
    result["skipped"] = missing
    primary = next(iter(result["tasks"]))
    result["task"] = primary
    # The primary task's numbers also sit at the top level: the documented JSON keys.
    result.update({k: v for k, v in result["tasks"][primary].items() if k in (
        "common_n", "metric", "a", "b", "difference", "mcnemar", "ttest", "wilcoxon", "flips", "tolerance", "reconciliation")})
    result["changed"], note = changed_fields(session, a, b)
    if note is not None:
        result["changed_note"], result["changed_reason"] = note.text(), note.to_dict()
    result["versions"] = version_diff(session, a, b)
    if options.golden is not None:
        result["golden"] = options.golden
    result["method"] = {"bootstrap": {"n_resamples": options.bootstrap, "confidence": options.confidence,
                                      "seed": options.seed, "method": options.ci_method, "resampled_unit": "sample"},
                        "split": split}
    if any(judging(t).kind.orders and t.name in result["tasks"] for t in tasks):
        result["method"]["order_rule"] = options.order_rule
    return result
