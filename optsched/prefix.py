"""Prefix reuse: the KV block ids of an instance's prompts (docs/semantics.md section 6,
"Prefix reuse").

A request may list the ids of its prompt's first full blocks (``Request.prefix``). This
module holds what every consumer needs of them, computed once per instance and cached on it
(:attr:`optsched.instance.Instance.prefix_index`):

* the ids as a CSR table of *dense* block indices (``0 .. K-1``, ``ids[k]`` the original
  id), so kernels and the evaluator index arrays instead of dictionaries;
* per request the listed blocks ``P`` and the shareable ones ``H = min(P, floor((I-1)/b))``
  (a prefill computes at least the last prompt token, so at most ``H*b`` tokens are hits);
* :meth:`PrefixIndex.held`, the blocks a request with ``m`` cached tokens holds,
  ``f(m) = min(P, floor(m / b))``;
* the loading checks (:func:`check_prefixes`): ids in range, at most ``floor(I/b)`` of
  them, and the forest rule (one position and one parent per id);
* the reuse potential of an unbounded cache (:func:`reuse_potential`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InstanceError

#: block ids are integers in ``0 .. MAX_BLOCK_ID - 1`` (they fit int64 with room to spare)
MAX_BLOCK_ID = 2**62


@dataclass(frozen=True, eq=False)
class PrefixIndex:
    """The listed blocks of every request of an instance, as dense indices.

    Request ``i`` lists ``block[ptr[i]:ptr[i+1]]`` (dense indices, position order); dense
    index ``k`` is the original id ``ids[k]`` (``ids`` sorted ascending)."""

    ptr: np.ndarray
    block: np.ndarray
    ids: np.ndarray
    listed: np.ndarray  # P per request
    shareable: np.ndarray  # H per request
    block_size: int

    @property
    def n_blocks(self) -> int:
        """Distinct block ids of the instance (``K``)."""
        return int(self.ids.size)

    @property
    def n_listed(self) -> int:
        """Block ids listed over all requests (with repeats)."""
        return int(self.block.size)

    def held(self, req: np.ndarray | int, m: np.ndarray | int) -> np.ndarray:
        """``f(m) = min(P, floor(m / b))``: blocks held by request(s) ``req`` with ``m`` cached
        tokens (elementwise)."""
        return np.minimum(self.listed[req], np.asarray(m) // self.block_size)

    def blocks_of(self, i: int) -> np.ndarray:
        """Request ``i``'s listed blocks (dense indices, position order)."""
        return self.block[self.ptr[i]:self.ptr[i + 1]]

    def dense(self, block_ids: np.ndarray) -> np.ndarray:
        """Dense indices of original ``block_ids`` (-1 where the instance lists no such id)."""
        a = np.asarray(block_ids, dtype=np.int64)
        if not self.ids.size:
            return np.full(a.shape, -1, np.int64)
        k = np.searchsorted(self.ids, a)
        kc = np.minimum(k, self.ids.size - 1)
        return np.where(self.ids[kc] == a, kc, -1).astype(np.int64)


