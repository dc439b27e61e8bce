"""Exact search over the graph of schedule states, for tiny instances (formulation ``exhaustive``,
:mod:`.solve`; large-neighbourhood search re-solves windows with :func:`search_between`).

A *node* is the state of semantics section 3 for every request -- ``(g, m)`` per request
(``S = I + g``; a finished request is ``(O, 0)``) -- plus the clock while some request
has not yet arrived. An *edge* is one batch (entries ``(i, c)``, ``1 <= c <= S - m``,
plus evictions), priced by the instance's own cost model
(:meth:`~optsched.cost.CostModel.batch_time`), or an *idle* edge to the next arrival.
A* (a heap; Dijkstra when no bound is known for the cost model) with a consistent
heuristic finds a minimum-cost path to "all finished"; the path is decoded into a
:class:`~optsched.schedule.Schedule` and replayed by :func:`optsched.evaluate`,
whose objective is returned (and checked against the search's own cost).

Edge costs (``t`` = clock before the batch, ``t' = t + d``):

* ``makespan``: ``t' - t`` (path cost = clock);
* ``total-latency``: ``sum over unfinished i of (t' - max(t, a_i))^+`` -- every arrived,
  unfinished request accrues the batch's time, one arriving mid-batch from its arrival;
  the path cost is then ``sum (completion - arrival)``;
* ``mean-ttft``: the same over requests without a first token, divided by ``n`` at the end.

Everything a schedule may do is searched: any subset of arrived requests, any chunk
``1 <= c <= S - m``, any eviction of a resident request, and eviction followed by a refill
in the next batch (``evict-and-refill``: a zero-time eviction-only batch then the batch;
semantics section 3 forbids evicting and processing a request in one batch). Limits ``C``,
``P``, ``max_batch_size``, ``M`` (with ``block_size``) and arrivals are enforced exactly
as the evaluator does.

Pruning rules (each keeps at least one optimal schedule; the arguments are in the
docstrings of the functions that apply them and summarised here):

R1 *No empty batches.* A batch without entries or evictions changes nothing and takes 0.
R2 *Eviction-only batches are merged into the next batch.* An eviction-only batch takes
   zero time (no entries) and only lowers memory; evicting at the start of the next batch
   is the same (semantics 3 step 1), except for a request the next batch processes, which is
   the explicit ``evict-and-refill`` move. Consecutive eviction-only batches merge likewise
   (a request cannot be evicted twice without being processed in between).
R3 *Plain evictions are necessary.* If request X is evicted at batch j and not processed
   in j, and batch j's memory check would pass with X's KV kept, postpone the eviction to
   batch j+1 (or fold it into j+1's ``evict-and-refill`` when j+1 processes X): no entry's
   ``(c, m, decode)`` changes, so no batch time changes, and every memory check still
   passes. Repeating this terminates (each eviction moves later, at most up to X's next
   entry), so some optimal schedule has every plain eviction X of batch j with
   ``KV_j + fp(m_X) > M``. Only those are generated.
R4 *Identical requests are interchangeable.* Requests with equal (arrival, prompt,
   output) are a class; permuting their states maps schedules to schedules with the same
   objective, so states are stored with each class's ``(g, m)`` sorted, and within a batch
   identical requests in identical states take options in a fixed (non-decreasing) order.
R5 *Earliest starts.* For a fixed sequence of batches, starting each as early as possible
   never delays any completion or first token (each end is monotone in the earlier ends),
   so a batch starts at the clock; deliberate idling is only "wait until the next
   arrival" (a batch that touches a later request starts at its arrival: a chain of idle
   edges). For makespan a state reached earlier dominates the same state reached later
   (replay the later path's batches with earliest starts), so the key holds only which
   arrivals have happened (idling changes it), not the clock (a key beaten later is
   re-opened); for the latency objectives the clock is part of the key until every request
   has arrived (after that the future cost no longer depends on it).
R6 *A* bound.* ``f = cost + h`` with ``h`` a consistent lower bound (``heuristic``); with
   a feasible warm start of objective ``U`` (and no restriction), nodes with ``f > U`` are
   not generated.
R8 *Refills that re-reach the cached prefix.* An evict-and-refill of X to ``c >= m_old``
   tokens is dropped when processing ``c - m_old`` tokens from ``m_old`` (or nothing, if
   ``c = m_old``) reaches the same state in a batch priced no higher by the cost model
   (fewer tokens, no more prefill tokens or entries, the same KV; a batch left with only
   evictions takes no time and R2 folds it). Under unit time this drops every such refill.
   Each replacement removes an eviction, so normalising with R2, R3, R8 terminates.
R7 *mean-ttft*: once every request has its first token and evictions are allowed, the
   remaining cost is 0 and a feasible completion always exists (evict all, run each
   request alone: its peak ``I + O - 1`` fits in ``M``), so the search stops there and
   appends that completion.

Restrictions (``params``): ``no_evictions`` (also the ``no_evictions`` hypothesis),
``no_chunking`` (every entry processes all ``S - m`` available tokens) and ``no_pausing``
(a resident request is processed in every batch until it finishes) -- with all three the
search is the online-scheduling paper's model (each request runs contiguously from its
start, as in its hindsight IP, appendix B.1).
"""

