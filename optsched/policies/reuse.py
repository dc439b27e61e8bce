"""Prefix reuse in the simulator (docs/semantics.md section 6, "Prefix reuse").

Two kinds of policy run on an instance whose requests list block ids:

* a **reuse-aware** policy (class attribute ``reuse_aware = True``: ``vllm-apc``, ``lpm``,
  ...) states hits (``Plan.hits``, tokens per entry) and drops (``Plan.drops``, dense block
  indices) itself; the simulator keeps the resident blocks in a :class:`BlockState`, applies
  the rules (evictions release, drops remove unheld resident blocks, hits hold resident
  blocks, computed tokens complete blocks, finishing releases) and refuses a plan that breaks
  one (:class:`~optsched.policies.errors.SimulationError`);
* every other policy ignores reuse: it runs exactly as without ids (its memory model,
  ``sum fp(m) <= M``, is never below the memory with shared blocks), and
  :func:`auto_drops` then adds to its schedule, at each batch, the drops of every resident
  block nobody holds after that batch's evictions. Such a policy gets no hits, and its
  schedule has the batch times it has without ids.

:class:`BlockState` also keeps the order in which blocks became unheld (``stamp``: vLLM frees
a request's blocks tail first, and a larger stamp means more recently used), which the LRU
caches of the reuse-aware policies read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..instance import Instance
from ..prefix import PrefixIndex
from ..schedule import Schedule
from .errors import SimulationError

#: the compiled walk of :func:`_auto_drops`, built on first use (numba loads only when a
#: schedule needs drops, not when the simulator is imported)
_KERNEL: dict[str, Any] = {}


def _auto_drops_kernel() -> Any:
    if "walk" not in _KERNEL:
        try:  # numba is a dependency; without it the walk runs as Python
            from numba import njit
            _KERNEL["walk"] = njit(cache=True)(_auto_drops)
        except ImportError:  # pragma: no cover - only without numba
            _KERNEL["walk"] = _auto_drops
    return _KERNEL["walk"]


class BlockState:
    """The resident blocks of a simulation and who holds them (semantics: prefix reuse)."""

    def __init__(self, index: PrefixIndex):
        K = index.n_blocks
        self.ix = index
        self.b = index.block_size
        self.resident = np.zeros(K, bool)
        self.holds = np.zeros(K, np.int64)
        #: release order: the block became unheld as the ``stamp``-th release (0: never)
        self.stamp = np.zeros(K, np.int64)
        self.clock = 0
        self.n_res = 0
        self.n_held = 0
        #: blocks that became unheld in the last batch applied, in release order
        self.released: list[int] = []

    def held(self, i: int, m: int) -> int:
        """``f(m)``: blocks request ``i`` holds with ``m`` cached tokens."""
        return min(int(self.ix.listed[i]), m // self.b)

    def private(self, i: int, m: int) -> int:
        """KV of request ``i``'s private tokens, in whole blocks (rule 4)."""
        x = m - self.b * self.held(i, m)
        return -(-x // self.b) * self.b

    def release(self, i: int, m: int) -> None:
        """Request ``i`` (``m`` cached tokens) stops holding its blocks, last block first."""
        blocks = self.ix.blocks_of(i)
        for x in blocks[:self.held(i, m)][::-1].tolist():
            self.holds[x] -= 1
            if self.holds[x] == 0:
                self.n_held -= 1
                self.clock += 1
                self.stamp[x] = self.clock
                self.released.append(x)

    def hold(self, x: int) -> None:
        if self.holds[x] == 0:
            self.n_held += 1
        self.holds[x] += 1

    def add(self, x: int) -> None:
        if not self.resident[x]:
            self.resident[x] = True
            self.n_res += 1

    def hit_run(self, i: int, m: int) -> int:
        """The longest hit request ``i`` can take now with ``m`` cached tokens: whole resident
        blocks from ``m`` (a block boundary) up to its shareable ones; 0 when ``m`` is not
        a boundary."""
        b = self.b
        if m % b:
            return 0
        blocks = self.ix.blocks_of(i)
        p, H = m // b, int(self.ix.shareable[i])
        k = p
        while k < H and self.resident[blocks[k]]:
            k += 1
        return (k - p) * b

    def apply_drops(self, drops: np.ndarray, name: str, j: int) -> None:
        """Rule 2 for a plan's drops (dense indices); a bad drop is a policy bug."""
        seen: set[int] = set()
        for x in drops.tolist():
            if not 0 <= x < self.resident.size or x in seen or not self.resident[x] \
                    or self.holds[x] > 0:
                why = ("is listed twice" if x in seen else "is not a block of the instance"
                       if not 0 <= x < self.resident.size else "is not resident"
                       if not self.resident[x] else f"is held by {int(self.holds[x])} request(s)")
                raise SimulationError(f"policy {name!r}, batch {j}: drops block "
                                      f"{self._raw(x)}, which {why}")
            seen.add(x)
            self.resident[x] = False
            self.n_res -= 1

    def apply_hit(self, i: int, m: int, h: int, name: str, j: int, rid: str) -> None:
        """Rule 3's hit of ``h`` tokens by request ``i`` at ``m`` cached tokens."""
        b = self.b
        if h % b or m % b or m + h > b * int(self.ix.shareable[i]):
            raise SimulationError(
                f"policy {name!r}, batch {j}: request {rid!r} hits {h} tokens at {m} cached "
                f"tokens: not whole blocks of {b} from a block boundary within its "
                f"{int(self.ix.shareable[i])} shareable blocks")
        blocks = self.ix.blocks_of(i)
        for p in range(m // b, (m + h) // b):
            x = int(blocks[p])
            if not self.resident[x]:
                raise SimulationError(f"policy {name!r}, batch {j}: request {rid!r} hits block "
                                      f"{self._raw(x)} (position {p}), which is not resident")
            self.hold(x)

    def complete(self, i: int, m0: int, m1: int) -> None:
        """The blocks request ``i`` completes going from ``m0`` to ``m1`` tokens join ``R``."""
        blocks = self.ix.blocks_of(i)
        for p in range(self.held(i, m0), self.held(i, m1)):
            x = int(blocks[p])
            self.add(x)
            self.hold(x)

    def _raw(self, x: int) -> str:
        return str(int(self.ix.ids[x])) if 0 <= x < self.ix.ids.size else f"#{x}"


# --- drops for a reuse-blind schedule ---------------------------------------------------------


def _auto_drops(bptr, e_req, e_tok, vptr, v_req, prompt, output, blk_ptr, blk, n_blocks, b):
    """Replay a schedule without hits (semantics section 3) and list, per batch, the resident
    blocks nobody holds after the batch's evictions (dense indices)."""
    n = prompt.size
    nb = bptr.size - 1
    S = prompt.copy()
    m = np.zeros(n, np.int64)
    g = np.zeros(n, np.int64)
    holds = np.zeros(n_blocks, np.int64)
    resident = np.zeros(n_blocks, np.bool_)
    P = blk_ptr[1:] - blk_ptr[:-1]
    out = np.zeros(blk.size + 1, np.int64)  # grows by doubling
    n_out = 0
    dptr = np.zeros(nb + 1, np.int64)
    pending = np.zeros(n, np.int64)  # requests that finished in the previous batch
    n_pend = 0
    freed = np.zeros(n_blocks, np.int64)  # candidate blocks of this batch
    for j in range(nb):
        n_free = 0
        for t in range(n_pend):
            i = pending[t]
            f = min(P[i], m[i] // b)
            for p in range(f - 1, -1, -1):
                x = blk[blk_ptr[i] + p]
                holds[x] -= 1
                if holds[x] == 0:
                    freed[n_free] = x
                    n_free += 1
            m[i] = 0
        n_pend = 0
        for k in range(vptr[j], vptr[j + 1]):
            i = v_req[k]
            f = min(P[i], m[i] // b)
            for p in range(f - 1, -1, -1):
                x = blk[blk_ptr[i] + p]
                holds[x] -= 1
                if holds[x] == 0:
                    freed[n_free] = x
                    n_free += 1
            m[i] = 0
        for t in range(n_free):
            x = freed[t]
            if holds[x] == 0 and resident[x]:
                resident[x] = False
                if n_out == out.size:
                    bigger = np.zeros(2 * out.size, np.int64)
                    bigger[:n_out] = out[:n_out]
                    out = bigger
                out[n_out] = x
                n_out += 1
        dptr[j + 1] = n_out
        for k in range(bptr[j], bptr[j + 1]):
            i = e_req[k]
            m0 = m[i]
            m1 = m0 + e_tok[k]
            f0 = min(P[i], m0 // b)
            f1 = min(P[i], m1 // b)
            for p in range(f0, f1):
                x = blk[blk_ptr[i] + p]
                resident[x] = True
                holds[x] += 1
            m[i] = m1
            if m1 == S[i]:
                g[i] += 1
                S[i] += 1
                if g[i] >= output[i]:
                    pending[n_pend] = i
                    n_pend += 1
    return dptr, out[:n_out]


def auto_drops(instance: Instance, schedule: Schedule) -> Schedule:
    """``schedule`` (a reuse-blind policy's, without hits) with the drops of every resident
    block nobody holds after each batch's evictions (module docstring)."""
    ix = instance.prefix_index
    if ix is None or schedule.has_hits:
        return schedule
    pos = instance.index
    idmap = np.array([pos[r] for r in schedule.ids], np.int64) if schedule.ids != instance.ids \
        else np.arange(len(schedule.ids), dtype=np.int64)
    from ..runtime.numba_load import call  # lazy: numba loads only when a schedule needs drops

    dptr, dense = call(_auto_drops_kernel(), schedule.batch_ptr, idmap[schedule.entry_req],
                       schedule.entry_tokens, schedule.evict_ptr, idmap[schedule.evict_req],
                       instance.prompt, instance.output, ix.ptr, ix.block, ix.n_blocks,
                       ix.block_size)
    if not dense.size:
        return schedule
    return Schedule(schedule.ids, schedule.batch_ptr, schedule.entry_req, schedule.entry_tokens,
                    schedule.evict_ptr, schedule.evict_req, schedule.start,
                    schedule.swap_out_ptr, schedule.swap_out_req, schedule.swap_out_tokens,
                    schedule.swap_in_ptr, schedule.swap_in_req, schedule.entry_hidden,
                    entry_hit=schedule.entry_hit, drop_ptr=dptr, drop_block=ix.ids[dense])


__all__ = ["BlockState", "auto_drops"]
