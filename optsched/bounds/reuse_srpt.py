"""Bound ``reuse-srpt``: the preemptive one-server relaxation of B7 with prefix reuse
(``formulations/bounds.md`` B19).

Each request's work is B7's with :class:`~optsched.bounds.reuse_floors.ReuseFloors`: its own
entries' least cost (the prompt tokens a hit cannot skip, after the hit's context) plus its
share of every batch's fixed time by a rule whose shares still sum to at most 1 per batch
with sharing -- its *private* KV plus ``b / n_x`` of each block ``x`` it holds (the resident
blocks count once), its own computed tokens over ``C``, one entry over the most entries of a
batch. Blocks another request computes for it are not its work here (they are in B19's
``reuse-work``). Preemptive SRPT on one machine is then a lower bound, as in B7.
"""

from __future__ import annotations

from .base import BoundResult, Budget, register_bound
from .reuse_floors import ReuseFloors
from .reuse_request import reuse_request_floors
from .srpt import srpt_value


@register_bound("reuse-srpt", "preemptive shortest-remaining-work on one server, each "
                "request's work charging only what prefix reuse cannot save (B19, B7), "
                "O(n log n); valid with prefix reuse",
                objectives=("total-latency", "mean-ttft"), rank=32, reuse_aware=True,
                twin_of="srpt")
def reuse_srpt_bound(instance, objective: str, budget: Budget) -> BoundResult:
    return srpt_value(instance, objective, budget, ReuseFloors.of(instance),
                      reuse_request_floors(instance, objective), "reuse-srpt")
