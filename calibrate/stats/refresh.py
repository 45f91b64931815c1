"""The refresh rule of a golden set: anchors, which members retire, which production items join.

Pure functions behind ``calibrate golden refresh NAME --from WHERE --renew 0.2 --anchor-share
0.5 --strata metadata.topic --seed S``: arrays of strata and ages in, indices out, the same
seed giving the same plan.  :func:`refresh_plan` keeps the anchors (never retired),
retires ``ceil(renew * N)`` other members, oldest first within the strata most
over-represented against production, and adds as many production items by largest-remainder
(Hamilton) allocation to production's stratum shares.  The drift statistics that tell when a
refresh is due are in :mod:`calibrate.stats.drift`; ``docs/statistics.md`` ("Drift") has the
decisions.

References
----------
.. [1] Balinski, M. L. and Young, H. P. (2001). *Fair Representation*, 2nd ed. Brookings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibrate.reasons import Reason
from calibrate.stats._common import is_missing, ordered_labels, to_list
from calibrate.stats.result import json_safe

__all__ = ["RefreshPlan", "largest_remainder_allocation", "refresh_plan", "renew_count", "retire_items", "select_anchors"]



def renew_count(n_items: int, renew: float) -> int:
    """Return ``ceil(renew * n_items)``, immune to float noise (``0.1 * 30`` is 3, not 4)."""
    if not 0.0 <= renew <= 1.0:
        raise ValueError(f"renew must be in [0, 1], got {renew!r}")
    return int(math.ceil(round(renew * n_items, 9)))


def _tiebreak(n: int, seed: int | None) -> np.ndarray:
    return np.random.default_rng(seed).permutation(n)


def largest_remainder_allocation(shares: Any, k: int, *, capacity: Any = None, seed: int | None = 0) -> np.ndarray:
    """Return the Hamilton (largest-remainder) allocation of ``k`` seats to ``shares``.

    Quotas ``q_s = k * w_s / sum(w)``; every stratum gets ``floor(q_s)`` and the remaining
    ``k - sum floor(q_s)`` seats go one each to the largest remainders ``q_s - floor(q_s)``
    (ties broken by a seeded random order, so the result is deterministic for a seed).  Hence
    ``|a_s - q_s| < 1`` for every stratum.  With ``capacity``, a stratum never gets more than
    its capacity; the seats it cannot take are allocated again, by the same rule, among the
    strata with room.

    Parameters
    ----------
    shares : array-like of float
        Non-negative weights (shares or counts) per stratum.
    k : int
        Seats to allocate.
    capacity : array-like of int, optional
        Most seats each stratum can take (e.g. production items available).
    seed : int or None
        Seed of the tie-break.

    Returns
    -------
    numpy.ndarray of int
        Seats per stratum, summing to ``k``.

    References
    ----------
    .. [1] Balinski, M. L. and Young, H. P. (2001). *Fair Representation*, 2nd ed. Brookings.
    """
    w = np.asarray(shares, dtype=float)
    if w.ndim != 1 or (w < 0).any() or not np.isfinite(w).all():
        raise ValueError("shares must be finite, non-negative and one-dimensional")
    cap = np.full(w.size, np.iinfo(np.int64).max) if capacity is None else np.asarray(capacity, dtype=np.int64)
    if cap.shape != w.shape or (cap < 0).any():
        raise ValueError("capacity must be non-negative and aligned with shares")
    if k < 0 or k > int(np.minimum(cap, k).sum()) or (k and w[cap > 0].sum() <= 0):
        raise ValueError(f"cannot allocate {k} items: {int(np.minimum(cap, k).sum())} can be taken")
    order = _tiebreak(w.size, seed)
    out = np.zeros(w.size, dtype=np.int64)
    left = k
    while left:
        room = (cap - out) > 0
        weights = np.where(room, w, 0.0)
        if weights.sum() <= 0:
            weights = room.astype(float)
        quota = left * weights / weights.sum()
        take = np.floor(quota).astype(np.int64)
        extra = left - int(take.sum())
        rem = quota - take
        rank = sorted(np.flatnonzero(room), key=lambda s: (-rem[s], order[s]))
        take[rank[:extra]] += 1
        take = np.minimum(take, cap - out)
        out += take
        left = k - int(out.sum())
    return out


def _strata_codes(strata: Any) -> tuple[np.ndarray, list]:
    items = ["" if is_missing(s) else s for s in to_list(strata)]
    names = ordered_labels(items)
    index = {s: i for i, s in enumerate(names)}
    return np.array([index[s] for s in items], dtype=np.int64), names


def select_anchors(strata: Any, added: Any, *, share: float, anchor: Any = None, seed: int | None = 0) -> np.ndarray:
    """Return a boolean mask of anchors: the existing ones, topped up to ``round(share * N)``.

    New anchors are allocated to strata by :func:`largest_remainder_allocation` of the
    missing count over the strata's non-anchor counts, and are the oldest items (smallest
    ``added``, ties in a seeded order) of each stratum.  Existing anchors are never
    dropped, even when they exceed the share.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"anchor share must be in [0, 1], got {share!r}")
    codes, _ = _strata_codes(strata)
    age = np.asarray(to_list(added))
    mask = np.zeros(codes.size, bool) if anchor is None else np.asarray(to_list(anchor), dtype=bool).copy()
    if age.size != codes.size or mask.size != codes.size:
        raise ValueError("strata, added and anchor must have the same length")
    want = int(math.floor(share * codes.size + 0.5 + 1e-9)) - int(mask.sum())
    if want <= 0:
        return mask
    free = np.bincount(codes[~mask], minlength=codes.max() + 1)
    seats = largest_remainder_allocation(free, want, capacity=free, seed=seed)
    tie = _tiebreak(codes.size, seed)
    for s, count in enumerate(seats):
        pool = [i for i in np.lexsort((tie, age)) if codes[i] == s and not mask[i]]
        mask[pool[:count]] = True
    return mask


