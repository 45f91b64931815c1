"""Compare two judges on the same targets: did B's changes help, and where?

For each task both judges have verdicts on, the comparison uses the *common* targets: those
with human gold, a usable verdict from both judges, outside the statistics' excluded labels,
and not a few-shot example of either judge's prompt version (a target shown to a judge as
an example is never scored for it). On those targets:

- the alignment of each judge (Cohen's kappa for categorical tasks, Spearman's rho for
  scores) and the difference B − A with a paired cluster-bootstrap CI (both statistics on
  the same resampled samples);
- categorical tasks: McNemar's exact test on per-target correctness (b01 = targets A got
  wrong and B right, "fixed"; b10 = A right and B wrong, "broken");
- scores: the paired t-test and Wilcoxon's signed-rank test on per-sample absolute error
  (A's error minus B's error: positive means B is closer to the gold);
- the targets that flipped, by readable id ("demo-001/claim/2").
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
import pandas as pd
from sqlmodel import Session, select

from calibrate import stats
from calibrate.calibration import (
    CalibrationError,
    Options,
    _fewshot_keys,
    _labels_frame,
    _verdicts_frame,
    categorical_gold,
    numeric_gold,
    resolve_dataset,
    resolve_judge,
)
from calibrate.models import FewShot, Judge, PromptVersion, Sample, Task
from calibrate.stats import Estimate

MAX_FLIPS_LISTED = 500


def _est(est: Estimate, keys=("value", "ci", "p_value", "status", "note")) -> dict:  # noqa: ANN001
    full = est.to_dict()
    return {k: full.get(k) for k in keys if k in full or k == "p_value"}


def _readable_ids(session: Session, dataset_id: int, frame: pd.DataFrame) -> dict[str, str]:
    """Return target_key → "EXTERNAL_ID[/claim/N | /context/R]" for the rows of `frame`."""
    wanted = sorted({int(x) for x in frame["sample_id"]})
    external: dict[int, str] = {}
    for start in range(0, len(wanted), 10_000):
        chunk = wanted[start:start + 10_000]
        external.update(session.execute(select(Sample.id, Sample.external_id).where(Sample.id.in_(chunk))).all())
    out = {}
    for key, sample_id, position in zip(frame["target_key"], frame["sample_id"], frame["position"], strict=True):
        kind = key.split(":", 1)[0]
        base = external.get(int(sample_id), str(sample_id))
        out[key] = base if kind == "sample" or pd.isna(position) else f"{base}/{kind}/{int(position)}"
    return out


def _common(task: Task, labels: pd.DataFrame, va: pd.DataFrame, vb: pd.DataFrame, excluded_keys: set[str]) -> pd.DataFrame:
    gold = categorical_gold(labels) if task.kind == "categorical" else numeric_gold(labels)
    gold = gold[gold["gold"].notna()]
    ok_a = va[(va["status"] == "ok") & va["value"].notna()][["target_key", "value", "position"]].rename(columns={"value": "a"})
    ok_b = vb[(vb["status"] == "ok") & vb["value"].notna()][["target_key", "value"]].rename(columns={"value": "b"})
    common = gold.merge(ok_a, on="target_key").merge(ok_b, on="target_key")
    common = common[~common["target_key"].isin(excluded_keys)]
    if task.kind == "categorical":
        dropped = set(task.excluded or [])
        common = common[~common["gold"].isin(dropped) & ~common["a"].isin(dropped) & ~common["b"].isin(dropped)]
    return common.sort_values(["sample_id", "target_key"]).reset_index(drop=True)


def _compare_task(session: Session, dataset_id: int, task: Task, common: pd.DataFrame, options: Options,
                  counts: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": task.kind, "target": task.target, "common_n": int(len(common)),
                           "n_samples": int(common["sample_id"].nunique()), **counts}
    boot = dict(n_resamples=options.bootstrap, confidence=options.confidence, method=options.ci_method, seed=options.seed)
    clusters = common["sample_id"].to_numpy()
    if task.kind == "categorical":
        labels = [lab for lab in (task.labels or []) if lab not in (task.excluded or [])]
        index = {lab: i for i, lab in enumerate(labels)}
        gold, a, b = (common[c].map(index).to_numpy() for c in ("gold", "a", "b"))
        ka = stats.cohen_kappa(common["gold"].tolist(), common["a"].tolist(), labels=labels)
        kb = stats.cohen_kappa(common["gold"].tolist(), common["b"].tolist(), labels=labels)
        out["metric"] = "cohen_kappa"
        out["a"] = _est(ka, ("value", "status", "note"))
        out["b"] = _est(kb, ("value", "status", "note"))
        diff = stats.paired_cluster_bootstrap_diff((gold, b), (gold, a), clusters, statistic="kappa", n_labels=len(labels), **boot) \
            if len(common) else Estimate.no_data("no common targets")
        right_a, right_b = a == gold, b == gold
        b01, b10, n = stats.discordant_counts(right_a, right_b)
        mc = stats.mcnemar_exact(b01, b10, n=n)
        out["mcnemar"] = {"b01": b01, "b10": b10, "p_value": mc.p_value, "status": mc.status, "note": mc.note}
        out["ttest"] = {"t": None, "p_value": None, "status": "not_applicable", "note": "categorical task: see mcnemar"}
        out["wilcoxon"] = {"statistic": None, "p_value": None, "status": "not_applicable", "note": "categorical task: see mcnemar"}
        out["accuracy"] = {"a": float(right_a.mean()) if n else None, "b": float(right_b.mean()) if n else None}
    else:
        gold, a, b = (common[c].astype(float).to_numpy() for c in ("gold", "a", "b"))
        ra, rb = stats.spearman_rho(gold, a), stats.spearman_rho(gold, b)
        out["metric"] = "spearman_rho"
        out["a"] = _est(ra, ("value", "status", "note"))
        out["b"] = _est(rb, ("value", "status", "note"))
        diff = stats.paired_cluster_bootstrap_diff((gold, b), (gold, a), clusters, statistic="spearman", **boot) \
            if len(common) else Estimate.no_data("no common targets")
        errors = pd.DataFrame({"sample_id": common["sample_id"], "ea": np.abs(a - gold), "eb": np.abs(b - gold)})
        per_sample = errors.groupby("sample_id")[["ea", "eb"]].mean()
        # a − b of errors, written as "b − a" of closeness so positive means B is better
        t = stats.paired_t_test(per_sample["eb"].to_numpy(), per_sample["ea"].to_numpy())
        w = stats.wilcoxon_signed_rank(per_sample["eb"].to_numpy(), per_sample["ea"].to_numpy())
        out["ttest"] = {"t": t.value, "p_value": t.p_value, "n": t.n, "status": t.status, "note": t.note}
        out["wilcoxon"] = {"statistic": w.value, "p_value": w.p_value, "n": w.n, "status": w.status, "note": w.note}
        out["mean_abs_error"] = {"a": float(errors["ea"].mean()) if len(errors) else None,
                                 "b": float(errors["eb"].mean()) if len(errors) else None}
        right_a, right_b = np.abs(a - gold) < 0.5, np.abs(b - gold) < 0.5
        out["mcnemar"] = {"b01": None, "b10": None, "p_value": None, "status": "not_applicable", "note": "score task: see ttest and wilcoxon"}
    out["difference"] = {"value": diff.value, "ci": list(diff.ci) if diff.ci else None, "p_value": diff.p_value,
                         "status": diff.status, "note": diff.note, "direction": "b minus a"}
    fixed_rows, broken_rows = common[~right_a & right_b], common[right_a & ~right_b]
    ids = _readable_ids(session, dataset_id, pd.concat([fixed_rows, broken_rows]))  # only the flipped few
    fixed = [ids[k] for k in fixed_rows["target_key"]]
    broken = [ids[k] for k in broken_rows["target_key"]]
    out["flips"] = {"fixed": fixed[:MAX_FLIPS_LISTED], "broken": broken[:MAX_FLIPS_LISTED],
                    "n_fixed": len(fixed), "n_broken": len(broken)}
    return out


def version_diff(session: Session, a: Judge, b: Judge) -> dict[str, Any] | None:
    """Return the unified diff of two prompt-version judges' templates, system texts and few-shots."""
    if a.prompt_version_id is None or b.prompt_version_id is None:
        return None
    va, vb = session.get(PromptVersion, a.prompt_version_id), session.get(PromptVersion, b.prompt_version_id)

    def shots(version: PromptVersion) -> list[str]:
        rows = session.exec(select(FewShot).where(FewShot.version_id == version.id).order_by(FewShot.order)).all()
        return [f"{row.target_key} → {row.value}: {row.rationale}" for row in rows]

    def diff(x: str, y: str, name: str) -> list[str]:
        return list(difflib.unified_diff(x.splitlines(), y.splitlines(), f"{a.name} {name}", f"{b.name} {name}", lineterm=""))

    return {
        "template": diff(va.template, vb.template, "template"),
        "system": diff(va.system or "", vb.system or "", "system"),
        "few_shots": diff("\n".join(shots(va)), "\n".join(shots(vb)), "few-shots"),
        "model": [va.model, vb.model],
        "params": [va.params, vb.params],
    }


