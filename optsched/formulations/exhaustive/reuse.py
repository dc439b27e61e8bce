"""Exact search over schedule states with prefix reuse (docs/semantics.md section 6, "Prefix
reuse"), for tiny instances whose requests list block ids; :func:`.search.search` hands such
an instance here. The argument for each rule is ``formulations/exhaustive-reuse.md``.

**What it enumerates** (E1, E2). A node is, per request, ``(g, m)`` of semantics section 3 (a
finished request ``(O, 0)``) **and** the set ``R`` of resident blocks (a bit mask over the
instance's distinct block ids), plus the clock while some request has not arrived. An edge
is an idle wait until the next arrival, or one batch at the clock: every combination of, per
arrived unfinished request, nothing, an entry with **every** allowed hit (``h = 0``
included) and every ``1 <= c <= S - m - h``, a plain eviction, or an evict-and-refill (a
zero-time eviction-only batch, then an entry from ``m = 0`` with every allowed hit), together
with a set of **drops** among the droppable blocks (resident, held by no request after the
evictions, neither hit nor completed by the batch). Limits ``C``, ``P``, ``max_batch_size``,
shared-block memory and arrivals are enforced as the evaluator does; edge costs are those of
:mod:`.search` (makespan, total-latency, mean-ttft).

**Pruning** (``SearchOptions.pruning``; each rule keeps an optimum, and the tests compare E4
and E5 with the search without them): E3 no empty batches, zero-time batches merged into the
next; E4 exactly ``k = max(0, ceil((base - M) / b))`` drops per batch, every ``k``-subset;
E5 a plain eviction only when the memory needs it; E6 earliest starts; E7 A* with a bound
on the batches each request still needs and, for makespan, on the tokens no hit can skip,
and states above an upper bound (warm start, ``--at-most``) not generated.

Not pruned (E8): hit sizes, drop subsets, identical requests. The size guard refuses more than
:data:`MAX_REQUESTS` requests or :data:`MAX_BLOCKS` distinct block ids; the search returns
``no_solution`` at ``max_states`` or the time limit.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import time
from dataclasses import dataclass
from typing import Any

from ...cost import LinearCost, UnitCost
from ...instance import Instance
from ...schedule import ScheduleBuilder
from ...solve_types import MODELLED, Status
from ..base import FormulationError
from .options import SearchOptions, SearchResult, state_path

#: the size guard: larger instances are refused (the state space grows as 2^blocks * states)
MAX_REQUESTS = 6
MAX_BLOCKS = 12

_EPS = 1e-9


@dataclass(frozen=True)
class _Move:
    """One request's part of a batch: ``kind`` 0 skip, 1 entry, 2 evict, 3 evict-and-refill;
    an entry has hit ``h`` and ``c`` computed tokens from ``m0`` (0 for a refill), cached
    before it ``start = m0 + h``. Precomputed: the request's code after the batch, ``end``
    (its ``m`` after, ``-1`` when it holds no KV), the masks of the blocks it hits,
    completes by computing, holds after the batch's evictions and holds after the batch,
    and its private tokens after the batch (rounded to blocks)."""

    kind: int
    h: int
    c: int
    start: int
    decode: bool
    code: int
    end: int
    hit: int
    computed: int
    held_mid: int
    held_after: int
    priv: int

    @property
    def entry(self) -> bool:
        return self.kind in (1, 3)


def _batch_floor(inst: Instance) -> float:
    """E7c: the least time of a batch with entries: 1 under unit time, ``k0 + min(0, k1 +
    min(0, kdr)) * C`` (at least 0) under a linear cost (every other term is >= 0), else 0."""
    cm = inst.cost_model
    if isinstance(cm, UnitCost):
        return 1.0
    if isinstance(cm, LinearCost):
        per_token = min(0.0, cm.k1 + min(0.0, cm.kdr))
        return max(0.0, cm.k0 + per_token * inst.limits.max_batch_tokens)
    return 0.0


def too_large(instance: Instance) -> str | None:
    """Why the size guard (module docstring) refuses ``instance``, or None."""
    idx = instance.prefix_index
    k = 0 if idx is None else idx.n_blocks
    if instance.n > MAX_REQUESTS or k > MAX_BLOCKS:
        return (f"a prefix-reuse instance of {instance.n} requests and {k} distinct block ids "
                f"is too large for the exhaustive search (at most {MAX_REQUESTS} requests and "
                f"{MAX_BLOCKS} block ids)")
    return None


def check_size(instance: Instance) -> None:
    """The size guard: a one-line :class:`FormulationError` naming the size."""
    why = too_large(instance)
    if why is not None:
        raise FormulationError(f"exhaustive: {why}")


class _ReuseSearch:
    def __init__(self, inst: Instance, objective: str, opts: SearchOptions):
        if objective not in MODELLED:
            raise FormulationError(f"exhaustive: objective {objective!r} is not one it models "
                                   f"({', '.join(MODELLED)})")
        if opts.no_chunking or opts.no_pausing:
            raise FormulationError("exhaustive: with prefix reuse only the no_evictions "
                                   "restriction is supported")
        idx = inst.prefix_index
        assert idx is not None
        self.inst, self.obj, self.opts = inst, objective, opts
        lim = inst.limits
        self.M, self.C, self.P, self.B = (lim.kv_capacity, lim.max_batch_tokens,
                                          lim.prefill_budget, lim.max_batch_size)
        self.b = lim.block_size
        reqs = inst.requests
        self.I = [r.prompt for r in reqs]
        self.O = [r.output for r in reqs]
        self.A = [r.arrival for r in reqs]
        self.blocks = [[int(x) for x in idx.blocks_of(i)] for i in range(inst.n)]
        self.H = [int(h) for h in idx.shareable]
        self.ids = [int(x) for x in idx.ids]
        self.W = max(a + o for a, o in zip(self.I, self.O)) + 2
        self.A_max = max(self.A)
        self.arrivals = sorted(set(self.A))
        self._cost: dict[tuple, float] = {}
        self.floor = _batch_floor(inst)
        self.Pc = min(self.C, self.P)
        self._moves: dict[tuple[int, int, int], list[_Move]] = {}
        self.own = [self.mask(i, 0, len(self.blocks[i])) for i in range(inst.n)]

    # -- per-request helpers -------------------------------------------------------------
    def f(self, i: int, m: int) -> int:
        """Blocks held with ``m`` cached tokens, ``min(P, floor(m / b))``."""
        return min(len(self.blocks[i]), m // self.b)

    def mask(self, i: int, lo: int, hi: int) -> int:
        """Bit mask of request ``i``'s blocks at positions ``lo .. hi - 1``."""
        out = 0
        for x in self.blocks[i][lo:hi]:
            out |= 1 << x
        return out

    def private(self, i: int, m: int) -> int:
        return self.inst.limits.kv_footprint(m - self.b * self.f(i, m))

    def hits(self, i: int, m: int, R: int) -> list[int]:
        """Every hit request ``i`` may take from ``m`` with ``R`` resident (0 included)."""
        out = [0]
        if m % self.b:
            return out
        p = m // self.b
        while p < self.H[i] and R >> self.blocks[i][p] & 1:
            p += 1
            out.append(p * self.b - m)
        return out

    def moves(self, i: int, code: int, R: int) -> list[_Move]:
        """Every move of request ``i`` in state ``code`` with ``R`` resident (cached)."""
        key = (i, code, R & self.own[i])
        out = self._moves.get(key)
        if out is not None:
            return out
        g, m = divmod(code, self.W)
        S = self.I[i] + g
        held = self.mask(i, 0, self.f(i, m))
        out = [_Move(0, 0, 0, m, False, code, m if m else -1, 0, 0, held, held,
                     self.private(i, m))]
        decode = g >= 1 and m == S - 1
        for h in self.hits(i, m, R):
            out.extend(self._entry(i, 1, g, m, h, c, decode, held) for c in range(1, S - m - h + 1))
        if m > 0 and not self.opts.no_evictions:
            out.append(_Move(2, 0, 0, 0, False, g * self.W, -1, 0, 0, 0, 0, 0))
            for h in self.hits(i, 0, R):
                out.extend(self._entry(i, 3, g, 0, h, c, False, 0) for c in range(1, S - h + 1))
        self._moves[key] = out
        return out

    def _entry(self, i: int, kind: int, g: int, m0: int, h: int, c: int, decode: bool,
               held_mid: int) -> _Move:
        b, W, O = self.b, self.W, self.O[i]
        start, end = m0 + h, m0 + h + c
        S = self.I[i] + g
        code = (O * W if g + 1 == O else (g + 1) * W + end) if end == S else g * W + end
        return _Move(kind, h, c, start, decode, code, end, self.mask(i, m0 // b, start // b),
                     self.mask(i, self.f(i, start), self.f(i, end)), held_mid,
                     self.mask(i, 0, self.f(i, end)), self.private(i, end))

    def batch_time(self, sig: tuple) -> float:
        t = self._cost.get(sig)
        if t is None:
            t = self._cost[sig] = self.inst.cost_model.batch_time(
                [s[0] for s in sig], [s[1] for s in sig], [s[2] for s in sig])
        return t

    # -- one batch ----------------------------------------------------------------------
    def batches(self, codes: tuple[int, ...], R: int, clock: float, deadline: float | None):
        """Yield ``(edge, new codes, new R, batch time)`` for every batch at ``clock``."""
        W = self.W
        active = [i for i, code in enumerate(codes)
                  if code // W < self.O[i] and self.A[i] <= clock + _EPS]
        opts = [self.moves(i, codes[i], R) for i in active]
        for n, combo in enumerate(self._combos(opts)):
            if deadline is not None and (n & 1023) == 1023 and time.perf_counter() > deadline:
                raise TimeoutError
            yield from self._apply(codes, R, active, combo)

    def _combos(self, opts: list[list[_Move]]):
        """Every choice of one move per active request within ``C``, ``P``, the batch size and
        the memory no drop can free (private tokens and held blocks), with at least one
        entry (E3)."""
        C, P, B, M, b = self.C, self.P, self.B, self.M, self.b
        chosen: list[_Move] = []

        def rec(k: int, tok: int, pre: int, ent: int, priv: int, held: int):
            if k == len(opts):
                if ent:
                    yield tuple(chosen)
                return
            for mv in opts[k]:
                c = mv.c
                pc = 0 if mv.decode else c
                e = ent + mv.entry
                if tok + c > C or pre + pc > P or (B is not None and e > B):
                    continue
                nh = held | mv.held_after | mv.computed
                if priv + mv.priv + b * nh.bit_count() > M:
                    continue
                chosen.append(mv)
                yield from rec(k + 1, tok + c, pre + pc, e, priv + mv.priv, nh)
                chosen.pop()

        yield from rec(0, 0, 0, 0, 0, 0)

    def _apply(self, codes, R: int, active: list[int], combo: tuple[_Move, ...]):
        """The batches (one per drop set) of one choice of moves."""
        new = list(codes)
        sig, edge, pre_evict, evict = [], [], [], []
        computed = hit = held_mid = 0
        priv = 0
        for i, mv in zip(active, combo):
            new[i] = mv.code
            computed |= mv.computed
            hit |= mv.hit
            held_mid |= mv.held_mid
            priv += mv.priv
            if mv.kind == 2:
                evict.append(i)
            elif mv.kind:
                if mv.kind == 3:
                    pre_evict.append(i)
                sig.append((mv.c, mv.start, mv.decode))
                edge.append((i, mv.c, mv.h))
        droppable = R & ~held_mid & ~hit & ~computed
        R_all = R | computed
        base = self.b * R_all.bit_count() + priv
        cand = [x for x in range(len(self.ids)) if droppable >> x & 1]
        d = self.batch_time(tuple(sorted(sig)))
        ncodes = tuple(new)
        for D in self._drop_sets(base, cand):
            dmask = sum(1 << x for x in D)
            mem = base - self.b * len(D)
            if mem > self.M or not self._evictions_needed(codes, evict, dmask, mem):
                continue
            yield ((tuple(edge), tuple(evict), tuple(pre_evict), D), ncodes, R_all & ~dmask, d)

    def _drop_sets(self, base: int, cand: list[int]):
        """E4: every ``k``-subset, ``k`` the fewest drops that fit (every subset unpruned)."""
        if not self.opts.pruning:
            for k in range(len(cand) + 1):
                yield from itertools.combinations(cand, k)
            return
        k = max(0, -(-(base - self.M) // self.b))
        if k <= len(cand):
            yield from itertools.combinations(cand, k)

    def _evictions_needed(self, codes, evict: list[int], dmask: int, mem: int) -> bool:
        """E5: every plain eviction frees memory the batch needs."""
        if not self.opts.pruning:
            return True
        for i in evict:
            g, m = divmod(codes[i], self.W)
            own = self.mask(i, 0, self.f(i, m)) & dmask
            if mem + self.private(i, m) + self.b * own.bit_count() <= self.M:
                return False
        return True

    # -- the search ------------------------------------------------------------------
    def edge_cost_fn(self, codes, clock: float):
        if self.obj == "makespan":
            return lambda t: t - clock
        n_now, later = 0, []
        for i, code in enumerate(codes):
            g = code // self.W
            if g >= self.O[i] or (self.obj == "mean-ttft" and g >= 1):
                continue
            if self.A[i] <= clock:
                n_now += 1
            else:
                later.append(self.A[i])
        return lambda t: n_now * (t - clock) + sum(t - a for a in later if a < t)

    def own_batches(self, i: int, code: int) -> int:
        """E7a: batches request ``i`` still needs: ``O - g``, and ``ceil(need / min(C, P)) +
        O - g - 1`` with ``need = S - max(m, H*b)`` the tokens before its next token that no
        hit can skip."""
        g, m = divmod(code, self.W)
        O = self.O[i]
        if g >= O:
            return 0
        need = self.I[i] + g - max(m, self.H[i] * self.b)
        return max(O - g, -(-need // self.Pc) + O - g - 1)

    def must_compute(self, codes, R: int) -> int:
        """E7b: tokens still to compute: each unfinished request's ``need`` and decode tokens,
        plus, per shareable block some unfinished request does not hold yet and that is not
        resident (someone computes it before it is hit), ``b`` less the most any request has
        computed of it."""
        W, b, tot, missing = self.W, self.b, 0, 0
        prog: dict[int, int] = {}
        for i, code in enumerate(codes):
            g, m = divmod(code, W)
            if g >= self.O[i]:
                continue
            tot += self.I[i] + g - max(m, self.H[i] * b) + self.O[i] - g - 1
            q = self.f(i, m)
            missing |= self.mask(i, q, self.H[i])
            if q < self.H[i] and m % b:
                x = self.blocks[i][q]
                prog[x] = max(prog.get(x, 0), m - q * b)
        missing &= ~R
        return tot + sum(b - prog.get(x, 0) for x in range(len(self.ids)) if missing >> x & 1)

    def heuristic(self, codes, R: int, clock: float) -> float:
        """E7, a consistent lower bound on the remaining cost from the batches each request
        still needs (:meth:`own_batches`; a batch generates at most one token per request and
        computes at most ``min(C, P)`` prefill tokens) and, for makespan, ``ceil(T / C)`` for
        the ``T`` tokens of :meth:`must_compute`, each batch at least ``floor`` long
        (:func:`_batch_floor`), after the request's arrival. makespan: the max over requests of
        the wait for the arrival plus that, and the total; total-latency: the sum; mean-ttft:
        the batches to the first token of each request without one. A batch of time ``d >=
        floor`` lowers each count by at most 1 (a hit does not lower ``need``; a drop or an
        eviction only raises them) and each wait by at most ``d``, so ``h`` drops by at most
        the edge's cost."""
        if not self.opts.pruning:
            return 0.0
        W, fl = self.W, self.floor
        if self.obj == "makespan":
            own = max((max(0.0, self.A[i] - clock) + fl * self.own_batches(i, c)
                       for i, c in enumerate(codes) if c // W < self.O[i]), default=0.0)
            return max(own, fl * -(-self.must_compute(codes, R) // self.C))
        if self.obj == "total-latency":
            return fl * sum(self.own_batches(i, c) for i, c in enumerate(codes))
        return fl * sum(self.own_batches(i, c) - self.O[i] + 1
                        for i, c in enumerate(codes) if c // W == 0)

    def key(self, codes, R: int, clock: float):
        if clock >= self.A_max - _EPS:
            return (codes, R, None)
        if self.obj == "makespan":
            return (codes, R, bisect.bisect_right(self.arrivals, clock + _EPS))
        return (codes, R, round(clock, 9))

    def run(self) -> SearchResult:
        t0 = time.perf_counter()
        opts = self.opts
        deadline = None if opts.time_limit is None else t0 + opts.time_limit
        ub = opts.upper_bound
        if ub is not None and self.obj == "mean-ttft":
            ub *= self.inst.n
        root = (tuple([0] * self.inst.n), 0)
        rkey = self.key(root[0], 0, 0.0)
        nodes: dict[Any, list] = {rkey: [0.0, 0.0, None, None, root[0], 0, False]}
        heap = [(self.heuristic(root[0], 0, 0.0), 0, rkey)]
        cnt, expanded = 1, 0
        done = tuple(o * self.W for o in self.O)
        while heap:
            _, _, key = heapq.heappop(heap)
            node = nodes[key]
            if node[6]:
                continue
            node[6] = True
            cost, clock, _, _, codes, R, _ = node
            if codes == done:
                return self._finish(key, nodes, cost, expanded, t0)
            expanded += 1
            if len(nodes) > opts.max_states or (deadline is not None
                                                and time.perf_counter() > deadline):
                return self._gave_up(expanded, len(nodes), t0)
            ecost = self.edge_cost_fn(codes, clock)
            succ = []
            try:
                for edge, ncodes, nR, d in self.batches(codes, R, clock, deadline):
                    succ.append((edge, ncodes, nR, clock + d))
            except TimeoutError:
                return self._gave_up(expanded, len(nodes), t0)
            nxt = [a for a in self.arrivals if a > clock + _EPS]
            if nxt:
                succ.append((None, codes, R, nxt[0]))
            for edge, ncodes, nR, t_end in succ:
                nc = cost + ecost(t_end)
                h = self.heuristic(ncodes, nR, t_end)
                if ub is not None and nc + h > ub * (1 + 1e-9) + 1e-9:
                    continue
                nkey = self.key(ncodes, nR, t_end)
                old = nodes.get(nkey)
                if old is not None and old[0] <= nc + 1e-12 * max(1.0, abs(nc)):
                    continue
                nodes[nkey] = [nc, t_end, key, edge, ncodes, nR, False]
                heapq.heappush(heap, (nc + h, cnt, nkey))
                cnt += 1
        if ub is not None:
            return SearchResult(Status.NO_SOLUTION, None, None, expanded, len(nodes),
                                time.perf_counter() - t0,
                                f"no schedule with objective <= the upper bound {opts.upper_bound}")
        what = "the restrictions" if opts.restricted else "the instance's limits"
        return SearchResult(Status.INFEASIBLE, None, None, expanded, len(nodes),
                            time.perf_counter() - t0,
                            f"no schedule finishes every request under {what} "
                            f"(search space exhausted after {expanded} states)")

    def _gave_up(self, expanded: int, generated: int, t0: float) -> SearchResult:
        opts = self.opts
        what = (f"state limit {opts.max_states}" if generated > opts.max_states
                else f"time limit {opts.time_limit:g} s")
        return SearchResult(Status.NO_SOLUTION, None, None, expanded, generated,
                            time.perf_counter() - t0,
                            f"{what} reached after {expanded} expanded and {generated} generated "
                            f"states; instance too large for exhaustive search")

    def _finish(self, key, nodes, cost: float, expanded: int, t0: float) -> SearchResult:
        path = state_path(nodes, key)
        ids = self.inst.ids
        bld = ScheduleBuilder(list(ids))
        pending: float | None = None
        for child in path[1:]:
            edge = child[3]
            if edge is None:
                pending = child[1]
                continue
            entries, evict, pre_evict, drops = edge
            if pre_evict:
                bld.add([], [ids[i] for i in pre_evict], pending)
                pending = None
            bld.add([(ids[i], c) for i, c, _ in entries], [ids[i] for i in evict], pending,
                     hits=[(ids[i], h) for i, _, h in entries if h],
                     drop=[self.ids[x] for x in drops])
            pending = None
        obj = cost / self.inst.n if self.obj == "mean-ttft" else cost
        return SearchResult(Status.OPTIMAL, obj, bld.build(), expanded, len(nodes),
                            time.perf_counter() - t0)


def search_reuse(instance: Instance, objective: str, options: SearchOptions) -> SearchResult:
    """Exact minimum of ``objective`` over the schedules of a prefix-reuse instance (module
    docstring: what it enumerates); refuses an instance over the size guard."""
    check_size(instance)
    return _ReuseSearch(instance, objective, options).run()
