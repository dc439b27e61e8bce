"""The batch-slot MILP with prefix reuse (``formulations/reuse-milp.md``): per slot the
entries, evictions and computed tokens of every request, the blocks it holds, the hits it
takes and the resident set ``r`` of every distinct block, under unit time.

:func:`build` makes the model, :func:`decode` turns a solution into a :class:`Schedule`
with hits and drops that :func:`optsched.evaluate` replays (the drops of slot ``j`` are the
blocks with ``r[x, j-1] = 1`` and ``r[x, j] = 0``, docs/semantics.md section 6, "In
equations")."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import milp
from ...instance import Instance
from ...prefix import PrefixIndex
from ...schedule import Schedule


@dataclass
class Rows:
    """Rows gathered per group name and added to the model once each (R-rows)."""

    rows: dict[str, list[tuple[list[int], list[float], float | None, float | None]]] = field(
        default_factory=lambda: defaultdict(list))

    def add(self, name: str, cols: Sequence[Any], coefs: Sequence[float],
            lo: float | None = None, hi: float | None = None) -> None:
        self.rows[name].append(([int(c) for c in cols], [float(x) for x in coefs], lo, hi))

    def flush(self, m: milp.Model) -> None:
        for name, rs in self.rows.items():
            r_ids = np.concatenate([np.full(len(c), k) for k, (c, _, _, _) in enumerate(rs)])
            cols = np.concatenate([np.asarray(c, np.int64) for c, _, _, _ in rs])
            coefs = np.concatenate([np.asarray(v, float) for _, v, _, _ in rs])
            lo = np.array([-np.inf if lo_ is None else lo_ for _, _, lo_, _ in rs])
            hi = np.array([np.inf if hi_ is None else hi_ for _, _, _, hi_ in rs])
            m.add_constraints(r_ids, cols, coefs, lo=lo, hi=hi, name=name)


@dataclass(frozen=True)
class ReuseModel:
    """A built model: the MILP, its variable blocks, the slot count ``J`` and the instance."""

    instance: Instance
    objective: str
    model: milp.Model
    v: dict[str, milp.VarBlock]
    slots: int


def _index(inst: Instance) -> PrefixIndex:
    idx = inst.prefix_index
    assert idx is not None
    return idx


def build(inst: Instance, objective: str, slots: int, at_most: float | None) -> ReuseModel:
    """The model of ``formulations/reuse-milp.md`` (R1-R9) with ``slots`` batch slots."""
    idx = _index(inst)
    n, J, b = inst.n, slots, inst.limits.block_size
    prompt = np.array([r.prompt for r in inst.requests])
    out = np.array([r.output for r in inst.requests])
    arr = np.array([r.arrival for r in inst.requests], float)
    peak = prompt + out - 1
    cap = np.minimum(inst.limits.max_batch_tokens, peak)
    L = idx.n_listed
    K = idx.n_blocks
    m = milp.Model("reuse-milp")
    v: dict[str, milp.VarBlock] = {}
    v["x"] = m.add_vars("x", (n, J), vtype="B")
    v["a"] = m.add_vars("a", J, vtype="B")
    v["c"] = m.add_vars("c", (n, J), lb=0, ub=np.repeat(cap[:, None], J, 1), vtype="I")
    v["e"] = m.add_vars("e", (n, J), vtype="B")
    v["lost"] = m.add_vars("lost", (n, J), lb=0, ub=np.repeat(peak[:, None], J, 1))
    v["m"] = m.add_vars("m", (n, J), lb=0, ub=np.repeat(peak[:, None], J, 1), vtype="I")
    v["z"] = m.add_vars("z", (n, J), vtype="B")
    v["g"] = m.add_vars("g", (n, J), lb=0, ub=np.repeat(out[:, None], J, 1), vtype="I")
    v["fin"] = m.add_vars("fin", (n, J), vtype="B")
    v["q"] = m.add_vars("q", (n, J), lb=0, ub=np.repeat((-(-peak // b))[:, None], J, 1),
                        vtype="I")
    v["y"] = m.add_vars("y", (max(L, 1), J), vtype="B")
    v["u"] = m.add_vars("u", (max(L, 1), J), vtype="B")
    v["r"] = m.add_vars("r", (max(K, 1), J), vtype="B")
    tmax = float(arr.max()) + J
    # R13: with integer arrivals every earliest start and completion is an integer (unit time)
    tv = "I" if np.all(arr == np.floor(arr)) else "C"
    v["T"] = m.add_vars("T", J, lb=0, ub=tmax, vtype=tv)
    v["C"] = m.add_vars("C", n, lb=arr + out, ub=tmax, vtype=tv)  # one token per batch (R5)
    rows = Rows()
    _slots(rows, v, n, J)
    for i in range(n):
        _request(rows, v, i, J, int(prompt[i]), int(out[i]), float(arr[i]), tmax,
                 (range(int(idx.ptr[i]), int(idx.ptr[i + 1])), b))
        _blocks_of(rows, v, idx, i, J, b, int(peak[i]))
    _resident(rows, v, idx, J)
    _symmetry(rows, v, inst, J)
    rows.add("work", list(v["c"].ids.ravel()), [1] * v["c"].size, lo=unskippable_work(inst))
    _limits(rows, v, inst, n, J, K, b)
    _objective(m, rows, v, objective, arr, at_most)
    rows.flush(m)
    return ReuseModel(inst, objective, m, v, J)


def _slots(rows: Rows, v: dict[str, milp.VarBlock], n: int, J: int) -> None:
    """R1: a slot is active iff it has an entry; active slots come first; starts follow."""
    x, a, T = v["x"], v["a"], v["T"]
    for j in range(J):
        for i in range(n):
            rows.add("active_ge", [a[j], x[i, j]], [1, -1], lo=0)
        rows.add("active_le", [a[j], *x[:, j]], [1] + [-1] * n, hi=0)
        if j:
            rows.add("active_first", [a[j - 1], a[j]], [1, -1], lo=0)
            rows.add("start", [T[j], T[j - 1], a[j - 1]], [1, -1, -1], lo=0)  # unit time


def _request(rows: Rows, v: dict[str, milp.VarBlock], i: int, J: int, inp: int, out: int,
             arr: float, tmax: float, listed: tuple[range, int]) -> None:
    """R2-R4: evictions, tokens, generation and finishing of request ``i``."""
    x, c, e, lost, m, z, g, fin, T, C, u = (v[k] for k in
                                            ("x", "c", "e", "lost", "m", "z", "g", "fin", "T",
                                             "C", "u"))
    big = inp + out
    for j in range(J):
        mp = [m[i, j - 1]] if j else []
        gp = [g[i, j - 1]] if j else []
        fp = [fin[i, j - 1]] if j else []
        rows.add("c_ge_x", [c[i, j], x[i, j]], [1, -1], lo=0)
        rows.add("c_le_x", [c[i, j], x[i, j]], [1, -big], hi=0)
        rows.add("lost_le_m", [lost[i, j], *mp], [1] + [-1] * len(mp), hi=0)
        rows.add("lost_ge", [lost[i, j], *mp, e[i, j]], [1] + [-1] * len(mp) + [-big], lo=-big)
        rows.add("lost_le_e", [lost[i, j], e[i, j]], [1, -big], hi=0)
        if j:
            rows.add("done_no_entry", [x[i, j], fin[i, j - 1]], [1, 1], hi=1)
            rows.add("done_freed", [e[i, j], fin[i, j - 1]], [1, -1], lo=0)
            rows.add("fin_mono", [fin[i, j], fin[i, j - 1]], [1, -1], lo=0)
        rows.add("arrival", [T[j], x[i, j]], [1, -arr], lo=0)
        # R3: m = m_prev - lost + hits + computed (hits are b * u, added in _blocks_of)
        ks, b = listed
        rows.add("tokens_kept", [m[i, j], *mp, lost[i, j], c[i, j], *(u[k, j] for k in ks)],
                 [1] + [-1] * len(mp) + [1, -1] + [-b] * len(ks), lo=0, hi=0)
        # R4: z = [m reaches S = I + g_prev]; g = g_prev + z
        rows.add("gen_lo", [m[i, j], *gp, z[i, j]], [1] + [-1] * len(gp) + [-big], lo=inp - big)
        rows.add("gen_hi", [m[i, j], *gp, z[i, j]], [1] + [-1] * len(gp) + [-1], hi=inp - 1)
        rows.add("gen_x", [z[i, j], x[i, j]], [1, -1], hi=0)
        rows.add("g", [g[i, j], *gp, z[i, j]], [1] + [-1] * len(gp) + [-1], lo=0, hi=0)
        rows.add("fin_lo", [g[i, j], fin[i, j]], [1, -out], lo=0)
        rows.add("fin_hi", [g[i, j], fin[i, j]], [1, -1], hi=out - 1)
        # R5: completion = end of the slot whose entry generates token O
        rows.add("completion", [C[i], T[j], fin[i, j], *fp],
                 [1, -1, -tmax] + [tmax] * len(fp), lo=1 - tmax)
    rows.add("all_done", [fin[i, J - 1]], [1], lo=1)


def _blocks_of(rows: Rows, v: dict[str, milp.VarBlock], idx: PrefixIndex, i: int, J: int,
               b: int, peak: int) -> None:
    """R6-R7: the blocks request ``i`` holds (``y``), its hits (``u``) and private tokens."""
    m, y, u, q, x, lost, r = (v[k] for k in ("m", "y", "u", "q", "x", "lost", "r"))
    lo_k, hi_k = int(idx.ptr[i]), int(idx.ptr[i + 1])
    H = int(idx.shareable[i])
    big = peak
    for j in range(J):
        mp = [m[i, j - 1]] if j else []
        for k in range(lo_k, hi_k):
            p = k - lo_k
            rows.add("held_lo", [m[i, j], y[k, j]], [1, -(p + 1) * b], lo=0)
            rows.add("held_hi", [m[i, j], y[k, j]], [1, -big], hi=(p + 1) * b - 1)
            if p >= H or j == 0:
                rows.add("hit_none", [u[k, j]], [1], hi=0)
                continue
            xb = int(idx.block[k])
            rows.add("hit_entry", [u[k, j], x[i, j]], [1, -1], hi=0)
            rows.add("hit_resident", [u[k, j], r[xb, j - 1]], [1, -1], hi=0)
            # the hit starts where the cache starts after evictions (m' = m_prev - lost)
            rows.add("hit_after", [*mp, lost[i, j], u[k, j]], [1, -1, big], hi=p * b + big)
            if p:
                rows.add("hit_from", [*mp, lost[i, j], u[k, j], u[k - 1, j]],
                         [1, -1, -p * b, p * b], lo=0)
        rows.add("private", [q[i, j], m[i, j], *(y[k, j] for k in range(lo_k, hi_k))],
                 [b, -1] + [b] * (hi_k - lo_k), lo=0)


def unskippable_work(inst: Instance) -> int:
    """R12: tokens every schedule computes (``formulations/bounds.md`` B19): per request its
    prompt after the leading run ``L'`` of shareable blocks some other request lists, and its
    ``O - 1`` decodes; plus ``b`` per block listed by two or more requests, each only at a
    shareable position (someone computes it once, at positions no request's count covers)."""
    idx = _index(inst)
    b = idx.block_size
    n_x = np.bincount(idx.block, minlength=idx.n_blocks)
    only_shareable = np.ones(idx.n_blocks, bool)
    total = 0
    for i, r in enumerate(inst.requests):
        ks = idx.blocks_of(i)
        H = int(idx.shareable[i])
        lead = 0
        while lead < H and n_x[ks[lead]] >= 2:
            lead += 1
        total += r.prompt - lead * b + r.output - 1
        only_shareable[ks[H:]] = False
    return int(total + b * np.count_nonzero((n_x >= 2) & only_shareable))


def _symmetry(rows: Rows, v: dict[str, milp.VarBlock], inst: Instance, J: int) -> None:
    """R11: of two identical requests (arrival, lengths and block ids), the first listed
    finishes no later (swapping their roles in any schedule gives one of the same value)."""
    first: dict[tuple[Any, ...], int] = {}
    fin = v["fin"]
    for i, r in enumerate(inst.requests):
        key = (r.arrival, r.prompt, r.output, r.prefix)
        if key in first:
            for j in range(J):
                rows.add("symmetry", [fin[first[key], j], fin[i, j]], [1, -1], lo=0)
        first[key] = i


def _resident(rows: Rows, v: dict[str, milp.VarBlock], idx: PrefixIndex, J: int) -> None:
    """R8: held blocks are resident; a block appears only when someone holds it (computed)."""
    y, r = v["y"], v["r"]
    holders: dict[int, list[int]] = defaultdict(list)
    for k, xb in enumerate(idx.block):
        holders[int(xb)].append(k)
    for xb, ks in holders.items():
        for j in range(J):
            for k in ks:
                rows.add("held_resident", [r[xb, j], y[k, j]], [1, -1], lo=0)
            prev = [r[xb, j - 1]] if j else []
            rows.add("appear", [r[xb, j], *prev, *(y[k, j] for k in ks)],
                     [1] + [-1] * len(prev) + [-1] * len(ks), hi=0)


def _limits(rows: Rows, v: dict[str, milp.VarBlock], inst: Instance, n: int, J: int, K: int,
            b: int) -> None:
    """R9: memory (blocks once, private tokens in whole blocks), ``C``, batch size."""
    lim = inst.limits
    for j in range(J):
        rows.add("memory", [*(v["r"][x, j] for x in range(K)), *v["q"][:, j]],
                 [b] * (K + n), hi=lim.kv_capacity)
        rows.add("tokens", [*v["c"][:, j], v["a"][j]], [1] * n + [-lim.max_batch_tokens],
                 hi=0)
        if lim.max_batch_size is not None:
            rows.add("batch_size", list(v["x"][:, j]), [1] * n, hi=lim.max_batch_size)


def _objective(m: milp.Model, rows: Rows, v: dict[str, milp.VarBlock], objective: str,
               arr: np.ndarray, at_most: float | None) -> None:
    C = v["C"]
    n = arr.size
    if objective == "makespan":
        z = m.add_var("makespan", lb=0, vtype="I" if C.is_integer else "C")
        for i in range(n):
            rows.add("makespan", [z, C[i]], [1, -1], lo=0)
        rows.add("makespan_slots", [z, *v["a"].ids], [1] + [-1] * v["a"].size, lo=0)
        m.set_objective([z], [1.0])
        if at_most is not None:
            rows.add("at_most", [z], [1], hi=at_most)
    else:
        m.set_objective(list(C.ids), [1.0] * n, constant=-float(arr.sum()))
        if at_most is not None:
            rows.add("at_most", list(C.ids), [1] * n, hi=at_most + float(arr.sum()))


def decode(rm: ReuseModel, values: np.ndarray) -> Schedule:
    """The schedule of a solution (R10): per slot, an eviction-only batch first when an
    evicted request also has an entry (the semantics forbids both in one batch; the batch
    takes no time), then the entries with their hits, the plain evictions and the drops
    ``r[x, j-1] = 1 > r[x, j]``."""
    inst, J = rm.instance, rm.slots
    idx = _index(inst)
    b = inst.limits.block_size
    val = {k: np.rint(rm.model.value(blk, values)).astype(np.int64) for k, blk in rm.v.items()
           if k not in ("T", "C", "lost")}
    ids = inst.ids
    batches: list[dict[str, Any]] = []
    for j in range(J):
        entries, hits, evict = [], [], []
        for i in range(inst.n):
            mp = int(val["m"][i, j - 1]) if j else 0
            done = bool(val["fin"][i, j - 1]) if j else False
            if val["e"][i, j] and mp > 0 and not done:
                evict.append(ids[i])
            if val["x"][i, j]:
                entries.append([ids[i], int(val["c"][i, j])])
                ks = range(int(idx.ptr[i]), int(idx.ptr[i + 1]))
                h = b * int(sum(val["u"][k, j] for k in ks))
                if h:
                    hits.append([ids[i], h])
        drop = [int(idx.ids[x]) for x in range(idx.n_blocks)
                if j and val["r"][x, j - 1] and not val["r"][x, j]]
        processed = {e[0] for e in entries}
        if any(r in processed for r in evict):
            batches.append({"entries": [], "evict": evict})
            evict = []
        if entries or evict or drop:
            batches.append({"entries": entries, "evict": evict, "hits": hits, "drop": drop})
    return Schedule.from_batches(batches)
