"""Bound ``reuse-work``: the server's busy time with prefix reuse (``formulations/bounds.md``
B19: B4-B6 with :class:`~optsched.bounds.reuse_floors.ReuseFloors`).

* makespan (B5): the batches holding the requests that arrive at or after ``t`` compute
  each one's unskippable prompt tokens, and once every block that only they list, and only
  at shareable positions (its first computation is by one of them, after ``t``);
* total latency / mean TTFT (B6): the ``k``-th completion (first token) comes after every
  batch that computed a block one of the first ``k`` requests hit, so the busy time before
  it counts each request's share of those blocks (B19), and the KV area counts a block held
  by several of them once.

Valid whatever the cache holds: the blocks are counted as an unbounded cache would need
them (computed once); a finite cache only adds recomputation.
"""

from __future__ import annotations

import numpy as np

from ..solve_types import Objective
from .base import BoundResult, Budget, register_bound
from .reuse_floors import ReuseFloors
from .reuse_request import reuse_request_floors
from .work import _suffix, makespan_floor, order_statistic_floor


def suffix_block_tokens(instance, order: np.ndarray) -> np.ndarray:
    """Per suffix ``order[s:]`` (requests sorted by arrival), ``b`` times the blocks listed
    only by requests of the suffix, by at least two, and by each only at a shareable
    position."""
    n = instance.n
    idx = instance.prefix_index
    if idx is None:
        return np.zeros(n)
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    req = np.repeat(np.arange(n), idx.listed)
    pos = np.arange(idx.n_listed) - idx.ptr[req]
    first = np.full(idx.n_blocks, n, np.int64)
    np.minimum.at(first, idx.block, rank[req])
    fixed = np.bincount(idx.block[pos >= idx.shareable[req]], minlength=idx.n_blocks) > 0
    # a block one request lists is its own work (ReuseFloors.hit_offset), counted there
    fixed |= np.bincount(idx.block, minlength=idx.n_blocks) < 2
    count = np.bincount(first[~fixed], minlength=n)[:n].astype(np.float64)
    return instance.limits.block_size * _suffix(count)


def reuse_makespan_floor(instance) -> float:
    """B5 with reuse: ``max_t t + busy(requests arriving at or after t)``."""
    return makespan_floor(instance, ReuseFloors.of(instance), suffix_block_tokens)


def reuse_order_statistic_floor(instance, objective: str) -> float:
    """B6 with reuse: sum over k of a floor on the k-th completion (first token)."""
    f = ReuseFloors.of(instance)
    return order_statistic_floor(instance, objective, f, f.block_tokens,
                                 reuse_request_floors(instance, objective))


@register_bound("reuse-work", "busy time of the server charging only what prefix reuse "
                "cannot save: unskippable prompt tokens, each shared block computed once, "
                "shared KV counted once (B19, B4-B6), O(n log n); valid with prefix reuse",
                rank=22, reuse_aware=True, twin_of="work")
def reuse_work_bound(instance, objective: str, budget: Budget) -> BoundResult:
    v = reuse_makespan_floor(instance) if objective == Objective.MAKESPAN else \
        reuse_order_statistic_floor(instance, objective)
    return BoundResult(v, "reuse-work", objective)
