"""Position bias of pairwise judges: does the verdict depend on which response is shown first?

A pairwise judge reads two responses to one target and names the better one (by response id,
e.g. ``"A"`` or ``"B"``) or declares a tie.  Run it twice per target, once in the *original*
order and once in the *swapped* order (the other response shown first), and compare:

- ``agreement``: share of targets whose two verdicts are the same (a consistent judge: 1);
- ``kappa``: Cohen's kappa between the two runs' verdicts, i.e. the agreement corrected for
  the agreement expected from the two runs' verdict distributions alone;
- ``first_position_rate``: share of the non-tie verdicts that pick the response shown first
  (a position-neutral judge: 0.5; pooled over both orders of the same targets, so the
  responses' own quality cancels out), with ``tie_rate`` beside it;
- ``n_first_both`` / ``n_second_both``: targets where the two runs picked *different*
  responses, i.e. the same position twice, and an exact two-sided sign test of
  "first and second equally likely" on them (``position_p_value``).

Verdicts that are missing (``None``, NaN: unparsed output, a failed call) are *unusable*: they
are counted per order in ``n_unusable`` and never treated as agreeing with anything.  Every
statistic above is computed on the ``n_pairs`` targets with a usable verdict in both orders.

:func:`consistent_verdicts` applies the "consistent" rule: keep a verdict only when both
orders give it; a conflict becomes a tie (or a miss).

References
----------
.. [1] Zheng, L., Chiang, W.-L., Sheng, Y. et al. (2023). Judging LLM-as-a-judge with MT-Bench
   and Chatbot Arena. *NeurIPS 2023 Datasets and Benchmarks* (section 3.3: position bias,
   swapping the order, counting a win only when it holds in both orders).
.. [2] Wang, P., Li, L., Chen, L. et al. (2024). Large language models are not fair evaluators.
   *Proceedings of ACL 2024*, 9440-9450.
.. [3] Shi, L., Ma, C., Liang, W. et al. (2024). Judging the judges: a systematic study of
   position bias in LLM-as-a-judge. arXiv:2406.07791 (position consistency, preference
   fairness).
.. [4] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
   Psychological Measurement* 20(1), 37-46.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from calibrate.reasons import Reason, join
from calibrate.stats._common import check_same_length, to_list
from calibrate.stats.agreement import cohen_kappa
from calibrate.stats.comparison import mcnemar_exact
from calibrate.stats.result import Estimate, Result, finite_or_none

__all__ = ["CONFLICT_RULES", "PositionResult", "consistent_verdicts", "position_bias"]

#: What :func:`consistent_verdicts` returns when the two orders disagree.
CONFLICT_RULES = ("tie", "miss")


@dataclass(frozen=True, kw_only=True)
class PositionResult(Result):
    """Outcome of :func:`position_bias`: a :class:`~calibrate.stats.result.Result` whose value is the agreement
    between the two orders (position consistency, Shi et al. 2024) over ``n`` complete pairs.

    Attributes
    ----------
    value : float or None
        Share of the pairs whose two verdicts are equal, a tie equalling a tie (also ``agreement``).
    n : int
        Targets with a usable verdict in both orders; every statistic below is computed on them
        (also ``n_pairs``).
    ci : None
        No interval (the kappa below has its own status).
    status : {"ok", "undefined"}
        ``"undefined"`` when no target has a usable verdict in both orders.
    reason : Reason, optional
        Why the result is undefined, or caveats (unusable verdicts, every verdict a tie).
    n_targets : int
        Targets given.
    kappa : Estimate
        Cohen's kappa between the original-order and swapped-order verdicts over the pairs
        (:func:`calibrate.stats.agreement.cohen_kappa`), with its own status and note (e.g.
        undefined when both runs always give the same single verdict).
    first_position_rate : float or None
        Share of the non-tie verdicts of the pairs (both orders pooled: up to ``2 · n_pairs``)
        that pick the response shown first in their order.  ``None`` when every verdict is a tie.
    tie_rate : float or None
        Share of the ``2 · n_pairs`` verdicts that are ties.
    n_first_both, n_second_both : int
        Pairs where the two orders picked different responses because the judge picked the
        first (second) position both times.
    position_p_value : float or None
        Exact two-sided sign test of ``n_first_both`` against ``n_second_both`` (binomial,
        p = 1/2); ``None`` when no pair flipped.
    n_unusable : int
        Missing verdicts, counted per order (a target missing both counts twice).
    n_unusable_original, n_unusable_swapped : int
        The same, per order.
    """

    n_targets: int
    kappa: Estimate
    first_position_rate: float | None
    tie_rate: float | None
    n_first_both: int
    n_second_both: int
    position_p_value: float | None
    n_unusable: int
    n_unusable_original: int
    n_unusable_swapped: int

    @property
    def agreement(self) -> float | None:
        """The value: the share of pairs whose two verdicts agree."""
        return self.value

    @property
    def n_pairs(self) -> int:
        """n: the complete pairs."""
        return self.n

    def to_dict(self) -> dict:
        """Return a JSON-safe dictionary; ``kappa`` is the nested ``Estimate.to_dict()``."""
        return {
            "n_targets": int(self.n_targets),
            "n_pairs": self.n,
            "agreement": self.value,
            "kappa": self.kappa.to_dict(),
            "first_position_rate": finite_or_none(self.first_position_rate),
            "tie_rate": finite_or_none(self.tie_rate),
            "n_first_both": int(self.n_first_both),
            "n_second_both": int(self.n_second_both),
            "position_p_value": finite_or_none(self.position_p_value),
            "n_unusable": int(self.n_unusable),
            "n_unusable_original": int(self.n_unusable_original),
            "n_unusable_swapped": int(self.n_unusable_swapped),
            **self.status_fields(),
        }



def _object_array(values: list) -> np.ndarray:
    return np.fromiter(values, dtype=object, count=len(values))


def _verdicts(original: Any, swapped: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return both runs as object arrays and their usable masks."""
    lo, ls = to_list(original), to_list(swapped)
    check_same_length(original=lo, swapped=ls)
    o, s = _usable(lo), _usable(ls)
    return o[0], s[0], o[1], s[1]


