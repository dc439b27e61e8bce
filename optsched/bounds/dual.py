"""Bound ``dual``: a Lagrangian dual of an interval-indexed relaxation in which each request
chooses its completion and, with it, how much of the server it needs
(``formulations/bounds.md`` B11).

Time ``[a_min, H)`` is cut into intervals of length ``ell``; the server does at most ``ell``
work in each (beyond ``H`` nothing is counted). Request ``i`` completing at ``C_i`` has
duration ``<= C_i - a_i``, so its work (its share of the batches, B7/B10) is at least
``W_i(C_i - a_i)``, the frontier of B10, all done inside ``[a_i, C_i]``. Pricing each
interval's capacity at ``pi_k >= 0`` (weak duality):

    sum_i (C_i - a_i) >= sum_i min_C [ (C - a_i) + p_i(C) W_i(C - a_i) ] - sum_k pi_k ell,

``p_i(C)`` the least price over the intervals that ``[a_i, C]`` touches. The inner minimum
splits by the intervals where ``p_i`` drops; each piece is bounded below with the same
Lagrangian tangents as B10. Any ``pi`` gives a valid bound; a projected subgradient method
starting from the queue of the SRPT schedule looks for a good one.
"""

from __future__ import annotations

import numpy as np

from ..solve_types import Objective
from .base import BoundResult, Budget, register_bound
from .coupled import Frontier, frontier
from .floors import Floors
from .srpt import srpt_completions

INTERVALS = 300
#: price drops followed per request; past them every later completion is priced at the
#: least price left (the piece floor is nondecreasing in the price), which caps a step's time
MAX_PIECES = 48
#: projected subgradient: steps of STEP x (largest start price) x DECAY^t along g / |g|
#: (tuned on the conversation windows of studies/bounds/trace_bounds.py; any prices are valid)
ITERATIONS = 160
STEP = 0.3
DECAY = 0.995
#: stop after this many steps without a gain of 1e-6 relative (30 stopped too early on
#: the light-load test instance: 1.196 instead of 1.221)
PATIENCE = 60
#: fewer steps on large instances (a step costs ~ n x MAX_PIECES x multipliers operations)
STEP_WORK = 1e9


def next_smaller(pi: np.ndarray) -> np.ndarray:
    """``nxt[k]`` = the first index ``> k`` with a strictly smaller price (``len(pi)`` if
    none): the next interval where a request's cheapest price drops."""
    G = pi.size
    nxt = np.full(G + 1, G, dtype=np.int64)
    stack: list[int] = []
    for k in range(G):
        while stack and pi[k] < pi[stack[-1]]:
            nxt[stack.pop()] = k
        stack.append(k)
    return nxt


def piece_floor(fr: Frontier, p: np.ndarray, s0: np.ndarray) -> np.ndarray:
    """A lower bound on ``min over s >= s0 of s + p W(s)`` per request (B11): the
    unconstrained minimum ``L(p)`` (chord of the concave ``L`` between grid multipliers),
    ``s0 + p wmin``, and for every grid ``lam >= p`` the tangent
    ``s (1 - p / lam) + p L(lam) / lam``, nondecreasing in ``s`` so taken at ``s0``."""
    lams, L = fr.lams, fr.L * (1 - 1e-10)
    j = np.searchsorted(lams, p)  # lams[j-1] < p <= lams[j]
    n = p.size
    rows = np.arange(n)
    hi = np.minimum(j, lams.size - 1)
    lo_l = np.where(j > 0, lams[np.maximum(j - 1, 0)], 0.0)
    lo_v = np.where(j > 0, L[rows, np.maximum(j - 1, 0)], fr.dmin * (1 - 1e-10))
    hi_l, hi_v = lams[hi], L[rows, hi]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(hi_l > lo_l, (p - lo_l) / (hi_l - lo_l), 1.0)
    chord = np.where(j >= lams.size, L[:, -1], lo_v + np.clip(t, 0, 1) * (hi_v - lo_v))
    ratio = p[:, None] / lams[None, :]
    tang = np.where(ratio <= 1, s0[:, None] * (1 - ratio) + ratio * L, -np.inf).max(axis=1)
    return np.maximum.reduce([chord, tang, s0 + p * fr.wmin * (1 - 1e-10)])


