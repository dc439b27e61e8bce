"""GBA, the Geometric Batching Algorithm (Feng, Yang, Zhang, *Competitive Non-Clairvoyant
KV-Cache Scheduling for LLM Inference*, arXiv 2601.22996): the clairvoyant counterpart of
GSA (:mod:`optsched.policies.gsa`), approximation ratio 10.67 for total latency (6.75 in
the large-memory regime), offline batch setting (every request at time 0).

What the paper says (abstract; the body was not reachable from here)
---------------------------------------------------------------------
A job's KV footprint grows by one token per decoded token; the scheduler minimises total
latency under a hard memory budget. GBA comes from the same "geometric phase structure" as
GSA, with the response lengths known. The abstract gives no pseudo-code.

What exactly is simulated (*assumed*: a doubling-phase batching in the classical style of
geometric/interval-indexed scheduling for total completion time, read from the name)
-------------------------------------------------------------------------------------------
* **Phases.** Phase ``k = 0, 1, 2, ...`` is one group (:mod:`optsched.policies.groups`).
  Its candidates are the waiting requests with ``O <= base^k`` (the geometric size classes;
  ``base = 2`` by default, a parameter),
  in ascending ``O`` (ties: prompt, arrival, instance order); they are packed greedily while
  the group fits ``M`` at every batch when all start together (equation (1) of the online
  paper, exact lengths), the group's prefills fit ``min(C, P)`` and its size
  ``min(C, max_batch_size)``. The group runs to completion (no eviction, no pausing, no
  joining); the next phase starts when its last member finishes. A phase with no candidate
  takes no time (``k`` moves on at once).
* **Online arrivals** (the paper's setting has none): only arrived requests are
  candidates; when nothing runs or waits the phase counter restarts at ``k = 0``.
* **Not built:** the 6.75 large-memory refinement, and any memory split between phases the
  body may specify. Output lengths are the true ones (*hypothetical*, semantics section 6).
"""

from __future__ import annotations

import math

from ..plugins import ParamSpec
from .groups import ShortestOutputGroups, checked_base
from .registry import register
from .simulator import SimView


def above_one(v: float) -> str | None:
    """ParamSpec check: a geometric ratio."""
    return None if v > 1 else "must be > 1"


class GBA(ShortestOutputGroups):
    """Geometric Batching Algorithm as assumed in the module docstring (ratio ``base``)."""

    def __init__(self, base: float = 2.0):
        self.base = checked_base(base)

    def bind(self, view: SimView) -> None:
        super().bind(view)
        self.k = 0
        top = max(1, int(self.O.max(initial=1)))
        self.kmax = math.ceil(math.log(top) / math.log(self.base))

    def form_group(self, exclude: set[int]) -> list[tuple[int, int]]:
        if not self.waiting:
            self.k = 0
            return []
        g = self.view.g
        while True:
            cands = [i for i in self.waiting if self.O[i] <= self.base ** self.k]
            self.k += 1
            if cands or self.k > self.kmax + 1:
                break
        group = self.pack(cands or self.waiting, lambda i: int(self.O[i] - g[i]))
        taken = {i for i, _ in group}
        self.waiting = [i for i in self.waiting if i not in taken]
        return group


register(
    "gba",
    "GBA (as far as the abstract defines it): doubling phases k = 0, 1, ...; phase k runs one "
    "group of waiting requests with O <= 2^k, shortest first, packed while KV <= M at every "
    "batch when all start together, run to completion (true output lengths: hypothetical)",
    "Feng, Yang, Zhang, Competitive Non-Clairvoyant KV-Cache Scheduling for LLM Inference, "
    "arXiv 2601.22996, GBA (abstract only: phase rule assumed, see optsched/policies/gba.py)",
    hypothetical=True,
    params=(ParamSpec("base", float, 2.0, "geometric ratio of the phases: phase k takes "
                      "requests with O <= base^k", check=above_one),),
    factory=GBA,
)

__all__ = ["GBA", "above_one"]
