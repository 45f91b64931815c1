"""Versions on common targets: every listed judge scored on the same targets, so their figures compare.

Each judge's own figure (`alignment_sections`, the report's) leaves out its own few-shot
examples and its own unusable verdicts, so two versions with identical verdicts can show
different numbers when one gained a few-shot example (the demo showed 0.861 → 0.893 with n
71 → 70). The dashboard, its chart and the report's `versions` section therefore score every
listed judge on the **common targets**:

- the targets every listed judge was run on (has a verdict for, usable or not),
- minus the few-shot examples of *any* listed judge's prompt version,
- that have human gold (and, for categorical tasks, a gold label the statistics use).

On them `n` is the same for every judge. A verdict that is unusable (unparsed, a failed call)
or, for categorical tasks, a label the statistics leave out (such as `not_applicable`) is
scored as a **miss**, not dropped: dropping it would shrink that judge's n, and a judge that
fails to answer has not agreed with the experts. For categorical tasks a miss is a category of
its own, "(no usable verdict)", which the gold never takes (κ over the task's labels plus it;
with no miss this is exactly κ over the labels). For scores a miss is the end of the scale
farthest from the gold (the task's scale, else the range of the gold and usable verdicts on
the common targets): as wrong as a score can be. `n_unparsed` and `n_abstained` count the
misses. A pairwise task is scored as a categorical one, on the one verdict per target its order
rule makes (`alignment_frames`); a target the rule leaves without one is a miss. docs/statistics.md
§13 states the rule.

The frames are those `alignment_sections` reads (`report.alignment_frames`): the labels, the
gold and every judge's verdicts are read once; each judge's own figure is a point estimate
beside (`own`: metric, value, n), the common figure carries the bootstrap CI and the decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sqlmodel import Session

from calibrate import stats
from calibrate.calibration.budget import budget_candidates
from calibrate.calibration.options import Options
from calibrate.calibration.report import AlignmentFrames, alignment_frames
from calibrate.calibration.sections import ABSTAINED, align_section, estimate_dict, judge_codes, per_group, with_point_p
from calibrate.judged import judging
from calibrate.reasons import Reason
from calibrate.stats import Estimate

MISS = "(no usable verdict)"


@dataclass
class CommonTargets:
    """The targets a set of judges is scored on together (`common_targets`)."""

    keys: list  # sorted target keys ("claim:ID" strings, or integer target ids: whatever the frames use)
    n_fewshot: int  # targets every judge ran on, left out as a few-shot example of one of them
    run_on: set  # the targets every judge was run on (has a verdict for, usable or not)
    open_keys: set  # run_on minus the few-shot examples (with or without gold)


def common_targets(gold: pd.DataFrame, run_on: list, fewshot: set, *, stat_labels: list[str] | None) -> CommonTargets:
    """Return the common targets of some judges: the one rule of the dashboard, `report --versions` (its rows and
    its comparison block) and `calibrate compare`.

    `gold`: the gold per target (`target_key`, `gold`; a tie has gold None); `run_on`: per judge,
    the target keys it has a verdict for, usable or not (pairwise: the order rule's one per
    target); `fewshot`: the few-shot examples of any of the judges, keyed as the frames are;
    `stat_labels`: a categorical task's labels the statistics use (None for scores). A target is
    common when every judge was run on it, it is no judge's few-shot example, and it has gold
    (for labels: a gold the statistics use). A judge's unusable verdict or abstention on a common
    target is a miss for that judge, never a reason to drop the target (module docstring).
    """
    ran = set.intersection(*(set(keys) for keys in run_on)) if run_on else set()
    with_gold = gold[gold["gold"].notna()]
    if stat_labels is not None:
        with_gold = with_gold[with_gold["gold"].isin(stat_labels)]
    open_keys = ran - fewshot
    return CommonTargets(keys=sorted(open_keys & set(with_gold["target_key"])), n_fewshot=len(ran & fewshot),
                         run_on=ran, open_keys=open_keys)


def judge_misses(task, gold: np.ndarray, values: np.ndarray, usable: np.ndarray, stat_labels: list[str],
                 scale: tuple[float, float] | None) -> tuple[np.ndarray, int, int]:
    """Return a judge's values on common targets with every miss scored, its unusable verdicts and its abstentions.

    Labels: an unusable verdict or an abstention (a value outside `stat_labels`) becomes `MISS`, a
    category the gold never takes. Scores: an unusable verdict becomes the end of `scale`
    farthest from the gold (equidistant: the low end); without a scale it stays NaN.
    """
    if judging(task).kind.labels:
        off_labels = usable & ~pd.Series(values).isin(stat_labels).to_numpy()
        return np.where(usable & ~off_labels, values, MISS), int((~usable).sum()), int(off_labels.sum())
    x = np.asarray(gold, dtype=float)
    judge_v = pd.to_numeric(pd.Series(np.where(usable, values, None)), errors="coerce").to_numpy(dtype=float)
    if scale is not None:
        low, high = scale
        judge_v = np.where(np.isnan(judge_v), np.where(np.abs(x - low) >= np.abs(x - high), low, high), judge_v)
    return judge_v, int((~usable).sum()), 0


def miss_labels(stat_labels: list[str], *scored: np.ndarray) -> list[str]:
    """Return the labels κ is computed over: the statistics' labels, plus `MISS` when any judge has a miss."""
    return [*stat_labels, MISS] if any((np.asarray(v, dtype=object) == MISS).any() for v in scored) else list(stat_labels)