def dual_value(fr: Frontier, a: np.ndarray, edges: np.ndarray, pi: np.ndarray
               ) -> tuple[float, np.ndarray]:
    """The Lagrangian bound for prices ``pi`` on the intervals ``edges`` and a subgradient
    (work each request places in its cheapest interval, minus the capacity)."""
    G = pi.size
    ell = np.diff(edges)
    nxt = next_smaller(pi)
    rest = np.minimum.accumulate(pi[::-1])[::-1]  # least price over intervals k..G-1
    pos = np.clip(np.searchsorted(edges, a, side="right") - 1, 0, G)
    best = np.full(a.size, np.inf)
    arg = np.full(a.size, G)
    active = np.ones(a.size, dtype=bool)
    depth = 0
    while active.any():
        idx = np.nonzero(active)[0]
        k = pos[idx]
        depth += 1
        inside = k < G
        kk = np.minimum(k, G - 1)
        # after MAX_PIECES drops one piece covers every C in [edges[k], H) at the least
        # price left; the piece beyond H (price 0) still follows
        capped = inside & (depth >= MAX_PIECES)
        p = np.where(inside, np.where(capped, rest[kk], pi[kk]), 0.0)
        start = edges[np.minimum(k, G)]
        s0 = np.maximum(np.maximum(start - a[idx], 0.0), fr.dmin[idx])
        sub = Frontier(fr.lams, fr.L[idx], fr.wmin[idx], fr.dmin[idx])
        v = piece_floor(sub, p, s0)
        better = v < best[idx]
        best[idx[better]] = v[better]
        arg[idx[better]] = np.where(inside[better] & ~capped[better], k[better], G)
        pos[idx] = np.where(inside, np.where(capped, G, nxt[kk]), G + 1)
        active[idx[~inside]] = False
    work = np.zeros(G)
    on = arg < G
    # the work each request needs if it completes at the start of its cheapest interval
    s = np.maximum(edges[np.minimum(arg[on], G - 1)] - a[on], fr.dmin[on])
    sub = Frontier(fr.lams, fr.L[on], fr.wmin[on], fr.dmin[on])
    np.add.at(work, arg[on], sub.least_work(s))
    return float(best.sum() - (pi * ell).sum()), work - ell


def queue_prices(a: np.ndarray, done: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Start prices: requests present (arrived, not done) at each interval's midpoint in a
    schedule; a unit of work there delays about that many of them."""
    mid = (edges[:-1] + edges[1:]) / 2
    arrived = np.searchsorted(np.sort(a), mid, side="right")
    finished = np.searchsorted(np.sort(done), mid, side="right")
    return np.maximum(arrived - finished, 0).astype(np.float64)


@register_bound("dual", "Lagrangian dual of an interval-indexed relaxation with a completion "
                "and a batching choice per request (B11), subgradient on the interval prices",
                objectives=("total-latency", "mean-ttft"), rank=140)
def dual_bound(instance, objective: str, budget: Budget) -> BoundResult:
    f = Floors.of(instance)
    a = instance.arrival.astype(np.float64)
    ttft = objective == Objective.MEAN_TTFT
    fr = frontier(f, ttft=ttft)
    done = srpt_completions(a, fr.wmin)
    H = float(done.max() + (done.max() - a.min()) * 0.25 + fr.dmin.max())
    edges = np.linspace(float(a.min()), H, INTERVALS + 1)
    pi = queue_prices(a, done, edges)
    best, _ = dual_value(fr, a, edges, np.zeros_like(pi))
    scale = max(float(pi.max()), 1.0)
    its = 0
    steps = max(10, min(ITERATIONS, int(STEP_WORK / (a.size * MAX_PIECES * fr.lams.size))))
    last_gain = 0
    for its in range(1, steps + 1):
        if budget.expired or its - last_gain > PATIENCE:
            break
        v, g = dual_value(fr, a, edges, pi)
        if v > best * (1 + 1e-6) + 1e-12:
            last_gain = its
        best = max(best, v)
        norm = float(np.linalg.norm(g))
        if norm == 0:
            break
        pi = np.maximum(0.0, pi + (STEP * scale * DECAY ** its) * g / norm)
    if ttft:  # the relaxation's objective is the sum of first-token times minus arrivals
        best /= instance.n
    return BoundResult(best, "dual", objective,
                       notes=(f"{INTERVALS} intervals up to {H:.4g}, {its} subgradient steps",))
