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

import importlib.util
import math
import time
from dataclasses import dataclass

import numpy as np

from ... import milp
from ...instance import Instance
from ...solve_types import SolveOptions, Status
from .floors import (
    area_lower_bounds,
    earliest_slots,
    footprint,
    separation_cover,
    separation_intervals,
)


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
    """(H20c) over the count model's columns, the hindsight model's rows
    (:func:`.hindsight.separation_cover`; every request is its own unit of count 1)."""
    rows, cols, nrows = separation_cover(start, unit, I, O, np.ones(I.size, np.int64), M)
    if nrows:
        m.add_constraints(rows, x.ids[cols], 1.0, hi=1.0, nrows=nrows, name="separation")


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


def cpsat_at_least(instance: Instance, deadline: int, k: int, floors: np.ndarray, *,
                   time_limit: float | None = None, threads: int | None = 1) -> bool | None:
    """(H22e) Can ``k`` requests all complete by ``deadline``? CP-SAT on the same relaxation as
    (H22a): an optional start per request; its KV profile ``fp(I + a)`` at age ``a`` as a stack
    of intervals on one cumulative of capacity ``M`` (the prompt's ``fp(I)`` over all ``O``
    slots, then ``fp(I + g) - fp(I + g - 1)`` from age ``g`` to the end); the separation
    intervals (H20b) of the large requests on one no-overlap; (H22d) as implications; the rows
    (H22c) of ``floors``. ``False`` only when CP-SAT proves it infeasible (so ``N(D) < k``);
    ``True`` when it finds a schedule; ``None`` when the limit ends first."""
    from ortools.sat.python import cp_model  # lazy: optional dependency (the cpsat extra)

    I, O = instance.prompt.astype(np.int64), instance.output.astype(np.int64)
    e = earliest_slots(instance)
    M = instance.limits.kv_capacity
    fits = np.flatnonzero(e + O <= deadline)
    if fits.size < k:
        return False
    m = cp_model.CpModel()
    pres, start = {}, {}
    intervals, demands = [], []
    for i in (int(v) for v in fits):
        pres[i] = m.new_bool_var(f"p{i}")
        start[i] = m.new_int_var(int(e[i]), int(deadline - O[i]), f"s{i}")
        prof = footprint(instance, I[i] + np.arange(O[i])).astype(np.int64)
        steps = np.diff(prof, prepend=0)
        for g in np.flatnonzero(steps > 0):
            intervals.append(m.new_optional_fixed_size_interval_var(
                start[i] + int(g), int(O[i] - g), pres[i], f"kv{i}_{g}"))
            demands.append(int(steps[g]))
    m.add_cumulative(intervals, demands, M)
    A, B = separation_intervals(I, O, M)
    sep = [m.new_optional_fixed_size_interval_var(2 * (start[i] + int(O[i])) - int(A[i]),
                                                  int(A[i] + B[i]), pres[i], f"sep{i}")
           for i in pres if A[i] + B[i] > 0]
    if len(sep) > 1:
        m.add_no_overlap(sep)
    for a, b in dominated_pairs(I, O, e):
        if b in pres:
            if a in pres:
                m.add_implication(pres[b], pres[a])
            else:
                m.add(pres[b] == 0)
    m.add(sum(pres.values()) >= k)
    for j in range(2, floors.size + 1):
        _cpsat_floor_row(m, pres, start, e, O, int(floors[j - 1]), j)
    solver = cp_model.CpSolver()
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = int(threads or 1)
    status = solver.solve(m)
    if status == cp_model.INFEASIBLE:
        return False
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    return None


def _cpsat_floor_row(m, pres: dict, start: dict, e: np.ndarray, O: np.ndarray, floor: int,
                     j: int) -> None:
    """(H22c) in CP-SAT: at most ``j - 1`` present requests complete by ``floor - 1``."""
    early = []
    for i, p in pres.items():
        if e[i] + O[i] > floor - 1:
            continue  # cannot complete that early
        b = m.new_bool_var(f"early{j}_{i}")
        m.add(start[i] + int(O[i]) <= floor - 1).only_enforce_if(b)
        m.add_implication(b, p)
        early.append(b)
        late = m.new_bool_var(f"late{j}_{i}")
        m.add(start[i] + int(O[i]) >= floor).only_enforce_if(late)
        m.add_bool_or([b, late, p.Not()])
    if len(early) > j - 1:
        m.add(sum(early) <= j - 1)


