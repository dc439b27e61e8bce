"""GSA, the Geometric Slicing Algorithm (Feng, Yang, Zhang, *Competitive Non-Clairvoyant
KV-Cache Scheduling for LLM Inference*, arXiv 2601.22996): non-clairvoyant (output lengths
unknown), competitive ratio at most 61.92 for total latency (32 in the large-memory regime),
offline batch setting (every request at time 0).

What the paper says (abstract; the body was not reachable from here)
---------------------------------------------------------------------
"GSA manages uncertainty through a geometric phase structure that periodically restarts
jobs to bound memory exposure, combined with a staggered pipeline mechanism that enables
high concurrency by smoothing aggregate memory consumption."

What exactly is simulated (*assumed*: the classical doubling scheme for non-clairvoyant
total completion time, read from the abstract's words)
-------------------------------------------------------------------------------------
* **Phases and slices.** Phase ``k = 0, 1, 2, ...`` gives every unfinished request a slice
  of ``L_k = ceil(base^k)`` generated tokens (``base = 2`` by default, a parameter). A
  request that has not finished after its slice is *restarted*: evicted (recompute) and
  moved to phase ``k + 1``. A request never uses more
  than ``S + L_k - 1`` KV tokens in its slice (``S`` = tokens to prefill), which is how the
  slicing bounds memory exposure without knowing ``O``.
* **Groups.** Within a phase the queue (arrival order, ties instance order: the policy
  knows nothing else) is cut into groups (:mod:`optsched.policies.groups`) packed greedily
  while ``sum (S_i + L_k - 1)`` -- the group's KV at its last batch -- fits ``M`` (equation
  (1) with every finishing offset ``L_k - 1``), the prefills ``min(C, P)`` and the size
  ``min(C, max_batch_size)``; groups run one after another. A member's slice is capped at
  ``M - S_i + 1`` so that it fits alone (it then finishes: ``I + O - 1 <= M``).
* **Differences from the paper, known or likely.** (1) Restart: our recompute semantics keep
  the generated tokens (semantics section 6: an evicted request re-prefills ``I + g``), so
  a restarted request resumes rather than starting over -- kinder than a full restart.
  (2) The staggered pipeline is not built (its rule is not in the abstract): groups are
  lockstep and sequential, so this GSA under-uses memory while a group's short members
  have finished. (3) Online arrivals (not in the paper's setting) join the current phase's
  queue; when nothing runs or waits the phase counter restarts at ``k = 0``.
"""

from __future__ import annotations

import math

from ..plugins import ParamSpec
from .gba import above_one
from .groups import GroupPolicy, checked_base
from .registry import register
from .simulator import SimView


class GSA(GroupPolicy):
    """Geometric Slicing Algorithm as assumed in the module docstring."""

    def __init__(self, base: float = 2.0):
        self.base = checked_base(base)

    def bind(self, view: SimView) -> None:
        super().bind(view)
        self.k = 0
        self.queue: list[int] = []  # this phase, arrival order
        self.later: list[int] = []  # restarted, for phase k + 1

    def on_arrivals(self, idx: list[int]) -> None:
        self.queue.extend(idx)

    def on_slice_end(self, i: int) -> None:
        self.later.append(i)

    def _slice(self, i: int) -> int:
        return max(1, min(math.ceil(self.base ** self.k), self.capM - int(self.view.S[i]) + 1))

    def form_group(self, exclude: set[int]) -> list[tuple[int, int]]:
        if not self.queue:
            if not self.later:
                if not exclude:  # evicted now, back in on_batch_end: the phase goes on
                    self.k = 0
                return []
            self.k += 1
            self.queue, self.later = self.later, []
        cands = [i for i in self.queue if i not in exclude]
        group = self.pack(cands, self._slice)
        taken = {i for i, _ in group}
        self.queue = [i for i in self.queue if i not in taken]
        return group


register(
    "gsa",
    "GSA (as far as the abstract defines it): doubling phases k = 0, 1, ...; in phase k every "
    "unfinished request gets a slice of 2^k tokens in lockstep groups packed (arrival order) "
    "while sum(S + 2^k - 1) <= M; unfinished at the slice end: evicted (restart), next phase; "
    "never reads output lengths",
    "Feng, Yang, Zhang, Competitive Non-Clairvoyant KV-Cache Scheduling for LLM Inference, "
    "arXiv 2601.22996, GSA (abstract only: slicing rule assumed, pipeline not built; see "
    "optsched/policies/gsa.py)",
    params=(ParamSpec("base", float, 2.0, "geometric ratio of the slices: phase k gives "
                      "ceil(base^k) tokens", check=above_one),),
    factory=GSA,
)

__all__ = ["GSA"]
