"""Round robin (Vidur's ``RoundRobinGlobalScheduler``): the ``k``-th request to arrive goes to
replica ``k mod R``."""

from __future__ import annotations

from collections.abc import Sequence

from ..instance import Instance
from .base import EngineState, register_router


@register_router(
    "rr", "round robin: the k-th arrival goes to engine k mod R (the next engine that fits it)",
    "Vidur (MLSys'24), vidur/scheduler/global_scheduler/round_robin_global_scheduler.py")
class RoundRobin:
    name = "rr"
    #: its compiled rule (optsched.cluster.fast)
    fast_router = "rr"

    def bind(self, instance: Instance, engines: Sequence[EngineState]) -> None:
        self.R = len(engines)
        self.counter = 0

    def route(self, i: int, t: float, candidates: Sequence[int]) -> int:
        """Engine ``counter mod R``; a request that does not fit it goes to the next engine
        (cyclically) that fits, and the counter moves on by one either way."""
        k = self.counter % self.R
        self.counter += 1
        if k in candidates:
            return k
        later = [c for c in candidates if c > k]
        return later[0] if later else candidates[0]