def compare_judges(session: Session, dataset_name: str, judge_a: str, judge_b: str, *, task: str | None = None,
                   options: Options | None = None) -> dict[str, Any]:
    """Compare judge B against judge A on the same targets; raise CalibrationError when there is nothing to compare."""
    options = options or Options()
    dataset = resolve_dataset(session, dataset_name)
    a, b = resolve_judge(session, judge_a), resolve_judge(session, judge_b)
    if a.id == b.id:
        raise CalibrationError("compare two different judges")
    tasks = list(session.exec(select(Task).order_by(Task.id)).all())
    if task:
        tasks = [t for t in tasks if t.name == task]
        if not tasks:
            names = ", ".join(session.exec(select(Task.name).order_by(Task.id)).all())
            raise CalibrationError(f"unknown task {task!r} (tasks: {names})")
    excluded = _fewshot_keys(session, a) | _fewshot_keys(session, b)
    result: dict[str, Any] = {"dataset": dataset.name, "judge_a": a.name, "judge_b": b.name, "tasks": {}}
    missing = []
    for t in tasks:
        va, vb = _verdicts_frame(session, dataset, t, a), _verdicts_frame(session, dataset, t, b)
        if va.empty or vb.empty:
            if not (va.empty and vb.empty):
                missing.append(f"{t.name}: {a.name} has {len(va)} verdicts, {b.name} has {len(vb)}")
            continue
        labels = _labels_frame(session, dataset, t)
        common = _common(t, labels, va, vb, excluded)
        counts = {"n_a": int(len(va)), "n_b": int(len(vb)), "n_fewshot": int(len(excluded & (set(va["target_key"]) | set(vb["target_key"]))))}
        if common.empty:
            missing.append(f"{t.name}: no target has human gold and a usable verdict from both judges")
            continue
        result["tasks"][t.name] = _compare_task(session, dataset.id, t, common, options, counts)
    if not result["tasks"]:
        detail = "; ".join(missing) or f"neither {a.name} nor {b.name} has verdicts on {dataset.name}"
        raise CalibrationError(f"nothing to compare between {a.name} and {b.name} on {dataset.name}: {detail}")
    result["skipped"] = missing
    primary = next(iter(result["tasks"]))
    result["task"] = primary
    # The primary task's numbers also sit at the top level: the documented JSON keys.
    result.update({k: v for k, v in result["tasks"][primary].items() if k in (
        "common_n", "metric", "a", "b", "difference", "mcnemar", "ttest", "wilcoxon", "flips")})
    result["versions"] = version_diff(session, a, b)
    result["method"] = {"bootstrap": {"n_resamples": options.bootstrap, "confidence": options.confidence,
                                      "seed": options.seed, "method": options.ci_method, "resampled_unit": "sample"}}
    return result