from __future__ import annotations

import bisect
import heapq
import time
from typing import Any

from ...cost import LinearCost, UnitCost
from ...instance import Instance
from ...schedule import ScheduleBuilder
from ...solve_types import MODELLED, Status
from ..base import FormulationError, refuse_prefix_reuse, refuse_swaps
from .options import DEFAULT_MAX_STATES, SearchOptions, SearchResult, state_path
from .reuse import search_reuse

__all__ = ["DEFAULT_MAX_STATES", "SearchOptions", "SearchResult", "search", "search_between"]

_SKIP, _PROC, _EVICT, _REFILL = 0, 1, 2, 3
_EPS = 1e-9


class _Timeout(Exception):
    """The deadline passed inside one expansion (internal; :func:`search` reports it)."""


class _Search:
    def __init__(self, inst: Instance, objective: str, opts: SearchOptions,
                 start: list[tuple[int, int]] | None = None,
                 goal: list[tuple[int, int]] | None = None):
        if objective not in MODELLED:
            raise FormulationError(f"exhaustive: objective {objective!r} is not one it models "
                                   f"({', '.join(MODELLED)})")
        self.inst, self.obj, self.opts = inst, objective, opts
        lim = inst.limits
        self.M, self.C, self.P = lim.kv_capacity, lim.max_batch_tokens, lim.prefill_budget
        self.B = lim.max_batch_size
        self.blk = lim.block_size
        self.Pc = min(self.C, self.P)
        reqs = inst.requests
        # canonical positions: requests grouped by class (arrival, prompt, output), R4
        order = sorted(range(inst.n), key=lambda i: (reqs[i].arrival, reqs[i].prompt, reqs[i].output, i))
        self.pos_req = order
        self.I = [reqs[i].prompt for i in order]
        self.O = [reqs[i].output for i in order]
        self.A = [reqs[i].arrival for i in order]
        cls = [(reqs[i].arrival, reqs[i].prompt, reqs[i].output) for i in order]
        self.cls_id = []
        self.blocks: list[tuple[int, int]] = []
        for p in range(inst.n):
            if p == 0 or cls[p] != cls[p - 1]:
                self.blocks.append((p, p + 1))
            else:
                lo, _ = self.blocks[-1]
                self.blocks[-1] = (lo, p + 1)
            self.cls_id.append(len(self.blocks) - 1)
        self.multi_blocks = [(lo, hi) for lo, hi in self.blocks if hi - lo > 1]
        self.W = max((a + b for a, b in zip(self.I, self.O)), default=1) + 2
        self.done_code = [o * self.W for o in self.O]
        # area[p][g] = sum_{j=g+1}^{O} fp(I + j - 1): KV held by the batches generating tokens g+1..O
        self.area = []
        for I, O in zip(self.I, self.O):
            col = [0] * (O + 1)
            for g in range(O - 1, -1, -1):
                col[g] = col[g + 1] + self.fp(I + g)
            self.area.append(col)
        self.A_max = max(self.A, default=0.0)
        self.arrivals = sorted(set(self.A))
        self._cost_cache: dict[tuple, float] = {}
        cm = inst.cost_model
        if isinstance(cm, UnitCost):
            self.lb = lambda k, t: float(k)
        elif isinstance(cm, LinearCost):
            k0, kt = cm.k0, cm.k1 + min(0.0, cm.kdr)
            self.lb = lambda k, t: k * k0 + t * kt
        else:  # unknown cost model: no bound, plain Dijkstra
            self.lb = lambda k, t: 0.0
        self.ub = opts.upper_bound
        if objective == "mean-ttft" and self.ub is not None:
            self.ub = self.ub * inst.n
        self.early_ttft_goal = objective == "mean-ttft" and not opts.restricted
        self.unit_r8 = opts.pruning and isinstance(cm, UnitCost)
        self._opt_cache: dict[tuple[int, int], list] = {}
        self.root = tuple(self._code(p, start) for p in range(inst.n)) if start else (0,) * inst.n
        self.goal = None if goal is None else tuple(self._code(p, goal) for p in range(inst.n))
        if goal is not None:
            self.early_ttft_goal = False

    def _code(self, p: int, states: list[tuple[int, int]]) -> int:
        """Code of position ``p`` from per-request (instance order) states ``(g, m)``."""
        g, m = states[self.pos_req[p]]
        return self.done_code[p] if g >= self.O[p] else g * self.W + m

    # -- helpers --------------------------------------------------------------------
    def fp(self, m: int) -> int:
        return self.inst.limits.kv_footprint(m)

    def canon(self, raw: list[int]) -> tuple[tuple[int, ...], list[int]]:
        """R4: sort each class block; ``order[new position] = old position``."""
        order = list(range(len(raw)))
        if not self.opts.pruning or not self.multi_blocks:
            return tuple(raw), order
        for lo, hi in self.multi_blocks:
            if hi - lo > 1:
                order[lo:hi] = sorted(range(lo, hi), key=lambda p: (raw[p], p))
        return tuple(raw[p] for p in order), order

    def batch_time(self, sig: tuple) -> float:
        t = self._cost_cache.get(sig)
        if t is None:
            t = self.inst.cost_model.batch_time([s[0] for s in sig], [s[1] for s in sig],
                                                [s[2] for s in sig])
            self._cost_cache[sig] = t
        return t

    def remaining(self, codes) -> int:
        W, tot = self.W, 0
        for p, code in enumerate(codes):
            g, m = divmod(code, W)
            if g < self.O[p]:
                tot += self.I[p] + g - m + self.O[p] - g - 1
        return tot

    def heuristic(self, codes, clock: float) -> float:
        """A consistent lower bound on the remaining cost.

        Per unfinished request: at least ``kb = ceil((S - m) / min(C, P)) + (O - g - 1)``
        more batches (a batch adds at most ``min(C, P)`` prefill tokens and generates at most
        one token per request; ``S - m = 1`` needs one batch either way) and ``kt = (S - m) +
        (O - g - 1)`` more tokens. Overall: ``ceil(T / C)`` batches for ``T`` tokens, and
        ``ceil(area / M)`` batches, where ``area = sum_i sum_{j > g_i} fp(I_i + j - 1)``: the
        batch generating token ``j`` holds the request's whole ``S = I + j - 1`` tokens, one
        token per request per batch, and a batch holds at most ``M`` (so ``area`` drops by at
        most ``M`` per batch). A batch takes at least ``lb(1, c)``: 1 (unit) or
        ``k0 + (k1 + min(0, kdr)) * sum c`` (linear; every other term is >= 0 and a decode
        entry costs >= k1 + kdr). One batch lowers each request's ``kb`` by at most 1 and
        its ``kt`` by its ``c``, so each bound drops by at most the batch's time
        (consistency). makespan: the max over requests (plus the wait for an unarrived one)
        and over the totals; total-latency: the sum over requests, and once every request has
        arrived, the sum over k of a bound on the k-th completion from the k smallest
        requests' batches, tokens and areas (each k-th order statistic and each prefix sum of
        the k smallest values drops by at most what one batch removes, so the sum drops by at
        most ``d`` per unfinished request); mean-ttft: the same for first tokens (area
        ``fp(I)``).
        """
        if not self.opts.pruning:
            return 0.0
        W, Pc, lb = self.W, self.Pc, self.lb
        if self.obj == "makespan":
            best, tot, area = 0.0, 0, 0
            for p, code in enumerate(codes):
                g, m = divmod(code, W)
                O = self.O[p]
                if g >= O:
                    continue
                S = self.I[p] + g
                kt = S - m + O - g - 1
                tot += kt
                area += self.area[p][g]
                v = lb(-(-(S - m) // Pc) + O - g - 1, kt) + max(0.0, self.A[p] - clock)
                if v > best:
                    best = v
            if tot:
                best = max(best, lb(max(-(-tot // self.C), -(-area // self.M)), tot))
            return best
        kb, kt, ar = [], [], []
        ttft = self.obj == "mean-ttft"
        for p, code in enumerate(codes):
            g, m = divmod(code, W)
            O = self.O[p]
            if g >= O or (ttft and g >= 1):
                continue
            S = self.I[p] + g
            if ttft:
                kb.append(-(-(S - m) // Pc))
                kt.append(S - m)
                ar.append(self.fp(S))
            else:
                kb.append(-(-(S - m) // Pc) + O - g - 1)
                kt.append(S - m + O - g - 1)
                ar.append(self.area[p][g])
        if clock < self.A_max - _EPS:
            return sum(lb(b, t) for b, t in zip(kb, kt))
        # every request has arrived: the k-th completion (first token) is at least
        # max(k-th smallest own bound, lb(max(k-th smallest kb, ceil(T_k / C), ceil(A_k / M)), T_k))
        # with T_k, A_k the sums of the k smallest token counts and areas
        own = sorted(lb(b, t) for b, t in zip(kb, kt))
        kb.sort()
        kt.sort()
        ar.sort()
        h, T, A, C, M = 0.0, 0, 0, self.C, self.M
        for k in range(len(own)):
            T += kt[k]
            A += ar[k]
            h += max(own[k], lb(max(kb[k], -(-T // C), -(-A // M)), T))
        return h

    def is_goal(self, codes) -> bool:
        if self.early_ttft_goal:
            W = self.W
            return all(c // W >= 1 for c in codes)
        if self.goal is not None:
            return codes == self.goal
        return all(c == d for c, d in zip(codes, self.done_code))

    # -- edges ----------------------------------------------------------------------
    def options(self, p: int, code: int):
        """Moves of one request in a batch: (kind, c, new code, tokens, prefill tokens,
        entry?, KV after (blocks), cached before, decode?)."""
        key = (p, code)
        out = self._opt_cache.get(key)
        if out is not None:
            return out
        W, opts = self.W, self.opts
        g, m = divmod(code, W)
        I, O = self.I[p], self.O[p]
        S = I + g
        fp = self.fp
        out = []
        if not (opts.no_pausing and m > 0):
            out.append((_SKIP, 0, code, 0, 0, False, fp(m), m, False))
        decode = g >= 1 and m == S - 1
        cs = (S - m,) if opts.no_chunking else range(1, S - m + 1)
        for c in cs:
            nm = m + c
            if nm == S:
                ng = g + 1
                ncode = O * W if ng == O else ng * W + nm
            else:
                ncode = g * W + nm
            out.append((_PROC, c, ncode, c, 0 if decode else c, True, fp(nm), m, decode))
        if m > 0 and not opts.no_evictions:
            out.append((_EVICT, 0, g * W, 0, 0, False, 0, m, False))
            cs = (S,) if opts.no_chunking else range(1, S + 1)
            for c in cs:
                if self.unit_r8 and c >= m:
                    continue  # R8 under unit cost: continuing from m is never costlier
                if c == S:
                    ng = g + 1
                    ncode = O * W if ng == O else ng * W + c
                else:
                    ncode = g * W + c
                # R8's alternative: continue from m (None: c < m, no alternative; (): skip X)
                alt = None if c < m else () if c == m else (c - m, m, decode)
                out.append((_REFILL, c, ncode, c, c, True, fp(c), 0, False, alt))
        self._opt_cache[key] = out
        return out

    def batches(self, codes, clock: float, deadline: float | None = None):
        """Yield (edge, successor raw codes, batch time) for every batch allowed at ``clock``;
        raises :class:`_Timeout` once ``deadline`` (perf_counter) passes while enumerating."""
        W = self.W
        O = self.O
        active = [p for p, code in enumerate(codes)
                  if code // W < O[p] and self.A[p] <= clock + _EPS]
        if not active:
            return
        opts = [self.options(p, codes[p]) for p in active]
        nact = len(active)
        # R4 inside a batch: an identical request in the identical state as its predecessor
        # takes an option index >= the predecessor's
        prune = self.opts.pruning
        same_prev = [prune and k > 0 and self.cls_id[active[k]] == self.cls_id[active[k - 1]]
                     and codes[active[k]] == codes[active[k - 1]] for k in range(nact)]
        suffix = [0] * (nact + 1)
        for k in range(nact - 1, -1, -1):
            suffix[k] = suffix[k + 1] + min(o[6] for o in opts[k])
        C, P, B, M = self.C, self.P, self.B, self.M
        fp = self.fp
        chosen = [0] * nact
        leaves: list[tuple[tuple[int, ...], int]] = []
        calls = [0]

        def rec(k, tok, pre, ent, mem):
            calls[0] += 1
            if deadline is not None and (calls[0] & 4095) == 0 and time.perf_counter() > deadline:
                raise _Timeout
            if k == nact:
                if ent:  # R1 / R2
                    leaves.append((tuple(chosen), mem))
                return
            ol = opts[k]
            rest = suffix[k + 1]
            for idx in range(chosen[k - 1] if same_prev[k] else 0, len(ol)):
                o = ol[idx]
                nt = tok + o[3]
                npre = pre + o[4]
                ne = ent + o[5]
                nmem = mem + o[6]
                if nt > C or npre > P or (B is not None and ne > B) or nmem + rest > M:
                    continue
                chosen[k] = idx
                rec(k + 1, nt, npre, ne, nmem)
            chosen[k] = 0

        rec(0, 0, 0, 0, 0)
        for n_leaf, (ch, mem) in enumerate(leaves):
            if deadline is not None and (n_leaf & 1023) == 1023 and time.perf_counter() > deadline:
                raise _Timeout
            edge = []
            sig = []
            refills = []
            ok = True
            for k, idx in enumerate(ch):
                o = opts[k][idx]
                kind = o[0]
                if kind == _SKIP:
                    continue
                if kind == _EVICT and prune and mem + fp(o[7]) <= M:
                    ok = False  # R3: this plain eviction is not needed now; postpone it
                    break
                edge.append((active[k], kind, o[1]))
                if o[5]:
                    sig.append((o[1], o[7], o[8]))
                    if kind == _REFILL and o[9] is not None:
                        refills.append(o)
            if not ok:
                continue
            sig.sort()
            key = tuple(sig)
            d = self.batch_time(key)
            if prune and refills and self._r8_dominated(key, d, refills):
                continue
            raw = list(codes)
            for k, idx in enumerate(ch):
                o = opts[k][idx]
                if o[0] != _SKIP:
                    raw[active[k]] = o[2]
            yield tuple(edge), raw, d

    def _r8_dominated(self, sig: tuple, d: float, refills) -> bool:
        """R8: an evict-and-refill of X to ``c >= m_old`` tokens is dropped when processing
        ``c - m_old`` tokens from ``m_old`` instead (or nothing, if ``c = m_old``) reaches the
        same state in a batch that is no slower: fewer tokens, no more prefill tokens or
        entries, the same KV. If that leaves the batch with only evictions, it takes no time
        and R2 folds it into the next batch. Each replacement removes an eviction, so
        normalising an optimal schedule this way (with R2, R3) terminates."""
        for o in refills:
            rest = list(sig)
            rest.remove((o[1], 0, False))
            if o[9]:
                rest.append(o[9])
                rest.sort()
            if not rest or self.batch_time(tuple(rest)) <= d + 1e-12:
                return True
        return False

    def edge_cost_fn(self, codes, clock: float):
        """The cost of moving the clock from ``clock`` to ``t_end`` in state ``codes``."""
        if self.obj == "makespan":
            return lambda t_end: t_end - clock
        W, n_now, later = self.W, 0, []
        for p, code in enumerate(codes):
            g = code // W
            if g >= self.O[p] or (self.obj == "mean-ttft" and g >= 1):
                continue
            a = self.A[p]
            if a <= clock:
                n_now += 1
            else:
                later.append(a)
        if not later:
            return lambda t_end: n_now * (t_end - clock)
        return lambda t_end: n_now * (t_end - clock) + sum(t_end - a for a in later if a < t_end)

    def key(self, codes, clock: float):
        """R5: makespan keys on the arrivals seen so far (earlier is better among equal
        keys); the latency objectives on the clock until the last arrival."""
        if clock >= self.A_max - _EPS:
            return (codes, None)
        if self.obj == "makespan":
            return (codes, bisect.bisect_right(self.arrivals, clock + _EPS))
        return (codes, round(clock, 9))

    # -- the search ------------------------------------------------------------------
    def run(self) -> SearchResult:
        t0 = time.perf_counter()
        opts = self.opts
        root = self.root
        rkey = self.key(root, 0.0)
        # node: key -> [cost, clock, parent key, edge, codes, closed]
        nodes: dict[Any, list] = {rkey: [0.0, 0.0, None, None, root, False]}
        heap = [(self.heuristic(root, 0.0), self.remaining(root), 0, rkey)]
        cnt = 1
        expanded = 0
        ub = self.ub
        limit = opts.max_states
        deadline = None if opts.time_limit is None else t0 + opts.time_limit

        def timed_out(expanded: int, generated: int) -> SearchResult:
            return SearchResult(
                Status.NO_SOLUTION, None, None, expanded, generated, time.perf_counter() - t0,
                f"time limit {opts.time_limit:g} s reached after {expanded} expanded and "
                f"{generated} generated states; instance too large for exhaustive search")
        while heap:
            f, _, _, key = heapq.heappop(heap)
            node = nodes[key]
            if node[5]:
                continue
            node[5] = True
            cost, clock, _, _, codes, _ = node
            if self.is_goal(codes):
                return self._finish(key, nodes, cost, expanded, t0)
            expanded += 1
            if len(nodes) > limit:
                return SearchResult(
                    Status.NO_SOLUTION, None, None, expanded, len(nodes), time.perf_counter() - t0,
                    f"state limit {limit} reached after {expanded} expanded and {len(nodes)} "
                    f"generated states; instance too large for exhaustive search")
            if deadline is not None and time.perf_counter() > deadline:
                return timed_out(expanded, len(nodes))
            succ = []
            ecost = self.edge_cost_fn(codes, clock)
            try:  # one expansion can enumerate very many batches on a large instance
                for edge, raw, d in self.batches(codes, clock, deadline):
                    t_end = clock + d
                    succ.append((edge, raw, t_end, ecost(t_end)))
            except _Timeout:
                return timed_out(expanded, len(nodes))
            nxt = [a for a in self.arrivals if a > clock + _EPS]
            if nxt:  # R5: idle until the next arrival
                succ.append((None, list(codes), nxt[0], ecost(nxt[0])))
            for edge, raw, t_end, ec in succ:
                ncodes, _ = self.canon(raw)
                nc = cost + ec
                nkey = self.key(ncodes, t_end)
                old = nodes.get(nkey)
                if old is not None and old[0] <= nc + 1e-12 * max(1.0, abs(nc)):
                    continue  # reached as cheaply before (a closed key is re-opened if beaten)
                h = self.heuristic(ncodes, t_end)
                if ub is not None and nc + h > ub * (1 + 1e-9) + 1e-9:
                    continue  # R6
                nodes[nkey] = [nc, t_end, key, edge, ncodes, False]
                heapq.heappush(heap, (nc + h, self.remaining(ncodes), cnt, nkey))
                cnt += 1
        what = "the restrictions" if opts.restricted else "the instance's limits"
        if ub is not None:
            return SearchResult(Status.NO_SOLUTION, None, None, expanded, len(nodes),
                                time.perf_counter() - t0,
                                f"no schedule with objective <= the upper bound {self.opts.upper_bound}")
        return SearchResult(Status.INFEASIBLE, None, None, expanded, len(nodes), time.perf_counter() - t0,
                            f"no schedule finishes every request under {what} "
                            f"(search space exhausted after {expanded} states)")

    def _finish(self, key, nodes, cost, expanded, t0) -> SearchResult:
        path = state_path(nodes, key)
        ids = self.inst.ids
        perm = list(self.pos_req)
        b = ScheduleBuilder(list(ids))
        pending_start = None
        for parent, child in zip(path, path[1:]):
            edge = child[3]
            pcodes = parent[4]
            raw = list(pcodes)
            if edge is None:  # idle: the next batch states its start
                pending_start = child[1]
                continue
            entries, evict, pre_evict = [], [], []
            for p, kind, c in edge:
                rid = ids[perm[p]]
                if kind == _PROC:
                    entries.append((rid, c))
                elif kind == _EVICT:
                    evict.append(rid)
                else:
                    pre_evict.append(rid)
                    entries.append((rid, c))
            if pre_evict:  # R2's evict-and-refill: a zero-time eviction-only batch first
                b.add([], pre_evict, None)
            b.add(entries, evict, pending_start)
            pending_start = None
            # replay the edge on the parent's codes to recover the permutation
            for p, kind, c in edge:
                raw[p] = self._apply(p, pcodes[p], kind, c)
            ncodes, order = self.canon(raw)
            assert ncodes == child[4], "exhaustive: path replay diverged"
            perm = [perm[o] for o in order]
        if self.early_ttft_goal:
            self._complete(b, path[-1][4], perm)
        objective = cost / self.inst.n if self.obj == "mean-ttft" else cost
        return SearchResult(Status.OPTIMAL, objective, b.build(), expanded, len(nodes),
                            time.perf_counter() - t0)

    def _apply(self, p, code, kind, c) -> int:
        for o in self.options(p, code):
            if o[0] == kind and o[1] == c:
                return o[2]
        raise AssertionError("exhaustive: move not found on replay")

    def _complete(self, b: ScheduleBuilder, codes, perm) -> None:
        """R7: evict every resident request, then run each unfinished request alone."""
        W, ids = self.W, self.inst.ids
        resident = [p for p, code in enumerate(codes) if code // W < self.O[p] and code % W > 0]
        if resident:
            b.add([], [ids[perm[p]] for p in resident], None)
        for p, code in enumerate(codes):
            g = code // W
            if g >= self.O[p]:
                continue
            S, m, O = self.I[p] + g, 0, self.O[p]
            while g < O:
                c = min(S - m, self.Pc) if S - m > 1 else 1
                b.add([(ids[perm[p]], c)], (), None)
                m += c
                if m == S:
                    g += 1
                    S += 1


def search(instance: Instance, objective: str = "makespan", options: SearchOptions | None = None
           ) -> SearchResult:
    """Exact minimum of ``objective`` over all schedules of ``instance`` (module docstring)."""
    refuse_swaps("exhaustive", instance)
    if instance.has_prefix:  # the search with cache decisions (semantics section 6)
        return search_reuse(instance, objective, options or SearchOptions())
    return _Search(instance, objective, options or SearchOptions()).run()


def search_between(instance: Instance, objective: str, start: list[tuple[int, int]],
                   goal: list[tuple[int, int]], options: SearchOptions | None = None
                   ) -> SearchResult:
    """Exact minimum cost of going from per-request states ``start`` to exactly ``goal``
    (``(g, m)`` per request, instance order; semantics section 3), clock 0 at the start.

    The path cost is the module docstring's edge cost summed up to the goal (for the latency
    objectives a request whose goal is unfinished accrues until the goal is reached). Used by
    large-neighbourhood search (:mod:`optsched.search.lns`) to re-solve a window of batches. Pruning
    is off: R3 (postpone an eviction) and R4 (interchange identical requests) do not hold when
    the goal fixes who is evicted and which request ends in which state, and the A* heuristic
    bounds the cost to *completion*, not to ``goal``; so this is plain Dijkstra."""
    refuse_swaps("exhaustive", instance)
    refuse_prefix_reuse("exhaustive", instance)
    if len(start) != instance.n or len(goal) != instance.n:
        raise FormulationError("exhaustive: start and goal need one state per request")
    opts = options or SearchOptions()
    opts = SearchOptions(max_states=opts.max_states, time_limit=opts.time_limit, pruning=False)
    return _Search(instance, objective, opts, start, goal).run()