def max_completed_by(instance: Instance, deadline: int, floors: np.ndarray, *,
                     solver: str = "highs", time_limit: float | None = None,
                     threads: int | None = 1) -> tuple[int, bool]:
    """An upper bound on ``N(deadline)`` (H22a) and whether it is proven exact."""
    m = count_model(instance, deadline, floors)
    if m.num_vars == 0:
        return 0, True
    opts = SolveOptions(solver=solver, time_limit=time_limit, threads=threads, progress=False,
                        abs_gap=0.99, rel_gap=0.0)
    res = milp.solve(m, solver, opts, fallback="highs")
    if res.bound is None or res.status == Status.ERROR:
        return instance.n, False
    return int(math.floor(res.bound + 1e-6)), res.status == Status.OPTIMAL


PROBES = ("cpsat", "milp")


def at_least(instance: Instance, deadline: int, k: int, floors: np.ndarray, probe: str = "cpsat",
             *, time_limit: float | None = None, solver: str = "highs",
             threads: int | None = 1) -> bool | None:
    """``N(deadline) >= k``? ``False`` only when proven not (H22a or H22e), ``None`` unknown."""
    if probe == "cpsat":
        return cpsat_at_least(instance, deadline, k, floors, time_limit=time_limit, threads=threads)
    if probe != "milp":
        raise ValueError(f"unknown probe {probe!r} (use one of {PROBES})")
    nb, ok = max_completed_by(instance, deadline, floors, solver=solver, time_limit=time_limit,
                              threads=threads)
    if nb < k:
        return False
    return True if ok else None


def completion_floors(instance: Instance, upper: np.ndarray | None = None, *,
                      budget: float | None = None, probe_limit: float | None = 10.0,
                      probe: str = "cpsat", solver: str = "highs",
                      threads: int | None = 1) -> CompletionFloors:
    """(H22b) ``L_1 <= ... <= L_n`` by bisection over deadlines.

    ``upper``: completion times of a feasible schedule (sorted here); its ``k``-th smallest
    shows ``N >= k`` without a probe. ``budget`` seconds for the whole computation (after it,
    the remaining floors are the cheap ones), ``probe_limit`` seconds per probe, ``probe``
    ``cpsat`` (H22e, default; ``milp`` when OR-Tools is not installed) or ``milp`` (H22a with
    ``solver``).
    """
    t0 = time.perf_counter()
    if probe == "cpsat" and importlib.util.find_spec("ortools") is None:
        probe = "milp"  # CP-SAT is an optional dependency (pip install optsched[cpsat])
    n = instance.n
    O = np.sort(instance.output.astype(np.int64))
    e0 = int(earliest_slots(instance).min()) if n else 0
    cheap = np.maximum(np.ceil(area_lower_bounds(instance)).astype(np.int64), O + e0) if n \
        else np.zeros(0, np.int64)
    ub = np.sort(np.asarray(upper, np.int64)) if upper is not None else None
    floors = np.maximum.accumulate(cheap) if n else cheap
    proven = np.zeros(n, bool)
    solves = 0

    def ask(deadline: int, k: int) -> bool | None:
        nonlocal solves
        solves += 1
        limit = probe_limit
        if budget is not None:
            left = max(0.05, budget - (time.perf_counter() - t0))
            limit = left if limit is None else min(limit, left)
        return at_least(instance, deadline, k, floors[:k - 1], probe, time_limit=limit,
                        solver=solver, threads=threads)

    for k in range(1, n + 1):
        lo = int(max(floors[k - 1], floors[k - 2] if k > 1 else 0))
        hi = int(ub[k - 1]) if ub is not None else None
        out_of_time = (lambda: budget is not None and time.perf_counter() - t0 > budget)
        lo, closed = _bisect(k, lo, hi, ask, out_of_time)
        floors[k - 1:] = np.maximum(floors[k - 1:], lo)
        proven[k - 1] = closed
    return CompletionFloors(floors, proven, solves, time.perf_counter() - t0)


def _bisect(k: int, lo: int, hi: int | None, ask, out_of_time) -> tuple[int, bool]:
    """Raise ``lo`` (a valid floor for the k-th completion) by probes ``N(D) < k`` with
    ``lo <= D < hi``; returns the new floor and whether it met ``hi`` by proof."""
    if hi is None:  # no schedule given: gallop up from lo
        hi, step = lo, 1
        while True:
            if out_of_time():
                return lo, False
            if ask(hi, k) is not False:
                break
            lo, hi, step = hi + 1, hi + step, 2 * step
    a, b = lo, max(hi, lo)
    exact = True
    while a < b:
        if out_of_time():
            return a, False
        mid = (a + b) // 2
        answer = ask(mid, k)
        if answer is False:  # proven: at most k-1 complete by mid, so L_k >= mid + 1
            a = mid + 1
        else:
            exact = exact and answer is True
            b = mid
    return a, exact


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
