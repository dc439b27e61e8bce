"""The hindsight model's LP with the (H23) cut loop, its certified bound and the reduced costs
(``formulations/hindsight.md`` (H23)-(H24)).

(H24a) *A bound whatever the LP solver's accuracy.* For row duals ``y`` of any sign pattern
that weak duality admits (``y_r >= 0`` only on a finite row lower bound, ``y_r <= 0`` only on a
finite upper bound; others are set to 0) and reduced costs ``rc = c - A^T y``,

    L(y) = const + sum_r y_r (lo_r if y_r > 0 else hi_r) + sum_j min(rc_j lb_j, rc_j ub_j)

is a lower bound on ``c x + const`` over the LP's feasible set, computed here in floating point
from whatever duals HiGHS returned (Neumaier and Shcherbina's safe bound; columns without a
finite bound get the a priori bound the caller gives, e.g. the number of requests for the
running count of the flow form (H16)).

(H24b) *Reduced-cost fixing.* Every feasible ``x`` satisfies
``c x + const >= L(y) + sum_j e_j(x_j)`` with ``e_j >= 0`` the excess of ``rc_j x_j`` over its
minimum on ``[lb_j, ub_j]``. So a schedule of objective at most ``U`` has
``sum_j e_j(x_j) <= U - L(y)``: a start whose reduced cost exceeds that is impossible, and the
sum is a knapsack constraint for the search (:mod:`.search`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...milp.backends.highs import _load_arrays, new_highs, run_highs
from .ffcuts import CutLoop, RoundStats, SlotItems
from .model import HindsightModel


@dataclass(frozen=True)
class LPBound:
    """A certified LP bound (H24a) and the reduced costs behind it."""

    value: float  # L(y)
    lp: float  # the LP optimum HiGHS reported (not certified)
    rc: np.ndarray  # reduced costs per column of the model
    x: np.ndarray  # the last LP solution, per column of the model
    rounds: int  # separation rounds run
    cuts: int  # (H23) rows added
    pool: int  # distinct cuts found
    seconds: float
    log: tuple[str, ...]  # one line per round
    #: the (H23) cuts: weights per type (one row per cut), their right-hand sides, the types
    weights: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    rho: np.ndarray = field(default_factory=lambda: np.zeros(0))
    types: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        if self.rc.ndim != 1 or self.rc.shape != self.x.shape:
            raise ValueError("reduced costs and the solution must be one vector per column")
        if self.weights.shape[0] != self.rho.size:
            raise ValueError("one right-hand side per cut")


def safe_bound(h, col_cap: np.ndarray, duals: np.ndarray | None = None
               ) -> tuple[float, np.ndarray]:
    """(H24a) ``L(y)`` and ``rc`` from the current duals of the HiGHS LP ``h`` (or ``duals``,
    any vector: the bound holds for every one); ``col_cap`` replaces infinite column bounds (an
    a priori bound on the column)."""
    lp = h.getLp()
    y = np.array(h.getSolution().row_dual if duals is None else duals, float)
    if y.shape != (lp.num_row_,) or not np.all(np.isfinite(y)):  # no duals (stopped early)
        y = np.zeros(lp.num_row_)
    lo = np.array(lp.row_lower_, float)
    hi = np.array(lp.row_upper_, float)
    y = np.where((y > 0) & ~np.isfinite(lo), 0.0, y)
    y = np.where((y < 0) & ~np.isfinite(hi), 0.0, y)
    a = lp.a_matrix_
    start = np.array(a.start_, np.int64)
    index = np.array(a.index_, np.int64)
    value = np.array(a.value_, float)
    ncol = lp.num_col_
    if a.format_ == 2:  # row-wise: start is per row
        aty = np.zeros(ncol)
        np.add.at(aty, index, value * np.repeat(y, np.diff(start)))
    else:
        aty = np.bincount(np.repeat(np.arange(ncol), np.diff(start)), weights=value * y[index],
                          minlength=ncol)
    rc = np.array(lp.col_cost_, float) - aty
    lb = np.array(lp.col_lower_, float)
    ub = np.array(lp.col_upper_, float)
    lb = np.where(np.isfinite(lb), lb, -col_cap)
    ub = np.where(np.isfinite(ub), ub, col_cap)
    rows = np.where(y > 0, y * np.where(np.isfinite(lo), lo, 0.0),
                    y * np.where(np.isfinite(hi), hi, 0.0))
    cols = np.minimum(rc * lb, rc * ub)
    return float(lp.offset_ + rows.sum() + cols.sum()), rc


def excess(rc: np.ndarray, lb: np.ndarray, ub: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(H24b) ``e_j(x_j) = rc_j x_j - min(rc_j lb_j, rc_j ub_j)``, per column."""
    return rc * x - np.minimum(rc * lb, rc * ub)