def build_index(prefixes: Sequence[Sequence[int]] | tuple[np.ndarray, np.ndarray],
                prompt: np.ndarray, block_size: int) -> PrefixIndex:
    """The :class:`PrefixIndex` of per-request id lists (or a CSR pair ``(ptr, flat ids)``);
    no checks (see :func:`check_prefixes`)."""
    if isinstance(prefixes, tuple) and len(prefixes) == 2 and isinstance(prefixes[0], np.ndarray):
        ptr, flat = prefixes
    else:
        lens = np.fromiter((len(p) for p in prefixes), np.int64, count=len(prefixes))
        ptr = np.zeros(lens.size + 1, np.int64)
        np.cumsum(lens, out=ptr[1:])
        flat = np.fromiter((x for p in prefixes for x in p), np.int64, count=int(ptr[-1]))
    ids, dense = np.unique(flat, return_inverse=True)
    listed = np.diff(ptr)
    shareable = np.minimum(listed, (np.asarray(prompt, np.int64) - 1) // block_size)
    for a in (ptr, dense, ids, listed, shareable):
        a.setflags(write=False)
    return PrefixIndex(ptr, dense.astype(np.int64), ids.astype(np.int64), listed, shareable,
                       block_size)


def check_prefixes(request_ids: Sequence[str], prompt: np.ndarray, ptr: np.ndarray,
                   flat: np.ndarray, block_size: int) -> None:
    """The loading checks of docs/semantics.md section 6, "Prefix reuse", on a CSR table of
    ids (``flat[ptr[i]:ptr[i+1]]`` are request ``i``'s): at most ``floor(I / b)`` ids, each
    an integer in ``0 .. 2^62 - 1``, and one position and one parent per id wherever it
    appears. Raises :class:`InstanceError` naming the request and the block (the first bad
    one in request order)."""
    n = len(request_ids)
    if not n or not ptr[-1]:
        return
    lens = np.diff(ptr)
    full = np.asarray(prompt, np.int64) // block_size
    over = np.flatnonzero(lens > full)
    if over.size:
        i = int(over[0])
        raise InstanceError(
            f"request {request_ids[i]!r}: field 'prefix' lists {int(lens[i])} block ids but the "
            f"prompt of {int(prompt[i])} tokens has {int(full[i])} full blocks of block_size "
            f"{block_size} (only full blocks carry ids)")
    bad = np.flatnonzero((flat < 0) | (flat >= MAX_BLOCK_ID))
    if bad.size:
        k = int(bad[0])
        i = int(np.searchsorted(ptr, k, side="right") - 1)
        raise InstanceError(f"request {request_ids[i]!r}: field 'prefix': block id {int(flat[k])} "
                            f"at position {k - int(ptr[i])} is not in 0..2^62-1")
    _check_forest(request_ids, ptr, flat)


def forest_clash(ptr: np.ndarray, flat: np.ndarray) -> tuple[int, int, int, str] | None:
    """The first id (in row order) that breaks the forest rule of a CSR table of ids (one
    position and one parent per id), as ``(row, id, earlier row, why)``; None if none does."""
    req = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    pos = np.arange(flat.size) - ptr[req]
    parent = np.where(pos > 0, np.concatenate([[-1], flat[:-1]]), -1)
    order = np.argsort(flat, kind="stable")
    f, p, q = flat[order], pos[order], parent[order]
    head = np.ones(f.size, bool)
    head[1:] = f[1:] != f[:-1]
    first = np.maximum.accumulate(np.where(head, np.arange(f.size), 0))
    clash = ~head & ((p != p[first]) | (q != q[first]))
    if not clash.any():
        return None
    k = int(order[np.flatnonzero(clash)].min())  # the first clash in row order
    j = int(order[first[np.flatnonzero(order == k)[0]]])  # the id's first occurrence
    if pos[k] != pos[j]:
        why = f"at position {int(pos[k])} but at position {int(pos[j])}"
    else:
        why = f"after {int(parent[k])} but after {int(parent[j])}"
    return int(req[k]), int(flat[k]), int(req[j]), why


def _check_forest(request_ids: Sequence[str], ptr: np.ndarray, flat: np.ndarray) -> None:
    """Every id has one position and one parent (the previous id; none at position 0)."""
    clash = forest_clash(ptr, flat)
    if clash is None:
        return
    i, x, i0, why = clash
    why = why.replace("after ", "after block ")
    raise InstanceError(
        f"request {request_ids[i]!r}: field 'prefix' is not prefix-consistent: block {x} "
        f"appears {why} in request {request_ids[i0]!r} (an id names the same tokens at the "
        "same position after the same blocks)")


def reuse_potential(index: PrefixIndex, arrival: np.ndarray, prompt: np.ndarray
                    ) -> dict[str, int | float]:
    """What an unbounded cache could give (docs/semantics.md section 6, "Prefix reuse",
    metrics): serving the requests in arrival order (ties: instance order), each hits every
    shareable block an earlier request listed. By the forest rule those blocks are a leading
    run, so the hit is ``b`` times their count. Returns the distinct blocks, the listed ones,
    the hit tokens and their share of all prompt tokens."""
    n = prompt.size
    b = index.block_size
    order = np.lexsort((np.arange(n), arrival))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    req = np.repeat(np.arange(n), index.listed)
    # the earliest (in arrival order) request that lists each block
    first = np.full(index.n_blocks, n, np.int64)
    np.minimum.at(first, index.block, rank[req])
    pos = np.arange(index.n_listed) - index.ptr[req]
    hit = (pos < index.shareable[req]) & (first[index.block] < rank[req])
    hits = int(hit.sum()) * b
    total = int(np.asarray(prompt).sum())
    return {"distinct_blocks": index.n_blocks, "listed_blocks": index.n_listed,
            "hit_tokens": hits, "prompt_tokens": total,
            "hit_share": hits / total if total else 0.0}


__all__ = ["MAX_BLOCK_ID", "PrefixIndex", "build_index", "check_prefixes", "forest_clash",
           "reuse_potential"]
