"""(H23) Future-feasibility cuts on the hindsight model's LP (``formulations/hindsight.md``).

Every start column ``x[u, t]`` (H1) occupies slots ``t .. t + O_u - 1``; in slot ``tau`` it is
an *item* of type ``(I_u + tau - t, O_u - tau + t)`` (:mod:`.future`). The LP solution gives
each slot its type loads ``y_tau`` (the sum of ``x`` over the slot's items of each type). A cut
is a weight per type with the most an FF multiset weighs, ``rho`` (H23c); the same weights make
a valid row in every slot:

    sum_{items (u, t) of slot tau} w(type) x[u, t] <= rho.

:class:`CutLoop` separates them round by round: first the pool (every cut found so far, in
every slot, most violated first), then, in the slots the pool leaves feasible and a greedy FF
cover does not already cover, the exact cover LP (:func:`.future.cover_cg`); a slot whose loads
need more than one FF multiset gives the dual weights, lifted to every type of the model
(:func:`.future.ff_lift`), ``rho`` recomputed by :func:`.future.ff_best`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .future import cover_cg, ff_best, ff_lift, greedy_cover

#: a cut must be violated by this much (relative to its right-hand side) to be added
VIOLATION = 1e-4
#: multisets remembered per slot for the next rounds' cover LPs
MEMORY = 200
#: loads below this are zero
_TINY = 1e-9


@dataclass(frozen=True, eq=False)
class SlotItems:
    """The items of a set of start columns (H23): per item its column, slot and type, sorted by
    slot (``ptr[tau]:ptr[tau + 1]`` are slot ``tau``'s); the types sorted by ``r`` descending
    (``tm``, ``tr``), an item's type an index into them."""

    col: np.ndarray
    slot: np.ndarray
    type: np.ndarray
    ptr: np.ndarray
    tm: np.ndarray
    tr: np.ndarray

    def __post_init__(self) -> None:
        if not (self.col.size == self.slot.size == self.type.size):
            raise ValueError("items: col, slot and type differ in length")
        if np.any(np.diff(self.tr) > 0):
            raise ValueError("items: types must be sorted by remaining slots, descending")

    @property
    def slots(self) -> int:
        return int(self.ptr.size - 1)

    @classmethod
    def of_columns(cls, start: np.ndarray, prompt: np.ndarray, output: np.ndarray
                   ) -> SlotItems:
        """Items of columns starting at ``start`` with per-column ``prompt`` ``I`` and
        ``output`` ``O`` (column ``k`` is item ``(I_k + a, O_k - a)`` in slot ``start_k + a``)."""
        start = np.asarray(start, np.int64)
        prompt = np.asarray(prompt, np.int64)
        output = np.asarray(output, np.int64)
        col = np.repeat(np.arange(start.size), output)
        age = np.arange(col.size) - np.repeat(np.cumsum(output) - output, output)
        slot = start[col] + age
        m = prompt[col] + age
        r = output[col] - age
        big = int(m.max(initial=0)) + 1
        rmax = int(r.max(initial=0))
        ukey, typ = np.unique((rmax - r) * big + m, return_inverse=True)  # r descending
        tm, tr = ukey % big, rmax - ukey // big
        order = np.argsort(slot, kind="stable")
        horizon = int(slot.max(initial=-1)) + 1
        ptr = np.searchsorted(slot[order], np.arange(horizon + 1))
        return cls(col[order], slot[order], typ[order], ptr, tm, tr)

    def loads(self, x: np.ndarray) -> np.ndarray:
        """``y[tau, type]``: the LP's load of each type in each slot."""
        xv = np.asarray(x, float)[self.col]
        nz = np.flatnonzero(xv > _TINY)
        y = np.zeros((self.slots, self.tm.size))
        np.add.at(y, (self.slot[nz], self.type[nz]), xv[nz])
        return y

    def row(self, weights: np.ndarray, tau: int) -> tuple[np.ndarray, np.ndarray]:
        """Columns and coefficients of a cut's row in slot ``tau`` (positive weights only;
        columns repeat when a column holds two items of the slot, which cannot happen)."""
        a, b = self.ptr[tau], self.ptr[tau + 1]
        coef = weights[self.type[a:b]]
        nz = coef > 0
        return self.col[a:b][nz], coef[nz]


@dataclass
class CutPool:
    """Cuts found so far: weights per type (rows of ``w``), their ``rho``, and the slots each is
    already a row in."""

    types: int
    w: np.ndarray = field(init=False)
    rho: np.ndarray = field(init=False)
    used: list[set[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.w = np.zeros((0, self.types))
        self.rho = np.zeros(0)

    def __len__(self) -> int:
        return int(self.rho.size)

    def add(self, w: np.ndarray, rho: float) -> int:
        self.w = np.vstack([self.w, w[None, :]])
        self.rho = np.append(self.rho, rho)
        self.used.append(set())
        return len(self) - 1


@dataclass
class RoundStats:
    """What one separation round did."""

    rows: int = 0  # rows added
    from_pool: int = 0  # of them, cuts already in the pool
    new_cuts: int = 0  # cuts found by the cover LP
    cover_lps: int = 0  # slots that needed the cover LP
    max_cover: float = 0.0  # the largest cover number found (> 1 when violated)


class CutLoop:
    """Separation of (H23) cuts for the LP over ``items``' columns, memory ``M``."""

    def __init__(self, items: SlotItems, M: int, per_slot: int = 2, max_rows: int = 400):
        self.items = items
        self.M = int(M)
        self.per_slot = per_slot
        self.max_rows = max_rows
        self.pool = CutPool(items.tm.size)
        #: per slot, FF multisets the cover LP priced in before (type indices, copies)
        self.memory: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    def separate(self, x: np.ndarray, deadline: float | None = None
                 ) -> tuple[list[tuple[np.ndarray, np.ndarray, float]], RoundStats]:
        """Rows ``(columns, coefficients, rho)`` violated by the LP solution ``x``; at the
        ``deadline`` (``time.perf_counter()``) the rows found so far."""
        it = self.items
        y = it.loads(x)
        stats = RoundStats()
        rows: list[tuple[np.ndarray, np.ndarray, float]] = []
        viol = self._pool_violations(y)
        for tau in range(it.slots):
            if deadline is not None and time.perf_counter() >= deadline:
                break
            if viol is not None and self._from_pool(viol[tau], tau, rows, stats):
                continue
            cut = self._cover_cut(y[tau], stats, tau)
            if cut is not None:
                k = self.pool.add(*cut)
                self.pool.used[k].add(tau)
                cols, coef = it.row(cut[0], tau)
                rows.append((cols, coef, cut[1]))
                stats.rows += 1
                stats.new_cuts += 1
        return rows, stats

    def _recall(self, tau: int, st: np.ndarray) -> np.ndarray:
        """The multisets remembered for slot ``tau``, restricted to the types ``st`` (a part of
        an FF multiset is FF)."""
        rows = []
        pos = np.full(self.items.tm.size, -1)
        pos[st] = np.arange(st.size)
        for types, copies in self.memory.get(tau, ()):
            p = pos[types]
            keep = p >= 0
            if keep.sum() >= 2:
                row = np.zeros(st.size, np.int64)
                row[p[keep]] = copies[keep]
                rows.append(row)
        return np.array(rows, np.int64).reshape(-1, st.size)

    def _remember(self, tau: int, st: np.ndarray, gen: np.ndarray) -> None:
        mem = self.memory.setdefault(tau, [])
        for row in gen:
            nz = np.flatnonzero(row)
            mem.append((st[nz], row[nz]))
        del mem[:-MEMORY]

    def _pool_violations(self, y: np.ndarray) -> np.ndarray | None:
        if not len(self.pool):
            return None
        return y @ self.pool.w.T - self.pool.rho[None, :] * (1 + VIOLATION)

    def _from_pool(self, viol: np.ndarray, tau: int, rows: list, stats: RoundStats) -> bool:
        """Add up to ``per_slot`` violated pool cuts as rows of slot ``tau``; True if any."""
        added = 0
        for k in np.argsort(-viol):
            if viol[k] <= 0 or added >= self.per_slot:
                break
            if tau in self.pool.used[k]:
                continue
            self.pool.used[k].add(int(tau))
            cols, coef = self.items.row(self.pool.w[k], tau)
            rows.append((cols, coef, float(self.pool.rho[k])))
            added += 1
        stats.rows += added
        stats.from_pool += added
        return added > 0

    def _cover_cut(self, y: np.ndarray, stats: RoundStats, tau: int
                   ) -> tuple[np.ndarray, float] | None:
        """(H23c) the cut of one slot's loads, or None when FF multisets cover them once."""
        it = self.items
        st = np.flatnonzero(y > _TINY)  # ascending = sorted by r descending
        if st.size < 2:
            return None
        tm, tr, ys = it.tm[st], it.tr[st], y[st]
        configs, total = greedy_cover(tm, tr, ys, self.M, 64)
        if total <= 1 + _TINY:
            return None
        init = np.vstack([np.eye(st.size, dtype=np.int64), configs, self._recall(tau, st)])
        val, w_st, _, gen = cover_cg(tm, tr, ys, self.M, init, self.max_rows, 0.5)
        self._remember(tau, st, gen)
        stats.cover_lps += 1
        if val <= 1 + VIOLATION:
            return None
        stats.max_cover = max(stats.max_cover, float(val))
        w = np.zeros(it.tm.size)
        w[st] = w_st
        rho = max(1.0, float(ff_best(it.tm, it.tr, w, self.M, -1)))
        w = ff_lift(it.tm, it.tr, w, self.M, rho)
        rho = max(rho, float(ff_best(it.tm, it.tr, w, self.M, -1)))
        if float(w @ y) <= rho * (1 + VIOLATION):
            return None
        return w, rho


__all__ = ["CutLoop", "CutPool", "RoundStats", "SlotItems", "VIOLATION"]
