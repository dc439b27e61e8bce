"""Bound ``reuse-request``: each request's own chain of batches with prefix reuse
(``formulations/bounds.md`` B19, B3 with :class:`~optsched.bounds.reuse_floors.ReuseFloors`).

A hit skips at most the shareable ``L = H*b`` prompt tokens, so the last prefill pass of a
request still computes its last ``u = I - L`` prompt tokens after ``L`` others; the batches
holding it run one after another after it arrives. Valid whatever the cache holds, so on
every instance with or without block ids.
"""

from __future__ import annotations

import numpy as np

from ..solve_types import Objective
from .base import BoundResult, Budget, register_bound
from .reuse_floors import ReuseFloors


def reuse_request_floors(instance, objective: str) -> np.ndarray:
    """Per request, a lower bound on its completion (first token for mean-ttft) with reuse."""
    f = ReuseFloors.of(instance)
    own = f.prefill_chain if objective == Objective.MEAN_TTFT else f.chain
    return instance.arrival + own


@register_bound("reuse-request", "each request's own chain of batches, charging only the "
                "prompt tokens a prefix hit cannot skip (B19, B3), O(n); valid with prefix "
                "reuse", rank=12, reuse_aware=True)
def reuse_request_bound(instance, objective: str, budget: Budget) -> BoundResult:
    done = reuse_request_floors(instance, objective)
    if objective == Objective.MAKESPAN:
        v = float(done.max())
    elif objective == Objective.TOTAL_LATENCY:
        v = float((done - instance.arrival).sum())
    else:
        v = float((done - instance.arrival).mean())
    return BoundResult(v, "reuse-request", objective)
