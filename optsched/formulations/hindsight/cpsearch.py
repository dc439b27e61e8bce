"""(H25) CP-SAT over the starts that reduced-cost fixing leaves (``formulations/hindsight.md``).

Given the certified bound ``L`` and reduced costs ``rc`` of the LP with the (H23) cuts
(:mod:`.lpbound`, (H24)), a schedule better than the incumbent ``U`` has
``sum_j e_j(x_j) <= obj - L`` with ``obj < U`` (H24b). Each request ``i`` of unit ``u``
starting at ``t`` contributes ``f_i(t) = max(0, rc[u, t])`` to that sum (the late bucket's
reduced cost for a start at or after the cut, (H12)); the terms with negative reduced cost
and those of the flow columns are left out, which keeps it valid. So the search runs over

* ``t_i`` in ``{t : f_i(t) <= U' - L}``, ``U'`` the largest objective below ``U``;
* ``sum_i floor(K f_i(t_i)) <= K (obj - L)`` (``K = 1000``; floors keep it valid), which
  tightens as CP-SAT's incumbent improves;
* the model's constraints: KV ``fp(I + a)`` at age ``a`` as a stack of intervals on one
  cumulative of capacity ``M`` (as in (H22e)); tokens, prefill and batch size (H17) when they
  can bind; the separation intervals (H20b) on one no-overlap; identical requests in id order
  (H11);
* ``obj = sum_i (t_i + O_i - a_i) <= U'``, minimised.

INFEASIBLE proves ``U`` optimal; OPTIMAL proves CP-SAT's schedule optimal (every better
schedule lies in the search space); otherwise CP-SAT's bound holds for the schedules in it, so
``min(U, bound)`` is a lower bound.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ...instance import Instance
from ...solve_types import Status
from .floors import footprint, separation_intervals

#: reduced costs are scaled by this and rounded down (H25)
SCALE = 1000


@dataclass(frozen=True)
class SearchSpace:
    """Per request: allowed start slots and their reduced-cost terms ``f_i(t)`` (H24b)."""

    starts: tuple[np.ndarray, ...]
    cost: tuple[np.ndarray, ...]
    groups: tuple[np.ndarray, ...]  # identical requests in id order (H11)

    def __post_init__(self) -> None:
        if len(self.starts) != len(self.cost):
            raise ValueError("search space: starts and costs differ in length")

    @property
    def size(self) -> int:
        return int(sum(s.size for s in self.starts))


@dataclass(frozen=True)
class SearchResult:
    """What CP-SAT found: ``status`` (optimal, infeasible, feasible; no_solution when it
    decided nothing), its best starts (None when it found none), its lower bound on the
    objective over the search space (None when it has none) and its wall time."""

    status: Status
    starts: np.ndarray | None
    bound: float | None
    seconds: float


def space(hm, rc: np.ndarray, gap: float, latest: np.ndarray) -> SearchSpace:
    """(H24b) the starts of each request with ``f_i(t) <= gap``, and their terms."""
    inst = hm.instance
    xrc = np.maximum(rc[hm.x.ids], 0.0)
    late_rc = {}
    if hm.late is not None:
        for k, u in enumerate(hm.late_units):
            late_rc[int(u)] = max(0.0, float(rc[hm.late.ids[k]]))
    starts: list[np.ndarray] = [np.zeros(0, np.int64)] * inst.n
    cost: list[np.ndarray] = [np.zeros(0)] * inst.n
    for u, members in enumerate(hm.unit_members):
        sel = np.flatnonzero((hm.col_unit == u) & (xrc <= gap + 1e-9))
        t, f = hm.col_t[sel].astype(np.int64), xrc[sel]
        if u in late_rc and late_rc[u] <= gap + 1e-9 and latest[u] >= hm.cut:
            extra = np.arange(hm.cut, int(latest[u]) + 1, dtype=np.int64)
            t = np.concatenate([t, extra])
            f = np.concatenate([f, np.full(extra.size, late_rc[u])])
        for i in members:
            starts[int(i)], cost[int(i)] = t, f
    groups = tuple(np.asarray(g) for g in hm.unit_members if len(g) > 1)
    return SearchSpace(tuple(starts), tuple(cost), groups)


def search(instance: Instance, sp: SearchSpace, bound: float, target: float, *,
           time_limit: float, threads: int = 2, seed: int = 0,
           hint: np.ndarray | None = None) -> SearchResult:
    """(H25) minimise over ``sp`` the total latency, at most ``target``, given the certified
    bound ``bound`` of the LP whose reduced costs made ``sp``. ``hint``: start slots to steer
    the search from (the incumbent; a hint changes where CP-SAT looks, never what it proves)."""
    from ortools.sat.python import cp_model  # lazy: optional dependency (the cpsat extra)

    t0 = time.perf_counter()
    n = instance.n
    O = instance.output.astype(np.int64)
    const = float(O.sum()) - float(instance.arrival.sum())
    if any(s.size == 0 for s in sp.starts):
        return SearchResult(Status.INFEASIBLE, None, None, time.perf_counter() - t0)
    m = cp_model.CpModel()
    t = [m.new_int_var_from_domain(cp_model.Domain.from_values(sp.starts[i].tolist()), f"t{i}")
         for i in range(n)]
    total = sum(t)
    m.add(total <= math.floor(target - const + 1e-9))
    _knapsack(m, t, sp, total, const - bound)
    _resources(m, instance, t)
    for g in sp.groups:
        for a, b in zip(g[:-1], g[1:]):
            m.add(t[int(a)] <= t[int(b)])
    m.minimize(total)
    if hint is not None:
        for i, v in enumerate(t):
            m.add_hint(v, int(hint[i]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, float(time_limit))
    solver.parameters.num_workers = max(1, int(threads))
    solver.parameters.random_seed = int(seed)
    status = solver.solve(m)
    secs = time.perf_counter() - t0
    if status == cp_model.INFEASIBLE:
        return SearchResult(Status.INFEASIBLE, None, None, secs)
    found = None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        found = np.array([solver.value(v) for v in t], np.int64)
    name = {cp_model.OPTIMAL: Status.OPTIMAL, cp_model.FEASIBLE: Status.FEASIBLE}.get(
        status, Status.NO_SOLUTION)
    lb = solver.best_objective_bound + const if status != cp_model.MODEL_INVALID else None
    return SearchResult(name, found, lb, secs)


def _knapsack(m, t, sp: SearchSpace, total, slack: float) -> None:
    """(H25) ``sum_i floor(K f_i(t_i)) - K sum_i t_i <= floor(K (const - L))``."""
    terms = []
    for i, v in enumerate(t):
        scaled = np.floor(sp.cost[i] * SCALE + 1e-9).astype(np.int64)
        if not scaled.any():
            continue
        f = m.new_int_var(0, int(scaled.max()), f"f{i}")
        m.add_allowed_assignments([v, f], list(zip(sp.starts[i].tolist(), scaled.tolist())))
        terms.append(f)
    if terms:
        m.add(sum(terms) - SCALE * total <= math.floor(SCALE * slack + 1e-6))


def _resources(m, instance: Instance, t) -> None:
    """KV as a stack of intervals on one cumulative (H22e), the (H17) limits that can bind,
    and the separation intervals (H20b) on one no-overlap."""
    I = instance.prompt.astype(np.int64)
    O = instance.output.astype(np.int64)
    lim = instance.limits
    M = lim.kv_capacity
    kv, dem = [], []
    for i, v in enumerate(t):
        prof = footprint(instance, I[i] + np.arange(O[i])).astype(np.int64)
        for g in np.flatnonzero(np.diff(prof, prepend=0) > 0):
            kv.append(m.new_fixed_size_interval_var(v + int(g), int(O[i] - g), f"kv{i}_{g}"))
            dem.append(int(prof[g] - (prof[g - 1] if g else 0)))
    m.add_cumulative(kv, dem, M)
    first = [m.new_fixed_size_interval_var(v, 1, f"p{i}") for i, v in enumerate(t)]
    rest = [(m.new_fixed_size_interval_var(v + 1, int(O[i] - 1), f"d{i}"), i)
            for i, v in enumerate(t) if O[i] > 1]
    C, P, B = lim.max_batch_tokens, lim.prefill_budget, lim.max_batch_size
    if C < M:
        m.add_cumulative(first + [d for d, _ in rest], [int(x) for x in I] + [1] * len(rest), C)
    if P < min(C, M):
        m.add_cumulative(first, [int(x) for x in I], P)
    if B is not None:
        whole = [m.new_fixed_size_interval_var(v, int(O[i]), f"w{i}") for i, v in enumerate(t)]
        m.add_cumulative(whole, [1] * len(whole), int(B))
    A, Bs = separation_intervals(I, O, M)
    sep = [m.new_fixed_size_interval_var(2 * v + int(2 * O[i] - A[i]), int(A[i] + Bs[i]), f"s{i}")
           for i, v in enumerate(t) if A[i] + Bs[i] > 0]
    if len(sep) > 1:
        m.add_no_overlap(sep)


__all__ = ["SCALE", "SearchResult", "SearchSpace", "search", "space"]
