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


def request_floors(instance, objective: str) -> np.ndarray:
    """Per request, a lower bound on its completion (first token for mean-ttft), absolute."""
    f = Floors.of(instance)
    own = f.prefill_chain if objective == Objective.MEAN_TTFT else f.chain
    return instance.arrival + own


@register_bound("request", "each request's own chain of batches (B3), O(n)", rank=10, cheap=True)
def request_bound(instance, objective: str, budget: Budget) -> BoundResult:
    done = request_floors(instance, objective)
    if objective == Objective.MAKESPAN:
        v = float(done.max())
    elif objective == Objective.TOTAL_LATENCY:
        v = float((done - instance.arrival).sum())
    else:
        v = float((done - instance.arrival).mean())
    return BoundResult(v, "request", objective)
