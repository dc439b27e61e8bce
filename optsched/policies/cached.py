"""Prefix-caching schedulers (docs/semantics.md section 6, "Prefix reuse"): vLLM with
automatic prefix caching, SARATHI with it, SGLang's cache-aware orders (longest prefix match,
depth-first radix order), Dexter et al.'s k-LPM, and an offline Belady cache under any of them.

Each is InferMax's unified scheduler (:mod:`.unified`, Algorithm 1) with three additions:

* **Hits at admission.** A waiting request (new, or evicted: ``m = 0``) is admitted with the
  longest run of resident shareable blocks as its hit (:meth:`SimView.hit_run`); vLLM looks
  blocks up only then, so a running prefill never hits later. The prefill computes the rest,
  ``S - hit`` tokens (chunked as the configuration says).
* **Memory with sharing.** The reservation accounting of :mod:`.unified` is kept, per request,
  for what it holds privately: ``used = b * |held blocks| + sum_i (fp(res_i) - b * f_i)``
  over the resident requests (``f_i`` the blocks request ``i`` holds). Hitting a block someone
  holds costs nothing; hitting a cached block costs ``b`` (it stops being free); completing a
  block that is already held frees ``b``. Cached blocks (resident, held by nobody) are free
  space, as in vLLM's free-block queue: they are dropped when the batch needs their room.
  Then ``used + b * (cached blocks after the drops) <= M``, and the KV after the batch
  (semantics rule 4) is at most that.
* **Which cached blocks go** (``cache``): ``lru`` drops the least recently used -- the order in
  which blocks became unheld, a request's last block first, as vLLM's free queue does
  (blocks freed by this batch's evictions last); ``belady`` (offline) drops the block whose
  next use is furthest: the earliest arrival among the requests that list it as shareable
  and do not hold it, never-used-again first (ties: LRU). Belady's rule is optimal for a
  fixed sequence of accesses; here the sequence depends on the schedule, so it is the rule,
  not a proven optimum, and it reads future arrivals (offline).

The **order** in which waiting requests are tried (``rule``; every order keeps the unified
scheduler's head-of-line rule: the first that does not fit closes the queue for the batch):

* ``fcfs``: arrival (vLLM);
* ``lpm``: longest hit first, ties by arrival (SGLang's ``lpm``); with more than
  ``fcfs_above`` waiting requests it falls back to arrival order, as SGLang does above 128
  (SGLang then keeps its previous order; here arrival order);
* ``dfs``: SGLang's ``dfs-weight``: the waiting requests attached to the deepest resident
  block of their hit (or to the root), the tree of those blocks walked depth first, children
  by decreasing number of waiting requests below them (ties: smaller block id), a node's
  children before its own requests (arrival order);
* ``k-lpm``: Dexter et al. (NeurIPS 2025, arXiv 2502.04677): the oldest waiting request, then
  ``k - 1`` longest-prefix-match picks, repeated (``k = 1`` is FCFS, ``k -> inf`` is LPM);
  the count runs over admissions across batches.

Hit lengths for the order are computed once per batch against the resident blocks at its
start. On an instance without block ids every policy here schedules exactly as its unified
configuration.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..prefix import PrefixIndex
from .registry import Param, PolicyError, non_negative, positive, register
from .reuse import BlockState
from .simulator import Plan, SimView
from .unified import (
    _DECODE,
    _P_PARAM,
    _PREFILL,
    _VLLM_PARAMS,
    TABLE1,
    VLLM_DEFAULTS,
    UnifiedScheduler,
)

_RULES = ("fcfs", "lpm", "dfs", "k-lpm")
_CACHES = ("lru", "belady")
#: SGLang's queue length above which LPM falls back to FCFS (schedule_policy.py)
SGLANG_LPM_LIMIT = 128


class CachedScheduler(UnifiedScheduler):
    """The unified scheduler with prefix hits, shared memory and a cache (module docstring)."""

    reuse_aware = True
    #: this exact class runs on the compiled kernel of :mod:`.fast_cached` (fcfs and lpm
    #: orders, LRU cache); the unified kernel does not cover it
    fast_kernel = "cached"

    def __init__(self, *, rule: str = "fcfs", cache: str = "lru", k: int = 2,
                 fcfs_above: int = 0, **unified):
        super().__init__(**unified)
        if rule not in _RULES:
            raise PolicyError(f"CachedScheduler: rule must be one of {', '.join(_RULES)}, "
                              f"got {rule!r}")
        if cache not in _CACHES:
            raise PolicyError(f"CachedScheduler: cache must be one of {', '.join(_CACHES)}, "
                              f"got {cache!r}")
        self.rule, self.cache, self.k, self.fcfs_above = rule, cache, int(k), int(fcfs_above)

    # -- setup --------------------------------------------------------------------------
    def bind(self, view: SimView) -> None:
        super().bind(view)
        self.bs = view.blocks  # None: no block ids, the unified scheduler's own behaviour
        self.hit_of: dict[int, int] = {}
        self.lru: list[tuple[int, int]] = []  # (release stamp, block), lazily invalidated
        self.admissions = 0  # k-lpm's count over admissions
        self._done = np.zeros(view.n, bool)  # finished requests (told by on_batch_end)
        if self.bs is not None and self.cache == "belady":
            self._users = _users_by_rank(view.prefix, self.rank_of)
            self._next = self._users[0][:-1].copy()  # per block: first user not finished

    @property
    def _st(self) -> BlockState:
        """The simulation's blocks (only called when the instance has block ids)."""
        assert self.bs is not None
        return self.bs

    @property
    def _ix(self) -> PrefixIndex:
        assert self.view.prefix is not None
        return self.view.prefix

    # -- memory with sharing ------------------------------------------------------------
    def _local_hold(self, x: int) -> int:
        return int(self._st.holds[x]) + self._dh.get(x, 0)

    def _change_hold(self, x: int, d: int) -> int:
        """Change block ``x``'s hold count in the plan by ``d``; returns the change of the
        number of held blocks (+1: it becomes held, -1: unheld)."""
        before = self._local_hold(x)
        self._dh[x] = self._dh.get(x, 0) + d
        after = before + d
        return int(after > 0) - int(before > 0)

    def _recount(self) -> int:
        """``used`` from the state at the batch's start (module docstring)."""
        run = self.run_idx
        if not run.size:
            return self._st.b * self._st.n_held
        held = self._ix.held(run, self.view.m[run])
        own = self.view.limits.kv_footprint(self.res[run]) - self._st.b * held
        return self._st.b * self._st.n_held + int(own.sum())

    def _evict(self, i: int) -> None:
        if self.bs is None:
            super()._evict(i)
            return
        b = self._st.b
        f = int(self._ix.held(i, int(self.view.m[i])))
        super()._evict(i)  # used -= fp(res)
        self.used += b * f
        for x in self._ix.blocks_of(i)[:f][::-1].tolist():
            d = self._change_hold(x, -1)
            self.n_held += d
            self.used += b * d
            if d < 0:
                self._freed.append(x)

    def _hit(self, i: int) -> int:
        h = self._hits.get(i)
        if h is None:
            h = self._hits[i] = self._st.hit_run(i, int(self.view.m[i]))
        return h

    def _cand_waiting(self, i: int, pos: int) -> bool:
        """Admit waiting request ``i`` with its hit (module docstring; otherwise as
        :meth:`UnifiedScheduler._cand_waiting`)."""
        if self.bs is None:
            return super()._cand_waiting(i, pos)
        if not self.hybrid and self.phase == _DECODE:
            return False
        if self.nb >= self.maxbs or self.n_resident >= self.max_num_seqs:
            return False
        v = self.view
        b = self._st.b
        S = int(v.S[i])
        h = self._hit(i)
        c = self._prefill_tokens(S - h)
        if c <= 0:
            return False
        R = self._reserve_target(i, S, int(v.g[i]))
        hit_blocks = self._ix.blocks_of(i)[:h // b].tolist()
        fresh = sum(1 for x in hit_blocks if self._local_hold(x) == 0)
        delta = self._fp(R) - h + b * fresh
        if delta <= self.capM - self.wm:
            delta += self.wm
        if delta > self.M - self.used:
            if not self.waiting_evicts:
                return False
            freeable = sum(self._own(x) for x in self.seq[pos:self.end].tolist())
            if delta > self.M - self.used + freeable:
                return False
            while delta > self.M - self.used:
                self.end -= 1
                self._evict(int(self.seq[self.end]))
            fresh = sum(1 for x in hit_blocks if self._local_hold(x) == 0)
        self._add(i, c, R, _PREFILL, True)
        self.used += -h
        for x in hit_blocks:
            d = self._change_hold(x, +1)
            self.n_held += d
            self.used += b * d
        self.hit_of[i] = h
        self.resident[i] = True
        self.n_resident += 1
        self.admitted.append(i)
        self.admissions += 1
        return True

    def _own(self, i: int) -> int:
        """What evicting resident request ``i`` frees at least (its private reservation)."""
        f = int(self._ix.held(i, int(self.view.m[i])))
        return self._fp(int(self.res[i])) - self._st.b * f

    # -- the waiting order ------------------------------------------------------------------
    def _run_waiting(self, pos: int) -> None:
        if self.bs is None or self.rule == "fcfs" or not self.waiting or (
                self.fcfs_above and len(self.waiting) > self.fcfs_above):
            super()._run_waiting(pos)
            return
        ranks = sorted(self.waiting)
        idx = self.idx_of_rank[np.array(ranks, np.int64)].tolist()
        taken = set()
        for i in self._order(idx):
            if not self._cand_waiting(i, pos):
                break
            taken.add(int(self.rank_of[i]))
        if taken:
            self.waiting = [r for r in self.waiting if r not in taken]
            heapq.heapify(self.waiting)

    def _order(self, idx: list[int]):
        """The waiting requests ``idx`` (arrival order) in the order ``rule`` tries them."""
        if self.rule == "dfs":
            yield from _dfs_order(idx, [self._hit(i) // self._st.b for i in idx],
                                  self.view.prefix)
            return
        hits = [self._hit(i) for i in idx]
        by_hit = sorted(range(len(idx)), key=lambda t: (-hits[t], t))
        if self.rule == "lpm":
            yield from (idx[t] for t in by_hit)
            return
        left = set(range(len(idx)))  # k-lpm
        oldest = 0
        lpm_pos = 0
        while left:
            if self.admissions % self.k == 0:
                while oldest not in left:
                    oldest += 1
                t = oldest
            else:
                while by_hit[lpm_pos] not in left:
                    lpm_pos += 1
                t = by_hit[lpm_pos]
            left.discard(t)
            yield idx[t]

    # -- one batch ----------------------------------------------------------------------
    def next_batch(self) -> Plan | None:
        if self.bs is None:
            return super().next_batch()
        self._dh: dict[int, int] = {}
        self._hits: dict[int, int] = {}
        self._freed: list[int] = []  # blocks this batch's evictions leave unheld, in order
        self.n_held = self._st.n_held
        self.hit_of = {}
        self.used = self._recount()
        plan = super().next_batch()
        assert plan is not None
        hits = [self.hit_of.get(int(i), 0) for i in np.asarray(plan.req).tolist()]
        return plan._replace(hits=hits if any(hits) else (), drops=self._drops())

    def _drops(self) -> list[int]:
        """The cached blocks this batch must drop so that ``used + b * cached <= M``."""
        bs = self._st
        cached = bs.n_res - self.n_held
        k = cached - max(0, (self.M - self.used) // bs.b)
        if k <= 0:
            return []
        if self.cache == "belady":
            return self._belady(k)
        out: list[int] = []
        while len(out) < k and self.lru:
            stamp, x = heapq.heappop(self.lru)
            if bs.resident[x] and bs.holds[x] == 0 and bs.stamp[x] == stamp \
                    and self._local_hold(x) == 0:
                out.append(x)
        out += [x for x in self._freed if self._local_hold(x) == 0][:k - len(out)]
        return out

    def _candidates(self) -> list[int]:
        """Every cached block after the plan (LRU order)."""
        bs = self._st
        keep = sorted((s, x) for s, x in self.lru if bs.resident[x] and bs.holds[x] == 0
                      and bs.stamp[x] == s and self._local_hold(x) == 0)
        self.lru = [(s, x) for s, x in keep]  # drop the stale entries (a sorted list is a heap)
        return [x for _, x in keep] + [x for x in self._freed if self._local_hold(x) == 0]

    def _belady(self, k: int) -> list[int]:
        """The ``k`` cached blocks whose next use is furthest (module docstring)."""
        cand = self._candidates()
        nxt = [self._next_use(x) for x in cand]
        order = sorted(range(len(cand)), key=lambda t: (-nxt[t], t))
        return [cand[t] for t in order[:k]]

    def _next_use(self, x: int) -> float:
        """The arrival rank of the first request that will want block ``x``: it lists it as
        shareable, has not finished and holds no KV (waiting, evicted or yet to arrive)."""
        ptr, users = self._users
        done, m = self._done, self.view.m
        q = int(self._next[x])
        while q < ptr[x + 1] and done[users[q]]:
            q += 1  # finished users never come back
        self._next[x] = q
        while q < ptr[x + 1]:
            u = users[q]
            if m[u] == 0 and not self.resident[u]:
                return float(self.rank_of[u])
            q += 1
        return float("inf")

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        super().on_batch_end(plan, finished)
        self._done[finished] = True
        if self.bs is not None:
            for x in self._st.released:
                heapq.heappush(self.lru, (int(self._st.stamp[x]), x))


def _users_by_rank(prefix, rank_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per block, the requests listing it among their shareable blocks, by arrival rank
    (CSR: ``users[ptr[x]:ptr[x+1]]``)."""
    n = prefix.listed.size
    req = np.repeat(np.arange(n), prefix.listed)
    pos = np.arange(prefix.n_listed) - prefix.ptr[req]
    keep = pos < prefix.shareable[req]
    blk, rq = prefix.block[keep], req[keep]
    order = np.lexsort((rank_of[rq], blk))
    ptr = np.zeros(prefix.n_blocks + 1, np.int64)
    np.add.at(ptr, blk + 1, 1)
    return np.cumsum(ptr), rq[order]


def _dfs_order(idx: list[int], depth: list[int], prefix):
    """SGLang's dfs-weight order of the waiting requests ``idx`` (module docstring):
    ``depth[t]`` is request ``idx[t]``'s hit in blocks; its node is its block ``depth - 1``."""
    children: dict[int, set[int]] = {}
    weight: dict[int, int] = {}
    at: dict[int, list[int]] = {}
    for i, d in zip(idx, depth):
        chain = [-1] + prefix.blocks_of(i)[:d].tolist()
        at.setdefault(chain[-1], []).append(i)
        for parent, child in zip(chain[:-1], chain[1:]):
            children.setdefault(parent, set()).add(child)
        for node in chain:
            weight[node] = weight.get(node, 0) + 1
    out: list[int] = []

    def walk(node: int) -> None:
        for child in sorted(children.get(node, ()), key=lambda c: (-weight[c], c)):
            walk(child)
        out.extend(at.get(node, ()))

    walk(-1)
    return out


# -- registration --------------------------------------------------------------------------
_CACHE_PARAM = Param("cache", str, "lru", "which cached blocks are dropped: lru (least recently "
                     "used) or belady (next use furthest; offline: reads future arrivals)",
                     choices=_CACHES)
_VLLM_APC = "vLLM automatic prefix caching (docs.vllm.ai, design: prefix caching)"
_SGLANG = ("SGLang RadixAttention and its cache-aware schedule policies (Zheng et al., "
           "SGLang: Efficient Execution of Structured Language Model Programs, NeurIPS 2024, "
           "section 3; python/sglang/srt/managers/schedule_policy.py)")


def _factory(**fixed):
    def make(**params):
        return CachedScheduler(**{**fixed, **params})

    return make


def _register_all() -> None:
    for base, name in (("vllm", "vllm-apc"), ("sarathi", "sarathi-apc")):
        cfg = dict(TABLE1[base][1])
        p = cfg.pop("P")
        register(name, f"{TABLE1[base][0]}; automatic prefix caching: block hits at "
                 "admission, LRU over unheld cached blocks",
                 f"{_VLLM_APC}; InferMax (Kim et al.) Algorithm 1 + Table 1",
                 params=(_P_PARAM, _CACHE_PARAM, *_VLLM_PARAMS),
                 defaults={"P": p, **VLLM_DEFAULTS}, factory=_factory(**cfg))
    sglang = dict(order="prefill-first", hybrid=False, chunked=True)
    register("lpm", "SGLang longest-prefix-match first (FCFS above fcfs_above waiting "
             "requests, as SGLang above 128), prefill priority, chunked prefill, LRU cache",
             _SGLANG, params=(_P_PARAM, _CACHE_PARAM,
                              Param("fcfs_above", int, SGLANG_LPM_LIMIT, "waiting requests "
                                    "above which the order is arrival (0 = never)",
                                    non_negative), *_VLLM_PARAMS),
             defaults={"P": 0, **VLLM_DEFAULTS}, factory=_factory(**sglang, rule="lpm"))
    register("dfs", "SGLang dfs-weight: depth-first radix-tree order of the waiting requests "
             "(heaviest subtree first), prefill priority, chunked prefill, LRU cache",
             _SGLANG, params=(_P_PARAM, _CACHE_PARAM, *_VLLM_PARAMS),
             defaults={"P": 0, **VLLM_DEFAULTS}, factory=_factory(**sglang, rule="dfs"))
    register("k-lpm", "k-LPM: the oldest waiting request, then k - 1 longest-prefix-match "
             "picks (k = 1 FCFS, large k LPM), prefill priority, chunked prefill, LRU cache",
             "Dexter et al., LLM Query Scheduling with Prefix Reuse and Latency Constraints, "
             "NeurIPS 2025, arXiv 2502.04677 (k-LPM)",
             params=(_P_PARAM, _CACHE_PARAM, Param("k", int, 2, "one FCFS pick in every k "
                                                   "admissions", positive), *_VLLM_PARAMS),
             defaults={"P": 0, **VLLM_DEFAULTS}, factory=_factory(**sglang, rule="k-lpm"))
    cfg = dict(TABLE1["vllm"][1])
    cfg.pop("P")
    register("belady", "vllm-apc's order with an offline Belady cache: the cached block whose "
             "next use (earliest pending arrival listing it) is furthest is dropped first",
             f"Belady, A study of replacement algorithms for a virtual-storage computer, IBM "
             f"Systems Journal 1966; order: {_VLLM_APC}",
             params=(_P_PARAM, *_VLLM_PARAMS),
             defaults={"P": 0, **VLLM_DEFAULTS}, factory=_factory(**cfg, cache="belady"))


_register_all()

__all__ = ["CachedScheduler", "SGLANG_LPM_LIMIT"]
