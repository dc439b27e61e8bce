"""SLO-park: serve for TTFT and TBT SLO attainment: shortest prompt first, peaks reserved,
and, under the per-request P99 reading of a TBT SLO only, long requests parked after their
first token (the online form of the offline park construction, ``optsched/serving/park.py``).

**Which TBT rule** (``tbt_rule``). SLOs are judged by a request's longest gap between tokens
(docs/semantics.md section 4, ``max_tbt``): then no gap may exceed the SLO, every request's
allowance below is 0, and the policy never parks: it prefills arrivals shortest prompt
first, reserves each request's peak KV and decodes it in every batch (``tbt_rule = "max"``,
the default). ``tbt_rule = "p99"`` restores the per-request P99 reading the policy was built
for (``optsched.metrics.serving.p99_tbt``), whose allowance is the loophole that reading
leaves: the rest of this docstring describes it.

**Clairvoyant** (hypothetical, semantics section 6): it reads the true output lengths, as
``svf``, ``mcsf`` and ``gba`` do here. It needs them for two things: a short request's peak
KV (reserved when its prefill starts) and the number of long gaps each request may have.

The allowance (docs/semantics.md section 4; ``optsched.metrics.serving.p99_tbt``)
---------------------------------------------------------------------------------
A request with ``O`` tokens has ``k = O - 1`` gaps between them; its P99 TBT (nearest rank)
is the ``ceil(0.99 k)``-th smallest gap, so it meets a TBT SLO ``T`` as long as at most

    a(O) = k - ceil(0.99 k)                                                   (allowance)

gaps exceed ``T``: none for ``O <= 100``, one for ``101 <= O <= 200``, two up to 300, ...
An eviction (recompute, semantics section 3) costs a request exactly one gap: from the
token before it to the token its refill generates. A request that still has allowance may
be evicted ("parked") and come back later at no cost to its SLO; one without allowance must
decode in every batch from its first token to its last (every gap a batch long).

What each batch holds (token budget ``C``; prefill tokens ``min(budget, P)``, budget 2,048
by default; entry cap ``max_batch_size``)
---------------------------------------------------------------------------------------
1. **Bound residents decode** (no allowance left: peak KV reserved, never evicted).
2. **First prefills**: the one under way (chunked) continues; then waiting requests in
   ``first`` order (``prompt``: shortest prompt first, the better order on notebook 08's
   setting, ``studies/serving/results/goodput-park.txt``; ``arrival``: FCFS). A request with
   ``a(O) = 0`` reserves its peak ``fp(I + O - 1)``, one with allowance its prompt
   ``fp(I)``; if that does not fit, free residents are evicted (lost ones first, then
   those that stay within their allowance, most tokens left first) until it does, else no
   further prefill starts. A waiting request whose prompt alone (priced by the cost model,
   starting now) can no longer end within its TTFT SLO is **lost**: it misses anyway, so
   it is served last. Then the **free residents decode** (allowance left, or lost: they
   hold their current KV and may be evicted; one token each was set aside before the
   prefills); a free decode that does not fit ``M`` evicts another free resident, or
   itself.
3. **Refills** of parked requests, shortest remaining output first, then lost requests.
   ``refill = "idle"`` (default): a batch that gives first tokens holds no refill, and a new
   refill starts only once no request waits for its first prefill -- the online stand-in
   for the offline construction's "after the last arrival", which an online scheduler
   cannot know; ``spare``: whenever budget and memory remain. A refill starts only if its
   reservation leaves ``headroom * M`` free for arrivals (ignored when the batch would
   otherwise be empty, so the run always ends). A refill that uses a request's last
   allowance reserves its peak (it is bound from then on). ``headroom`` 0.3 by default:
   sustainable rates (10 probes, ``optsched capacity``'s search) on notebook 08's setting
   and three seeded windows (``studies/serving/slo_park.py``'s instances, the ones reported, so
   the choice is tuned on them): headroom 0 17.45 / 7.34 / 14.05 / 10.15 req/s (7 probes),
   0.2 20.53 / 8.51 / 14.63, 0.3 20.25 / 9.36 / 15.03, 0.4 20.81 / 9.36 / 14.63, 0.5
   20.81 / 9.23 (load 8-13). A prefill budget of 2,048 tokens against ``C = 4,096`` (12
   probes, four instances): 20.32 / 9.36 / 15.03 / 12.02 -> 20.67 / 9.14 / 15.03 / 12.82
   req/s (``studies/serving/results/slo-park.txt``; shorter batches give waiting prompts their first
   token sooner, as for ``ttft-first``'s ``P``).

Parking (``park``): ``eager`` (default) evicts a request with allowance in the batch after
its first token if some request waits for its first prefill; ``always`` evicts it whatever
waits (``optsched/serving/park.py``'s rule); ``lazy`` keeps it resident and free, evicted only
when a first prefill or a decode needs the memory.

Memory: every resident's reservation is at least its KV after the batch (bound: peak;
free: its current KV, grown before each decode; a (re)fill: all of ``S`` at its first chunk),
and the reservations sum to at most ``M``, so the KV after every batch fits (section 3 step 3).

SLOs: a request's TTFT SLO is the instance's ``ttft_slo`` where it has one, else the
``ttft_slo`` parameter; the P99 TBT SLO is the ``tbt_slo`` parameter (the instance carries
per-request TTFT and mean TPOT SLOs, not a P99 TBT; ``optsched capacity``'s ``--ttft-slo`` /
``--tbt-slo`` configure the metric, not the instance; the defaults are Apt-Serve's 1 s / 1 s
as in notebook 08). Gaps longer than the TBT SLO that the policy did not cause (a skipped
decode, a batch longer than ``T``) are counted against the allowance from the policy's own
clock; a request over its allowance is lost.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from .registry import Param, positive, register
from .simulator import Plan, Policy, SimView

_BIG = 1 << 62
_FIRST_ORDERS = ("prompt", "arrival")
_REFILL = ("idle", "spare")
_PARK = ("eager", "always", "lazy")
_TBT_RULES = ("max", "p99")

# states of a request
WAIT, FIRST, BOUND, FREE, PARKED, REFILL, DONE = range(7)


def allowance(output: np.ndarray) -> np.ndarray:
    """``a(O) = k - ceil(0.99 k)``, ``k = O - 1``: how many of a request's gaps may exceed
    the TBT SLO with its P99 (nearest rank) still within it (module docstring); computed with
    the same floating-point rank as :func:`optsched.metrics.serving.p99_tbt`."""
    k = np.maximum(np.asarray(output, np.int64) - 1, 0)
    return k - np.ceil(0.99 * k).astype(np.int64)


def _check_headroom(v: float) -> str | None:
    return None if 0 <= v < 1 else "must be in [0, 1)"


class SLOPark(Policy):
    """The SLO-park policy; see the module docstring."""

    def __init__(
        self,
        ttft_slo: float = 1.0,
        tbt_slo: float = 1.0,
        first: str = "prompt",
        budget: int = 2048,
        refill: str = "idle",
        headroom: float = 0.3,
        park: str = "eager",
        tbt_rule: str = "max",
    ):
        for name, v, allowed in (
            ("first", first, _FIRST_ORDERS),
            ("refill", refill, _REFILL),
            ("park", park, _PARK),
            ("tbt_rule", tbt_rule, _TBT_RULES),
        ):
            if v not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {v!r}")
        if not (ttft_slo > 0 and tbt_slo > 0):
            raise ValueError("ttft_slo and tbt_slo must be > 0")
        self.ttft_default, self.tbt = float(ttft_slo), float(tbt_slo)
        self.first, self.budget, self.refill, self.park = first, budget, refill, park
        self.headroom = float(headroom)
        self.tbt_rule = tbt_rule

    # -- set-up ------------------------------------------------------------------------------
    def bind(self, view: SimView) -> None:
        super().bind(view)
        lim = view.limits
        n = view.n
        self.M, self.C = lim.kv_capacity, lim.max_batch_tokens
        pre = lim.prefill_budget
        self.Pb = min(pre, self.budget) if self.budget > 0 else pre
        self.cap = lim.max_batch_size or _BIG
        self.I = view.prompt.tolist()
        self.O = view.known_output.tolist()
        self.arr = view.arrival.tolist()
        slo = np.where(np.isfinite(view.ttft_slo), view.ttft_slo, self.ttft_default)
        self.due = (view.arrival + slo).tolist()  # first token by then
        price = view.cost_model.batch_time
        # the latest start from which the prompt alone still ends within the TTFT SLO
        self.late_at = [d - price([p], [0], [False]) for d, p in zip(self.due, self.I, strict=True)]
        self.allow = (allowance(view.known_output) if self.tbt_rule == "p99"
                      else np.zeros(n, np.int64)).tolist()
        self.peak = [int(view.fp(i + o - 1)) for i, o in zip(self.I, self.O, strict=True)]
        key = view.prompt.astype(np.float64) if self.first == "prompt" else view.arrival
        order = np.lexsort((np.arange(n), view.arrival, key))
        self.rank = np.empty(n, np.int64)
        self.rank[order] = np.arange(n)
        self.state = [WAIT] * n
        self.lost = [False] * n
        self.used = [0] * n  # long gaps charged (observed, or an eviction's gap to come)
        self.charged = [False] * n  # an eviction's gap is charged, its token not yet come
        self.last = [math.nan] * n  # time of the newest token
        self.res = [0] * n  # reserved KV (whole blocks)
        self.total = 0  # sum of reservations
        self.waiting: list[tuple[int, int]] = []  # heap (rank, i); lost ones are skipped
        self.deadlines: list[tuple[float, int]] = []  # heap (late_at, i) of the same
        self.n_wait = 0  # requests waiting for their first prefill, not lost
        self.lost_wait: list[int] = []  # lost before their first prefill
        self.firsts: list[int] = []  # first prefills under way, in start order
        self.bound: list[int] = []
        self.free: list[int] = []
        self.parked: list[int] = []
        self.refills: list[int] = []  # refills under way
        self.evictions = self.lost_count = 0

    def mechanisms(self) -> dict[str, float | int]:
        return {"evictions": self.evictions, "lost": self.lost_count}

    def on_arrivals(self, idx: list[int]) -> None:
        for i in idx:
            heapq.heappush(self.waiting, (int(self.rank[i]), i))
            heapq.heappush(self.deadlines, (self.late_at[i], i))
        self.n_wait += len(idx)

    # -- one batch ---------------------------------------------------------------------------
    def next_batch(self) -> Plan | None:
        self._req: list[int] = []
        self._tok: list[int] = []
        self._ev: list[int] = []
        self._in: set[int] = set()
        self._left, self._pre = self.C, self.Pb
        self._drop_late()
        if self.park == "always" or (self.park == "eager" and self.n_wait):
            for i in [i for i in self.free if self._fresh(i)]:
                self._evict(i)
        self._decode_bound()
        # first prefills may evict free residents, so those decode after them, on tokens
        # set aside for them now
        aside = min(len(self.free), max(self._left, 0))
        self._left -= aside
        n_first = len(self._req)
        self._continue(self.firsts)
        self._admit()
        firsts = len(self._req) > n_first
        self._left += aside
        self._decode_free()
        # idle: refills never lengthen a batch that gives first tokens, and new ones start
        # only when no request waits for its first prefill
        if self.refill == "spare" or not firsts:
            self._continue(self.refills)
            if self.refill == "spare" or not self.n_wait:
                self._refill(self.headroom if self._req or self._ev else 0.0)
        v = self.view
        self._g0 = [int(v.g[i]) for i in self._req]
        return Plan(self._req, self._tok, self._ev)

    def _fresh(self, i: int) -> bool:
        """A free request that has just its first token and allowance to spend on parking."""
        v = self.view
        return not self.lost[i] and int(v.g[i]) == 1 and self.used[i] < self.allow[i]

    def _drop_late(self) -> None:
        """Waiting requests whose prompt alone, started now, can no longer end within the
        TTFT SLO are lost (they stay in ``waiting`` until they reach its top)."""
        now = self.view.now
        while self.deadlines and self.deadlines[0][0] < now:
            i = heapq.heappop(self.deadlines)[1]
            if self.state[i] == WAIT and not self.lost[i]:
                self.lost[i] = True
                self.lost_count += 1
                self.lost_wait.append(i)
                self.n_wait -= 1

    def _head(self) -> int | None:
        """The first waiting request that is not lost (lost ones are popped)."""
        while self.waiting:
            i = self.waiting[0][1]
            if self.state[i] == WAIT and not self.lost[i]:
                return i
            heapq.heappop(self.waiting)
        return None

    def _room(self) -> bool:
        return self._left > 0 and len(self._req) < self.cap

    def _add(self, i: int, c: int, prefill: bool) -> None:
        self._req.append(i)
        self._tok.append(c)
        self._in.add(i)
        self._left -= c
        if prefill:
            self._pre -= c

    def _reserve(self, i: int, amount: int) -> None:
        self.total += amount - self.res[i]
        self.res[i] = amount

    def _evict(self, i: int) -> None:
        """Evict free resident ``i``: its gap to come is charged to its allowance."""
        self.free.remove(i)
        self._ev.append(i)
        self._reserve(i, 0)
        self.evictions += 1
        if not self.lost[i]:
            self.used[i] += 1
            self.charged[i] = True
        self.state[i] = PARKED
        self.parked.append(i)

    def _victim(self) -> int | None:
        """The free resident to evict first: lost ones, then those whose eviction keeps them
        within their allowance, most tokens left first; never one in the batch."""
        best, key = None, None
        for j in self.free:
            if j in self._in:
                continue
            k = (not self.lost[j], self.used[j] >= self.allow[j], -(self.O[j] - self.view.g[j]))
            if key is None or k < key:
                best, key = j, k
        return best

    def _make_room(self, need: int) -> bool:
        """Evict victims until ``need`` more reserved KV fits ``M``."""
        while self.total + need > self.M:
            j = self._victim()
            if j is None:
                return False
            self._evict(j)
        return True

    def _decode_bound(self) -> None:
        for i in self.bound:
            if not self._room():
                return
            self._add(i, 1, False)  # the peak reservation covers it

    def _decode_free(self) -> None:
        v = self.view
        for i in list(self.free):
            if i not in self.free or not self._room():
                continue
            m = int(v.m[i])
            if m < int(v.S[i]) - 1:
                continue  # cannot happen: a free resident is caught up (defensive)
            grow = int(v.fp(m + 1)) - self.res[i]
            if grow > 0 and not self._make_room(grow):
                self._evict(i)
                continue
            if i not in self.free:
                continue
            self._reserve(i, max(self.res[i], int(v.fp(m + 1))))
            self._add(i, 1, False)

    def _chunk(self, i: int) -> int:
        if not self._room():
            return 0
        v = self.view
        return max(0, min(int(v.S[i] - v.m[i]), self._left, self._pre))

    def _continue(self, under_way: list[int]) -> None:
        for i in under_way:
            c = self._chunk(i)
            if c:
                self._add(i, c, True)

    def _admit(self) -> None:
        """Step 2: new first prefills in ``first`` order while budget and memory allow."""
        while (i := self._head()) is not None:
            c = self._chunk(i)
            if not c:
                return
            need = self.peak[i] if self.allow[i] == 0 else int(self.view.fp(self.I[i]))
            if not self._make_room(need):
                return
            heapq.heappop(self.waiting)
            self.n_wait -= 1
            self._reserve(i, need)
            self.state[i] = FIRST
            self.firsts.append(i)
            self._add(i, c, True)
            if c < self.I[i]:
                return  # a chunked head: the rest waits

    def _refill(self, headroom: float) -> None:
        """Step 3: parked requests (then lost ones) into free memory, leaving ``headroom``."""
        v = self.view
        limit = self.M - int(headroom * self.M)
        cands = sorted(
            (i for i in self.parked if i not in self._ev),
            key=lambda i: (self.lost[i], self.O[i] - int(v.g[i]), i),
        )
        cands += self.lost_wait
        for i in cands:
            c = self._chunk(i)
            if not c:
                return
            S = int(v.S[i])
            spent = not self.lost[i] and self.used[i] >= self.allow[i]
            need = self.peak[i] if spent else int(v.fp(S))
            if self.total + need > limit:
                if self._req or self._ev:
                    return
                limit = self.M  # nothing else runs: serve it anyway
                if self.total + need > limit:
                    return
            if i in self.lost_wait:
                self.lost_wait.remove(i)
                self.state[i] = FIRST
                self.firsts.append(i)
            else:
                self.parked.remove(i)
                self.state[i] = REFILL
                self.refills.append(i)
            self._reserve(i, need)
            self._add(i, c, True)
            if c < S - int(v.m[i]):
                return

    # -- after the batch ---------------------------------------------------------------------
    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        v = self.view
        now = v.now  # the end of the batch just run
        done = set(finished.tolist())
        for i, g0 in zip(self._req, self._g0, strict=True):
            g = int(v.g[i])
            if g == g0:
                continue  # no token this batch
            if g >= 2 and not math.isnan(self.last[i]):
                self._gap(i, now - self.last[i])
            self.last[i] = now
            if i in done:
                self._finish(i)
            elif self.state[i] in (FIRST, REFILL):
                (self.firsts if self.state[i] == FIRST else self.refills).remove(i)
                self._settle(i)

    def _gap(self, i: int, gap: float) -> None:
        """Count a gap against ``i``'s allowance (an eviction's was charged in advance)."""
        long = gap > self.tbt * (1 + 1e-12)
        if self.charged[i]:
            self.charged[i] = False
            if not long:
                self.used[i] -= 1
        elif long:
            self.used[i] += 1
        if not self.lost[i] and self.used[i] > self.allow[i]:
            self.lost[i] = True
            self.lost_count += 1
            if self.state[i] == BOUND:  # it may be evicted from now on
                self.bound.remove(i)
                self.free.append(i)
                self.state[i] = FREE
                self._reserve(i, int(self.view.fp(int(self.view.m[i]))))

    def _settle(self, i: int) -> None:
        """A (re)fill produced its token: bound (peak reserved) or free."""
        v = self.view
        if not self.lost[i] and self.res[i] == self.peak[i] and self.used[i] >= self.allow[i]:
            self.state[i] = BOUND
            self.bound.append(i)
        else:
            self.state[i] = FREE
            self.free.append(i)
            self._reserve(i, int(v.fp(int(v.m[i]))))

    def _finish(self, i: int) -> None:
        for group in (self.firsts, self.refills, self.bound, self.free):
            if i in group:
                group.remove(i)
        self.state[i] = DONE
        self._reserve(i, 0)


_PARAMS = (
    Param("ttft_slo", float, 1.0, "TTFT SLO (s) of requests without one in the instance", check=positive),
    Param("tbt_slo", float, 1.0, "TBT SLO (s): no gap may exceed it (tbt_rule max); under p99, "
          "gaps beyond it spend the allowance", check=positive),
    Param(
        "first",
        str,
        "prompt",
        "order of first prefills: prompt (shortest first) or arrival (FCFS)",
        choices=_FIRST_ORDERS,
    ),
    Param("budget", int, 2048, "most prefill tokens per batch (0 = the instance's P, or C)", lo=0),
    Param(
        "refill",
        str,
        "idle",
        "when parked requests are refilled: idle (no request waits "
        "for its first prefill) or spare (whenever budget and memory remain)",
        choices=_REFILL,
    ),
    Param("headroom", float, 0.3, "share of M a refill leaves free for arrivals", check=_check_headroom),
    Param(
        "park",
        str,
        "eager",
        "eager: a request with allowance is evicted right after its "
        "first token while others wait; always: right after its first token (as "
        "optsched/serving/park.py); lazy: only when memory is needed",
        choices=_PARK,
    ),
    Param("tbt_rule", str, "max", "max: the SLO bounds a request's longest gap (docs/semantics.md "
          "section 4), so nothing is parked; p99: the per-request P99 reading, whose allowance "
          "of long gaps parking spends (kept for comparison)", choices=_TBT_RULES),
)

register(
    "slo-park",
    "SLO-park: prefill arrivals shortest prompt first, keep requests that must meet every "
    "TBT gap resident (peak KV reserved); with tbt_rule=p99 only, park (evict) requests whose "
    "per-request P99 TBT allows a long gap after their first token and refill them when no "
    "arrival waits (knows O)",
    "optsched: the online form of optsched/serving/park.py's park construction; TBT SLO on "
    "the longest gap (docs/semantics.md section 4) or, with tbt_rule=p99, the per-request P99 "
    "(nearest rank); recompute preemption (section 3); clairvoyant like svf, mcsf and gba",
    hypothetical=True,
    params=_PARAMS,
    factory=SLOPark,
)

__all__ = ["SLOPark", "allowance"]
