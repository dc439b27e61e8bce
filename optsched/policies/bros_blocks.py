"""BROS's bidirectional KV block table (paper 003, section 5), used by ``bros`` and ``bros-rr``.

Blocks of ``size`` slots (the last block may be smaller, see :meth:`for_capacity`); per block
at most one RT owner filling slots from the left and one BE owner filling from the right
(``-1`` = none); per request its blocks in allocation order. ``shared=False`` gives one
owner per block (``bros-rr``; and ``bros`` on instances whose engine pages KV in blocks).

**Host reservation.** A lazy checkpoint moves only the overwritten BE slots to the host,
but the table reserves host room for the *whole* KV of every request with a checkpoint
(``kv_of(j)`` tokens, once per request). Invariant: ``sum of m_j over checkpointed j <=
host capacity``. It guarantees that the GPU part of any checkpointed request can always
be swapped out too -- such a request can neither be evicted nor processed (semantics
section 6, rule 3), so without the reservation a full host could pin its GPU slots
forever (the progress argument of :mod:`optsched.policies.bros` relies on it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class BidirectionalBlocks:
    """The block table; every change inside one iteration is undoable (:meth:`snapshot`,
    :meth:`restore`)."""

    def __init__(self, n_blocks: int, size: int, shared: bool = True, last_slots: int = 0):
        self.size, self.shared = size, shared
        #: slots of each block: ``size``, except a smaller last block when ``last_slots``
        self.slots = np.full(n_blocks, size, np.int64)
        if last_slots:
            self.slots[-1] = last_slots
        self.rt_owner = np.full(n_blocks, -1, np.int64)
        self.be_owner = np.full(n_blocks, -1, np.int64)
        self.rt_n = np.zeros(n_blocks, np.int64)
        self.be_n = np.zeros(n_blocks, np.int64)
        self.blocks: dict[int, list[int]] = {}
        self._undo: list = []
        #: host tokens not reserved (set by the policy each iteration; see the module docstring)
        self.host_free = 0
        #: requests whose whole KV is reserved on the host (they hold a checkpoint)
        self.reserved: set[int] = set()
        #: a request's cached tokens (GPU plus host): what a first checkpoint reserves
        self.kv_of: Callable[[int], int] = self.held
        #: preemption table: block -> (RT request, BE request) whose slots were overwritten
        self.preempted: dict[int, tuple[int, int]] = {}

    @classmethod
    def for_capacity(cls, capacity: int, size: int, shared: bool = True) -> BidirectionalBlocks:
        """Blocks of ``size`` slots holding exactly ``capacity`` tokens: ``capacity // size``
        whole blocks and, when ``size`` does not divide it, one last block of the remainder
        (so the table never holds less than the instance's ``M``)."""
        n, rem = divmod(capacity, size)
        return cls(n + (rem > 0), size, shared, last_slots=rem)

    @property
    def capacity(self) -> int:
        return int(self.slots.sum())

    def free_in(self, b: int) -> int:
        return int(self.slots[b]) - int(self.rt_n[b]) - int(self.be_n[b])

    def free_total(self) -> int:
        return int((self.slots - self.rt_n - self.be_n).sum())

    def held(self, i: int) -> int:
        return sum(int(self.rt_n[b] if self.rt_owner[b] == i else self.be_n[b])
                   for b in self.blocks.get(i, ()))

    def snapshot(self) -> int:
        """A mark in the undo log; :meth:`restore` rolls every change after it back."""
        return len(self._undo)

    def restore(self, mark: int) -> None:
        while len(self._undo) > mark:
            self._undo.pop()()

    def _set(self, arr: np.ndarray, b: int, value: int) -> None:
        old = int(arr[b])
        arr[b] = value
        self._undo.append(lambda: arr.__setitem__(b, old))

    def _link(self, i: int, b: int) -> None:
        lst = self.blocks.setdefault(i, [])
        lst.append(b)
        self._undo.append(lambda: lst.remove(b))

    def _unlink(self, i: int, b: int) -> None:
        lst = self.blocks[i]
        k = lst.index(b)
        lst.pop(k)
        self._undo.append(lambda: lst.insert(k, b))

    def _reserve(self, j: int) -> bool:
        """Reserve host room for request ``j``'s whole KV (once); False when it does not fit."""
        if j in self.reserved:
            return True
        need = self.kv_of(j)
        if need > self.host_free:
            return False
        old = self.host_free
        self.host_free -= need
        self.reserved.add(j)

        def undo():
            self.host_free = old
            self.reserved.discard(j)

        self._undo.append(undo)
        return True

    def _take(self, i: int, b: int, k: int, rt: bool) -> int:
        t = min(k, self.free_in(b))
        if t <= 0:
            return 0
        owner, count = (self.rt_owner, self.rt_n) if rt else (self.be_owner, self.be_n)
        if owner[b] != i:
            self._set(owner, b, i)
            self._link(i, b)
        self._set(count, b, int(count[b]) + t)
        return t

    def room(self, i: int, rt: bool) -> int:
        """Free slots request ``i`` could take without overwriting anyone."""
        own = self.rt_owner if rt else self.be_owner
        usable = (own == -1) | (own == i)
        return int((self.slots[usable] - self.rt_n[usable] - self.be_n[usable]).sum())

    def _take_empty(self, i: int, k: int, rt: bool) -> int:
        """Whole empty blocks (in index order) for up to ``k`` slots, in one step."""
        empty = np.flatnonzero((self.rt_owner == -1) & (self.be_owner == -1))
        if empty.size == 0 or k <= 0:
            return 0
        cum = np.cumsum(self.slots[empty])
        nb = min(empty.size, int(np.searchsorted(cum, k)) + 1)
        bl = empty[:nb]
        counts = self.slots[bl].copy()
        counts[-1] -= max(0, int(cum[nb - 1]) - k)
        owner, count = (self.rt_owner, self.rt_n) if rt else (self.be_owner, self.be_n)
        lst = self.blocks.setdefault(i, [])
        owner[bl] = i
        count[bl] = counts
        lst.extend(bl.tolist())

        def undo(bl=bl, owner=owner, count=count, lst=lst, nb=nb):
            owner[bl] = -1
            count[bl] = 0
            del lst[-nb:]

        self._undo.append(undo)
        return int(counts.sum())

    def grow(self, i: int, k: int, rt: bool, protected: set[int]) -> list[tuple[int, int]] | None:
        """``k`` more slots for request ``i``; returns the BE slots overwritten (``(BE request,
        tokens)``, RT only) or None when the slots cannot be found (the table is unchanged).

        Order: free slots in ``i``'s own blocks (the last first), whole empty blocks, then
        (shared tables) FindPreemptBlock -- blocks of another side with the most empty
        slots -- and, for an RT request, lazy checkpointing (:meth:`_overwrite`): overwriting
        BE slots of unprotected requests, host reservation permitting."""
        snap = self.snapshot()
        overwritten: dict[int, int] = {}
        own = self.rt_owner if rt else self.be_owner
        other = self.be_owner if rt else self.rt_owner
        for blk in reversed(self.blocks.get(i, [])):
            if k <= 0:
                break
            if own[blk] == i:
                k -= self._take(i, blk, k, rt)
        if k > 0:
            k -= self._take_empty(i, k, rt)
        if k > 0 and self.shared:  # FindPreemptBlock: shared blocks, most empty slots first
            cand = np.flatnonzero((own == -1) & (other >= 0))
            free = self.slots[cand] - self.rt_n[cand] - self.be_n[cand]
            for blk in cand[np.argsort(-free, kind="stable")][: int((free > 0).sum())].tolist():
                k -= self._take(i, blk, k, rt)
                if k <= 0:
                    break
            if k > 0 and rt:
                k = self._overwrite(i, k, protected, overwritten)
        if k > 0:
            self.restore(snap)
            return None
        return list(overwritten.items())

    def _overwrite(self, i: int, k: int, protected: set[int], overwritten: dict[int, int]) -> int:
        """Lazy checkpointing: RT request ``i`` takes BE slots -- first its peer's in the blocks
        it already shares (section 5.2: the KV "about to be overwritten by its peer"), then
        the fullest BE-only blocks; only the overwritten tokens are recorded (to be
        checkpointed). Returns the slots still missing."""
        cand = np.flatnonzero(((self.rt_owner == -1) | (self.rt_owner == i))
                              & (self.be_owner >= 0) & (self.be_n > 0))
        cand = cand[np.lexsort((-self.be_n[cand], self.rt_owner[cand] != i))]
        for blk in cand.tolist():
            j = int(self.be_owner[blk])
            if j in protected or not self._reserve(j):
                continue
            t = min(k, int(self.be_n[blk]))
            self._set(self.be_n, blk, int(self.be_n[blk]) - t)
            overwritten[j] = overwritten.get(j, 0) + t
            old = self.preempted.get(blk)
            self.preempted[blk] = (i, j)
            self._undo.append(lambda blk=blk, old=old: (
                self.preempted.__setitem__(blk, old) if old else self.preempted.pop(blk, None)))
            if self.be_n[blk] == 0:
                self._set(self.be_owner, blk, -1)
                self._unlink(j, blk)
            k -= self._take(i, blk, k, True)
            if k <= 0:
                break
        return k

    def drop(self, i: int) -> None:
        """Free request ``i``'s slots within an iteration, undoably (:meth:`restore`): the
        progressive drop of section 5.2 frees a victim's blocks and may be rolled back when
        the RT request it made room for does not fit the iteration after all."""
        for b in list(self.blocks.get(i, ())):
            if self.rt_owner[b] == i:
                self._set(self.rt_owner, b, -1)
                self._set(self.rt_n, b, 0)
            if self.be_owner[b] == i:
                self._set(self.be_owner, b, -1)
                self._set(self.be_n, b, 0)
            old = self.preempted.pop(b, None)
            if old is not None:
                self._undo.append(lambda b=b, old=old: self.preempted.__setitem__(b, old))
            self._unlink(i, b)

    def release(self, i: int) -> None:
        """Free request ``i``'s slots (finished, evicted or swapped out whole); not undoable:
        call it between iterations only (it clears the undo log)."""
        self._undo.clear()
        for b in self.blocks.pop(i, ()):
            if self.rt_owner[b] == i:
                self.rt_owner[b], self.rt_n[b] = -1, 0
            if self.be_owner[b] == i:
                self.be_owner[b], self.be_n[b] = -1, 0
            self.preempted.pop(b, None)


__all__ = ["BidirectionalBlocks"]
