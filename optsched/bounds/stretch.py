"""Bound ``stretch``: total latency when every decode step's speed is paid for in machine time
(``formulations/bounds.md`` B15).

Split each batch's duration among its entries by their entry costs (a cost share). An entry
of cost ``e`` in a batch of duration ``t >= h + E`` (``E`` the batch's entry costs, ``h`` its
batch term) then occupies the machine at rate ``e / E >= e / (t - h)`` while its request
advances one step per ``t``: a request that advances at rate ``r`` uses the machine at rate

    c_e(r) = r e / (1 - h r),       0 <= r <= 1 / (h + e)       (eq. B15a)

at least, and the rates of all requests sum to at most 1. A fast step needs a short batch,
so few other entries, so a large share; a cheap share needs a long batch: the rung charges
*decode stretch* (a request that decodes in batches ``k`` deep waits ``k`` entries a step)
against the machine time it saves. Prices ``pi_l >= 0`` on the machine time of a grid of
intervals make it separable (weak duality): for every schedule

    sum_i (C_i - a_i) >= sum_i min over i's trajectories [C_i - a_i + sum_l pi_l U_il]
                         - sum_l pi_l |l|,

each minimum solved exactly over a lower envelope of ``c`` (:mod:`._stretch_kernel`) with its
prefill pass before its decode steps. Any prices give a lower bound; they move along the
supergradient (usage minus capacity per interval) for as long as the budget allows, and the
best value seen is reported, so a time limit still certifies. Total latency only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .base import BoundResult, Budget, register_bound
from .floors import Floors

#: pieces of the lower envelope of ``c_e`` (decode) and of the prefill pass's usage
PIECES = 10
PREFILL_PIECES = 4
#: grid step as a share of the median request chain (F5)
GRID_PER_CHAIN = 50
#: first-token buckets per request (offsets 0, 1, 2, 4, ... grid steps, the last unbounded)
BUCKETS = 9
#: a request's first window: this many chains, plus this many grid steps; doubled while
#: its subproblem ends past it
WINDOW_CHAINS = 2.5
WINDOW_STEPS = 20
#: the grid ends this many (longest) chains after the last arrival, at least this share of
#: the arrival span later (past it nothing is priced: still valid, only weaker)
TAIL_CHAINS = 10.0
TAIL_SPAN = 0.25
#: at most this many intervals: a coarser grid where the chains are tiny beside the arrival
#: span (a chain of rounding noise made a grid of 10^18 intervals); any grid is valid
MAX_INTERVALS = 2**20
#: dual iterations without a time limit, and the adaptive target of the step (a share of the
#: best value, halved after PATIENCE iterations without improvement)
MAX_ITERATIONS = 200
TARGET = 0.2
PATIENCE = 8
MIN_TARGET = 1e-4
#: relative rounding allowance of a per-request sum of non-negative step terms
SUM_ROUNDING = 1e-10


def envelope(e: float, h: float, pieces: int) -> tuple[np.ndarray, np.ndarray]:
    """Pieces ``(slopes, lengths)`` of the largest of ``pieces`` tangents of ``c_e`` on
    ``[0, 1 / (h + e)]`` (eq. B15a), touching where ``c_e'`` grows geometrically from ``e`` to
    ``(h + e)^2 / e`` (the first at 0, the last at the end). ``c_e`` is convex, so every
    tangent, and their maximum, lies below it; piece ``k`` is tangent ``k`` between its
    crossings with its neighbours."""
    if h <= 0.0 and e <= 0.0:
        return np.zeros(pieces), np.r_[1e12, np.zeros(pieces - 1)]  # free, unbounded steps
    if e <= 0.0:
        return np.zeros(pieces), np.r_[1.0 / h, np.zeros(pieces - 1)]
    if h <= 0.0:
        return np.r_[e, np.zeros(pieces - 1)], np.r_[1.0 / e, np.zeros(pieces - 1)]
    rmax = 1.0 / (h + e)
    r = (1.0 - (e / (h + e)) ** (np.arange(pieces) / (pieces - 1))) / h
    r[0], r[-1] = 0.0, rmax
    c = r * e / (1.0 - h * r)
    d = e / (1.0 - h * r) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        x = (c[1:] - d[1:] * r[1:] - c[:-1] + d[:-1] * r[:-1]) / (d[:-1] - d[1:])
    x = np.concatenate([[0.0], np.nan_to_num(x, nan=rmax), [rmax]])
    x = np.maximum.accumulate(np.clip(x, 0.0, rmax))
    return d, np.diff(x)


@dataclass(frozen=True)
class Requests:
    """Per request (instance order): ``req = (a, decode steps, prefill chain, chain, decode
    work units)`` and the envelope pieces of its decode steps, of its decode work (units of
    its largest step floor) and of its prefill pass (eq. B15a)."""

    req: np.ndarray
    dslope: np.ndarray
    dlen: np.ndarray
    wslope: np.ndarray
    wlen: np.ndarray
    pslope: np.ndarray
    plen: np.ndarray

    def __post_init__(self):
        n = self.req.shape[0]
        shapes = {self.dslope.shape, self.dlen.shape, self.wslope.shape, self.wlen.shape}
        if self.req.shape != (n, 5) or len(shapes) != 1 or self.dslope.shape[0] != n or \
                self.pslope.shape != self.plen.shape or self.pslope.shape[0] != n:
            raise ValueError("stretch: per-request arrays disagree")


def step_floor(f: Floors, g: np.ndarray) -> np.ndarray:
    """Entry floor of decode step ``g >= 1`` of each request (B2, ``S = I + g``): both
    ``dec_g`` and ``ref_g`` grow with ``S``, so step 1 has the least, step ``O - 1`` the
    largest."""
    k = f.k
    S = f.instance.prompt.astype(np.float64) + g
    dec = (k["k1"] + k["kdr"] - k["kdm"]) + k["kdm"] * S
    ref = k["kpr"] + k["k1"] * S + f._quad_floor(S)
    return np.maximum(np.minimum(dec, ref), 0.0)


def requests(f: Floors) -> Requests:
    """The subproblem data of every request (B15 (ii)): its decode steps at ``h = k0 +
    min(kdb, kpb)``, priced by steps at the least step floor and by work (the floors' sum, in
    units of the largest floor) at the largest; its prefill pass at ``h = k0 + kpb`` and its
    entry floor (B1)."""
    inst, k = f.instance, f.k
    hd = k["k0"] + min(k["kdb"], k["kpb"])
    hp = k["k0"] + k["kpb"]
    steps = (inst.output - 1).astype(np.float64)
    e = step_floor(f, np.ones(inst.n))
    emax = step_floor(f, np.maximum(steps, 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        work = np.where(emax > 0, f.step_entry_cost / emax, steps) * (1 - SUM_ROUNDING)
    p = np.maximum(f.prefill_entry_cost, 0.0)
    n = inst.n
    dsl, dln = np.zeros((n, PIECES)), np.zeros((n, PIECES))
    wsl, wln = np.zeros((n, PIECES)), np.zeros((n, PIECES))
    psl, pln = np.zeros((n, PREFILL_PIECES)), np.zeros((n, PREFILL_PIECES))
    cache: dict[tuple[float, float, int], tuple[np.ndarray, np.ndarray]] = {}
    for i in range(n):
        for (val, h, K, sl, ln) in ((e[i], hd, PIECES, dsl, dln), (emax[i], hd, PIECES, wsl, wln),
                                    (p[i], hp, PREFILL_PIECES, psl, pln)):
            key = (float(val), h, K)
            if key not in cache:
                cache[key] = envelope(float(val), h, K)
            sl[i], ln[i] = cache[key]
    req = np.stack([inst.arrival.astype(np.float64), steps, f.prefill_chain, f.chain, work],
                   axis=1)
    return Requests(req, dsl, dln, wsl, wln, psl, pln)


@dataclass(frozen=True)
class Grid:
    """Uniform intervals ``[tau_l, tau_{l+1})`` from the earliest arrival."""

    tau: np.ndarray

    def __post_init__(self):
        if self.tau.size < 2 or not (np.diff(self.tau) > 0).all():
            raise ValueError("stretch: the grid needs increasing boundaries")

    @property
    def step(self) -> float:
        return float(self.tau[1] - self.tau[0])

    @classmethod
    def of(cls, req: np.ndarray) -> Grid:
        a, chain = req[:, 0], req[:, 3]
        pos = chain[chain > 0]
        dt = float(np.median(pos)) / GRID_PER_CHAIN if pos.size else 1.0
        span = float(a.max() - a.min())
        end = float(a.max()) + max(TAIL_CHAINS * float(chain.max()), TAIL_SPAN * span, 2 * dt)
        dt = max(dt, (end - float(a.min())) / MAX_INTERVALS)
        T = int(math.ceil((end - float(a.min())) / dt))
        return cls(float(a.min()) + dt * np.arange(T + 1))


def windows(req: np.ndarray, grid: Grid, horizon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First interval and length of each request's window ``[a_i, a_i + horizon_i]``."""
    T = grid.tau.size - 1
    l0 = np.clip(np.searchsorted(grid.tau, req[:, 0], side="right") - 1, 0, T - 1)
    l1 = np.clip(np.searchsorted(grid.tau, req[:, 0] + horizon, side="right"), l0 + 1, T)
    return l0.astype(np.int64), (l1 - l0).astype(np.int64)


