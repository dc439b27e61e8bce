"""Bound ``reuse-request``: each request's own chain of batches with prefix reuse
(``formulations/bounds.md`` B19, B3 with :class:`~optsched.bounds.reuse_floors.ReuseFloors`).

A hit skips at most the shareable ``L = H*b`` prompt tokens, so the last prefill pass of a
request still computes its last ``u = I - L`` prompt tokens after ``L`` others; the batches
holding it run one after another after it arrives. Valid whatever the cache holds, so on
every instance with or without block ids.
"""

from __future__ import annotations

import numpy as np

from .base import BoundResult, Budget, register_bound
from .request import chain_value, request_floors
from .reuse_floors import ReuseFloors


def reuse_request_floors(instance, objective: str) -> np.ndarray:
    """Per request, a lower bound on its completion (first token for mean-ttft) with reuse."""
    return request_floors(instance, objective, ReuseFloors.of(instance))


@register_bound("reuse-request", "each request's own chain of batches, charging only the "
                "prompt tokens a prefix hit cannot skip (B19, B3), O(n); valid with prefix "
                "reuse", rank=12, reuse_aware=True, twin_of="request")
def reuse_request_bound(instance, objective: str, budget: Budget) -> BoundResult:
    return BoundResult(chain_value(instance, objective, reuse_request_floors(instance, objective)),
                       "reuse-request", objective)