@dataclass
class VersionScores:
    """The listed judges scored on their common targets, and each one's own figure beside."""

    judges: list[str]  # the listed judges that have verdicts, in the order given
    common_targets: int  # N: the targets every one of them is scored on
    n_fewshot: int  # targets left out because they are a few-shot example of some listed judge
    note: str  # why N is 0, or ""
    reason: Reason | None = None  # the note as data (calibrate.reasons)
    common: dict[str, dict | None] = field(default_factory=dict)  # judge → light section on the common targets
    own: dict[str, dict | None] = field(default_factory=dict)  # judge → {metric, value, n} on its own targets


@dataclass
class CommonContext:
    """What scoring some judges on their common targets starts from (`common_context`)."""

    task: object
    ran: list[str]  # the listed judges that have verdicts, in the order given
    categorical: bool
    stat_labels: list[str]
    gold: pd.DataFrame  # the gold per target, indexed by target key
    common: CommonTargets
    common_gold: pd.DataFrame  # the gold of the common targets, in their order
    scale: tuple[float, float] | None

    @property
    def keys(self) -> list:
        return self.common.keys

    def judge_values(self, frames: AlignmentFrames, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Return a judge's verdict values on the common targets, in their order, and which are usable."""
        verdicts = frames.verdicts[name]
        values = verdicts["value"].to_numpy(dtype=object)
        usable = (verdicts["status"] == "ok").to_numpy() & pd.notna(values)
        where = pd.Index(verdicts["target_key"]).get_indexer(self.keys)
        return values[where], usable[where]


def common_context(frames: AlignmentFrames, judge_names: list[str]) -> CommonContext:
    """Return the common targets of the judges of `judge_names` that have verdicts, their gold and the score scale."""
    task = frames.task
    ran = [name for name in judge_names if frames.verdicts.get(name) is not None]
    categorical = judging(task).kind.labels  # categorical and pairwise: labels
    stat_labels = [lab for lab in (task.labels or []) if lab not in (task.excluded or [])]
    gold = frames.gold.drop_duplicates("target_key").set_index("target_key")
    fewshot = set().union(*(frames.fewshot[name] for name in ran)) if ran else set()
    common = common_targets(frames.gold, [frames.verdicts[name]["target_key"] for name in ran], fewshot,
                            stat_labels=stat_labels if categorical else None)
    common_gold = gold.loc[common.keys] if common.keys else gold.iloc[:0]
    scale = None if categorical or not ran else score_scale(task, common_gold, [frames.verdicts[name] for name in ran])
    return CommonContext(task, ran, categorical, stat_labels, gold, common, common_gold, scale)


@dataclass
class ScoredTargets:
    """Every listed judge's values on the common targets with its misses scored: what the common figures are computed
    on (`scored_targets`), for statistics that resample the judges together (calibration/selection.py)."""

    task: object
    keys: list
    clusters: np.ndarray  # the sample of each common target (the bootstrap's cluster)
    gold: np.ndarray
    values: dict[str, np.ndarray]  # judge → its values, misses scored (labels: MISS; scores: the far end of the scale)
    labels: list[str] | None  # labels: the categories κ is computed over (the statistics' labels and MISS); scores: None


def scored_targets(frames: AlignmentFrames, judge_names: list[str]) -> ScoredTargets:
    """Return the judges' values on their common targets, misses scored exactly as `score_versions` scores them."""
    ctx = common_context(frames, judge_names)
    gold_v = ctx.common_gold["gold"].to_numpy(dtype=object)
    values = {}
    for name in ctx.ran:
        judged, usable = ctx.judge_values(frames, name)
        values[name] = judge_misses(ctx.task, gold_v, judged, usable, ctx.stat_labels, ctx.scale)[0]
    return ScoredTargets(ctx.task, list(ctx.keys), ctx.common_gold["sample_id"].to_numpy(),
                         gold_v if ctx.categorical else gold_v.astype(float), values,
                         [*ctx.stat_labels, MISS] if ctx.categorical else None)


def score_versions(session: Session, dataset_name: str, task_name: str, judge_names: list[str],
                   options: Options | None = None, *, groups: dict[int, str | None] | None = None,
                   frames: AlignmentFrames | None = None) -> VersionScores:
    """Score every judge of `judge_names` that has verdicts on the targets common to all of them (see the module).

    With `groups` (sample id → group value), each common section also gets `per_group`. Each
    judge costs index look-ups on arrays (no merge): the dashboard computes 20 of them per page.
    """
    options = options or Options()
    frames = frames or alignment_frames(session, dataset_name, task_name, judge_names, options)
    ctx = common_context(frames, judge_names)
    task, ran, gold = ctx.task, ctx.ran, ctx.gold
    out = VersionScores(judges=ran, common_targets=0, n_fewshot=0, note="")
    if not ran:
        out.reason = Reason("no_judge_verdicts")
        out.note = out.reason.text()
        return out
    gold_keys = set(gold.index[gold["gold"].notna().to_numpy()])
    open_keys = ctx.common.open_keys
    keys = ctx.keys  # the order of the report's merged rows: the bootstrap draws the same samples
    out.n_fewshot = ctx.common.n_fewshot
    out.common_targets = len(keys)
    if not keys:
        out.reason = Reason("judges_share_no_target", count=len(ran)) if len(ran) > 1 else Reason("no_target_outside_fewshot")
        out.note = out.reason.text()
    first = frames.verdicts[ran[0]]
    no_gold = first[first["target_key"].isin(open_keys - gold_keys)]  # labelling them adds to N
    candidates = budget_candidates(pd.DataFrame({"sample_id": no_gold["sample_id"].to_numpy(),
                                                 "target_key": no_gold["target_key"].to_numpy(), "excluded": "no_gold"}))
    for name in ran:
        verdicts = frames.verdicts[name]
        values = verdicts["value"].to_numpy(dtype=object)
        usable = (verdicts["status"] == "ok").to_numpy() & pd.notna(values)
        out.own[name] = _own_point(task, gold, pd.Index(verdicts["target_key"]), values, usable, frames.fewshot[name],
                                   ctx.stat_labels)
        judged, judged_usable = ctx.judge_values(frames, name)
        out.common[name] = _common_section(task, ctx.common_gold, judged, judged_usable, ctx.stat_labels, ctx.scale, options,
                                           groups, candidates=candidates)
    return out


def score_scale(task, gold: pd.DataFrame, verdicts: list[pd.DataFrame]) -> tuple[float, float] | None:
    """Return the ends of a score task's scale: the task's, else the range of the gold and the usable verdicts."""
    if task.scale_min is not None and task.scale_max is not None:
        return float(task.scale_min), float(task.scale_max)
    values = gold["gold"].astype(float).tolist()
    for frame in verdicts:
        ok = frame[(frame["status"] == "ok") & frame["value"].notna()]["value"]
        values += pd.to_numeric(ok, errors="coerce").dropna().tolist()
    return (min(values), max(values)) if values else None


def _own_point(task, gold: pd.DataFrame, index: pd.Index, values: np.ndarray, usable: np.ndarray, fewshot: set[str],
               stat_labels: list[str]) -> dict:
    """Return the judge's figure on all its own targets as the report counts them (join_verdicts): a point estimate,
    n and the excluded counts."""
    golds = gold["gold"].reindex(index).to_numpy(dtype=object)
    has_gold = pd.notna(golds)
    shown = index.isin(fewshot) if fewshot else np.zeros(len(index), dtype=bool)
    scored = usable & has_gold & ~shown
    n_abstained = 0
    if judging(task).kind.labels:  # as sections.categorical_section: gold outside the labels left out, abstentions are misses
        scored &= pd.Series(golds).isin(stat_labels).to_numpy()
        judged, used = judge_codes(values[scored].tolist(), stat_labels)
        n_abstained = judged.count(ABSTAINED)
        est = stats.cohen_kappa(golds[scored].tolist(), judged, labels=used) \
            if scored.any() else Estimate.no_data(Reason("no_scored_targets"))
        metric = "cohen_kappa"
    else:
        est = stats.spearman_rho(golds[scored].astype(float), values[scored].astype(float)) \
            if scored.any() else Estimate.no_data(Reason("no_scored_targets"))
        metric = "spearman_rho"
    n_fewshot = sum(1 for key in fewshot if key in gold.index or key in index)  # as join_verdicts counts them
    return {"metric": metric, "value": est.value, "n": int(scored.sum()), "status": est.status, **est.note_fields(),
            "n_fewshot": n_fewshot, "n_no_gold": int((usable & ~has_gold & ~shown).sum()),
            "n_unparsed": int((~usable & ~shown).sum()), "n_abstained": n_abstained}


def _common_section(task, gold: pd.DataFrame, values: np.ndarray, usable: np.ndarray, stat_labels: list[str],
                    scale: tuple[float, float] | None, options: Options, groups: dict[int, str | None] | None, *,
                    candidates: list[str]) -> dict:
    """Return a judge's light section on the common targets (`gold`: their gold by target, `values`/`usable`: its
    verdicts on them in the same order), misses scored."""
    section: dict = {"kind": task.kind, "target": task.target, "n": int(len(gold))}
    clusters = gold["sample_id"].to_numpy()
    if judging(task).target.within:
        section["n_samples"] = int(len(set(clusters.tolist())))
    boot = dict(n_resamples=options.bootstrap, confidence=options.confidence, seed=options.seed)
    gold_v = gold["gold"].to_numpy(dtype=object)
    categorical = judging(task).kind.labels
    judge_v, section["n_unparsed"], abstained = judge_misses(task, gold_v, values, usable, stat_labels, scale)
    if categorical:
        section["n_abstained"] = abstained
        labels = [*stat_labels, MISS]
        est = stats.cohen_kappa(gold_v.tolist(), judge_v.tolist(), labels=labels) if len(gold_v) else Estimate.no_data(
            Reason("no_common_target"))
        if est.status == "ok":
            index = {lab: i for i, lab in enumerate(labels)}
            codes = ([index[v] for v in gold_v], [index[v] for v in judge_v])
            if judging(task).kind.orders:  # one target per sample, as in the report (sections.categorical_section)
                est = stats.multinomial_bootstrap_kappa(*codes, n_labels=len(labels), method=options.ci_method, **boot)
            else:
                est = stats.cluster_bootstrap_kappa(*codes, clusters, n_labels=len(labels), method=options.ci_method, **boot)
        section["cohen_kappa"] = estimate_dict(est)
        section["percent_agreement"] = float(np.mean(gold_v == judge_v)) if len(gold_v) else None
        metric = "cohen_kappa"
    else:
        x = gold_v.astype(float)
        if len(x) == 0:
            est = Estimate.no_data(Reason("no_common_target"))
        else:
            est = with_point_p(stats.cluster_bootstrap_corr(x, judge_v, clusters, method="spearman", ci_method=options.ci_method, **boot),
                               stats.spearman_rho(x, judge_v))
        section["spearman_rho"] = estimate_dict(est, keep=("value", "ci", "p_value", "status", "note"))
        metric = "spearman_rho"
    align_section(section, metric, est, options, candidates, light=True)
    if groups is not None:
        scored = pd.DataFrame({"sample_id": clusters, "gold": gold_v if categorical else x, "judge": judge_v})
        section["per_group"] = per_group("categorical" if categorical else task.kind, scored, groups, options,
                                         labels=[*stat_labels, MISS] if categorical else None)
    return section
