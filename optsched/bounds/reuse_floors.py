"""Per-request floors that stay valid with prefix reuse (``formulations/bounds.md`` B19,
``docs/semantics.md`` section 6, "Prefix reuse").

A request ``i`` lists ``P`` blocks of ``b`` tokens, the first ``H`` of them shareable, so a
hit skips at most ``L = H*b <= I - 1`` prompt tokens and only tokens before position ``L``.
Whatever the cache holds (an unbounded one included), in ANY feasible schedule:

* before its first token ``i`` computes every prompt position ``L' .. I-1`` at least once,
  ``L' <= L`` the leading shareable blocks another request lists too (a block only ``i``
  lists is resident only if ``i`` computed it): ``u = I - L' >= 1`` tokens, each seeing at
  least its position's tokens before it (F1, F4, F5 with ``u`` computed tokens from offset
  ``L'``); a refill between tokens computes positions ``L .. S-1`` (it may hit ``i``'s own
  cached blocks);
* ``i``'s *private* KV (semantics rule 4) after the batch generating token ``g`` is
  ``fp(I + g - 1 - P*b)``; its ``P`` listed blocks are resident then too, but count once
  however many requests hold them: request ``i`` is charged ``b * sum_x 1/n_x`` of them
  (``n_x`` the requests listing ``x``), which over any set of requests is at most the
  distinct blocks it holds (F3 with sharing);
* a block ``x`` listed by ``n_x >= 2`` requests, only at shareable positions, must be
  computed once, by one of them, before any of them hits it: each is charged ``b / n_x``
  computed tokens.
  This share is *not* the request's own work: it bounds the work of all batches before the
  request's first token (B19's order statistics), never one request's own time;
* the per-batch entry count loses its memory cap: requests that share blocks can hold less
  than one private KV slot each.

The cost model is priced with ``kpm`` lowered to ``min(kpm, 2 kpq)`` (every entry costs no
more, so the floors stay floors) so that the chunk price is convex in the computed part
(B19: a chunk straddling the hit boundary costs at least its part after it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .floors import Floors, block_area


@dataclass(frozen=True, eq=False)
class ReuseFloors(Floors):
    """Floors F1-F5 of an instance with prefix block ids, charging only what reuse cannot
    save (B19). Without ids they are F1-F5 with ``kpm`` at most ``2 kpq`` and no memory
    cap on the entries of a batch."""

    @cached_property
    def k(self) -> dict[str, float]:
        k = dict(super().k)
        k["kpm"] = min(k["kpm"], 2.0 * k["kpq"])
        return k

    @cached_property
    def listed(self) -> np.ndarray:
        """``P`` per request (0 without ids)."""
        idx = self.instance.prefix_index
        return np.zeros(self.instance.n, np.int64) if idx is None else np.asarray(idx.listed)

    @cached_property
    def refill_offset(self) -> np.ndarray:
        """``L = H*b``: the most prompt tokens a hit can skip (a refill may hit blocks the
        request computed itself before its eviction)."""
        idx = self.instance.prefix_index
        if idx is None:
            return np.zeros(self.instance.n, np.int64)
        return np.asarray(idx.shareable, np.int64) * self.instance.limits.block_size

    @cached_property
    def _listing(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per listed block: its request, its position, whether it is shareable there, and
        ``n_x`` (the requests listing it)."""
        idx = self.instance.prefix_index
        assert idx is not None
        req = np.repeat(np.arange(self.instance.n), idx.listed)
        pos = np.arange(idx.n_listed) - idx.ptr[req]
        n_x = np.bincount(idx.block, minlength=idx.n_blocks)[idx.block]
        return req, pos, pos < idx.shareable[req], n_x

    @cached_property
    def hit_offset(self) -> np.ndarray:
        """``L' = b *`` the leading shareable blocks that another request lists too: before
        its first token the request computes every position from ``L'`` on at least once
        itself (a block only it lists is resident only if it computed it, in this pass or an
        earlier one). ``L' <= L``."""
        idx = self.instance.prefix_index
        if idx is None:
            return np.zeros(self.instance.n, np.int64)
        req, pos, shareable, n_x = self._listing
        first_own = np.asarray(idx.shareable, np.int64).copy()
        own = shareable & (n_x == 1)
        np.minimum.at(first_own, req[own], pos[own])
        return first_own * self.instance.limits.block_size

    @cached_property
    def computed_prompt(self) -> np.ndarray:
        """``u = I - L'``: prompt tokens the request computes itself before its first token."""
        return self.instance.prompt - self.hit_offset

    @cached_property
    def max_entries(self) -> int:
        lim = self.instance.limits
        cap = lim.max_batch_tokens
        return min(cap, lim.max_batch_size) if lim.max_batch_size is not None else cap

    @cached_property
    def tokens(self) -> np.ndarray:  # F2: the request's own computed tokens
        return self.computed_prompt + self.instance.output - 1

    @cached_property
    def _block_shares(self) -> tuple[np.ndarray, np.ndarray]:
        """Per request ``sum_x 1/n_x`` over its listed blocks (held share) and over its
        shareable blocks that no request lists at a non-shareable position (compute share)."""
        inst = self.instance
        idx = inst.prefix_index
        if idx is None:
            return np.zeros(inst.n), np.zeros(inst.n)
        req, pos, shareable, n_x = self._listing
        fixed = np.bincount(idx.block[~shareable], minlength=idx.n_blocks) > 0
        w = 1.0 / n_x
        held = np.bincount(req, weights=w, minlength=inst.n)
        # a block only one request lists is that request's own work (``hit_offset``)
        counted = shareable & ~fixed[idx.block] & (n_x >= 2) & (pos * inst.limits.block_size
                                                                 < self.hit_offset[req])
        comp = np.bincount(req, weights=np.where(counted, w, 0.0), minlength=inst.n)
        return held, comp

    @cached_property
    def block_tokens(self) -> np.ndarray:
        """``b * sum_x 1/n_x`` over the shareable-only blocks ``i`` lists: its share of the
        tokens some lister must compute before ``i``'s first token."""
        return self.instance.limits.block_size * self._block_shares[1]

    @cached_property
    def area(self) -> np.ndarray:  # F3 with sharing
        inst = self.instance
        b = inst.limits.block_size
        lo = inst.prompt - b * self.listed
        private = block_area(lo, lo + inst.output - 1, b).astype(np.float64)
        return private + b * inst.output * self._block_shares[0]

    @cached_property
    def prefill_area(self) -> np.ndarray:
        """KV charged to ``i`` after the batch generating its first token (F3 with sharing)."""
        inst = self.instance
        b = inst.limits.block_size
        private = inst.limits.kv_footprint(inst.prompt - b * self.listed).astype(np.float64)
        return private + b * self._block_shares[0]


__all__ = ["ReuseFloors"]
