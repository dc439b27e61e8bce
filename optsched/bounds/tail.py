"""Bound ``tail``: the 99th percentile of the first-token times (``formulations/bounds.md``
B16).

The percentile of the evaluator (numpy's linear rule, semantics section 4) is
``(1 - f) x_(K) + f x_(K+1)`` over the TTFTs sorted ascending (0-based), ``pos = 0.99 (n - 1)``,
``K = floor(pos)``, ``f = pos - K``: non-decreasing in every order statistic, so lower bounds
of ``x_(K)`` and ``x_(K+1)`` bound it. Two bound an order statistic ``x_(k)``:

* **own chains** (B3): every TTFT is at least its request's prefill chain, so the sorted
  TTFTs dominate the sorted chains term by term: ``x_(k) >=`` the ``k``-th smallest chain;
* **counting** (B12b-d): ``x_(k) <= tau`` only if ``k + 1`` requests have a first token within
  ``tau`` of their arrival; B12 bounds how many can (each request's deadline ``a_i + tau``:
  own floors, Horn's condition on intervals under B7's sharing rules, B10's first-token
  frontier). When that count is at most ``k``, ``x_(k) > tau``. The largest such ``tau`` is
  found by bisection; every ``tau`` reported was checked, so a time limit still certifies.
"""

from __future__ import annotations

import math

import numpy as np

from ..instance import Instance
from .base import BoundResult, Budget, register_bound
from .floors import Floors
from .goodput import Slos, counting_misses, own_feasible
from .goodput_memory import rule_works

#: percentile of the objective (semantics section 4)
QUANTILE = 0.99
#: endpoints of B12b's interval grid (any grid is valid; a coarse one keeps a count ~0.1 s at
#: 1,200 requests)
GRID = 96
#: bisection steps on ``tau``
STEPS = 24


def percentile_position(n: int, q: float = QUANTILE) -> tuple[int, float]:
    """``(K, f)``: numpy's linear percentile is ``(1 - f) x_(K) + f x_(K+1)``."""
    pos = q * (n - 1)
    K = int(math.floor(pos))
    return K, pos - K


class Counter:
    """B12's upper bound on how many requests of any schedule have a first token within
    ``tau`` of their arrival (every request's TTFT deadline ``tau``; its own SLO fields play
    no part), with the per-request works computed once: own floors (B12a), Horn's condition
    on intervals under B7's sharing rules (B12b) and B10's first-token frontier (B12d)."""

    def __init__(self, instance: Instance, grid: int | None = GRID):
        from .coupled import frontier

        self.instance, self.grid = instance, grid
        self.f = Floors.of(instance)
        self.works = [w for w, _ in rule_works(instance, self.f)]
        self.frontier = frontier(self.f, ttft=True)

    def __call__(self, tau: float) -> int:
        n = self.instance.n
        inf = np.full(n, math.inf)
        slos = Slos(np.full(n, float(tau)), inf, inf, np.ones(n, dtype=bool))
        ok, _ = own_feasible(self.f, slos)
        if not ok.any():
            return 0
        a = self.instance.arrival
        most = max(counting_misses(a[ok], a[ok] + tau, w[ok], self.grid) for w in self.works)
        w = self.frontier.least_work(slos.ttft)  # B12d, as goodput.coupled_misses
        sel = ok & np.isfinite(w)
        if sel.any():
            most = max(most, counting_misses(a[sel], a[sel] + tau, w[sel], self.grid))
        return int(ok.sum()) - most


def order_statistic(count: Counter, k: int, budget: Budget, lo: float = 0.0) -> float:
    """A lower bound on the ``k``-th smallest TTFT (0-based): the largest ``tau >= lo`` whose
    count is at most ``k`` (``lo`` itself is returned unchecked: callers pass a value known
    to bound it, or 0)."""
    hi = max(lo, 1e-9) * 2.0
    while count(hi) <= k:  # ends: every request meets a large enough tau
        lo, hi = hi, hi * 2.0
        if budget.expired:
            return lo
    for _ in range(STEPS):
        if budget.expired:
            break
        mid = (lo + hi) / 2.0
        if count(mid) <= k:
            lo = mid
        else:
            hi = mid
    return lo


@register_bound("tail", "P99 TTFT: order statistics of the first-token times, from the own "
                "prefill chains and B12's count of requests that can meet a TTFT deadline "
                "(B16)", objectives=("p99-ttft",), rank=105)
def tail_bound(instance, objective: str, budget: Budget) -> BoundResult:
    n = instance.n
    K, frac = percentile_position(n)
    own = np.sort(Floors.of(instance).prefill_chain)
    lb = [float(own[K]), float(own[min(K + 1, n - 1)])]
    count = Counter(instance)
    lb[0] = order_statistic(count, K, budget, lo=lb[0])
    if frac > 0:
        lb[1] = order_statistic(count, K + 1, budget, lo=max(lb[0], lb[1]))
    value = (1 - frac) * lb[0] + frac * lb[1] if frac > 0 else lb[0]
    chains = (1 - frac) * float(own[K]) + frac * float(own[min(K + 1, n - 1)])
    return BoundResult(value, "tail", objective, notes=(
        f"tail: TTFT order statistics {K} and {K + 1} of {n} (weights {1 - frac:.3g}, "
        f"{frac:.3g}); own prefill chains alone: {chains:.6g}",))
