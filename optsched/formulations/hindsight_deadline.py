"""(H22) Deadline-cardinality floors for the hindsight IP (``formulations/hindsight.md``).

``N(D)`` is the largest number of requests that can all complete by slot ``D`` in a schedule of
the paper's model. The requests that complete by ``D`` in *any* feasible schedule form a
feasible schedule on their own (dropping requests only frees memory), so in every schedule at
most ``N(D)`` requests complete by ``D``. Equivalently ``L_k = min {D : N(D) >= k}`` is a lower
bound on the ``k``-th smallest completion time, and the rows (H22c)

    sum { x[u, t] : t + O_u <= L_k - 1 } <= k - 1,        k = 2..n,

are valid for the hindsight model (H1). Unlike the memory rows (H4), whose LP runs fractions of
many requests side by side, ``N(D)`` is an *integer* optimum: it says how many whole requests
fit into the first ``D`` slots. That is the throughput limit the fluid LP misses.

(H22a) ``N(D)`` is bounded from above by a max-count MILP over start slots ``t <= D - O_i``
with the memory rows (H4), the completion-separation rows (H20) and the rows (H22c) of the
floors already known (they are valid for every schedule, so for the sub-schedule too). A
time-limited solve gives its dual bound, still an upper bound on ``N(D)``.

(H22b) ``L_k`` by bisection over ``D`` between a known floor (``L_{k-1}``, the ``k``-th
smallest output ``O_(k)`` plus the earliest arrival, and the area floor (H9a)) and the ``k``-th
smallest completion of a known schedule (which shows ``N >= k`` there without a solve). Only a
*proof* ``N(D) < k`` raises the floor, so a probe that runs out of time just lowers the top of
the interval: every returned ``L_k`` is valid whatever the time limits.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .. import milp
from ..instance import Instance
from ..solve_types import SolveOptions
from .hindsight import area_lower_bounds, earliest_slots, footprint, separation_intervals


@dataclass(frozen=True)
class CompletionFloors:
    """``floors[k-1] = L_k``, a lower bound on the k-th smallest completion time (H22b);
    ``proven[k-1]``: the bisection closed (``L_k`` is the exact ``min {D : N(D) >= k}`` given
    the model of (H22a)), else the floor is only what the budget reached."""

    floors: np.ndarray
    proven: np.ndarray
    solves: int
    seconds: float

    def __post_init__(self) -> None:
        if self.floors.shape != self.proven.shape:
            raise ValueError("floors and proven differ in length")
        if np.any(np.diff(self.floors) < 0):
            raise ValueError("completion floors must be non-decreasing")


def count_model(instance: Instance, deadline: int, floors: np.ndarray) -> milp.Model:
    """(H22a) The max-count MILP: binary ``x[i, t]``, ``e_i <= t <= deadline - O_i``; each
    request at most once; memory (H4); separation (H20); the rows (H22c) of ``floors``."""
    I, O = instance.prompt.astype(np.int64), instance.output.astype(np.int64)
    e = earliest_slots(instance)
    M = instance.limits.kv_capacity
    lens = np.maximum(deadline - O - e + 1, 0)
    unit = np.repeat(np.arange(instance.n), lens)
    start = np.arange(unit.size) - np.repeat(np.cumsum(lens) - lens, lens) + e[unit]
    m = milp.Model("deadline_count")
    x = m.add_vars("x", unit.size, vtype="B")
    m.set_objective(x.ids, 1.0, sense="max")
    if unit.size == 0:
        return m
    m.add_constraints(unit, x.ids, 1.0, hi=1.0, nrows=instance.n, name="at_most_once")
    occ = np.repeat(np.arange(unit.size), O[unit])
    age = np.arange(occ.size) - np.repeat(np.cumsum(O[unit]) - O[unit], O[unit])
    kv = footprint(instance, I[unit][occ] + age).astype(float)
    m.add_constraints(start[occ] + age, x.ids[occ], kv, hi=M, nrows=deadline, name="memory")
    _separation(m, x, unit, start, I, O, M)
    _dominance(m, x, unit, I, O, e)
    completion = start + O[unit]
    for k in range(2, floors.size + 1):
        sel = np.flatnonzero(completion <= floors[k - 1] - 1)
        if sel.size > k - 1:
            m.add_constraint(x.ids[sel], np.ones(sel.size), hi=k - 1, name=f"floor_{k}")
    return m


def _separation(m: milp.Model, x: milp.VarBlock, unit: np.ndarray, start: np.ndarray,
                I: np.ndarray, O: np.ndarray, M: int) -> None:
    """(H20c) over the count model's columns: at every left endpoint, the doubled-time
    intervals covering it sum to at most 1 (non-maximal points give weaker, valid rows)."""
    A, B = separation_intervals(I, O, M)
    cols = np.flatnonzero(((A + B) > 0)[unit])
    if cols.size < 2:
        return
    cu = unit[cols]
    c2 = 2 * (start[cols] + O[cu])
    lo, hi = c2 - A[cu], c2 + B[cu]
    X = np.unique(lo)
    first = np.searchsorted(X, lo, "left")
    last = np.searchsorted(X, hi, "left")
    cnt = last - first
    rep = np.repeat(np.arange(cols.size), cnt)
    row = np.arange(rep.size) - np.repeat(np.cumsum(cnt) - cnt, cnt) + first[rep]
    m.add_constraints(row, x.ids[cols[rep]], 1.0, hi=1.0, nrows=X.size, name="separation")


def dominated_pairs(I: np.ndarray, O: np.ndarray, e: np.ndarray) -> list[tuple[int, int]]:
    """Pairs ``(a, b)``, ``a`` dominates ``b``: ``e_a <= e_b``, ``I_a <= I_b``, ``O_a <= O_b``
    (ties broken by index, so identical requests are ordered and no pair appears twice).
    Only the covering pairs are listed (``a`` dominates ``b`` with nothing strictly between)."""
    n = I.size
    key = np.stack([e, I, O], axis=1)
    dom = np.array([[bool(np.all(key[a] <= key[b])) and (np.any(key[a] < key[b]) or a < b)
                     for b in range(n)] for a in range(n)], dtype=bool) if n else np.zeros((0, 0), bool)
    np.fill_diagonal(dom, False)
    pairs = []
    for a in range(n):
        for b in np.flatnonzero(dom[a]):
            if not np.any(dom[a] & dom[:, b]):  # no c with a > c > b
                pairs.append((a, int(b)))
    return pairs


def _dominance(m: milp.Model, x: milp.VarBlock, unit: np.ndarray, I: np.ndarray, O: np.ndarray,
               e: np.ndarray) -> None:
    """(H22d) If ``a`` dominates ``b`` (:func:`dominated_pairs`), a set that completes by the
    deadline with ``b`` but without ``a`` still does with ``a`` in ``b``'s place: ``a`` may start
    there (``e_a <= e_b``), holds ``I_a + k <= I_b + k`` KV at each age and ends no later. So
    ``sum_t x[b, t] <= sum_t x[a, t]`` keeps some maximum-count set."""
    pairs = dominated_pairs(I, O, e)
    if not pairs:
        return
    by_unit = [np.flatnonzero(unit == i) for i in range(I.size)]
    rows, cols, vals = [], [], []
    for r, (a, b) in enumerate(pairs):
        rows += [np.full(by_unit[b].size, r), np.full(by_unit[a].size, r)]
        cols += [x.ids[by_unit[b]], x.ids[by_unit[a]]]
        vals += [np.ones(by_unit[b].size), -np.ones(by_unit[a].size)]
    m.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), hi=0.0,
                      nrows=len(pairs), name="dominance")


def max_completed_by(instance: Instance, deadline: int, floors: np.ndarray, *,
                     solver: str = "highs", time_limit: float | None = None,
                     threads: int | None = 1) -> tuple[int, bool]:
    """An upper bound on ``N(deadline)`` (H22a) and whether it is proven exact."""
    m = count_model(instance, deadline, floors)
    if m.num_vars == 0:
        return 0, True
    opts = SolveOptions(solver=solver, time_limit=time_limit, threads=threads, progress=False,
                        abs_gap=0.99, rel_gap=0.0)
    res = milp.solve(m, solver, opts)
    if res.bound is None or res.status == "error":
        return instance.n, False
    return int(math.floor(res.bound + 1e-6)), res.status == "optimal"


def completion_floors(instance: Instance, upper: np.ndarray | None = None, *,
                      budget: float | None = None, probe_limit: float | None = 10.0,
                      solver: str = "highs", threads: int | None = 1) -> CompletionFloors:
    """(H22b) ``L_1 <= ... <= L_n`` by bisection over deadlines.

    ``upper``: completion times of a feasible schedule (sorted here); its ``k``-th smallest
    shows ``N >= k`` without a solve. ``budget`` seconds for the whole computation (after it,
    the remaining floors are the cheap ones), ``probe_limit`` seconds per MILP probe.
    """
    t0 = time.perf_counter()
    n = instance.n
    O = np.sort(instance.output.astype(np.int64))
    e0 = int(earliest_slots(instance).min()) if n else 0
    cheap = np.maximum(np.ceil(area_lower_bounds(instance)).astype(np.int64), O + e0) if n \
        else np.zeros(0, np.int64)
    ub = np.sort(np.asarray(upper, np.int64)) if upper is not None else None
    floors = np.maximum.accumulate(cheap) if n else cheap
    proven = np.zeros(n, bool)
    solves = 0
    for k in range(1, n + 1):
        lo = int(max(floors[k - 1], floors[k - 2] if k > 1 else 0))
        hi = int(ub[k - 1]) if ub is not None else None
        lo, closed, used = _bisect(instance, k, lo, hi, floors, t0, budget, probe_limit, solver,
                                   threads)
        solves += used
        floors[k - 1:] = np.maximum(floors[k - 1:], lo)
        proven[k - 1] = closed
    return CompletionFloors(floors, proven, solves, time.perf_counter() - t0)


def _bisect(instance: Instance, k: int, lo: int, hi: int | None, floors: np.ndarray,
            t0: float, budget: float | None, probe_limit: float | None, solver: str,
            threads: int | None) -> tuple[int, bool, int]:
    """Raise ``lo`` (a valid floor for the k-th completion) by probes ``N(D) < k`` with
    ``lo <= D < hi``; returns the new floor, whether it met ``hi`` by proof, and the probes."""
    used = 0
    known_floors = floors[:k - 1]
    if hi is None:  # no schedule given: gallop up from lo
        hi = lo
        step = 1
        while True:
            if budget is not None and time.perf_counter() - t0 > budget:
                return lo, False, used
            nb, _ = max_completed_by(instance, hi, known_floors, solver=solver,
                                     time_limit=probe_limit, threads=threads)
            used += 1
            if nb >= k:
                break
            lo, hi, step = hi + 1, hi + step, 2 * step
    a, b = lo, max(hi, lo)
    exact = True
    while a < b:
        if budget is not None and time.perf_counter() - t0 > budget:
            return a, False, used
        mid = (a + b) // 2
        nb, ok = max_completed_by(instance, mid, known_floors, solver=solver,
                                  time_limit=probe_limit, threads=threads)
        used += 1
        if nb < k:  # proven: at most k-1 complete by mid, so L_k >= mid + 1
            a = mid + 1
        else:
            exact = exact and ok
            b = mid
    return a, exact, used


def deadline_rows(m: milp.Model, x: milp.VarBlock, completion: np.ndarray,
                  floors: np.ndarray) -> int:
    """(H22c) ``sum {x : completion <= L_k - 1} <= k - 1`` for ``k = 2..n`` (rows that cannot
    bind are skipped); returns the number of rows added."""
    added = 0
    for k in range(2, floors.size + 1):
        sel = np.flatnonzero(completion <= floors[k - 1] - 1)
        if sel.size > k - 1:
            m.add_constraint(x.ids[sel], np.ones(sel.size), hi=k - 1, name=f"deadline_{k}")
            added += 1
    return added
