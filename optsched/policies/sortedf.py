"""Sorted-F (Wang, Ye, Zhou, *LLM Serving Optimization with Variable Prefill and Decode
Lengths*, arXiv 2508.06133): offline scheduling of a backlog with heterogeneous prompts
under a KV budget, minimising total latency; a constant-factor approximation.

What the paper says (abstract, v1 and v3; the body was not reachable from here)
--------------------------------------------------------------------------------
Sorted-F "repeatedly forms feasible batches using an F-metric that balances batch size
against downstream decode cost", and achieves a constant competitive ratio (the constant is
not in the abstract). FCFS, shortest-output-first and total-size orders can be arbitrarily
bad when prompts differ. Not built: the paper's exact DP, local search and LP-based
variants (the LP is not given in the abstract).

What exactly is simulated (*assumed*: the F-metric is not defined in the abstract)
-----------------------------------------------------------------------------------
* **Batches** are groups (:mod:`optsched.policies.groups`): all members start together and
  run to completion; the next batch is formed when the last member finishes.
* **Candidates.** The waiting requests sorted by output length ``O`` (ties: prompt, arrival,
  instance order) are packed greedily (equation (1) of the online paper with exact lengths,
  prefills within ``min(C, P)``, size within ``min(C, max_batch_size)``); every prefix
  ``X_j`` of the packed list is a feasible batch ("sorted").
* **F-metric (our reading)**: ``F(X) = max_{i in X} O_i / |X|``, the batch's duration per
  request it completes -- Smith's ratio for a batch that occupies the server for its
  longest decode and completes ``|X|`` requests: small when the batch is large (batch size)
  and its longest decode short (downstream decode cost). The prefix with the smallest
  ``F`` is run (ties: the larger). With unit-time batches this is Smith's rule applied to
  batches, which is optimal for total completion time among sequences of fixed batches.
* Output lengths are the true ones (*hypothetical*, semantics section 6); online arrivals
  (not in the paper's setting) are candidates once arrived.
"""

from __future__ import annotations

from .groups import ShortestOutputGroups
from .registry import register


def best_prefix(outputs: list[int]) -> int:
    """Length ``j >= 1`` of the prefix minimising ``F = max(outputs[:j]) / j`` (ties: the
    longer); ``outputs`` is the packed list's remaining lengths (module docstring)."""
    best, best_j, top = float("inf"), 1, 0
    for j, o in enumerate(outputs, start=1):
        top = max(top, o)
        f = top / j
        if f <= best:
            best, best_j = f, j
    return best_j


class SortedF(ShortestOutputGroups):
    """Sorted-F as assumed in the module docstring."""

    def form_group(self, exclude: set[int]) -> list[tuple[int, int]]:
        g = self.view.g
        packed = self.pack(self.waiting, lambda i: int(self.O[i] - g[i]))
        if not packed:
            return []
        group = packed[:best_prefix([q for _, q in packed])]
        taken = {i for i, _ in group}
        self.waiting = [i for i in self.waiting if i not in taken]
        return group


register(
    "sorted-f",
    "Sorted-F (as far as the abstract defines it): batches run to completion; the next batch "
    "is the prefix of the shortest-output-first greedy memory packing minimising "
    "F = max O / batch size (true output lengths: hypothetical)",
    "Wang, Ye, Zhou, LLM Serving Optimization with Variable Prefill and Decode Lengths, arXiv "
    "2508.06133, Sorted-F (abstract only: F-metric assumed, see optsched/policies/sortedf.py)",
    hypothetical=True,
    factory=SortedF,
)

__all__ = ["SortedF", "best_prefix"]
