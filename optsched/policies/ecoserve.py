"""EcoServe (Shen and Sen, "EcoServe: Maximizing Multi-Resource Utilization with SLO
Guarantees in LLM Serving", sections 2-4) and its baseline ORCA, on the InferMax batch
semantics (docs/semantics.md section 3).

What exactly is simulated
-------------------------
* **Decoupled queues** (section 3.2.1). A request is first a *prompt task* (PT): it waits in
  the PT queue, reserves ``fp(S)`` KV (its prompt, or prompt + generated tokens when it is
  refilled after a preemption) when it starts, and is chunked so that the batch reaches the
  *target forward size* ``TFS`` tokens (decodes + prefill chunks; a parameter, default
  :func:`default_tfs`). When its prefill completes it is a *generation task* (GT): it joins
  the GT queue holding its prompt's KV (its *occupied* KV, section 2.4). A selected GT is
  allocated ``fp(m + L)`` in total (**exact allocation** in blocks): ``m`` cached tokens
  plus ``L`` = the padded prediction of the tokens still to generate. A GT decodes one token
  in every batch until it finishes.
* **Admission** (section 3.2.1's reserve, read so that it cannot deadlock): a waiting GT may
  be allocated anywhere in ``M``; a *new* PT is admitted only while no GT waits and while
  the reservations stay within the cap ``M - reserve * M`` (``reserve`` 1-5%). Read the
  other way round (GTs capped at ``M - reserve``, new prompts admitted up to ``M``), a PT's
  prompt KV stays with it as a waiting GT and counts against the GTs' cap: once prompts
  pass the cap, the waiting GTs hold the memory and cannot start while a few run (seen on
  the Azure trace: 1-6 GTs running, 80-96 waiting on ~95% of the KV; a 3-request instance in
  ``tests/policies/test_ecoserve.py``). Under this rule the reserve is the headroom an
  under-predicted GT grows into first (section 3.2.2, "it first tries to use the reserved
  KVC"), and prompts never take memory a waiting GT needs.
* **Length bins** (``length_bin``, default 16 tokens = one KV block of the paper's vLLM
  base): GTs whose padded predictions ``L`` round up to the same multiple of ``length_bin``
  form one time-synced group. The paper groups GTs "with the same predicted RL"; with
  token-exact predictions (``length_bin = 1``) same-length groups have mean size 1.00-1.03
  on the Azure trace and time-synced batching never acts (EcoServe-SD and EcoServe-D gave
  identical numbers). The bin is the *group key only*: a GT is allocated
  its padded prediction itself (section 3.2.1, "that allocated to a GT equals to its
  predicted RL"; section 3.2.2, "the predicted RL is increased by a certain percent"), so
  the oracle allocates exactly what it will use. (Allocating the binned length, as this
  module did before, over-allocated up to ``length_bin - 1`` tokens per GT: on a 7-request
  instance, one long request at t = 0 and six short ones at t = 1.5 with M = 120, the
  oracle's long GT reserved 55 tokens for 47, the six short GTs could not start until it
  finished and the mean latency was 49.0 against 25.0 with exact allocation;
  ``tests/policies/test_ecoserve.py``.)
* **Time-synced batching** (``sync``, section 3.2.2): GTs with the same group key (binned ``L``) form a group
  and are selected together (split when the free KV cannot hold the whole group); the
  unsynced variant ``ecoserve-d`` selects GTs one by one in arrival order.
* **Under-prediction** (section 3.2.2, "Misprediction"): a GT whose next token would exceed
  its allocation first takes one more block from the free KV *including the PT reserve*;
  if there is none it stops (offload-free preemption). We price that stop with the
  evaluator's **recompute** semantics: the request is evicted (KV dropped), re-enters the
  PT queue as a refill of ``S`` tokens, and on becoming a GT again is **re-predicted**
  (``L`` = padded new prediction of the remaining tokens) and regrouped. *Modelling choice*:
  the paper keeps a stopped GT's KV on the GPU; our semantics has no "paused in place"
  state other than staying resident, so the stop is the vLLM-style recompute preemption
  (docs/semantics.md section 3).
* **Ordering** (``ordering``, section 3.3): both queues by (JCT-deadline bucket ascending,
  occupied-KV bucket descending, predicted ``L`` / prompt length descending, arrival).
  The JCT SLO is ``slo_scale * (t_p + t_g * l)`` with ``t_p`` the cost model's time of the
  request's prefill alone, ``t_g`` of one decode at its prompt length, ``l`` the padded
  predicted output; buckets at 0.2, 0.5 and 2 time units (the paper's seconds). The paper:
  "Each task has a deadline to satisfy its SLO. For each factor, we set up certain magnitude
  ranges and order tasks accordingly (e.g., 0.2-0.5s, 0.5-2s, >2s for the deadline, ...).
  First, we order the tasks in ascending order of the deadline." Two readings
  (``deadline``): ``remaining`` (default) buckets the time left to the absolute deadline
  ``arrival + SLO`` when the task is selected -- a queued task moves to a more urgent bucket
  as its deadline nears (its queue entry is renewed then; late tasks are in the first
  bucket); ``slo-length`` buckets the SLO's length, fixed per request, which in effect orders
  by predicted output, shortest first. ``remaining`` is the default because it is the
  text's: a deadline is a point in time, what the ranges can bucket is the time left to it,
  and the key exists "to ensure compliance with JCT SLO requirements", which the SLO's length
  cannot tell (a request that has waited a minute ranks with one just arrived). The two
  differ near and past saturation, where ``remaining`` puts every late task in the first
  bucket and the later keys order them longest first: on the seeded Azure windows at 90%
  load EcoServe is 2.83-9.50x the certified total-latency bound under ``remaining`` and
  2.80-4.83x under ``slo-length`` (within 6% of each other at 50% load);
  ``studies/papers36/FINDINGS.md``. When the
  head group does not fit, a **binary search** over the queued ``L`` finds the longest GT
  that fills the remaining space, repeatedly. Without ordering both queues are FCFS. PTs are
  chunked to fill ``TFS`` exactly, so no search is needed on the PT side.
* **KV-cache pipelining** (``pipeline``, section 3.4): after a group of ``k`` GTs of length
  ``l`` is selected, ``k * 2**(j-1)`` GTs with ``L <= l / 2**j - buffer * l`` (closest
  first) are *hosted* at level ``j = 1, 2, ...``: they borrow the unused second half of the
  allocation instead of getting their own (they hold only their occupied KV). A host and
  everything it hosts form a *family* whose KV is bounded by the family's reservation; at
  level ``j`` there are ``2**(j-1)`` GTs of length ``l / 2**j`` per host, so ``2**j``
  requests each growing by one token per batch stay within ``l`` while they run -- this is
  the paper's Russian-doll nesting (the paper's counts ``k * 2**j`` would overfill the
  host's half at level 1; we use the counts that fit). Before every batch each family's
  next KV is checked; when the host needs the space a hosted GT still running is preempted
  (the most recently hosted first). A finished host's reservation stays with its family
  until the hosted GTs finish.
* **Progress guard** (not in the paper): when no GT runs and the head GT cannot be placed,
  waiting GTs are evicted (lowest priority first) until it fits
  (or, if its predicted allocation exceeds what is left of ``M``, it starts with what is
  left and relies on the under-prediction path), and no new PT is admitted meanwhile.
  Without it, prompts that finished prefill can fill the KV so that no GT can ever start.

Every variant keeps ``sum of reservations <= M`` with each request's (or family's) KV inside
its reservation, so every schedule respects ``M`` exactly.

ORCA (Yu et al., OSDI 2022, as EcoServe's baseline, section 1 and 2.1): iteration-level FCFS
with **max allocation** -- a request reserves ``prompt + max_output`` tokens when admitted --
and a fixed small batch size (8). Prompts longer than ``C`` are chunked (as in
:mod:`.unified`); a request that outgrows ``max_output`` grows token by token and is evicted
(recompute) when the KV is full.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right, insort
from collections import deque

import numpy as np

from ..cost import LinearCost
from ..instance import block_round
from .predictors import make_predictor
from .registry import Param, PolicyError, non_negative, positive, register, unit_interval
from .simulator import Plan, Policy, SimView

_EMPTY = np.zeros(0, np.int64)
_BIG = 1 << 62
# request states
_NEW, _PT_WAIT, _PT_RUN, _GT_WAIT, _GT_RUN, _DONE = range(6)
#: JCT-deadline bucket edges (section 3.3's example, seconds or the cost model's unit)
DEADLINE_EDGES = (0.2, 0.5, 2.0)


def default_tfs(cost_model, C: int) -> int:
    """Target forward size: the batch size in tokens at which the per-batch fixed cost
    (``k0 + kpb + kdb``) is 10% of a batch's time under a :class:`LinearCost`
    (``tokens = 9 * fixed / k1``), capped by ``C``; ``C`` for other cost models (no
    saturation point). 832 tokens under ``infermax-llama2-7b-a100``."""
    if isinstance(cost_model, LinearCost) and cost_model.k1 > 0:
        fixed = cost_model.k0 + cost_model.kpb + cost_model.kdb
        return max(1, min(C, math.ceil(9 * fixed / cost_model.k1)))
    return C


def _check_reserve(v) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1)"


class EcoServe(Policy):
    """EcoServe and its ablations (module docstring)."""

    def __init__(self, *, sync: bool = True, ordering: bool = True, pipeline: bool = True,
                 predictor: str = "noisy", accuracy: float = 0.732, padding: float = 0.15,
                 seed: int = 0, reserve: float = 0.03, buffer: float = 0.15, tfs: int = 0,
                 slo_scale: float = 2.0, bucket: int = 128, length_bin: int = 16,
                 deadline: str = "remaining"):
        if pipeline and not sync:
            raise PolicyError("EcoServe: pipeline needs sync (KV pipelining hosts groups)")
        self.sync, self.ordering, self.pipeline = sync, ordering, pipeline
        self.predictor = make_predictor(predictor, accuracy=accuracy, seed=seed)
        self.padding, self.reserve_frac, self.buffer = padding, reserve, buffer
        self.tfs_param, self.slo_scale, self.bucket = tfs, slo_scale, bucket
        self.length_bin = length_bin
        self.remaining = deadline == "remaining"

    # -- setup ------------------------------------------------------------------------
    def bind(self, view: SimView) -> None:
        super().bind(view)
        n, lim = view.n, view.limits
        self.b = lim.block_size
        self.M = lim.kv_capacity
        self.C = lim.max_batch_tokens
        self.P = lim.prefill_budget
        self.maxbs = lim.max_batch_size or _BIG
        self.tfs = min(self.tfs_param or default_tfs(view.cost_model, self.C), self.C)
        self.pt_cap = self.M - int(self.reserve_frac * self.M)
        if view.predict_remaining is None:  # bind_predictor sets it: we have a predictor
            raise RuntimeError(f"policy {self.name!r}: the simulator bound no length predictor")
        self.predict = view.predict_remaining
        self.state = np.zeros(n, np.int8)
        self.res = np.zeros(n, np.int64)  # own reservation (block-charged tokens)
        self.pt_target = np.zeros(n, np.int64)  # S of a PT when it started: done at m == S
        self.L = np.zeros(n, np.int64)  # padded predicted tokens still to generate (GTs)
        self.key = np.zeros(n, np.int64)  # L rounded up to length_bin: the group key
        self.total = np.zeros(n, np.int64)  # padded predicted output (at arrival)
        self.dl = np.zeros(n, np.int64)  # JCT-deadline bucket ("slo-length" reading)
        self.due = np.zeros(n, np.float64)  # absolute JCT deadline ("remaining" reading)
        self.cur = np.zeros(n, np.int64)  # seq of a request's live queue entry (stamp)
        self.moves: list[tuple[float, int, int]] = []  # (time, seq, i): bucket changes
        self.fam = np.full(n, -1, np.int64)  # family root of a running GT
        self.budget = np.zeros(n, np.int64)  # family reservation, indexed by root
        self.members: dict[int, list[int]] = {}
        self.hosting: set[int] = set()  # roots of families with hosted GTs
        self.alive: dict[int, int] = {}
        self.used = 0  # sum of reservations (PTs, waiting GTs, family budgets)
        self.seq = 0
        self.pt_heap: list[tuple] = []
        self.pt_run: list[int] = []  # PTs with a partial prefill, in start order
        self.gt_heap: list[tuple] = []
        self.by_len: dict[int, list[tuple]] = {}  # L -> heap of queued GTs (sync)
        self.sorted_len: list[tuple[int, int]] = []  # (L, i) of queued GTs (ordering)
        self.n_gt_wait = 0
        self.searchable = self.ordering or self.pipeline
        self.gkey: dict[int, tuple] = {}
        self.deferred: list[int] = []  # preempted this batch: enter the PT queue after it
        self.running: list[int] = []
        self.run_arr = _EMPTY
        self.dirty = False
        self.ones = np.ones(max(1, min(self.C, n)), np.int64)
        if self.ordering:
            self._solo_times()
        self.counters = {"reserve_uses": 0, "underpredictions": 0, "hosted_preemptions": 0,
                         "guard_evictions": 0, "hosted": 0, "hosts": 0, "groups": 0,
                         "grouped": 0, "batches": 0, "gt_waiting": 0, "gt_running": 0,
                         "kv_reserved": 0}

    def _fp(self, x: int) -> int:
        return block_round(x, self.b)

    def _pad(self, pred: np.ndarray) -> np.ndarray:
        """Padded prediction (section 3.2.2: increased by ``padding``)."""
        return np.ceil(pred * (1.0 + self.padding) - 1e-9).astype(np.int64)

    def _bin(self, L: np.ndarray) -> np.ndarray:
        """The group key: ``L`` rounded up to a multiple of ``length_bin`` (module docstring,
        "Length bins")."""
        k = self.length_bin
        return L if k == 1 else -(-L // k) * k

    # -- arrivals and queues -------------------------------------------------------------
    def on_arrivals(self, idx: list[int]) -> None:
        if not idx:
            return
        a = np.asarray(idx, np.int64)
        self.total[a] = self._pad(self.predict(a))
        if self.ordering:
            self._deadline_buckets(a)
        for i in idx:
            self._push_pt(i)

    def _solo_times(self) -> None:
        """Per request, the cost model's time of its prefill alone (``t_p``) and of one
        decode at its prompt length (``t_g``): request constants, priced once."""
        v = self.view
        n = v.n
        bt = v.cost_model.batch_times
        rows = np.arange(n)
        self.t_p = bt(rows, v.prompt, np.zeros(n, np.int64), np.zeros(n, bool), n)
        self.t_g = bt(rows, np.ones(n, np.int64), v.prompt, np.ones(n, bool), n)

    def _deadline_buckets(self, a: np.ndarray) -> None:
        """The JCT SLO ``slo_scale * (t_p + t_g * l)`` per request (section 3.3): its bucket
        (``slo-length`` reading) and the absolute deadline ``arrival + SLO`` (``remaining``)."""
        slo = self.slo_scale * (self.t_p[a] + self.t_g[a] * self.total[a])
        self.dl[a] = np.searchsorted(DEADLINE_EDGES, slo, side="right")
        self.due[a] = self.view.arrival[a] + slo

    def _bucket(self, i: int) -> int:
        """Request ``i``'s deadline bucket now (module docstring, "Ordering")."""
        if not self.remaining:
            return int(self.dl[i])
        due, now = float(self.due[i]), self.view.now
        k = bisect_right(DEADLINE_EDGES, due - now)
        while k and due - DEADLINE_EDGES[k - 1] < now:  # rounding: the rule of _rekey
            k -= 1
        if k:  # the bucket drops when the time left falls below the edge under it
            heapq.heappush(self.moves, (float(self.due[i]) - DEADLINE_EDGES[k - 1], self.seq, i))
        return k

    def _stamp(self, i: int) -> int:
        self.seq += 1
        self.cur[i] = self.seq
        return self.seq

    def _pt_key(self, i: int) -> tuple:
        seq = self._stamp(i)
        if not self.ordering:
            return (float(self.view.arrival[i]), i, seq)
        return (self._bucket(i), -int(self.view.S[i]), seq)

    def _push_pt(self, i: int) -> None:
        self.state[i] = _PT_WAIT
        heapq.heappush(self.pt_heap, (*self._pt_key(i), i))

    def _gt_key(self, i: int) -> tuple:
        seq = self._stamp(i)
        if not self.ordering:
            return (seq,)
        return (self._bucket(i), -(int(self.res[i]) // self.bucket), -int(self.L[i]), seq)

    def _push_gt(self, i: int) -> None:
        self._queue_gt(i)
        if self.searchable:
            insort(self.sorted_len, (int(self.L[i]), i))
        self.n_gt_wait += 1

    def _queue_gt(self, i: int) -> None:
        """A (new) live entry of waiting GT ``i`` in the GT heaps."""
        self.state[i] = _GT_WAIT
        item = (*self._gt_key(i), i)
        heapq.heappush(self.gt_heap, item)
        if self.sync:
            heapq.heappush(self.by_len.setdefault(int(self.key[i]), []), item)
        self.gkey[i] = item

    def _live(self, item: tuple, state: int) -> bool:
        """Whether a heap entry is its request's current one in that queue."""
        i = item[-1]
        return self.state[i] == state and self.cur[i] == item[-2]

    def _rekey(self) -> None:
        """``remaining`` reading: requests whose deadline bucket dropped since they were
        queued get a new entry with the new bucket (the old one is dead by its stamp)."""
        mv = self.moves
        now = self.view.now
        while mv and mv[0][0] < now:  # the bucket drops once time left < edge
            _, seq, i = heapq.heappop(mv)
            if self.cur[i] != seq:
                continue
            if self.state[i] == _PT_WAIT:
                self._push_pt(i)
            elif self.state[i] == _GT_WAIT:
                self._queue_gt(i)

    def _take_gt(self, i: int) -> None:
        """Remove ``i`` from the GT queue (heaps are cleaned lazily by state)."""
        self.n_gt_wait -= 1
        if self.searchable:
            sl = self.sorted_len
            k = bisect_right(sl, (int(self.L[i]), i)) - 1
            del sl[k]

    def _head_gt(self) -> int:
        h = self.gt_heap
        while h and not self._live(h[0], _GT_WAIT):
            heapq.heappop(h)
        return h[0][-1] if h else -1

    # -- GT selection ------------------------------------------------------------------
    def _need(self, i: int) -> int:
        return self._fp(int(self.view.m[i]) + int(self.L[i])) - int(self.res[i])

    def _start_host(self, i: int, limit: int = _BIG) -> None:
        """Give waiting GT ``i`` its own allocation (at most ``limit`` in total): a family
        rooted at ``i``."""
        total = min(self._fp(int(self.view.m[i]) + int(self.L[i])), limit)
        self.used += total - int(self.res[i])
        self.res[i] = total
        self.budget[i] = total
        self.members[i] = [i]
        self.alive[i] = 1
        self.counters["hosts"] += 1
        self._run(i, i)

    def _run(self, i: int, root: int) -> None:
        self._take_gt(i)
        self.state[i] = _GT_RUN
        self.fam[i] = root
        self.running.append(i)
        self.dirty = True

    def _room(self) -> int:
        return min(self.C, self.maxbs) - len(self.running)

    def _select_gts(self, cap: int) -> None:
        """Fill the GT allocation space ``cap`` (section 3.2; Algorithm 1, lines 2-3): the
        head of the queue (with its group under ``sync``) while it fits; then, with
        ``ordering``, the binary-search fill."""
        while self.n_gt_wait and self._room() > 0:
            head = self._head_gt()
            if not self.sync:
                if self._need(head) > cap - self.used:
                    break
                self._start_host(head)
                continue
            group, complete = self._take_group(int(self.key[head]), cap)
            self._count_group(group)
            if group and self.pipeline:
                self._host(group)
            if not complete:  # the head did not fit, or the group was split: KV is full
                break
        if self.ordering:
            self._fill_by_search(cap)

    def _take_group(self, key: int, cap: int) -> tuple[list[int], bool]:
        """Start the queued GTs of group key ``key`` (binned predicted length) while they
        fit; also return whether the whole group was taken."""
        h = self.by_len.get(key, [])
        taken: list[int] = []
        while h:
            i = h[0][-1]
            if not self._live(h[0], _GT_WAIT) or self.key[i] != key:
                heapq.heappop(h)
                continue
            if self._room() <= 0 or self._need(i) > cap - self.used:
                return taken, False
            heapq.heappop(h)
            self._start_host(i)
            taken.append(i)
        return taken, True

    def _fill_by_search(self, cap: int) -> None:
        """Binary search for the longest queued GT that fits the remaining space (3.3)."""
        sl = self.sorted_len
        while sl and self._room() > 0:
            free = cap - self.used
            k = bisect_right(sl, (free, _BIG)) - 1
            while k >= 0 and self._need(sl[k][1]) > free:
                k -= 1  # block rounding: at most a few steps
            if k < 0:
                return
            i = sl[k][1]
            self._start_host(i)
            group = [i]
            if self.sync:
                group += self._take_group(int(self.key[i]), cap)[0]
            self._count_group(group)
            if self.pipeline:
                self._host(group)

    def _count_group(self, group: list[int]) -> None:
        """Mechanism stats: one more time-synced group of ``len(group)`` GTs (if any)."""
        if group:
            self.counters["groups"] += 1
            self.counters["grouped"] += len(group)

    def _host(self, group: list[int]) -> None:
        """KV pipelining (section 3.4): host GTs in the second halves of ``group``'s
        allocations, recursively (module docstring)."""
        length = int(self.L[group].min())  # every host of the group has at least this much
        count = len(group)
        level = 1
        while self._room() > 0:
            target = math.floor(length / 2**level - self.buffer * length)
            if target < 1:
                return
            want = count * 2 ** (level - 1)
            got = self._pick_hosted(target, want)
            for k, x in enumerate(got):
                root = group[k % count]
                self.budget[root] += int(self.res[x])
                self.members[root].append(x)
                self.alive[root] += 1
                self.hosting.add(root)
                self._run(x, root)
                self.counters["hosted"] += 1
            if len(got) < want:
                return
            level += 1

    def _pick_hosted(self, target: int, want: int) -> list[int]:
        """Up to ``want`` queued GTs with the largest ``L <= target``."""
        sl = self.sorted_len
        k = bisect_right(sl, (target, _BIG)) - 1
        out: list[int] = []
        room = self._room()
        while k >= 0 and len(out) < min(want, room):
            out.append(sl[k][1])
            k -= 1
        return out

    # -- running GTs: allocation checks ---------------------------------------------------
    def _check_families(self) -> None:
        """Before a batch: every family's next KV must fit its reservation (else reserve,
        else preempt: the hosted GTs first, then the host)."""
        run = self._run_array()
        if not run.size:
            return
        m = self.view.m
        nxt = m[run] + 1
        nxt = block_round(nxt, self.b)
        fam = self.fam[run]
        over = nxt > self.budget[fam]  # exact for one-member families
        if over.any():
            over = self._extend_singletons(fam, nxt, over)
        bad = fam[over].tolist()
        if self.hosting:  # families with hosted GTs: few, summed one by one
            bad += [r for r in self.hosting if self._family_need(r) > self.budget[r]]
        for root in dict.fromkeys(bad):
            if root in self.alive:
                self._fix_family(int(root))

    def _extend_singletons(self, fam: np.ndarray, nxt: np.ndarray, over: np.ndarray):
        """The common under-prediction case at once: one-member families whose next token
        exceeds the allocation all take it from the free KV (reserve included) when it has
        room for all of them; returns the families still to fix one by one."""
        roots = fam[over]
        if self.hosting:
            single = np.array([r not in self.hosting for r in roots.tolist()], bool)
            roots = roots[single]
        extra = nxt[over] - self.budget[fam[over]]
        if self.hosting:
            extra = extra[single]
        total = int(extra.sum())
        if not roots.size or self.used + total > self.M:
            return over
        self.budget[roots] += extra
        self.res[roots] += extra
        self.used += total
        self.counters["underpredictions"] += int(roots.size)
        self.counters["reserve_uses"] += int(roots.size)
        if not self.hosting:
            return np.zeros_like(over)
        left = over.copy()
        left[np.flatnonzero(over)[single]] = False
        return left

    def _family_need(self, root: int) -> int:
        m = self.view.m
        return sum(self._fp(int(m[x]) + 1) for x in self.members[root] if self.state[x] == _GT_RUN)

    def _fix_family(self, root: int) -> None:
        st = self.state
        while self._family_need(root) > self.budget[root]:
            hosted = [x for x in self.members[root] if x != root and st[x] == _GT_RUN]
            if hosted:
                self._preempt(hosted[-1])
                self.counters["hosted_preemptions"] += 1
                continue
            self.counters["underpredictions"] += 1
            extra = self._family_need(root) - int(self.budget[root])
            if self.used + extra <= self.M:
                self.budget[root] += extra
                self.res[root] += extra
                self.used += extra
                self.counters["reserve_uses"] += 1
            else:
                self._preempt(root)
            return

    def _leave(self, x: int) -> None:
        """Running GT ``x`` leaves its family (finished or preempted)."""
        root = int(self.fam[x])
        self.fam[x] = -1
        self.running.remove(x)
        self.dirty = True
        if x != root:
            self.budget[root] -= int(self.res[x])
            self.used -= int(self.res[x])
        self.alive[root] -= 1
        if self.alive[root] == 0:
            self.used -= int(self.budget[root])
            self.budget[root] = 0
            del self.alive[root]
            self.hosting.discard(root)
            del self.members[root]
        self.res[x] = 0

    def _preempt(self, x: int) -> None:
        """Offload-free preemption priced as recompute: evict, back to the PT queue."""
        if self.state[x] == _GT_RUN:
            self._leave(x)
        else:  # a waiting GT evicted by the progress guard
            self._take_gt(x)
            self.used -= int(self.res[x])
            self.res[x] = 0
        self.ev.append(x)
        self.state[x] = _PT_WAIT
        self.deferred.append(x)

    def _run_array(self) -> np.ndarray:
        if self.dirty:
            self.run_arr = np.array(self.running, np.int64)
            self.dirty = False
        return self.run_arr

    # -- one batch --------------------------------------------------------------------
    def next_batch(self) -> Plan | None:
        self.ev: list[int] = []
        if self.remaining and self.ordering:
            self._rekey()
        self._check_families()
        self._select_gts(self.M)
        starving = not self.running and self.n_gt_wait > 0
        if starving:
            self._guard()
        run = self._run_array()
        req, tok = self._select_pts(len(run), admit=not starving)
        self._sample(run.size)
        ones = self.ones[: run.size] if run.size <= self.ones.size else np.ones(run.size, np.int64)
        ev = np.array(self.ev, np.int64) if self.ev else _EMPTY
        if req:
            return Plan(np.concatenate([run, np.array(req, np.int64)]),
                        np.concatenate([ones, np.array(tok, np.int64)]), ev)
        return Plan(run, ones, ev)

    def _sample(self, running: int) -> None:
        """Mechanism stats of this batch: GTs waiting and running, KV reserved."""
        c = self.counters
        c["batches"] += 1
        c["gt_waiting"] += self.n_gt_wait
        c["gt_running"] += running
        c["kv_reserved"] += self.used

    def mechanisms(self) -> dict[str, float | int]:
        """What EcoServe's mechanisms did in the run: time-synced groups
        (count, mean size), KV pipelining (share of started GTs that were hosted), the mean
        GTs waiting and running per batch, the mean share of ``M`` reserved, and the
        under-prediction / reserve / guard counters."""
        c = self.counters
        nb = max(c["batches"], 1)
        started = c["hosts"] + c["hosted"]
        return {
            "groups": c["groups"],
            "mean_group_size": c["grouped"] / c["groups"] if c["groups"] else 0.0,
            "pipelined_share": c["hosted"] / started if started else 0.0,
            "mean_gt_waiting": c["gt_waiting"] / nb,
            "mean_gt_running": c["gt_running"] / nb,
            "mean_kv_reserved_share": c["kv_reserved"] / nb / self.M,
            **{k: c[k] for k in ("underpredictions", "reserve_uses", "hosted_preemptions",
                                 "guard_evictions")},
        }

    def _guard(self) -> None:
        """Progress guard (module docstring): waiting GTs are evicted until the head GT
        fits."""
        self._select_gts(self.M)
        if self.running or self.pt_run:
            return
        head = self._head_gt()
        waiting = np.flatnonzero(self.state == _GT_WAIT).tolist()
        victims = sorted((x for x in waiting if x != head), key=self.gkey.__getitem__,
                         reverse=True)  # lowest priority first
        first = self._fp(int(self.view.m[head]) + 1) - int(self.res[head])  # one more token
        for x in victims:
            if self._need(head) <= self.M - self.used:
                break
            self._preempt(x)
            self.counters["guard_evictions"] += 1
        if first <= self.M - self.used:  # allocation capped by the capacity left
            b = self.b
            self._start_host(head, (self.M - self.used + int(self.res[head])) // b * b)

    def _select_pts(self, n_run: int, admit: bool) -> tuple[list[int], list[int]]:
        """PTs up to the target forward size (Algorithm 1, line 5), chunked to fit it."""
        v = self.view
        budget = min(self.tfs, self.C) - n_run
        budget = min(budget, self.P)
        slots = self.maxbs - n_run
        req: list[int] = []
        tok: list[int] = []
        for i in list(self.pt_run):
            if budget <= 0 or slots <= 0:
                return req, tok
            c = min(int(v.S[i] - v.m[i]), budget)
            req.append(i)
            tok.append(c)
            budget -= c
            slots -= 1
        h = self.pt_heap
        st = self.state
        while admit and h and budget > 0 and slots > 0:
            i = h[0][-1]
            if not self._live(h[0], _PT_WAIT):
                heapq.heappop(h)
                continue
            R = self._fp(int(v.S[i]))
            # a prompt above the cap still runs when nothing else holds KV: the cap keeps
            # headroom for others, and with none in the system it would only stall the engine
            alone = self.used == 0 and R <= self.M
            if self.n_gt_wait or (R > self.pt_cap - self.used and not alone):
                break  # admission rule (module docstring): below the cap, no GT waiting
            heapq.heappop(h)
            self.used += R
            self.res[i] = R
            self.pt_target[i] = v.S[i]
            st[i] = _PT_RUN
            self.pt_run.append(i)
            c = min(int(v.S[i]), budget)
            req.append(i)
            tok.append(c)
            budget -= c
            slots -= 1
        return req, tok

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        st = self.state
        for x in self.deferred:
            self._push_pt(x)
        self.deferred = []
        for x in finished.tolist():
            if st[x] == _GT_RUN:
                self._leave(x)
            else:  # output of one token: done at its prefill
                self.pt_run.remove(x)
                self.used -= int(self.res[x])
                self.res[x] = 0
            st[x] = _DONE
        if not self.pt_run:
            return
        v = self.view
        target = self.pt_target
        done = [i for i in self.pt_run if st[i] == _PT_RUN and v.m[i] == target[i]]
        if not done:
            return
        for i in done:
            self.pt_run.remove(i)
        d = np.array(done, np.int64)
        g = v.g[d]
        fresh = self.total[d] - g
        again = (g > 1) | (fresh < 1)
        if again.any():
            fresh[again] = self._pad(self.predict(d[again]))
        self.L[d] = np.maximum(fresh, 1)
        self.key[d] = self._bin(self.L[d])
        for i in done:
            self._push_gt(i)


class Orca(Policy):
    """ORCA as EcoServe's baseline: FCFS, max allocation, fixed batch size (module
    docstring)."""

    def __init__(self, *, batch_size: int = 8, max_output: int = 1024):
        self.batch_size, self.max_output = batch_size, max_output

    def bind(self, view: SimView) -> None:
        super().bind(view)
        lim = view.limits
        self.b, self.M, self.C = lim.block_size, lim.kv_capacity, lim.max_batch_tokens
        self.P = lim.prefill_budget
        self.bs = min(self.batch_size, lim.max_batch_size or _BIG)
        self.res = np.zeros(view.n, np.int64)
        self.used = 0
        self.waiting: deque[int] = deque()
        self.running: list[int] = []
        self.counters = {"growth_evictions": 0}

    def _fp(self, x: int) -> int:
        return block_round(x, self.b)

    def on_arrivals(self, idx: list[int]) -> None:
        self.waiting.extend(idx)

    def next_batch(self) -> Plan | None:
        v = self.view
        req: list[int] = []
        tok: list[int] = []
        ev: list[int] = []
        budget, pbudget = self.C, self.P
        for i in list(self.running):
            m, S = int(v.m[i]), int(v.S[i])
            if m < S - 1 or v.g[i] == 0:
                c = min(S - m, budget, pbudget)
                pbudget -= c
            else:
                c = min(1, budget)
            if c <= 0:
                continue
            grow = self._fp(m + c) - int(self.res[i])
            if grow > 0:
                if self.used + grow > self.M:
                    self._drop(i, ev)
                    continue
                self.used += grow
                self.res[i] += grow
            req.append(i)
            tok.append(c)
            budget -= c
        while self.waiting and len(self.running) < self.bs and budget > 0 and pbudget > 0:
            i = self.waiting[0]
            S = int(v.S[i])
            # capped at the whole blocks M holds: fp(M) > M when b does not divide M
            R = self._fp(min(int(v.prompt[i]) + self.max_output - 1, self.M - self.M % self.b))
            R = max(R, self._fp(S))
            if self.used + R > self.M:
                break
            self.waiting.popleft()
            self.used += R
            self.res[i] = R
            self.running.append(i)
            c = min(S, budget, pbudget)
            req.append(i)
            tok.append(c)
            budget -= c
            pbudget -= c
        self.waiting.extendleft(reversed(ev))  # evicted: first in line from the next batch
        return Plan(np.array(req, np.int64), np.array(tok, np.int64), np.array(ev, np.int64))

    def _drop(self, i: int, ev: list[int]) -> None:
        self.running.remove(i)
        self.used -= int(self.res[i])
        self.res[i] = 0
        ev.append(i)
        self.counters["growth_evictions"] += 1

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        for x in finished.tolist():
            self.running.remove(x)
            self.used -= int(self.res[x])
            self.res[x] = 0


# -- registration ------------------------------------------------------------------------
ECOSERVE = "EcoServe (Shen and Sen, EcoServe: Maximizing Multi-Resource Utilization)"


def _params(predictor: str = "noisy", padding: float = 0.15) -> tuple[Param, ...]:
    return (
        Param("predictor", str, predictor, "response-length predictor: noisy or exact (oracle)",
              choices=("noisy", "exact")),
        Param("accuracy", float, 0.732, "noisy predictor: share of predictions padded by 15% "
              "that cover the true length (section 2.3: 0.732 on ShareGPT)",
              lambda v: None if 0.5 < v <= 1 else "must be in (0.5, 1]"),
        Param("padding", float, padding, "padding ratio added to predictions (sweet spot "
              "0.10-0.20, section 2.3)", non_negative),
        Param("seed", int, 0, "seed of the noisy predictor", non_negative),
        Param("reserve", float, 0.03, "share of M new PTs may not take (1-5%, section 3.2.1; "
              "admission rule in the module docstring)",
              _check_reserve, lo=0.0),
        Param("buffer", float, 0.15, "KV pipelining buffer b as a share of the host's length "
              "(10-15%, section 4)", unit_interval),
        Param("tfs", int, 0, "target forward size in tokens (0 = default_tfs from the cost "
              "model)", non_negative),
        Param("slo_scale", float, 2.0, "JCT SLO scale used for the deadline buckets", positive),
        Param("bucket", int, 128, "occupied-KV bucket width in tokens (ordering)", positive),
        Param("deadline", str, "remaining", "section 3.3's deadline buckets: remaining = time "
              "left to the absolute JCT deadline (arrival + SLO) when selecting (the paper's "
              "text); slo-length = the SLO's own length (fixed per request)",
              choices=("remaining", "slo-length")),
        Param("length_bin", int, 16, "GTs grouped by padded predicted length rounded up to a multiple of "
              "this many tokens, so that same-length groups form (1 = token-exact)", positive),
    )


_VARIANTS = {
    "ecoserve-d": ("EcoServe-D (UnsyncDecoupled): PT and GT queues, exact allocation of the "
                   "predicted length, GTs one by one FCFS, PTs up to TFS",
                   dict(sync=False, ordering=False, pipeline=False)),
    "ecoserve-sd": ("EcoServe-SD (SyncDecoupled): + same-predicted-length GT groups, KV reserve "
                    "for PTs, re-prediction after under-prediction",
                    dict(sync=True, ordering=False, pipeline=False)),
    "ecoserve-sdo": ("EcoServe-SDO: + queue ordering (deadline bucket, occupied KV, length) and "
                     "binary-search fill", dict(sync=True, ordering=True, pipeline=False)),
    "ecoserve": ("EcoServe: SyncDecoupled + ordering + KV-cache pipelining",
                 dict(sync=True, ordering=True, pipeline=True)),
}


def _factory(**fixed):
    def make(**params):
        return EcoServe(**fixed, **params)

    return make


for _name, (_desc, _cfg) in _VARIANTS.items():
    register(_name, _desc, f"{ECOSERVE}, sections 3-4", params=_params(),
             factory=_factory(**_cfg))
register(
    "ecoserve-oracle", "EcoServe with the exact response lengths (no padding; knows O)",
    f"{ECOSERVE}, section 4 (Oracle)", hypothetical=True,
    params=_params(predictor="exact", padding=0.0),
    factory=_factory(sync=True, ordering=True, pipeline=True),
)
register(
    "orca", "ORCA: FCFS iteration-level batching, max allocation (prompt + max_output "
    "reserved at admission), fixed batch size",
    "Yu et al., ORCA (OSDI 2022), as the baseline of EcoServe sections 1, 2.1 and 4",
    params=(Param("batch_size", int, 8, "fixed batch size (EcoServe section 2.1: 8)", positive),
            Param("max_output", int, 1024, "maximum output length reserved per request",
                  positive)),
    factory=lambda **p: Orca(**p),
)

__all__ = ["EcoServe", "Orca", "default_tfs", "DEADLINE_EDGES"]
