"""Window-hull rows for the hindsight model's LP (``formulations/hindsight.md``, "Where
(H23)-(H25) stop"; the experiment is ``studies/hindsight/window_hull.py``).

Take a window of ``W`` consecutive slots and the start columns ``x[u, t]`` occupying a slot of
it (``t < w0 + W`` and ``t + O_u > w0``). In an integer schedule the starts it uses among them
form a *pattern*: at most ``count(u)`` starts of unit ``u``, whose KV footprints
``fp(I_u + a)`` sum to at most ``M`` in every slot any of them occupies (each start runs to its
end, inside the window or not). When the LP's values ``x*`` on those columns are not covered by
one unit of patterns, the cover LP

    min sum_p lam_p   s.t.  sum_p mult_p(e) lam_p >= x*_e,  lam >= 0

has value above 1, and its duals ``a >= 0`` give the row ``sum_e a_e x_e <= rho``, valid for every
integer schedule when ``rho`` is at least the heaviest pattern's weight ``max_p a . mult_p``.
CP-SAT prices the patterns (integer weights ``ceil(K a)``) and ``rho`` is its *proven upper
bound* on the heaviest weight over ``K``, so neither its time limit nor the rounding can make a
row invalid. Columns with ``x* = 0`` are left out of a window's row: a pattern restricted to
fewer columns is still a pattern. ``W = 1`` is the exact per-request slot hull.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .floors import footprint

#: pattern weights are scaled by this and rounded up (so rho stays an upper bound)
K = 100_000
#: LP values below this are zero
TINY = 1e-7
#: a window row must be violated by this much, relative to rho
VIOLATION = 1e-4


@dataclass(frozen=True)
class Columns:
    """The model's start columns: start slot, unit, and per unit I, O, count and KV profile."""

    start: np.ndarray
    unit: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    count: np.ndarray
    profile: tuple[np.ndarray, ...]
    M: int

    @property
    def end(self) -> np.ndarray:
        return self.start + self.output[self.unit]

    def touching(self, w0: int, width: int) -> np.ndarray:
        """Columns occupying a slot of ``[w0, w0 + width)``."""
        return np.flatnonzero((self.start < w0 + width) & (self.end > w0))


def columns_of(hm) -> Columns:
    """The start columns of a built hindsight model ``hm``."""
    inst = hm.instance
    first = [int(mm[0]) for mm in hm.unit_members]
    uI = inst.prompt[first].astype(np.int64)
    uO = inst.output[first].astype(np.int64)
    prof = tuple(footprint(inst, uI[u] + np.arange(uO[u])).astype(np.int64)
                 for u in range(len(first)))
    return Columns(hm.col_t.astype(np.int64), hm.col_unit.astype(np.int64), uI, uO,
                   np.array([len(mm) for mm in hm.unit_members], np.int64), prof,
                   int(inst.limits.kv_capacity))


class Patterns:
    """CP-SAT over the patterns of the columns ``S``: ``mult[e]`` starts of column ``e``, at most
    ``count(u)`` per unit, KV at most ``M`` in every slot the chosen starts occupy."""

    def __init__(self, cols: Columns, S: np.ndarray, seconds: float = 20.0):
        from ortools.sat.python import cp_model  # lazy: optional dependency (the cpsat extra)

        self._cp = cp_model
        self.seconds = seconds
        m = cp_model.CpModel()
        units = cols.unit[S]
        self.y = [m.new_int_var(0, int(cols.count[u]), f"y{j}") for j, u in enumerate(units)]
        for u in np.unique(units):
            members = [self.y[j] for j in np.flatnonzero(units == u)]
            if len(members) > 1:
                m.add(sum(members) <= int(cols.count[u]))
        for terms in _slot_terms(cols, S).values():
            if sum(c * int(cols.count[units[j]]) for j, c in terms) > cols.M:
                m.add(sum(c * self.y[j] for j, c in terms) <= cols.M)
        self.model = m

    def heaviest(self, a: np.ndarray) -> tuple[float, float, np.ndarray]:
        """The heaviest pattern under weights ``a``: its weight, a proven upper bound on the
        heaviest weight, and its multiplicities."""
        w = np.ceil(np.maximum(a, 0.0) * K).astype(np.int64)
        self.model.clear_objective()
        self.model.maximize(sum(int(w[j]) * v for j, v in enumerate(self.y) if w[j] > 0))
        solver = self._cp.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_time_in_seconds = self.seconds
        status = solver.solve(self.model)
        if status not in (self._cp.OPTIMAL, self._cp.FEASIBLE):
            return 0.0, math.inf, np.zeros(len(self.y))
        mult = np.array([solver.value(v) for v in self.y], float)
        return float(a @ mult), float(solver.best_objective_bound) / K, mult


