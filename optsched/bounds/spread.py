"""Bound ``spread``: mean busy time plus the *actual* decode duration, with each request's
batching chosen against the queue it delays (``formulations/bounds.md`` B13).

The one-machine relaxation of B7/B9 may spread every entry's piece uniformly over its whole
batch (the pieces of a batch still sum to at most its duration). A request's completion is
then its mean busy time plus the mean distance of its pieces to the completion, and a piece
in the batch generating token ``g + 1`` is at least half that batch plus every later pass
away from it. B10's share rule ties both to the batching ``u = K / S`` of that batch:

    work_g = ent_g + h / u,     gen batch >= gam_g + kappa S (u - 1),
    pass_g >= c_g + kappa S (u - 1),       1 <= u <= M / S.

So ``C_i >= MB_i + N_i(u) / w_i(u)`` with ``N_i`` linear in ``u`` (weights trimmed to the
least works). Weak duality of the mean-busy-time LP with prices ``beta(t) >= 0`` on the
machine gives ``sum MB_i >= sum_i min_{t >= a_i} (t + w_i beta(t)) - int beta``, separable
per request, so the batching is chosen per request:

    sum_i C_i >= sum_i min_{t >= a_i} [t + phi_i(beta(t))] - int beta,
    phi_i(lam) = min_u [lam w_i(u) + N_i(u) / w_i(u)]   (bounded below per work bucket).

Any ``beta`` is valid; it is the fractional queue of preemptive smallest-work-first at the
least works, held at its minimum over each short segment. Total latency only.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .base import BoundResult, Budget, register_bound
from .coupled import _steps, other_entry_rate
from .floors import Floors

#: Lagrange multipliers of the work-bucket constraint (any non-negative values are valid)
MUS = np.concatenate([[0.0], np.geomspace(1e-8, 1e4, 193)])
#: work buckets per request between its least and largest work (any grid is valid): thin
#: ones next to the least work, where the queue price puts almost every request
N_BUCKETS = 24
EDGES = np.concatenate([[0.0], np.geomspace(1e-5, 1.0, N_BUCKETS)])
#: segments of the price function beta: the PSWF events, cut to at most span / this
SEGMENTS = 3000
#: weights of the queue-price inequality against ``MB_i - a_i >= w_i / 2`` (each convex
#: combination of the two is valid; the queue prices cover a request only while the
#: reference schedule is busy, the own-work one always holds)
THETAS = (1.0, 0.9, 0.75, 0.5, 0.25, 0.0)
#: relative rounding allowance of a per-request sum of non-negative step terms
SUM_ROUNDING = 1e-10


@dataclass(frozen=True)
class Tradeoff:
    """Per request: the work bucket edges ``W[:, j]`` (``j = 0..N_BUCKETS``) and the least
    tail ``tail[:, j] <= N_i(u) / w_i(u)`` over batchings whose work lies in bucket ``j``
    (``W[:, j] <= w <= W[:, j + 1]``), so ``phi_i(lam) >= min_j lam W[:, j] + tail[:, j]``
    (bounds.md B13)."""

    W: np.ndarray
    tail: np.ndarray
    wmin: np.ndarray

    def __post_init__(self):
        n = self.wmin.shape[0]
        if self.W.shape != (n, N_BUCKETS + 1) or self.tail.shape != (n, N_BUCKETS):
            raise ValueError(f"trade-off arrays disagree: W {self.W.shape}, tail "
                             f"{self.tail.shape}, n = {n}")

    def phi(self, i: int, lam: np.ndarray) -> np.ndarray:
        """``phi_i`` at each price in ``lam`` (a minimum of affine functions: concave)."""
        return (lam[:, None] * self.W[i, None, :-1] + self.tail[i, None, :]).min(axis=1)


def tradeoff(f: Floors) -> Tradeoff:
    """Bucketed lower bounds of ``N_i(u) / w_i(u)`` (bounds.md B13, eq. for ``N_i``).

    ``N_i(u) = N0_i + sum_g kappa S_g Theta_g (u_g - 1)`` with ``Theta_g = xmin_g / 2 +
    X_<g`` (``xmin`` the work at ``u = M / S``, ``X_<g`` the least work of the earlier steps)
    and ``N0_i = sum_g xmin_g gam_g / 2 + X_<g c_g``. On bucket ``j``, ``w <= W_{j+1}``, so
    ``N / w >= min {N : w(u) <= W_{j+1}} / W_{j+1}``, and for every ``mu >= 0`` that minimum
    is at least ``N0 + mu (E - W_{j+1}) + sum_g min_u [kappa S Theta (u - 1) + mu h / u]``
    (``E = sum_g ent_g``; the inner minimum at ``u = sqrt(mu h / (kappa S Theta))``
    clipped to ``[1, M / S]``)."""
    inst, k = f.instance, f.k
    M, h, kappa = float(inst.limits.kv_capacity), f.batch_overhead, other_entry_rate(k)
    S, ent, c, first = _steps(f, False)
    umax = np.maximum(M / S, 1.0)
    gam = c.copy()  # a decode pass is one batch: the generating batch is the whole pass ...
    # ... a refill (or the prefill pass) may end with a one-token chunk: price that batch
    gam = np.minimum(gam, k["k0"] + k["kpb"] + k["kpr"] + k["k1"])
    gam[first] = k["k0"] + k["kpb"] + k["kpr"] + k["k1"]
    xmin = ent + h / umax
    cum = np.cumsum(xmin)
    start = np.repeat(cum[first] - xmin[first], np.diff(np.append(first, S.size)))
    before = cum - xmin - start  # X_<g: least work of the request's earlier steps
    theta = xmin / 2 + before
    N0 = np.add.reduceat(xmin * gam / 2 + before * c, first) * (1 - SUM_ROUNDING)
    E = np.add.reduceat(ent, first)
    wmin = np.add.reduceat(xmin, first)
    wmax = np.add.reduceat(ent + h, first)
    slope = kappa * S * theta
    G = np.empty((inst.n, MUS.size))  # sum_g min_u [slope (u - 1) + mu h / u]
    for j, mu in enumerate(MUS):
        if h <= 0 or mu <= 0:
            u = np.ones_like(S)
        else:
            with np.errstate(divide="ignore"):
                u = np.where(slope > 0, np.sqrt(mu * h / np.maximum(slope, 1e-300)), umax)
            u = np.clip(u, 1.0, umax)
        G[:, j] = np.add.reduceat(slope * (u - 1) + mu * h / u, first) * (1 - SUM_ROUNDING)
    lo, hi = wmin * (1 - 1e-9), np.maximum(wmax, wmin) * (1 + 1e-9)
    W = lo[:, None] + (hi - lo)[:, None] * EDGES[None, :]
    top = W[:, 1:]  # bucket j's largest work
    lag = (G[:, None, :] + MUS[None, None, :] * (E[:, None, None] - top[:, :, None])).max(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):  # no work (every cost 0): no tail
        tail = np.where(top > 0, np.maximum(N0[:, None] + lag, 0.0) / top, 0.0)
    return Tradeoff(W, tail, wmin)


@dataclass(frozen=True)
class Segment:
    """Dual prices held on ``[tau, tau + ell)`` (bounds.md B13): capacity rows ``m`` (the
    work released at or after ``s[m]`` fits in ``t - s[m]``), ``s`` increasing, priced so
    that a request released at ``a`` gets ``Y(a) = 1 / theta[m]`` for the last ``m`` with
    ``s[m] <= a`` (0 before ``s[0]``); ``theta`` decreasing (the rows' prices
    ``1 / theta[m] - 1 / theta[m - 1] >= 0``)."""

    tau: float
    ell: float
    s: np.ndarray
    theta: np.ndarray

    def __post_init__(self):
        if self.ell < 0 or self.s.size != self.theta.size or self.s.size == 0:
            raise ValueError("segment: length >= 0 and one price per row")
        if (np.diff(self.s) < 0).any() or (np.diff(self.theta) > 0).any() or (
                self.theta <= 0).any() or self.s[-1] > self.tau:
            raise ValueError("segment: rows must have s increasing (<= tau) and theta "
                             "positive, decreasing")

    def charge(self, scale: float) -> float:
        """``scale * sum_m y_m int (t - s_m) dt`` over the segment."""
        y = 1.0 / self.theta - np.concatenate([[0.0], 1.0 / self.theta[:-1]])
        return scale * float((y * self.ell * (self.tau + self.ell / 2 - self.s)).sum())

    def price(self, a: np.ndarray) -> np.ndarray:
        m = np.searchsorted(self.s, a, side="right") - 1
        return np.where(m >= 0, 1.0 / self.theta[np.maximum(m, 0)], 0.0)


def pswf_prices(release: np.ndarray, work: np.ndarray, segments: int = SEGMENTS
                ) -> list[Segment]:
    """Prices from preemptive smallest-work-first at the least works (exact for the
    fractional queue of release-0 instances, B13): while job ``w`` runs, the rows are a
    staircase kept on a stack, row ``m`` = (the time since which only jobs of work
    ``<= theta[m]`` ran, ``theta[m]``), the top row being the job in service; idle time
    clears it. Segments are cut at events and to at most ``span / segments``. Any
    non-negative prices are valid."""
    order = np.argsort(release, kind="stable")
    r, w = release[order].tolist(), work[order].tolist()
    lmax = max(r[-1] - r[0], float(np.sum(work)), 1e-12) / segments
    out: list[Segment] = []
    stack: list[tuple[float, float]] = []  # (s, theta), s increasing, theta decreasing
    n, k, t = len(r), 0, r[0]
    heap: list[tuple[float, int, float]] = []
    while k < n or heap:
        if not heap:
            if t < r[k]:
                stack = []  # idle: a new busy period
            t = max(t, r[k])
        while k < n and r[k] <= t:
            heapq.heappush(heap, (w[k], k, w[k]))
            k += 1
        wk, j, rem = heapq.heappop(heap)
        run = min(rem, (r[k] if k < n else np.inf) - t, lmax)
        if wk > 0:
            s0 = t
            while stack and stack[-1][1] <= wk:  # its stretch now holds a job of work wk
                s0 = stack.pop()[0]
            stack.append((s0, wk))
            if run > 0:
                out.append(Segment(t, run, np.array([x for x, _ in stack]),
                                   np.array([y for _, y in stack])))
        t += run
        if run < rem:
            heapq.heappush(heap, (wk, j, rem - run))
    return out


def dual_value(to: Tradeoff, a: np.ndarray, prices: list[Segment], scale: float = 1.0,
               budget: Budget | None = None) -> float:
    """``max over theta in THETAS of sum_i min_j [theta G_i(W_ij) + (1 - theta) W_ij / 2 +
    tail_ij] - theta int sum_m y_m (t - s_m) dt`` (bounds.md B13): ``G_i(W) = int_{t >=
    a_i} min(1, Y_i(t) W) dt`` is non-decreasing in ``W``, so on work bucket ``j`` at least
    its value at the bucket's smallest work; ``MB_i - a_i >= w_i / 2`` (rate <= 1) is the
    other inequality of the convex combination. When ``budget`` runs out the remaining
    segments are priced 0 (still valid prices)."""
    order = np.argsort(a, kind="stable")  # a segment prices a contiguous run of arrivals
    a_s, Wlo = a[order], to.W[order, :-1]
    G = np.zeros_like(Wlo)
    total = 0.0
    for n_seg, seg in enumerate(prices):
        if budget is not None and n_seg % 256 == 255 and budget.expired:
            break
        end = seg.tau + seg.ell
        total -= seg.charge(scale)
        # priced: released in [s[0], end) (earlier ones have Y = 0, later ones are not in)
        lo = int(np.searchsorted(a_s, seg.s[0], side="left"))
        hi = int(np.searchsorted(a_s, end, side="left"))
        if hi <= lo:
            continue
        length = end - np.maximum(seg.tau, a_s[lo:hi])
        Y = scale * seg.price(a_s[lo:hi])
        G[lo:hi] += length[:, None] * np.minimum(1.0, Y[:, None] * Wlo[lo:hi])
    half, tail = Wlo / 2, to.tail[order]
    return max(theta * total + float((theta * G + (1 - theta) * half + tail).min(axis=1)
                                     .sum()) for theta in THETAS)


@register_bound("spread", "mean busy time plus half the generating batch and the later "
                "passes, each request's batching chosen against the queue price (weak "
                "duality of the mean-busy-time LP; B13), O(sum O x 98 + n x segments)",
                objectives=("total-latency",), rank=120)
def spread_bound(instance, objective: str, budget: Budget) -> BoundResult:
    f = Floors.of(instance)
    a = instance.arrival.astype(np.float64)
    to = tradeoff(f)
    prices = pswf_prices(a, to.wmin)
    v = dual_value(to, a, prices, budget=budget)
    return BoundResult(v, "spread", objective,
                       notes=(f"queue prices of PSWF at the least works, {len(prices)} "
                              "segments",))
