"""Bound ``coupled``: a counting bound in which a request's batching trades its share of the
server against its own duration (``formulations/bounds.md`` B10).

Every earlier rung prices a request's work (its share of the server) as if its batches were
memory-full and its duration (chain) as if it ran alone. In one schedule it cannot be both:
in the batch generating a token of ``i`` with ``S`` cached tokens after it, the other
entries hold ``K - S`` more tokens (``S <= K <= M``) and each of their entries costs at
least ``kappa`` per token it holds, so the batch lasts ``kappa (K - S)`` longer than ``i``
alone, while ``i``'s share of the batch term is ``h S / K``. With ``u = K / S``:

    work_g >= ent_g + h / u,    chain_g >= c_g + kappa S (u - 1),    1 <= u <= M / S.

Per request the least work compatible with a duration ``D`` is a convex decreasing frontier
``W_i(D)``, bounded below by its Lagrangian tangents ``(L_i(lam) - D) / lam``. A request
completed by ``tau`` has ``D <= tau - a_i``, so received at least ``W_i(tau - a_i)`` of the
one-machine relaxation before ``tau``; at most as many requests finish by ``tau`` as
preemptive SRPT completes with those works (it completes the most jobs by every time, B7).
That count, on a grid of ``tau``, bounds each order statistic ``C_(k)`` from below.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..solve_types import Objective
from .base import BoundResult, Budget, register_bound
from .floors import Floors
from .request import request_floors
from .srpt import srpt_completions

#: how many Lagrange multipliers (chain seconds per work second) bound ``W_i`` by tangents,
#: log-spaced over the range where some step's best ``u`` moves from 1 to ``M / S``
N_LAMBDAS = 61
#: grid evaluations of the completion count (initial uniform grid, then refinements)
GRID_POINTS = 160
REFINE_ROUNDS = 6
REFINE_POINTS = 80
#: relative rounding allowance of a per-request sum of non-negative step terms
SUM_ROUNDING = 1e-10


def other_entry_rate(k: dict[str, float]) -> float:
    """``kappa``: every entry costs at least ``kappa`` times the tokens its request caches
    after it (B10): a decode entry ``k1 + kdr + kdm (m' - 1) >= kappa m'`` when
    ``kappa <= min(kdm, k1 + kdr)``; a prefill entry ``>= k1 c + kpl m >= kappa m'`` when
    ``kappa <= min(k1, kpl)`` (the other prefill terms are ``>= 0``)."""
    return max(0.0, min(k["kdm"], k["kpl"], k["k1"], k["k1"] + k["kdr"]))


@dataclass(frozen=True)
class Frontier:
    """Per request, the work/duration trade-off of B10: ``L[i, j] = min over u of
    (chain + lams[j] * work)`` summed over its steps, the work at the largest batching
    ``wmin`` and the duration alone ``dmin`` (the chain floor F5)."""

    lams: np.ndarray
    L: np.ndarray
    wmin: np.ndarray
    dmin: np.ndarray

    def __post_init__(self):
        n = self.wmin.shape[0]
        if self.L.shape != (n, self.lams.size) or self.dmin.shape != (n,):
            raise ValueError(f"frontier arrays disagree: L {self.L.shape}, lams "
                             f"{self.lams.shape}, wmin {n}, dmin {self.dmin.shape}")
        if not (self.lams > 0).all():
            raise ValueError("frontier: Lagrange multipliers must be > 0")

    def least_work(self, slack: np.ndarray) -> np.ndarray:
        """A lower bound on the work of each request whose duration is at most ``slack``
        (``inf`` where ``slack`` is below its chain floor: it cannot finish in time). For
        every ``lam > 0``, ``D + lam w >= L(lam)``, so ``w >= (L(lam) - slack) / lam``."""
        L = self.L * (1 - SUM_ROUNDING)
        tang = (L - slack[:, None]) / self.lams[None, :]
        w = np.maximum(self.wmin * (1 - SUM_ROUNDING), tang.max(axis=1))
        ok = slack >= self.dmin * (1 - SUM_ROUNDING)
        return np.where(ok, w, np.inf)


def _steps(f: Floors, ttft: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flat per-step arrays over ``g = 0..O-1`` of every request (``g = 0`` is the last
    prefill pass, generating token 1; only that one for ``ttft``): tokens ``S = I + g``
    cached after the generating batch, entry floor ``ent`` (B1/B2), chain floor ``c`` (F5),
    and each request's first index (every request has step 0: no segment is empty)."""
    inst, k = f.instance, f.k
    O = np.ones(inst.n, dtype=np.int64) if ttft else inst.output.astype(np.int64)
    first = np.cumsum(O) - O
    total = int(O.sum())
    g = np.arange(total, dtype=np.int64) - np.repeat(first, O)
    S = (np.repeat(inst.prompt.astype(np.int64), O) + g).astype(np.float64)
    dec = (k["k1"] + k["kdr"] - k["kdm"]) + k["kdm"] * S
    ref = k["kpr"] + k["k1"] * S + f._quad_floor(S)
    ent = np.minimum(dec, ref)
    c = k["k0"] + np.minimum(dec + k["kdb"], ref + k["kpb"])
    ent[first] = f.prefill_entry_cost
    c[first] = f.prefill_chain
    return S, ent, c, first


def multipliers(kappa: float, h: float, M: float) -> np.ndarray:
    """Log-spaced ``lam`` over ``[kappa / h, kappa M^2 / h]``, where a step's best
    ``u = sqrt(lam h / (kappa S))`` moves from 1 to ``M / S`` for some ``1 <= S <= M``
    (any positive values are valid; these are the ones that can bind)."""
    if kappa <= 0 or h <= 0:
        return np.array([1.0])
    lo, hi = kappa / h, kappa * M * M / h
    return np.geomspace(lo / 4, hi * 4, N_LAMBDAS)


def other_token_rate(k: dict[str, float]) -> float:
    """Every entry costs at least this much per token it processes (B10, first tokens): a
    prefill entry ``>= k1 c``, a decode entry (``c = 1``) ``>= k1 + kdr``."""
    return max(0.0, min(k["k1"], k["k1"] + k["kdr"]))


def frontier(f: Floors, ttft: bool = False) -> Frontier:
    """The per-request Lagrangian values of B10, one pass over the steps per multiplier.
    Step ``g`` with ``u = K / S`` in ``[1, M / S]``: ``chain = c + kappa S (u - 1)``,
    ``work = ent + h / u``; ``min_u kappa S u + lam h / u`` is at ``sqrt(lam h / (kappa S))``
    clipped to the range (``u = M / S`` when ``kappa = 0``, ``u = 1`` when ``h = 0``).
    First tokens (``ttft``) share the batch term by tokens instead: ``S = I`` tokens,
    ``kappa`` = :func:`other_token_rate`, ``C`` in place of ``M``, ``h = k0 + kpb``."""
    lim, k = f.instance.limits, f.k
    if ttft:
        M = float(lim.max_batch_tokens)
        h, kappa = k["k0"] + k["kpb"], other_token_rate(k)
    else:
        M = float(lim.kv_capacity)
        h, kappa = f.batch_overhead, other_entry_rate(k)
    S, ent, c, first = _steps(f, ttft)
    umax = np.maximum(M / S, 1.0)  # a prompt longer than C: no sharing is assumed (u = 1)
    lams = multipliers(kappa, h, M)
    L = np.empty((f.instance.n, lams.size))
    for j, lam in enumerate(lams):
        if h <= 0:
            u = np.ones_like(S)
        elif kappa <= 0:
            u = umax
        else:
            u = np.clip(np.sqrt(lam * h / (kappa * S)), 1.0, umax)
        L[:, j] = np.add.reduceat(c + kappa * S * (u - 1) + lam * (ent + h / u), first)
    wmin = np.add.reduceat(ent + h / umax, first)
    dmin = np.add.reduceat(c, first)
    return Frontier(lams, L, wmin, dmin)


def srpt_count(release: np.ndarray, work: np.ndarray, tau: float) -> int:
    """How many jobs preemptive SRPT on one machine completes by ``tau`` (at least as many
    as any preemptive schedule of the same jobs, bounds.md B7); ``inf`` work never ends.
    Jobs released at or after ``tau`` cannot change SRPT's schedule before it."""
    keep = np.isfinite(work) & (release < tau)
    return int(srpt_completions(release[keep], work[keep], until=tau).size)


def count_at(fr: Frontier, a: np.ndarray, tau: float) -> int:
    """Upper bound on the requests completed by ``tau`` in any schedule (B10)."""
    slack = (tau - a) + 1e-12 * (abs(tau) + np.abs(a))  # rounding only widens it
    return srpt_count(a, fr.least_work(slack), tau)


def order_statistic_floors(fr: Frontier, a: np.ndarray, hi: float, budget: Budget) -> np.ndarray:
    """``lo[k-1] <= C_(k)``: the largest grid time at which fewer than ``k`` requests can be
    done; the grid is refined where many order statistics share a wide interval."""
    n = a.size
    pts = {float(t): count_at(fr, a, float(t))
           for t in np.linspace(float(a.min()), hi, GRID_POINTS)}
    for _ in range(REFINE_ROUNDS):
        if budget.expired:
            break
        ts = sorted(pts)
        cs = np.array([pts[t] for t in ts])
        gain = np.diff(cs) * np.diff(ts)
        for j in np.argsort(-gain)[:REFINE_POINTS]:
            if gain[j] <= 0:
                break
            mid = (ts[j] + ts[j + 1]) / 2
            pts[mid] = count_at(fr, a, mid)
    grid = np.array(sorted(pts))
    # a larger count is still an upper bound: make it nondecreasing against rounding
    cs = np.maximum.accumulate(np.array([pts[t] for t in grid]))
    # fewer than k requests done by grid[j] means C_(k) > grid[j]: take the last such j
    j = np.searchsorted(cs, np.arange(1, n + 1), side="left") - 1
    return np.where(j >= 0, grid[np.maximum(j, 0)], float(a.min()))


def _horizon(fr: Frontier, a: np.ndarray, start: float) -> float:
    """A time by which the count reaches ``n`` (doubling from ``start``)."""
    hi = max(start, float((a + fr.dmin).max()))
    while count_at(fr, a, hi) < a.size:
        hi = a.min() + 2 * (hi - a.min()) + 1e-9
    return hi


@register_bound("coupled", "counting bound in which each request's batching trades its share "
                "of the server against its own duration (memory-full batches are slower; "
                "B10), O(grid x n log n)", objectives=("total-latency", "mean-ttft"), rank=130)
def coupled_bound(instance, objective: str, budget: Budget) -> BoundResult:
    from .srpt import job_works

    f = Floors.of(instance)
    a = instance.arrival.astype(np.float64)
    fr = frontier(f, ttft=objective == Objective.MEAN_TTFT)
    base = srpt_completions(a, job_works(f, objective, (1.0, 0.0, 0.0)))
    own = np.sort(request_floors(instance, objective))
    lo = order_statistic_floors(fr, a, _horizon(fr, a, float(base.max())), budget)
    total = float(np.maximum(np.maximum(lo, base), own).sum()) - float(a.sum())
    if objective == Objective.MEAN_TTFT:
        total /= instance.n
    rate = (f"{other_token_rate(f.k):.4g} s per token" if objective == Objective.MEAN_TTFT
            else f"{other_entry_rate(f.k):.4g} s per cached token")
    return BoundResult(total, "coupled", objective, notes=(f"kappa = {rate}",))
