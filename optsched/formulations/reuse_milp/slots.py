"""How many batch slots the reuse MILP needs to contain an optimum (``formulations/
reuse-milp.md``, R0), under unit time."""

from __future__ import annotations

import math

from ...instance import Instance


def certified_slots(inst: Instance, objective: str, upper: float) -> int:
    """The most batches with entries a schedule of objective ``<= upper`` can have (R0).

    Unit time: every batch with entries takes 1 and batches do not overlap, so they all lie in
    ``[0, makespan]``: at most ``floor(makespan)`` of them. For total latency, the request that
    completes last has latency at most ``upper`` minus the other requests' latencies, each at
    least its output length (one token per batch), so the makespan is at most
    ``max arrival + upper - (sum O - max O)``."""
    if objective == "makespan":
        span = upper
    else:
        out = [r.output for r in inst.requests]
        span = max(r.arrival for r in inst.requests) + upper - (sum(out) - max(out))
    return max(1, math.floor(span + 1e-9))
