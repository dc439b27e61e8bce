"""Least outstanding requests (Vidur's ``LORGlobalScheduler``), also known as join the
shortest queue: each arrival goes to the engine with the fewest requests routed to it and not
yet finished, waiting or running."""

from __future__ import annotations

from collections.abc import Sequence

from ..instance import Instance
from .base import EngineState, register_router


@register_router(
    "lor", "least outstanding requests (join the shortest queue): the engine with the fewest "
    "unfinished requests at the arrival, the first such engine on a tie",
    "Vidur (MLSys'24), vidur/scheduler/global_scheduler/lor_global_scheduler.py")
class LeastOutstanding:
    name = "lor"
    #: its compiled rule (optsched.cluster.fast)
    fast_router = "lor"

    def bind(self, instance: Instance, engines: Sequence[EngineState]) -> None:
        self.engines = engines

    def route(self, i: int, t: float, candidates: Sequence[int]) -> int:
        return min(candidates, key=lambda k: (self.engines[k].outstanding(t), k))