def _usable(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Return the values as an object array with every missing value replaced by ``None``, and the mask of the rest.

    ``pandas.NA`` would make later element-wise comparisons raise, and NaN never equals itself.
    """
    arr = _object_array(values)
    ok = ~pd.isna(arr)
    arr[~ok] = None
    return arr, ok


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


def position_bias(original: Any, swapped: Any, first_original: Any, first_swapped: Any, *,
                  tie: Any = "tie") -> PositionResult:
    """Return position-bias statistics of a pairwise judge run in both presentation orders.

    Parameters
    ----------
    original, swapped : array-like
        Per target, the verdict of the original-order run and of the swapped-order run: the id
        of the response judged better, the ``tie`` value, or ``None``/NaN when the run gave no
        usable verdict (map unparsable output to ``None`` before calling).  Verdicts name
        *responses*, not positions: with ids ``"A"``/``"B"``, ``"A"`` means response A wherever
        it was shown.
    first_original, first_swapped : array-like
        Per target, the id of the response shown first in the original and in the swapped
        order.  Needed where both orders have a usable verdict; where both are given they must
        differ (the swapped run shows the other response first), and a non-tie verdict must be
        one of the two.
    tie : hashable, default "tie"
        The verdict value meaning "neither is better".  It must not be a response id.

    Returns
    -------
    PositionResult
        ``n_pairs``, ``agreement``, ``kappa``, ``first_position_rate``, ``tie_rate``, the flip
        counts and their sign test, the unusable counts, ``status`` and ``note``.  Undefined
        (``status="undefined"``, rates ``None``) when no target has a usable verdict in both
        orders.

    Raises
    ------
    ValueError
        Inputs of different lengths; a missing first-shown id where both orders have a
        verdict; the same response shown first in both orders; a verdict that is neither of
        the pair's responses nor ``tie``; a response id equal to ``tie``.

    Notes
    -----
    The statistics use the complete pairs only.  Pooling both orders of the same targets puts
    each response once in each position, so a judge that always prefers the same response
    (whatever the order) has a first-position rate of exactly 0.5; pooling verdicts of targets
    judged in one order only would mix the responses' quality into the rate.  Ties pick no
    position: they are left out of the first-position rate's denominator and reported as
    ``tie_rate`` instead.  A pair with one tie and one pick disagrees, but is not a flip.

    Kappa treats verdict values as categories shared across targets, which suits ids such as
    ``"A"``/``"B"`` or model names; with ids unique to each target, read ``agreement``.

    References
    ----------
    .. [1] Zheng, L., Chiang, W.-L., Sheng, Y. et al. (2023). Judging LLM-as-a-judge with
       MT-Bench and Chatbot Arena. *NeurIPS 2023 Datasets and Benchmarks*.
    .. [2] Shi, L., Ma, C., Liang, W. et al. (2024). Judging the judges: a systematic study of
       position bias in LLM-as-a-judge. arXiv:2406.07791.
    .. [3] Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and
       Psychological Measurement* 20(1), 37-46.
    """
    o, s, uo, us = _verdicts(original, swapped)
    lf_o, lf_s = to_list(first_original), to_list(first_swapped)
    check_same_length(original=o, first_original=lf_o, first_swapped=lf_s)
    (fo, has_fo), (fs, has_fs) = _usable(lf_o), _usable(lf_s)
    n = o.size

    both_first = has_fo & has_fs
    if np.any((has_fo & (fo == tie)) | (has_fs & (fs == tie))):
        raise ValueError(f"a response id equals the tie value {tie!r}")
    same_first = both_first & (fo == fs)
    if same_first.any():
        i = int(np.flatnonzero(same_first)[0])
        raise ValueError(f"target {i}: {fo[i]!r} is shown first in both orders; "
                         "the swapped run must show the other response first")
    for verdict, usable, name in ((o, uo, "original"), (s, us, "swapped")):
        stray = both_first & usable & (verdict != tie) & (verdict != fo) & (verdict != fs)
        if stray.any():
            i = int(np.flatnonzero(stray)[0])
            raise ValueError(f"{name}[{i}] = {verdict[i]!r} is neither of the pair's responses "
                             f"({fo[i]!r}, {fs[i]!r}) nor the tie value {tie!r}")

    pair = uo & us
    missing_first = pair & ~both_first
    if missing_first.any():
        i = int(np.flatnonzero(missing_first)[0])
        which = "first_original" if not has_fo[i] else "first_swapped"
        raise ValueError(f"{which} is missing at target {i}, where both orders have a verdict")

    n_unusable_o, n_unusable_s = int((~uo).sum()), int((~us).sum())
    n_pairs = int(pair.sum())
    counts = {"n_targets": n, "n": n_pairs, "n_unusable": n_unusable_o + n_unusable_s,
              "n_unusable_original": n_unusable_o, "n_unusable_swapped": n_unusable_s}
    notes = []
    if n_unusable_o or n_unusable_s:
        notes.append(Reason("unusable_verdicts", original=n_unusable_o, swapped=n_unusable_s))
    if n_pairs == 0:
        note = Reason("no_usable_pair") if n else Reason("no_targets")
        return PositionResult(value=None, kappa=Estimate.no_data(note), first_position_rate=None, tie_rate=None,
                              n_first_both=0, n_second_both=0, position_p_value=None, status="undefined",
                              reason=join([note, *notes]), **counts)

    po, ps, pfo, pfs = o[pair], s[pair], fo[pair], fs[pair]
    same = po == ps
    agreement = float(same.mean())
    kappa = cohen_kappa(po.tolist(), ps.tolist())

    tie_o, tie_s = po == tie, ps == tie
    picks_first_o = ~tie_o & (po == pfo)
    picks_first_s = ~tie_s & (ps == pfs)
    n_ties = int(tie_o.sum() + tie_s.sum())
    n_picks = 2 * n_pairs - n_ties
    first_rate = _rate(int(picks_first_o.sum() + picks_first_s.sum()), n_picks)
    flip = ~tie_o & ~tie_s & ~same
    n_first_both = int((flip & picks_first_o).sum())  # different responses picked: the same position twice
    n_second_both = int((flip & ~picks_first_o).sum())
    if first_rate is None:
        notes.append(Reason("all_ties"))
    sign = mcnemar_exact(n_first_both, n_second_both)
    return PositionResult(value=agreement, kappa=kappa, first_position_rate=first_rate,
                          tie_rate=n_ties / (2 * n_pairs), n_first_both=n_first_both, n_second_both=n_second_both,
                          position_p_value=sign.p_value, reason=join(notes), **counts)


def consistent_verdicts(original: Any, swapped: Any, *, tie: Any = "tie", on_conflict: str = "tie") -> list:
    """Return one verdict per target under the "consistent" rule: both orders must agree.

    Parameters
    ----------
    original, swapped : array-like
        Per target, the verdicts of the two presentation orders (response ids, ``tie``, or
        ``None``/NaN for an unusable verdict), as for :func:`position_bias`.
    tie : hashable, default "tie"
        The tie value, returned for conflicts when ``on_conflict="tie"``.
    on_conflict : {"tie", "miss"}, default "tie"
        What a target gets when both orders have a usable verdict and they differ (including a
        pick in one order and a tie in the other): ``"tie"`` (Zheng et al.'s conservative rule:
        a win must hold in both orders) or ``"miss"`` (``None``, no verdict).

    Returns
    -------
    list
        Per target: the common verdict when both orders agree; ``tie`` or ``None`` on a
        conflict; ``None`` when either order is unusable (one order alone cannot show that the
        verdict survives the swap, so it is a miss, never a silent win).

    References
    ----------
    .. [1] Zheng, L., Chiang, W.-L., Sheng, Y. et al. (2023). Judging LLM-as-a-judge with
       MT-Bench and Chatbot Arena. *NeurIPS 2023 Datasets and Benchmarks* (section 3.4).
    """
    if on_conflict not in CONFLICT_RULES:
        raise ValueError(f"on_conflict must be one of {CONFLICT_RULES}, got {on_conflict!r}")
    o, s, uo, us = _verdicts(original, swapped)
    conflict_value = tie if on_conflict == "tie" else None
    out: list = [None] * o.size
    pair = uo & us
    agree = np.zeros(o.size, dtype=bool)
    agree[pair] = o[pair] == s[pair]
    for i in np.flatnonzero(agree).tolist():
        out[i] = o[i]
    for i in np.flatnonzero(pair & ~agree).tolist():
        out[i] = conflict_value
    return out