def root_bound(hm: HindsightModel, *, deadline: float | None, max_rounds: int = 200,
               log=None) -> LPBound:
    """The LP relaxation of ``hm`` with (H23) rounds until no cut is violated, ``max_rounds``
    or the ``deadline`` (``time.perf_counter()``; every LP solve stops there too), then
    (H24a)."""
    t0 = time.perf_counter()
    a = hm.model.arrays()
    h = new_highs()
    _load_arrays(h, a)
    h.changeColsIntegrality(a.num_vars, np.arange(a.num_vars, dtype=np.int32),
                            np.zeros(a.num_vars, dtype=np.uint8))
    inst = hm.instance
    units_I = inst.prompt[[mm[0] for mm in hm.unit_members]]
    units_O = inst.output[[mm[0] for mm in hm.unit_members]]
    items = SlotItems.of_columns(hm.col_t, units_I[hm.col_unit], units_O[hm.col_unit])
    loop = CutLoop(items, inst.limits.kv_capacity)
    xids = hm.x.ids
    cap = np.full(a.num_vars, float(inst.n))
    lines: list[str] = []
    solved = _run(h, deadline)
    lp = h.getInfo().objective_function_value if solved else float("nan")
    lines.append(f"LP {lp:.2f} ({a.num_vars} columns, {a.num_rows} rows)" if solved else
                 f"LP stopped at the time limit ({a.num_vars} columns, {a.num_rows} rows): the "
                 "bound is (H24a) of the duals it had")
    best = _certified(h, cap)
    rounds = cuts = 0
    for rounds in range(1, max_rounds + 1):
        if not solved or _past(deadline):
            break
        rows, st = loop.separate(np.array(h.getSolution().col_value, float)[xids], deadline)
        if not rows or _past(deadline):  # no time left to solve the LP with them
            break
        _add_rows(h, rows, xids)
        cuts += len(rows)
        solved = _run(h, deadline)
        lp = h.getInfo().objective_function_value if solved else float("nan")
        if solved:
            best = max(best, _certified(h, cap), key=lambda b: b[0])
        lines.append(_round_line(rounds, st, lp, time.perf_counter() - t0))
        if log is not None:
            log(lines[-1])
    value, rc, x = best
    return LPBound(value, lp, rc, x, rounds, cuts, len(loop.pool), time.perf_counter() - t0,
                   tuple(lines), loop.pool.w, loop.pool.rho, (items.tm, items.tr))


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() >= deadline


def _certified(h, cap: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(H24a) of the LP's current duals, their reduced costs and the LP's solution (zeros
    when it has none): the three belong together, whichever round they come from."""
    value, rc = safe_bound(h, cap)
    x = np.array(h.getSolution().col_value, float)
    if x.shape != rc.shape:  # no primal values (stopped early)
        x = np.zeros(rc.shape)
    return value, rc, x


def _run(h, deadline: float | None) -> bool:
    """Solve the LP within the ``deadline`` (``time.perf_counter()``); True if optimal. A stop
    at the limit keeps the duals HiGHS had: (H24a) is a bound for any duals.

    HiGHS compares ``time_limit`` with its run clock, which adds up every ``run()`` of the same
    object: the limit is that clock plus the time left (a plain "time left" stopped the cut loop
    once the LP solves *together* had taken longer than the time left)."""
    import highspy  # lazy: the solver library loads only when a solve runs

    if deadline is not None:
        left = max(0.01, deadline - time.perf_counter())
        h.setOptionValue("time_limit", float(h.getRunTime()) + left)
    run_highs(h)
    return h.getModelStatus() == highspy.HighsModelStatus.kOptimal


def _add_rows(h, rows, xids: np.ndarray) -> None:
    import highspy  # lazy: the solver library loads only when a solve runs

    inf = highspy.kHighsInf
    for cols, coef, rho in rows:
        h.addRow(-inf, float(rho), int(cols.size), xids[cols].astype(np.int32),
                 coef.astype(float))


def _round_line(k: int, st: RoundStats, lp: float, seconds: float) -> str:
    return (f"(H23) round {k}: {st.rows} rows ({st.from_pool} from the pool, {st.new_cuts} new; "
            f"{st.cover_lps} cover LPs, largest cover {st.max_cover:.3f}), LP {lp:.2f}, "
            f"{seconds:.1f} s")


__all__ = ["LPBound", "excess", "root_bound", "safe_bound"]