@dataclass(frozen=True)
class Dual:
    """The best value the dual loop found, its iterations and the grid it used."""

    value: float
    iterations: int
    intervals: int
    uncertified: int


def dual_bound(f: Floors, budget: Budget, max_iterations: int = MAX_ITERATIONS,
               target_value: float | None = None) -> Dual:
    """Weak duality over interval prices (module docstring): every iteration's value is a
    lower bound; a projected supergradient step moves the prices towards ``target_value``
    (an objective of some schedule, when the caller knows one: Polyak's step) or towards an
    adaptive share above the best value seen. Neither changes validity, only speed."""
    from ._stretch_kernel import subproblems  # lazy: numba is imported when the rung runs

    rq = requests(f)
    grid = Grid.of(rq.req)
    T, dt = grid.tau.size - 1, grid.step
    horizon = WINDOW_CHAINS * rq.req[:, 3] + WINDOW_STEPS * dt
    pi = np.zeros(T)
    best, best_pi, target, stale, it, unc = -np.inf, pi, TARGET, 0, 0, 0
    while it < max_iterations and (it == 0 or not budget.expired) and target > MIN_TARGET:
        l0, wlen = windows(rq.req, grid, horizon)
        usage, vals = np.zeros(T), np.zeros(f.instance.n)
        cert = np.zeros(f.instance.n, dtype=np.bool_)
        subproblems(rq.req, grid.tau, pi, rq.dslope, rq.dlen, rq.wslope, rq.wlen, rq.pslope,
                    rq.plen, l0, wlen, BUCKETS, usage, vals, cert)
        it += 1
        value = float(vals.sum()) - float(pi.sum()) * dt
        unc = int((~cert).sum())
        horizon = np.where(cert, horizon, 2.0 * horizon)
        if value > best + 1e-12 * abs(value):
            best, best_pi, stale = value, pi, 0
        else:
            stale += 1
            if stale >= PATIENCE:
                target, stale, pi = target / 2, 0, best_pi
                continue
        g = usage - dt
        norm = float(g @ g)
        if norm <= 0.0:
            break
        goal = best + target * abs(best)
        if target_value is not None:
            goal = best + target / TARGET * max(target_value - best, 0.0)
        step = (goal - value) / norm
        pi = np.maximum(0.0, pi + step * g)
    return Dual(best, it, T, unc)


@register_bound("stretch", "decode stretch paid in machine time: each request's steps at the "
                "speed its batches allow, against prices on machine time (Lagrangian of a "
                "rate-usage relaxation, B15); valid at every iteration",
                objectives=("total-latency",), rank=150)
def stretch_bound(instance, objective: str, budget: Budget) -> BoundResult:
    t0 = time.process_time()
    d = dual_bound(Floors.of(instance), budget)
    return BoundResult(d.value, "stretch", objective, notes=(
        f"stretch: {d.iterations} dual iterations over {d.intervals} intervals "
        f"({time.process_time() - t0:.1f} s CPU; {d.uncertified} windows still growing)",))
