"""The arithmetic of sampling, without the database: apportionment (how many of each stratum and split) and
annotator groups (who labels which item with overlap K, every pair sharing items, loads within one).

`allocate_strata` and `largest_remainder` apportion by largest remainder; `controlled_rounding`
rounds a stratum × split table so both margins hold; `combination_cycle` and `assignee_groups`
order the annotator groups. Used by `sample_dataset` (calibrate/ingest/sampling.py); the rules
and the reasons for them: docs/sampling.md.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from calibrate.errors import SamplingError
from calibrate.reasons import Reason

MAX_COMBINATIONS = 5000  # beyond this many annotator groups, balanced random groups instead
_SEARCH_MAX_COMBINATIONS = 300
_SEARCH_RESTARTS = 3
_SEARCH_BUDGET = 500


# --------------------------------------------------------------------------- apportionment


def largest_remainder(total: int, weights: Sequence[int | Fraction], tiebreak: Sequence[Any] | None = None) -> list[int]:
    """Split `total` seats in proportion to `weights` by the largest-remainder (Hamilton) method.

    Each gets the floor of its exact quota, then the seats left over go one each to the largest
    remainders. Ties go to the larger weight, then to the smaller `tiebreak` key (default: the
    position). Exact arithmetic: no float rounding decides a seat.
    """
    weights = [Fraction(w) for w in weights]
    if total < 0 or any(w < 0 for w in weights):
        raise ValueError("largest_remainder needs a non-negative total and weights")
    whole = sum(weights)
    if total == 0 or not weights:
        return [0] * len(weights)
    if whole == 0:
        raise ValueError("largest_remainder needs a positive weight")
    quotas = [total * w / whole for w in weights]
    seats = [math.floor(q) for q in quotas]
    keys = tiebreak if tiebreak is not None else range(len(weights))
    order = sorted(range(len(weights)), key=lambda i: (-(quotas[i] - seats[i]), -weights[i], keys[i]))
    for i in order[: total - sum(seats)]:
        seats[i] += 1
    return seats


def allocate_strata(n: int, sizes: dict[str, int], tiebreak: dict[str, Any] | None = None) -> dict[str, int]:
    """Allocate `n` draws over strata of the given sizes: proportional, every stratum at least one.

    Largest remainder first; then each stratum left at 0 gets one draw, taken from the stratum
    whose allocation most exceeds its exact quota (ties: larger allocation, then `tiebreak`).
    `n` ≥ the total takes everything; `n` < the number of strata raises SamplingError.
    """
    names = list(sizes)
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    if n < len(names):
        raise SamplingError(Reason("strata_too_many", count=len(names), n=n))
    keys = [(tiebreak or {}).get(name, index) for index, name in enumerate(names)]
    seats = largest_remainder(n, [sizes[name] for name in names], keys)
    quotas = [Fraction(n * sizes[name], total) for name in names]
    for i in sorted((i for i in range(len(names)) if seats[i] == 0), key=lambda i: (-sizes[names[i]], keys[i])):
        donor = min((j for j in range(len(names)) if seats[j] > 1), key=lambda j: (-(seats[j] - quotas[j]), -seats[j], keys[j]))
        seats[donor] -= 1
        seats[i] = 1
    return dict(zip(names, seats, strict=True))


def controlled_rounding(rows: Sequence[int], cols: Sequence[int]) -> list[list[int]]:
    """Integer table with the given row and column sums, each cell the floor or ceiling of r·c/total.

    Such a table always exists (the exact table is a feasible fractional flow); found by
    greedy largest-remainder filling completed with augmenting paths.
    """
    total = sum(rows)
    if total != sum(cols):
        raise ValueError("row and column sums differ")
    if total == 0:
        return [[0] * len(cols) for _ in rows]
    table = [[(r * c) // total for c in cols] for r in rows]
    frac = [[Fraction(r * c, total) - table[h][s] for s, c in enumerate(cols)] for h, r in enumerate(rows)]
    row_left = [r - sum(table[h]) for h, r in enumerate(rows)]
    col_left = [c - sum(table[h][s] for h in range(len(rows))) for s, c in enumerate(cols)]
    extra = [[0] * len(cols) for _ in rows]
    cells = sorted(((h, s) for h in range(len(rows)) for s in range(len(cols)) if frac[h][s] > 0),
                   key=lambda hs: (-frac[hs[0]][hs[1]], hs[0], hs[1]))
    for h, s in cells:
        if row_left[h] > 0 and col_left[s] > 0:
            extra[h][s] = 1
            row_left[h] -= 1
            col_left[s] -= 1
    while any(row_left):
        start = next(h for h, left in enumerate(row_left) if left > 0)
        end, parent_col, parent_row = _augmenting_path(start, frac, extra, col_left)
        s = end
        col_left[s] -= 1
        while True:
            h = parent_col[s]
            extra[h][s] = 1
            if h == start:
                break
            s_prev = parent_row[h]
            extra[h][s_prev] = 0
            s = s_prev
        row_left[start] -= 1
    return [[table[h][s] + extra[h][s] for s in range(len(cols))] for h in range(len(rows))]


def _augmenting_path(start: int, frac: list[list[Fraction]], extra: list[list[int]],
                     col_left: list[int]) -> tuple[int, dict[int, int], dict[int, int]]:
    """Find, by breadth-first search from row `start`, a path to a column with room: row → column by an unused cell,
    column → row by a used one. Return the column it ends at and the parents of its columns and rows."""
    parent_col: dict[int, int] = {}
    parent_row: dict[int, int] = {}
    queue, seen_rows = [start], {start}
    while queue:
        nxt = []
        for h in queue:
            for s in range(len(col_left)):
                if frac[h][s] > 0 and not extra[h][s] and s not in parent_col:
                    parent_col[s] = h
                    if col_left[s] > 0:
                        return s, parent_col, parent_row
                    for h2 in range(len(extra)):
                        if extra[h2][s] and h2 not in seen_rows:
                            seen_rows.add(h2)
                            parent_row[h2] = s
                            nxt.append(h2)
        queue = nxt
    raise RuntimeError("controlled rounding found no augmenting path")  # pragma: no cover - impossible: a flow exists


# --------------------------------------------------------------------------- annotator groups


def _pair_cycle(n_users: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Every pair of range(n_users) once; after every prefix the loads differ by at most one.

    Even n: the circle method's rounds of disjoint pairs (each round a perfect matching).
    Odd n: Walecki's decomposition into Hamiltonian cycles, each cycle v0…v(n−1) taken as
    its even edges, then the closing edge, then its odd edges.
    """
    label = [int(u) for u in rng.permutation(n_users)]
    rounds: list[list[tuple[int, int]]] = []
    if n_users % 2 == 0:
        m = n_users - 1
        for r in range(m):
            pairs = [(r, n_users - 1)] + [((r + i) % m, (r - i) % m) for i in range(1, n_users // 2)]
            rounds.append([pairs[int(i)] for i in rng.permutation(len(pairs))])
    elif n_users >= 3:
        m = (n_users - 1) // 2
        for i in range(m):
            path = [i]
            for step in range(1, m + 1):
                path.append((i + step) % (2 * m))
                if step < m:
                    path.append((i - step) % (2 * m))
            cycle = [n_users - 1] + path
            edges = [(cycle[j], cycle[(j + 1) % n_users]) for j in range(n_users)]
            rounds.append(edges[0 : n_users - 1 : 2] + [edges[n_users - 1]] + edges[1 : n_users - 1 : 2])
    ordered = [rounds[int(i)] for i in rng.permutation(len(rounds))]
    return [tuple(sorted((label[a], label[b]))) for pairs in ordered for a, b in pairs]


def _balanced_search(n_users: int, k: int, tie: np.ndarray, budget: int) -> list[tuple[int, ...]] | None:
    """Depth-first search for an order of all k-subsets with loads within one after every prefix.

    With loads at levels m and m+1 (L: the users at m), a set keeps the spread ≤ 1 iff it lies
    inside L or contains all of L. Prefers sets that cover pairs not yet together. Gives up
    (None) after `budget` nodes.
    """
    combos = list(itertools.combinations(range(n_users), k))
    masks = [sum(1 << u for u in c) for c in combos]
    pairs = [[a * n_users + b for a, b in itertools.combinations(c, 2)] for c in combos]
    preference = sorted(range(len(combos)), key=lambda j: int(tie[j]))
    loads = [0] * n_users
    used = [False] * len(combos)
    covered = [False] * (n_users * n_users)
    sequence: list[int] = []
    nodes = 0

    def search() -> bool | None:
        nonlocal nodes
        if len(sequence) == len(combos):
            return True
        nodes += 1
        if nodes > budget:
            return None
        low = min(loads)
        low_mask = sum(1 << u for u in range(n_users) if loads[u] == low)
        candidates = []
        for j in preference:
            if used[j]:
                continue
            if masks[j] & ~low_mask == 0:
                inside = 0
            elif masks[j] & low_mask == low_mask:
                inside = 1
            else:
                continue
            candidates.append((inside, -sum(1 for p in pairs[j] if not covered[p]), int(tie[j]), j))
        candidates.sort()
        for *_, j in candidates:
            used[j] = True
            sequence.append(j)
            for u in combos[j]:
                loads[u] += 1
            added = [p for p in pairs[j] if not covered[p]]
            for p in added:
                covered[p] = True
            found = search()
            if found:
                return True
            for p in added:
                covered[p] = False
            for u in combos[j]:
                loads[u] -= 1
            used[j] = False
            sequence.pop()
            if found is None:
                return None
        return False

    return [combos[j] for j in sequence] if search() else None


def _greedy_cycle(n_users: int, k: int, tie: np.ndarray) -> list[tuple[int, ...]]:
    """Every k-subset once, each step the unused set whose members are least loaded."""
    combos = np.array(list(itertools.combinations(range(n_users), k)), dtype=np.int64)
    count = len(combos)
    loads = np.zeros(n_users, dtype=np.int64)
    used = np.zeros(count, dtype=bool)
    order = []
    scale = k * count + 1
    for _ in range(count):
        member = loads[combos]
        key = (member.max(axis=1) * scale + member.sum(axis=1)) * count + tie
        key[used] = np.iinfo(np.int64).max
        j = int(np.argmin(key))
        used[j] = True
        loads[combos[j]] += 1
        order.append(tuple(int(u) for u in combos[j]))
    return order


def combination_cycle(n_users: int, k: int, seed: int) -> list[tuple[int, ...]]:
    """Return every k-subset of range(n_users) once, in a seeded order that keeps loads even.

    Used round-robin, sample i gets group i mod C(n_users, k): every pair of annotators shares
    items once i reaches C(n_users, k), and the loads differ by at most one after every prefix
    — guaranteed for k ∈ {1, 2, n−2, n−1, n} (constructions) and found by a bounded search for
    the other k on small teams (all of them up to 8 annotators); otherwise a greedy order keeps
    them close. (Whether such an order always exists is an open problem: Baranyai–Katona.)
    """
    if not 1 <= k <= n_users:
        raise ValueError("need 1 <= k <= n_users")
    rng = np.random.default_rng([seed, 2])
    everyone = set(range(n_users))

    def complement(groups: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        return [tuple(sorted(everyone - set(g))) for g in groups]

    if k == n_users:
        return [tuple(range(n_users))]
    if k == 1 or k == n_users - 1:
        singles = [(int(u),) for u in rng.permutation(n_users)]
        return singles if k == 1 else complement(singles)
    if k == 2 or k == n_users - 2:
        pairs = _pair_cycle(n_users, rng)
        return pairs if k == 2 else complement(pairs)
    if k > n_users - k:  # the complements of a balanced order are balanced
        return complement(combination_cycle(n_users, n_users - k, seed))
    count = math.comb(n_users, k)
    if count <= _SEARCH_MAX_COMBINATIONS:
        for _ in range(_SEARCH_RESTARTS):
            found = _balanced_search(n_users, k, rng.permutation(count), _SEARCH_BUDGET)
            if found is not None:
                return found
    return _greedy_cycle(n_users, k, rng.permutation(count))


def assignee_groups(n_users: int, k: int, count: int, seed: int) -> list[tuple[int, ...]]:
    """Return `count` groups of k user indexes, round-robin over the combination cycle."""
    if count == 0:
        return []
    if k in (1, 2, n_users - 2, n_users - 1, n_users) or math.comb(n_users, k) <= MAX_COMBINATIONS:
        cycle = combination_cycle(n_users, k, seed)
        return [cycle[i % len(cycle)] for i in range(count)]
    # Too many groups to cycle through: the k least loaded users, ties broken at random.
    rng = np.random.default_rng([seed, 3])
    loads = np.zeros(n_users, dtype=np.int64)
    groups = []
    for _ in range(count):
        chosen = np.lexsort((rng.random(n_users), loads))[:k]
        loads[chosen] += 1
        groups.append(tuple(sorted(int(u) for u in chosen)))
    return groups