def retire_items(strata: Any, added: Any, anchor: Any, *, renew: float, target_shares: dict, seed: int | None = 0) -> np.ndarray:
    """Return the indices of the items to retire: ``ceil(renew * N)`` non-anchors.

    One at a time, the stratum most over-represented against production,
    ``excess_s = n_s - N * t_s`` (``n_s`` its current members, ``t_s`` production's share, 0
    for a stratum production no longer has), gives up its oldest non-anchor item (smallest
    ``added``; ties in a seeded order).  Strata with no non-anchor left are skipped; ties
    between strata go to the larger stratum, then the seeded order.

    Raises
    ------
    ValueError
        When ``ceil(renew * N)`` exceeds the non-anchor items.
    """
    codes, names = _strata_codes(strata)
    age = np.asarray(to_list(added))
    anc = np.asarray(to_list(anchor), dtype=bool)
    if age.size != codes.size or anc.size != codes.size:
        raise ValueError("strata, added and anchor must have the same length")
    k = renew_count(codes.size, renew)
    if k > int((~anc).sum()):
        raise ValueError(f"renew {renew:g} retires {k} items but only {int((~anc).sum())} are not anchors")
    total = sum(float(v) for v in target_shares.values()) or 1.0
    target = np.array([codes.size * float(target_shares.get(s, 0.0)) / total for s in names])
    counts = np.bincount(codes, minlength=len(names)).astype(float)
    tie = _tiebreak(codes.size, seed)
    queues = {s: [i for i in np.lexsort((tie, age)) if codes[i] == s and not anc[i]] for s in range(len(names))}
    s_tie = _tiebreak(len(names), seed)
    retired = []
    for _ in range(k):
        s = min((s for s in queues if queues[s]), key=lambda s: (-(counts[s] - target[s]), -counts[s], s_tie[s]))
        retired.append(queues[s].pop(0))
        counts[s] -= 1
    return np.array(sorted(retired), dtype=np.int64)


