"""Least KV load: each arrival goes to the engine with the smallest share of its KV capacity in
use: least outstanding requests with the KV in use over ``M`` as the load (no published
implementation is followed: outstanding requests, then position, break ties)."""

from __future__ import annotations

from collections.abc import Sequence

from ..instance import Instance
from .base import EngineState, register_router


@register_router(
    "least-kv", "least KV load: the engine with the smallest KV in use over its capacity at the "
    "arrival, fewest outstanding requests then the first engine on a tie",
    "optsched: Vidur's LOR (lor_global_scheduler.py) with KV in use / M as the load")
class LeastKV:
    name = "least-kv"
    #: its compiled rule (optsched.cluster.fast)
    fast_router = "least-kv"

    def bind(self, instance: Instance, engines: Sequence[EngineState]) -> None:
        self.engines = engines
        self.M = [instance.engine(k).limits.kv_capacity for k in range(len(engines))]  # type: ignore[union-attr]

    def route(self, i: int, t: float, candidates: Sequence[int]) -> int:
        e = self.engines
        return min(candidates, key=lambda k: (e[k].kv(t) / self.M[k], e[k].outstanding(t), k))