def _slot_terms(cols: Columns, S: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """Per slot, the (position in ``S``, KV) of every column of ``S`` occupying it."""
    terms: dict[int, list[tuple[int, int]]] = {}
    for j, e in enumerate(S):
        prof = cols.profile[int(cols.unit[e])]
        for age, kv in enumerate(prof):
            terms.setdefault(int(cols.start[e]) + age, []).append((j, int(kv)))
    return terms


def window_cut(cols: Columns, S: np.ndarray, xs: np.ndarray, max_patterns: int = 300
               ) -> tuple[float, np.ndarray, float] | None:
    """(cover number, weights ``a`` on ``S``, ``rho``) when the cover LP of ``xs`` by the
    patterns of ``S`` exceeds 1; None when one unit of patterns covers it (or pricing gave up)."""
    import highspy  # lazy: the solver library loads only when a solve runs

    inf = highspy.kHighsInf
    lp = highspy.Highs()
    lp.setOptionValue("output_flag", False)
    k = S.size
    empty = np.zeros(0, np.int32)
    lp.addRows(k, xs.astype(float), np.full(k, inf), 0, empty, empty, np.zeros(0))
    for j in range(k):  # the one-start patterns
        lp.addCol(1.0, 0.0, inf, 1, np.array([j], np.int32), np.ones(1))
    patterns = Patterns(cols, S)
    for _ in range(max_patterns):
        lp.run()
        value = lp.getInfo().objective_function_value
        if value <= 1 + 1e-6:
            return None
        a = np.maximum(np.array(lp.getSolution().row_dual), 0.0)
        weight, bound, mult = patterns.heaviest(a)
        if weight <= 1 + 1e-6:
            return (value, a, max(bound, 1.0)) if math.isfinite(bound) else None
        nz = np.flatnonzero(mult)
        lp.addCol(1.0, 0.0, inf, nz.size, nz.astype(np.int32), mult[nz])
    return None


def separate(cols: Columns, x: np.ndarray, width: int, offset: int, deadline: float | None
             ) -> tuple[list[tuple[np.ndarray, np.ndarray, float]], list[float]]:
    """Window rows ``(columns, weights, rho)`` violated by the LP values ``x`` of the start
    columns, over the windows ``[w0, w0 + width)`` with ``w0 = -offset, width - offset, ...``,
    and every window's cover number above 1."""
    rows: list[tuple[np.ndarray, np.ndarray, float]] = []
    covers: list[float] = []
    for w0 in range(-offset, int(cols.end.max(initial=0)), width):
        if deadline is not None and time.perf_counter() >= deadline:
            break
        touch = cols.touching(w0, width)
        S = touch[x[touch] > TINY]
        if S.size < 2:
            continue
        cut = window_cut(cols, S, x[S])
        if cut is None:
            continue
        value, a, rho = cut
        covers.append(value)
        if float(a @ x[S]) > rho * (1 + VIOLATION):
            rows.append((S, a, rho))
    return rows, covers


__all__ = ["Columns", "Patterns", "columns_of", "separate", "window_cut"]
