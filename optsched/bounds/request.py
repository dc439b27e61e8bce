"""Bound ``request``: each request's own minimal latency (``formulations/bounds.md`` B3).

The batches holding a request run one after another, after it arrives, and each takes at
least the floor of F5 (:class:`~optsched.bounds.floors.Floors`), so its completion is at
least ``a_i + chain_i`` and its first token at least ``a_i + prefill_chain_i``.
"""

from __future__ import annotations

import numpy as np

from ..solve_types import Objective
from .base import BoundResult, Budget, register_bound
from .floors import Floors


def request_floors(instance, objective: str, floors: Floors | None = None) -> np.ndarray:
    """Per request, a lower bound on its completion (first token for mean-ttft), absolute;
    ``floors`` (default: :meth:`Floors.of`) lets B19 pass its reuse floors."""
    f = Floors.of(instance) if floors is None else floors
    own = f.prefill_chain if objective == Objective.MEAN_TTFT else f.chain
    return instance.arrival + own


def chain_value(instance, objective: str, done: np.ndarray) -> float:
    """The objective of per-request completion floors ``done`` (B3): their latest, or their
    summed or mean latency."""
    if objective == Objective.MAKESPAN:
        return float(done.max())
    if objective == Objective.TOTAL_LATENCY:
        return float((done - instance.arrival).sum())
    return float((done - instance.arrival).mean())


@register_bound("request", "each request's own chain of batches (B3), O(n)", rank=10, cheap=True)
def request_bound(instance, objective: str, budget: Budget) -> BoundResult:
    return BoundResult(chain_value(instance, objective, request_floors(instance, objective)),
                       "request", objective)
