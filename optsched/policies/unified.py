"""InferMax's unified scheduler (Algorithm 1 of Kim et al., "Optimizing LLM Inference for
Database Systems: Cost-Aware Scheduling for Concurrent Requests", section 3.1) and the
policies that are configurations of it: Table 1 (vLLM, SARATHI and variants), their
eviction-free variants (section 4.1), the ranking schedulers (section 4.6), the InferMax
scheduler (section 6), and FCFS.

What exactly is simulated
-------------------------
Per batch, ``GETNEXTBATCH`` walks the requests **group by group** (step 1) and, within a
group, candidate by candidate in priority order:

* **Groups** (``order``):
  ``prefill-first`` (vLLM): ``R_w`` (waiting: new and evicted requests), then the running
  decodes ``R_r^d``, then the running partial prefills ``R_r^p``;
  ``decode-first`` (SARATHI, InferMax): ``R_r^d``, ``R_r^p``, ``R_w``;
  ``single`` (Rank_*, FCFS): one group with every request, running or waiting, ordered by
  the key alone ("rather than by phase", section 4.6).
  Within a group requests are ordered by ``key``: arrival (ties: instance order), prompt
  ``I`` or output ``O`` (ties: arrival). An evicted request keeps its key, so under
  arrival order it re-enters the waiting queue ahead of later arrivals (as vLLM's
  ``appendleft``). InferMax (section 6) orders ``R_r^d`` by cached tokens ``m``,
  longest first.
* **Hybrid check** (step 2): without hybrid batching a candidate whose phase (prefill:
  first prefill, chunk or refill; decode: semantics section 3) differs from the entries
  already in the batch is skipped.
* **CanAllocate** (step 3) against ``C`` (batch tokens), ``P`` (prefill tokens),
  ``max_batch_size`` and ``M``. A prefill candidate processes ``S - m`` tokens; with
  chunked prefill it is cut to what is left of ``min(C, P)`` in this batch. *Modelling
  choice:* a prefill longer than ``min(C, P)`` could never run without chunking, so it is
  chunked even when chunked prefill is off (vLLM would reject such a request; the Azure
  conversation trace has 402 prompts above 4,096 tokens).
  Memory uses **reservations**: each resident request holds ``res >= m`` KV tokens
  (charged in whole blocks) and ``CanAllocate`` checks ``fp(new res) - fp(res) <=
  M - sum fp(res)``. ``m_reserve`` is (paper: "typically 1 for decode and input size for
  prefill"): a decode grows ``res`` to ``m + 1``; a (re)fill reserves its whole ``S``
  (prompt + generated) at its first chunk, so later chunks of ``R_r^p`` "can be
  allocated as they ... have already reserved the whole input tokens". Because
  ``sum fp(res) <= M`` and ``res >= m``, every schedule respects ``M`` exactly
  (semantics section 3: requests finishing in the batch still count).
  ``reserve="full"`` (eviction-free, ``NAME-ef``; hypothetical) reserves
  ``I + O - 1`` at admission (section 4.1), so a running request never needs more.
  ``reserve="histogram"`` (InferMax, section 6) reserves ``I + O_est - 1`` where
  ``O_est`` is the ``quantile`` of the output lengths of requests finished so far that
  are longer than the ``g`` tokens already generated (at least ``g + 1``; with no data
  yet, ``g + 1``, i.e. the prompt alone); capped at ``M``. A request that outgrows its
  estimate grows by one token per decode as usual.
* **Eviction** (step 4) when ``M`` is insufficient: for a running candidate, the
  lowest-priority running request not yet in the batch is evicted (KV dropped, back to
  ``R_w``; recompute semantics, semantics section 3), repeatedly; if no lower-priority request is
  left, the candidate **self-evicts** (it is evicted in this batch and refills later).
  "Lowest priority" is the last request in the walk order, so under SARATHI a running
  partial prefill goes before any decode, and under InferMax the decode with the fewest
  cached tokens goes first ("evict short requests"). A waiting candidate that does not
  fit never evicts (vLLM and SARATHI "skip" ``R_w``) and closes ``R_w`` for this batch
  (FCFS head-of-line); only in the ``single`` group policies does a waiting candidate
  evict lower-priority running requests, and only if that makes it fit.
  Allocation failures for other reasons (``C``, ``P``, batch size) never evict: a
  waiting candidate closes ``R_w``, a running one is skipped.
* **Re-queueing.** A request evicted in batch ``j`` rejoins ``R_w`` after batch ``j``
  (at :meth:`UnifiedScheduler.on_batch_end`), so batch ``j + 1`` is the earliest that can
  refill it (the semantics forbid evicting and processing a request in one batch anyway).
  ``R_w`` is a priority queue on the same key as everything else: a victim keeps its
  rank, so under ``key="arrival"`` it is served before every request that arrived after
  it (vLLM puts preempted requests back at the front of its waiting queue), and several
  victims rejoin in their own arrival order whatever order they were evicted in.
* **vLLM's admission limits** (:class:`UnifiedScheduler` parameters ``watermark`` and
  ``max_num_seqs``; every policy here takes them, and the vLLM-family policies ``vllm*``
  and ``sarathi*`` default to vLLM's values; InferMax, the ranking schedulers and
  ``fcfs`` (the online paper's model) default to off). ``watermark``: a waiting request is admitted
  only if ``floor(watermark * M / b)`` blocks stay free after its reservation (vLLM's
  block manager, ``watermark=0.01``); running requests grow into that headroom, so it
  only holds back admissions. A request whose reservation alone exceeds ``M`` minus the
  watermark (vLLM would reject it as too long) is admitted when it fits without the
  watermark, so it can still run. ``max_num_seqs``: at most this many requests hold KV
  (running, admitted, or in a partial prefill) at once; a waiting candidate that would
  exceed it closes ``R_w`` for this batch (vLLM's ``max_num_seqs=256`` counts the
  running sequences, not the entries of one batch, which ``max_batch_size`` caps).
"""