@dataclass(frozen=True)
class RefreshPlan:
    """What ``golden refresh`` does: which members retire, which production items join.

    ``retired`` indexes the members, ``added`` indexes production, ``anchors`` is the mask of
    members kept byte-identical; ``allocation`` and ``target`` map each stratum to the items
    added and to ``k * t_s``.
    """

    retired: np.ndarray
    added: np.ndarray
    anchors: np.ndarray
    allocation: dict
    target: dict
    notes: list = field(default_factory=list)  # Reasons (calibrate.reasons); to_dict gives their English and codes

    def to_dict(self) -> dict:
        """Return a JSON-safe dictionary (indices as lists)."""
        return json_safe({"retired": self.retired, "added": self.added, "anchors": np.flatnonzero(self.anchors),
                          "allocation": self.allocation, "target": self.target,
                          "notes": [str(note) for note in self.notes],
                          "reasons": [note.to_dict() for note in self.notes if isinstance(note, Reason)]})


def refresh_plan(strata: Any, added: Any, production_strata: Any, *, renew: float = 0.2, anchor_share: float = 0.5,
                 anchor: Any = None, exclude: Any = None, seed: int | None = 0) -> RefreshPlan:
    """Return the plan of a golden-set refresh: anchors, ``k = ceil(renew * N)`` retired, ``k`` added.

    1. Anchors: :func:`select_anchors` (existing anchors kept, topped up to ``anchor_share``).
    2. Retired: :func:`retire_items` against production's stratum shares.
    3. Added: the ``k`` seats go to strata by :func:`largest_remainder_allocation` of
       production's shares (capped by the eligible production items of each stratum), then
       a seeded random sample within each stratum.  Production items flagged in ``exclude``
       (e.g. already members, or few-shot examples) are never drawn.

    Parameters
    ----------
    strata, added : array-like
        Per member: stratum (e.g. ``metadata.topic``; missing = ``""``) and the version (or
        time) it was added in.
    production_strata : array-like
        Stratum of each production item.
    renew, anchor_share : float
        As ``--renew`` and ``--anchor-share``.
    anchor, exclude : array-like of bool, optional
        Existing anchors among members; production items not to draw.
    seed : int or None
        One seed for every random choice: the same seed gives the same plan.
    """
    anchors = select_anchors(strata, added, share=anchor_share, anchor=anchor, seed=seed)
    prod_codes, prod_names = _strata_codes(production_strata)
    shares = {s: float(np.count_nonzero(prod_codes == i)) for i, s in enumerate(prod_names)}
    retired = retire_items(strata, added, anchors, renew=renew, target_shares=shares, seed=seed)
    k = retired.size
    ok = np.ones(prod_codes.size, bool) if exclude is None else ~np.asarray(to_list(exclude), dtype=bool)
    if ok.size != prod_codes.size:
        raise ValueError("exclude must be aligned with production_strata")
    avail = np.bincount(prod_codes[ok], minlength=len(prod_names)) if prod_codes.size else np.zeros(0, np.int64)
    notes = []
    if k > int(avail.sum()):
        raise ValueError(f"production has {int(avail.sum())} eligible items, {k} are needed")
    seats = largest_remainder_allocation(list(shares.values()), k, capacity=avail, seed=seed) if k else np.zeros(len(prod_names), np.int64)
    total = sum(shares.values()) or 1.0
    target = {s: k * shares[s] / total for s in prod_names}
    if any(abs(int(a) - target[s]) >= 1 for a, s in zip(seats, prod_names, strict=True)):
        notes.append(Reason("refresh_seats_moved"))
    rng = np.random.default_rng(seed)
    chosen = [rng.choice(np.flatnonzero(ok & (prod_codes == i)), int(a), replace=False) for i, a in enumerate(seats) if a]
    added_idx = np.sort(np.concatenate(chosen)).astype(np.int64) if chosen else np.zeros(0, np.int64)
    return RefreshPlan(retired=retired, added=added_idx, anchors=anchors,
                       allocation={s: int(a) for s, a in zip(prod_names, seats, strict=True)}, target=target, notes=notes)
