"""Where a trajectory first goes wrong: does the judge find the same first error step as the gold? (issue 33)

Pure: plain mappings in, a plain dict out. A step task (a label per step of a sample's
trajectory) has a *negative* label (step_correctness: `incorrect`). Per trajectory, each side's
first error is the lowest step index it marks with that label (`first_marked`); a side that
marks none found no error.

`localisation` compares the two over the trajectories both sides looked at:

- `exact`: over the trajectories where both found an error, the share whose first error is
  the same step; `within_1`: the share whose first errors are at most one step apart. Each is
  {value, ci, n, status}: `n` the trajectories compared, `ci` the Wilson score interval (each
  trajectory is one independent trial, so no bootstrap is needed), `status` "ok", or "no_data"
  (value and ci null) when no trajectory has an error on both sides.
- `n_trajectories` (looked at by both), `n_both` (an error on both sides), `n_only_gold` (the
  gold found an error the judge missed entirely), `n_only_judge` (the judge flagged a
  trajectory the gold holds correct), `n_neither`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping


def first_marked(rows: Iterable[tuple[Hashable, int, object]], negative: object) -> dict[Hashable, int | None]:
    """Return trajectory → the lowest step index whose value is `negative` (None: it marks none), from
    (trajectory, step index, value) rows; every trajectory with a row is a key."""
    out: dict[Hashable, int | None] = {}
    for trajectory, index, value in rows:
        first = out.setdefault(trajectory, None)
        if value == negative and (first is None or int(index) < first):
            out[trajectory] = int(index)
    return out


def _share(hits: int, n: int, confidence: float) -> dict:
    if n == 0:
        return {"value": None, "ci": None, "n": 0, "status": "no_data"}
    from scipy import stats as sps  # noqa: PLC0415 - SciPy loads on first use (docs/architecture.md)
    ci = sps.binomtest(hits, n).proportion_ci(confidence_level=confidence, method="wilson")
    return {"value": hits / n, "ci": [float(ci.low), float(ci.high)], "n": n, "status": "ok"}


def localisation(gold: Mapping[Hashable, int | None], judge: Mapping[Hashable, int | None], *,
                 confidence: float = 0.95) -> dict:
    """Return the localisation block (module docstring) of each side's first error per trajectory."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    common = [t for t in gold if t in judge]
    both = [(gold[t], judge[t]) for t in common if gold[t] is not None and judge[t] is not None]
    return {
        "n_trajectories": len(common),
        "n_both": len(both),
        "exact": _share(sum(g == j for g, j in both), len(both), confidence),
        "within_1": _share(sum(abs(g - j) <= 1 for g, j in both), len(both), confidence),
        "n_only_gold": sum(gold[t] is not None and judge[t] is None for t in common),
        "n_only_judge": sum(gold[t] is None and judge[t] is not None for t in common),
        "n_neither": sum(gold[t] is None and judge[t] is None for t in common),
    }