from __future__ import annotations

import heapq
import warnings
from bisect import bisect_left

import numpy as np

from .registry import Param, PolicyError, PolicyWarning, non_negative, register, unit_interval
from .simulator import Plan, Policy, SimView

_NONE, _PREFILL, _DECODE = 0, 1, 2
_EMPTY = np.zeros(0, np.int64)
_BIG = 1 << 62
_ORDERS = ("prefill-first", "decode-first", "single")
_KEYS = ("arrival", "prompt", "output")
_DECODE_SORTS = (None, "m_desc")
_RESERVES = ("input", "full", "histogram")


class UnifiedScheduler(Policy):
    """InferMax Algorithm 1 with a configuration (see the module docstring)."""

    #: this exact class runs on the compiled kernel (:func:`optsched.policies.fast.fast_config`)
    fast_kernel = "unified"

    # the batch being planned (reset by next_batch)
    blocks: list[np.ndarray]
    cur: list[int]
    btok: list[int]
    ev: list[int]
    admitted: list[int]
    pre_entries: list[int]
    tok: int
    pre: int
    nb: int
    phase: int

    def __init__(
        self,
        *,
        order: str = "decode-first",
        key: str = "arrival",
        decode_sort: str | None = None,
        hybrid: bool = True,
        chunked: bool = True,
        P: int = 0,
        reserve: str = "input",
        quantile: float = 0.5,
        waiting_evicts: bool = False,
        watermark: float = 0.0,
        max_num_seqs: int = 0,
    ):
        for name, value, allowed in (("order", order, _ORDERS), ("key", key, _KEYS),
                                     ("decode_sort", decode_sort, _DECODE_SORTS),
                                     ("reserve", reserve, _RESERVES)):
            if value not in allowed:
                raise PolicyError(f"UnifiedScheduler: {name} must be one of "
                                  f"{', '.join(map(repr, allowed))}, got {value!r}")
        self.order = order
        self.key = key
        self.decode_sort = decode_sort
        self.hybrid = hybrid
        self.chunked = chunked
        self.P = P
        self.reserve = reserve
        self.quantile = quantile
        self.waiting_evicts = waiting_evicts
        if not 0 <= watermark < 1:
            raise PolicyError(f"UnifiedScheduler: watermark must be in [0, 1), got {watermark!r}")
        if max_num_seqs < 0:
            raise PolicyError(f"UnifiedScheduler: max_num_seqs must be >= 0 (0 = no cap), "
                              f"got {max_num_seqs!r}")
        self.watermark = watermark
        self.max_num_seqs = max_num_seqs or _BIG

    # -- setup ------------------------------------------------------------------------
    def bind(self, view: SimView) -> None:
        super().bind(view)
        n = view.n
        lim = view.limits
        self.M = lim.kv_capacity
        self.C = lim.max_batch_tokens
        P = self.P if self.P else self.C
        if lim.max_prefill_tokens is not None:
            P = min(P, lim.max_prefill_tokens)
        self.Pb = min(P, self.C)
        if not self.chunked:
            warn_forced_chunks(self.name, view.prompt, self.Pb, self.C)
        self.maxbs = lim.max_batch_size or _BIG
        self.b = lim.block_size
        self.capM = (self.M // self.b) * self.b
        # vLLM: watermark_blocks = int(watermark * num_blocks), kept free at admission
        self.wm = int(self.watermark * (self.M // self.b)) * self.b
        idx = np.arange(n)
        keys: tuple[np.ndarray, ...]
        if self.key == "arrival":
            keys = (idx, view.arrival)
        elif self.key == "prompt":
            keys = (idx, view.arrival, view.prompt)
        else:
            if np.any(view.known_output < 0):
                raise PolicyError(f"policy {self.name!r} needs output lengths")
            keys = (idx, view.arrival, view.known_output)
        self.idx_of_rank = np.lexsort(keys)
        self.rank_of = np.empty(n, np.int64)
        self.rank_of[self.idx_of_rank] = idx
        self.rank_list = self.rank_of.tolist()
        self.res = np.zeros(n, np.int64)
        self.resident = np.zeros(n, bool)
        self.n_resident = 0
        self.used = 0
        self.waiting: list[int] = []  # heap of ranks
        self.run_idx = np.zeros(0, np.int64)  # resident requests, by rank
        if self.reserve == "full" and np.any(view.known_output < 0):
            raise ValueError(f"policy {self.name!r} needs output lengths")
        self.exact = self.reserve == "input" and self.b == 1
        self.partial: set[int] = set()  # resident requests in the prefill phase
        self.hist = np.zeros(16, np.int64)
        self.hist_cum: np.ndarray | None = None

    def on_arrivals(self, idx: list[int]) -> None:
        rl = self.rank_list
        for i in idx:
            heapq.heappush(self.waiting, rl[i])

    # -- helpers ----------------------------------------------------------------------
    def _fp(self, x: int) -> int:
        return self.view.limits.kv_footprint(x)

    def _estimate(self, g: int) -> int:
        """InferMax histogram: quantile of finished outputs longer than ``g``."""
        if self.hist_cum is None:
            self.hist_cum = np.cumsum(self.hist)
        cum = self.hist_cum
        if g + 1 >= cum.size:
            return g + 1
        below = int(cum[g])
        above = int(cum[-1]) - below
        if above <= 0:
            return g + 1
        target = below + max(1, int(np.ceil(self.quantile * above)))
        return max(g + 1, int(np.searchsorted(cum, target, side="left")))

    def _reserve_target(self, i: int, S: int, g: int) -> int:
        if self.reserve == "input":
            return S
        I = int(self.view.prompt[i])
        if self.reserve == "full":
            R = I + int(self.view.known_output[i]) - 1
        else:
            R = I + self._estimate(g) - 1
        return max(S, min(R, self.capM))

    def _evict(self, i: int) -> None:
        r = int(self.res[i])
        self.used -= self._fp(r)
        self.res[i] = 0
        if self.resident[i]:
            self.n_resident -= 1
        self.resident[i] = False
        self.ev.append(i)

    def _add(self, i: int, c: int, new_res: int, phase: int, prefill: bool) -> None:
        old = int(self.res[i])
        self.used += self._fp(new_res) - self._fp(old)
        self.res[i] = new_res
        self.cur.append(i)
        self.btok.append(c)
        self.tok += c
        self.nb += 1
        if prefill:
            self.pre += c
            self.pre_entries.append(i)
        if self.phase == _NONE:
            self.phase = phase

    def _prefill_tokens(self, need: int) -> int:
        """Tokens a prefill of ``need`` tokens may process now (0 = does not fit)."""
        avail = min(self.C - self.tok, self.Pb - self.pre)
        if self.chunked or need > self.Pb:
            return max(0, min(need, avail))
        return need if need <= avail else 0

    # -- running candidates -------------------------------------------------------------
    def _cand_running(self, pos: int) -> None:
        """Generic path for the running candidate at ``seq[pos]`` (steps 2-4)."""
        i = int(self.seq[pos])
        v = self.view
        dec = bool(self.seq_dec[pos])
        ph = _DECODE if dec else _PREFILL
        if not self.hybrid and self.phase not in (_NONE, ph):
            return
        if self.nb >= self.maxbs:
            return
        m = int(v.m[i])
        if dec:
            if self.tok + 1 > self.C:
                return
            c = 1
        else:
            c = self._prefill_tokens(int(v.S[i]) - m)
            if c <= 0:
                return
        old = int(self.res[i])
        new_res = max(old, m + c)
        delta = self._fp(new_res) - self._fp(old)
        while delta > self.M - self.used:
            if self.end - 1 > pos:
                self.end -= 1
                self._evict(int(self.seq[self.end]))
            else:
                self._evict(i)  # self-eviction
                return
        self._add(i, c, new_res, ph, not dec)

    def _decode_block(self, pos: int, q: int) -> int:
        """Fast path for consecutive running decodes ``seq[pos:q]``; returns the next pos."""
        if not self.hybrid and self.phase == _PREFILL:
            return q
        k = min(q - pos, self.C - self.tok, self.maxbs - self.nb)
        if k <= 0:
            return q
        v = self.view
        cand = self.seq[pos:pos + k]
        free = self.M - self.used
        if self.exact:
            # token-exact blocks and "input" reservations: a running decode holds
            # res == m (its reservation was used up), so each needs exactly one token
            j = min(k, max(free, 0))
            if j:
                take = cand[:j]
                self.res[take] += 1
                self.used += j
        else:
            old = self.res[cand]
            new = np.maximum(old, v.m[cand] + 1)
            fp = v.limits.kv_footprint
            need = fp(new) - fp(old)
            cum = need.cumsum()
            j = k if cum[-1] <= free else int(np.searchsorted(cum, free, side="right"))
            if j:
                take = cand[:j]
                self.res[take] = new[:j]
                self.used += int(cum[j - 1])
        if j:
            if self.cur:
                self.blocks.append(np.array(self.cur, np.int64))
                self.cur = []
            self.blocks.append(take)
            self.btok.extend([1] * j)
            self.tok += j
            self.nb += j
            if self.phase == _NONE:
                self.phase = _DECODE
        if j < k:
            self._cand_running(pos + j)  # memory failure: evict lower priority / self
            return pos + j + 1
        return pos + k if k == q - pos else q

    def _run_seq(self, lo: int, hi: int) -> int:
        pos = lo
        nondec = self.nondec
        while pos < min(hi, self.end):
            lim = min(hi, self.end)
            if self.seq_dec[pos]:
                k = bisect_left(nondec, pos)
                q = min(nondec[k], lim) if k < len(nondec) else lim
                pos = self._decode_block(pos, q)
            else:
                self._cand_running(pos)
                pos += 1
        return max(pos, lo)

    # -- waiting candidates ---------------------------------------------------------------
    def _cand_waiting(self, i: int, pos: int) -> bool:
        """Try to admit waiting request ``i``; running victims are ``seq[pos:end]``."""
        if not self.hybrid and self.phase == _DECODE:
            return False
        if self.nb >= self.maxbs or self.n_resident >= self.max_num_seqs:
            return False
        v = self.view
        S = int(v.S[i])
        c = self._prefill_tokens(S)
        if c <= 0:
            return False
        R = self._reserve_target(i, S, int(v.g[i]))
        # the watermark is headroom kept on top of the reservation (waived for a request
        # that could never be admitted with it)
        delta = self._fp(R)
        if delta <= self.capM - self.wm:
            delta += self.wm
        if delta > self.M - self.used:
            if not self.waiting_evicts:
                return False
            freeable = sum(self._fp(int(self.res[x])) for x in self.seq[pos:self.end].tolist())
            if delta > self.M - self.used + freeable:
                return False
            while delta > self.M - self.used:
                self.end -= 1
                self._evict(int(self.seq[self.end]))
        self._add(i, c, R, _PREFILL, True)
        self.resident[i] = True
        self.n_resident += 1
        self.admitted.append(i)
        return True

    def _run_waiting(self, pos: int) -> None:
        w = self.waiting
        ior = self.idx_of_rank
        while w:
            if not self._cand_waiting(int(ior[w[0]]), pos):
                break
            heapq.heappop(w)

    # -- one batch --------------------------------------------------------------------
    def next_batch(self) -> Plan | None:
        v = self.view
        run = self.run_idx
        if not self.partial:
            # every running request is a decode (the common case)
            D = run
            if self.decode_sort == "m_desc" and D.size > 1:
                D = D[(-v.m[D]).argsort(kind="stable")]
            seq, seq_dec = D, np.ones(D.size, bool)
            self.nondec = []
        else:
            dec = (v.g[run] >= 1) & (v.m[run] == v.S[run] - 1)
            if self.order == "single":
                seq, seq_dec = run, dec
                self.nondec = np.flatnonzero(~dec).tolist()
            else:
                D = run[dec]
                if self.decode_sort == "m_desc" and D.size > 1:
                    D = D[(-v.m[D]).argsort(kind="stable")]
                seq = np.concatenate([D, run[~dec]])
                seq_dec = np.zeros(seq.size, bool)
                seq_dec[: D.size] = True
                self.nondec = list(range(D.size, seq.size))
        self.seq, self.seq_dec, self.end = seq, seq_dec, seq.size
        self.in_rank_order = self.decode_sort is None and (
            not self.partial or self.order == "single")
        # entry requests in order: numpy blocks (decode fast path) and single entries
        self.blocks = []
        self.cur = []
        self.btok = []
        self.ev = []
        self.admitted = []
        self.pre_entries = []
        self.tok = self.pre = self.nb = 0
        self.phase = _NONE

        if self.order == "prefill-first":
            self._run_waiting(0)
            self._run_seq(0, seq.size)
        elif self.order == "decode-first":
            self._run_seq(0, seq.size)
            self._run_waiting(self.end)
        else:
            self._run_single()
        blocks = self.blocks
        if self.cur:
            blocks.append(np.array(self.cur, np.int64))
        if not blocks:
            req = _EMPTY
        elif len(blocks) == 1:
            req = blocks[0]
        else:
            req = np.concatenate(blocks)
        return Plan(req, self.btok, self.ev)

    def _run_single(self) -> None:
        w = self.waiting
        ior = self.idx_of_rank
        seq_rank = self.rank_of[self.seq]
        pos = 0
        closed = False
        while True:
            wr = w[0] if (w and not closed) else _BIG
            hi = min(int(np.searchsorted(seq_rank, wr)), self.end)
            if pos < hi:
                pos = self._run_seq(pos, hi)
            elif wr < _BIG:
                if self._cand_waiting(int(ior[wr]), pos):
                    heapq.heappop(w)
                else:
                    closed = True
            else:
                break

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        res = self.res
        if finished.size:
            self.used -= int(self.view.limits.kv_footprint(res[finished]).sum())
            res[finished] = 0
            self.resident[finished] = False
            self.n_resident -= int(finished.size)
            if self.reserve == "histogram":
                outs = self.view.g[finished]
                top = int(outs.max())
                if top >= self.hist.size:
                    self.hist = np.concatenate(
                        [self.hist, np.zeros(max(top + 1, 2 * self.hist.size) - self.hist.size,
                                             np.int64)]
                    )
                np.add.at(self.hist, outs, 1)
                self.hist_cum = None
        rl = self.rank_list
        partial = self.partial
        for i in self.ev:
            heapq.heappush(self.waiting, rl[i])
            partial.discard(i)
        if self.pre_entries:
            v = self.view
            for i in self.pre_entries:
                if self.resident[i] and not (v.g[i] >= 1 and v.m[i] == v.S[i] - 1):
                    partial.add(i)
                else:
                    partial.discard(i)
        cand = self.seq[: self.end]
        if self.admitted:
            cand = np.concatenate([cand, np.asarray(self.admitted, np.int64)])
        cand = cand[self.resident[cand]]
        if self.admitted or not self.in_rank_order:
            cand = cand[self.rank_of[cand].argsort(kind="stable")]
        self.run_idx = cand


def warn_forced_chunks(name: str, prompt: np.ndarray, budget: int, C: int) -> None:
    """Say (a :class:`PolicyWarning`, one line on stderr from the command line) that a policy
    without chunked prefill must chunk the prompts longer than its prefill budget: the
    modelling choice of the module docstring ("CanAllocate"), never applied in silence.
    Refills longer than the budget (prompt + generated tokens) are chunked the same way."""
    longer = int(np.count_nonzero(prompt > budget))
    if not longer:
        return
    what = "max_batch_tokens C" if budget == C else "prefill budget min(C, P)"
    warnings.warn(
        f"{name}: {longer} prompt(s) longer than {what} = {budget} (longest "
        f"{int(prompt.max())}) are processed in chunks although {name} has no chunked "
        f"prefill (vLLM would reject them); raise C, or compare with a chunked-prefill "
        "policy (sarathi*)", PolicyWarning, stacklevel=3)


# -- registration ------------------------------------------------------------------------
INFERMAX = "InferMax (Kim et al., Optimizing LLM Inference for Database Systems)"

_P_PARAM = Param(
    "P", int, 0, "max prefill tokens per batch (0 = C); capped by the instance's P", non_negative
)
#: vLLM's admission limits (module docstring); every UnifiedScheduler policy takes them
_VLLM_PARAMS = (
    Param("watermark", float, 0.0, "share of the KV blocks kept free when admitting a waiting "
          "request (vLLM default 0.01)", lo=0.0, hi=0.99),
    Param("max_num_seqs", int, 0, "most requests holding KV at once, 0 = no cap (vLLM default "
          "256)", non_negative),
)
#: vLLM's own defaults, used by the policies that model the vLLM engine (vllm*, sarathi*)
VLLM_DEFAULTS = {"watermark": 0.01, "max_num_seqs": 256}

# name -> (description, Table-1 configuration)
TABLE1 = {
    "vllm": ("vLLM: prefill priority, no hybrid batching, no chunked prefill, P = C",
             dict(order="prefill-first", hybrid=False, chunked=False, P=0)),
    "sarathi": ("SARATHI: decode priority, hybrid batching, chunked prefill, P = 512",
                dict(order="decode-first", hybrid=True, chunked=True, P=512)),
    "sarathi-pc": ("SARATHI_{P=C}: decode priority, hybrid, chunked prefill, P = C",
                   dict(order="decode-first", hybrid=True, chunked=True, P=0)),
    "sarathi-nocp": ("SARATHI_nocp: decode priority, hybrid, no chunked prefill, P = C",
                     dict(order="decode-first", hybrid=True, chunked=False, P=0)),
    "vllm-hy": ("vLLM_hy: prefill priority, hybrid batching, no chunked prefill, P = C",
                dict(order="prefill-first", hybrid=True, chunked=False, P=0)),
    "sarathi-nohy": ("SARATHI_nohy: decode priority, no hybrid, no chunked prefill, P = C",
                     dict(order="decode-first", hybrid=False, chunked=False, P=0)),
}


def _factory(**fixed):
    def make(**params):
        return UnifiedScheduler(**{**fixed, **params})

    return make


for _name, (_desc, _table_cfg) in TABLE1.items():
    _cfg = dict(_table_cfg)
    _p = _cfg.pop("P")
    register(
        _name, _desc, f"{INFERMAX}, Algorithm 1 + Table 1",
        params=(_P_PARAM, *_VLLM_PARAMS), defaults={"P": _p, **VLLM_DEFAULTS},
        factory=_factory(**_cfg),
    )
    register(
        f"{_name}-ef",
        f"eviction-free {_name}: reserves I + O - 1 at admission (knows O)",
        f"{INFERMAX}, Algorithm 1 + Table 1, EF variant of section 4.1",
        hypothetical=True, params=(_P_PARAM, *_VLLM_PARAMS),
        defaults={"P": _p, **VLLM_DEFAULTS}, factory=_factory(**_cfg, reserve="full"),
    )

_RANK = dict(order="single", hybrid=True, chunked=True, waiting_evicts=True)
register(
    "rank-org", "Rank_org: one group in arrival order (no I/O ranking), hybrid, chunked, P = 512",
    f"{INFERMAX}, section 4.6", params=(_P_PARAM, *_VLLM_PARAMS), defaults={"P": 512},
    factory=_factory(**_RANK, key="arrival"),
)
register(
    "rank-i", "Rank_I: one group, smallest prompt I first, hybrid, chunked, P = 512",
    f"{INFERMAX}, section 4.6", params=(_P_PARAM, *_VLLM_PARAMS), defaults={"P": 512},
    factory=_factory(**_RANK, key="prompt"),
)
register(
    "rank-o", "Rank_O: one group, smallest output O first (knows O), hybrid, chunked, P = 512",
    f"{INFERMAX}, section 4.6", hypothetical=True, params=(_P_PARAM, *_VLLM_PARAMS),
    defaults={"P": 512},
    factory=_factory(**_RANK, key="output"),
)
register(
    "infermax",
    "InferMax: SARATHI groups, longest running decodes (largest m) first and shortest "
    "evicted first, reserve I + histogram-estimated O - 1",
    f"{INFERMAX}, section 6", params=(
        _P_PARAM,
        Param("quantile", float, 0.5,
              "quantile of the online output-length histogram used as the estimate",
              unit_interval),
        *_VLLM_PARAMS,
    ), defaults={"P": 512},
    factory=_factory(order="decode-first", decode_sort="m_desc", hybrid=True, chunked=True,
                     reserve="histogram"),
)
register(
    "fcfs",
    "FCFS: one group in arrival order over running and waiting requests, hybrid batching, "
    "no chunked prefill, P = C; later arrivals are evicted first",
    "vLLM's default first-come-first-served order (Kwon et al.), as described in "
    "Jaillet et al., Online Scheduling for LLM Inference with KV Cache Constraints, section 7",
    params=(_P_PARAM, *_VLLM_PARAMS), defaults={"P": 0},
    factory=_factory(order="single", key="arrival", hybrid=True, chunked=False,
                     waiting_evicts=True),
)

__all__ = ["UnifiedScheduler", "TABLE1"]
