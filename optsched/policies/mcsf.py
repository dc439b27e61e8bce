"""MC-SF, "memory-constrained shortest first" (Jaillet, Jiang, Podimata, Zhou, *Online
Scheduling for LLM Inference with KV Cache Constraints*: Algorithm 1 for the
semi-online case where every request arrives at 0, Algorithm 2 online; section 4-5).

What exactly is simulated
-------------------------
Every batch keeps **all running requests** (each processes one token; the paper's
"prioritise requests that have already started") and then adds waiting requests in
**ascending output length** (ties: arrival, then instance order) as long as the memory
check of equation (1) holds: with the paper's prompt size ``s = I - 1`` (semantics section
7), a request admitted at batch ``t`` processes its ``S`` prompt tokens in that batch and
one token per batch after it, so after batch ``t + k`` it holds ``S + k`` KV tokens and
it finishes at ``k = O - g - 1`` with peak ``I + O - 1``. Equation (1) demands, for every
future completion time ``t'`` of the running and candidate requests,
``sum over requests still unfinished at t' of their KV at t' <= M`` (in whole blocks;
requests finishing at ``t'`` count, semantics section 3). The scan stops at the first
candidate that fails (Algorithm 1 adds "in this order" while the check holds).
Algorithm 1 (all arrivals at 0) and Algorithm 2 (online) are the same rule; the
simulator's arrival gating makes it online.

The paper's model has no batch token budget; ours does. So that the unit-step memory
profile above stays exact, a candidate is admitted only if the batch's tokens
(``#running + sum S`` of admissions) stay within ``C`` and the running set stays within
``min(C, max_batch_size)`` (every running request then decodes in every batch); the
admitted prompts also respect the prefill budget ``P``.
*Modelling choice:* a prompt longer than ``min(C, P)`` can never be processed whole; it is
admitted only when nothing else runs, its prefill is chunked by ``min(C, P)``, and no one
else is admitted until it completes (it runs alone, so memory cannot overflow).
A prediction is capped at ``M - I + 1`` (in whole blocks) so that no request looks
too large to ever start.

**Output lengths**: MC-SF assumes outputs are known ("accurately predicted"); it uses
``predicted_output`` where the instance gives one and the true output elsewhere
(``output_fallback``). With exact lengths it never evicts. With wrong predictions the
profile can be wrong; a request that outlives its prediction is then assumed to finish
next batch, and if the actual KV after the batch would exceed ``M`` the most recently
admitted running requests are evicted (recompute) until it fits -- a safety net the
paper does not need.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from ..instance import block_round
from .registry import register
from .simulator import Plan, Policy, SimView

_BIG = 1 << 62


def profile_ok(base: np.ndarray, fin: np.ndarray, M: int, b: int = 1) -> bool:
    """Equation (1): ``max_t sum_{fin_r >= t} fp(base_r + t) <= M`` over ``t in fin``.

    ``base`` = KV after the current batch, ``fin`` = finishing offset in batches.
    """
    if base.size == 0:
        return True
    if b == 1:
        order = np.argsort(-fin, kind="stable")
        fs = fin[order]
        val = np.cumsum(base[order]) + fs * np.arange(1, fs.size + 1)
        # prefix values undercount ties, the last of each tie group is exact: max is exact
        return int(val.max()) <= M
    for t in np.unique(fin):
        live = fin >= t
        x = base[live] + t
        if int(block_round(x, b).sum()) > M:
            return False
    return True


class MCSF(Policy):
    """MC-SF (Algorithms 1-2); see the module docstring."""

    #: this exact class runs on the compiled kernel (:func:`optsched.policies.fast.fast_config`)
    fast_kernel = "mcsf"

    output_fallback = True

    def bind(self, view: SimView) -> None:
        super().bind(view)
        n = view.n
        lim = view.limits
        self.M, self.C, self.b = lim.kv_capacity, lim.max_batch_tokens, lim.block_size
        self.cap = min(self.C, lim.max_batch_size or _BIG)
        self.maxbs = lim.max_batch_size or _BIG
        self.Pb = min(self.C, lim.prefill_budget)
        # a prediction can never make a request look larger than M (it could never start)
        capM = (self.M // self.b) * self.b
        est = np.minimum(view.known_output, capM - view.prompt + 1)
        idx = np.arange(n)
        self.idx_of_rank = np.lexsort((idx, view.arrival, self.priority(view, est)))
        self.rank_of = np.empty(n, np.int64)
        self.rank_of[self.idx_of_rank] = idx
        self.rank_list = self.rank_of.tolist()
        self.est = est
        self.waiting: list[Any] = []  # heap: ranks here, (estimate, arrival, index) in A_min
        self.running: list[int] = []  # admission order
        self.lone: int | None = None  # a prompt longer than C being chunked alone

    def priority(self, view: SimView, est: np.ndarray) -> np.ndarray:
        """Admission order key, smallest first (ties: arrival, then instance order): the
        (predicted) output length. A subclass may rank by another key (the LNS's priority
        neighbourhood, optsched/search/lns.py, ranks by fluid work)."""
        return est

    def on_arrivals(self, idx: list[int]) -> None:
        for i in idx:
            self._push(i)

    # the waiting queue and the safety net's victim choice, overridable (A_min re-ranks)
    def _push(self, i: int) -> None:
        """Queue request ``i`` (an arrival or an evicted request)."""
        heapq.heappush(self.waiting, self.rank_list[i])

    def _head(self) -> int:
        """The first waiting request in admission order (the queue is not empty)."""
        return int(self.idx_of_rank[self.waiting[0]])

    def _pop(self) -> None:
        heapq.heappop(self.waiting)

    def _victim_pos(self, run: np.ndarray) -> int:
        """Position in ``run`` (admission order) of the next request the safety net evicts:
        the most recently admitted."""
        return run.size - 1

    def next_batch(self) -> Plan | None:
        v = self.view
        S, m, g = v.S, v.m, v.g
        run = np.asarray(self.running, np.int64)
        self.ev: list[int] = []
        # 1. all running requests: one token each (a lone long prompt: its next chunk)
        c_run = np.ones(run.size, np.int64)
        if self.lone is not None:
            k = self.running.index(self.lone)
            c_run[k] = min(int(S[self.lone] - m[self.lone]), self.Pb)
        # safety net (wrong predictions only): KV after the batch must fit M
        if run.size:
            kv_after = int(self.view.fp(m[run] + c_run).sum())
            while kv_after > self.M and run.size:
                k = self._victim_pos(run)
                victim = int(run[k])
                kv_after -= int(self.view.fp(m[victim] + c_run[k]))
                self.ev.append(victim)
                run, c_run = np.delete(run, k), np.delete(c_run, k)
            if self.ev:
                self.running = run.tolist()
                if self.lone in self.ev:
                    self.lone = None
        req = run.tolist()
        tok = [int(x) for x in c_run]
        ntok = int(c_run.sum())
        npre = 0
        # 2. admissions, shortest (predicted) output first, while equation (1) holds
        if self.lone is None:
            est = self.est
            gr = g[run]
            base = (m[run] + 1).astype(np.int64)
            fin = np.maximum(est[run] - gr - 1, 0)
            w = self.waiting
            evicted = set(self.ev)
            while w:
                i = self._head()
                if i in evicted:
                    break
                Si = int(S[i])
                if not req and Si > self.Pb:
                    # a prompt longer than min(C, P): chunk it, alone
                    self._pop()
                    req.append(i)
                    tok.append(self.Pb)
                    self.lone = i
                    self.lone_g = int(g[i])
                    break
                if len(req) + 1 > self.cap or ntok + Si > self.C or npre + Si > self.Pb:
                    break
                fi = max(int(est[i]) - int(g[i]) - 1, 0)
                nb = np.append(base, Si)
                nf = np.append(fin, fi)
                if not profile_ok(nb, nf, self.M, self.b):
                    break
                self._pop()
                base, fin = nb, nf
                req.append(i)
                tok.append(Si)
                ntok += Si
                npre += Si
        self.plan_req = req
        return Plan(req, tok, self.ev)

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        fin = set(finished.tolist())
        for i in self.ev:
            self._push(i)
        self.running = [i for i in self.plan_req if i not in fin]
        if self.lone is not None:
            i = self.lone
            if i in fin or int(self.view.g[i]) > self.lone_g:
                self.lone = None


register(
    "mcsf",
    "MC-SF: keep running requests, admit waiting ones in ascending output length while KV "
    "stays <= M at every future completion time; uses true output lengths when no "
    "predictions are given (as the paper assumes accurate prediction)",
    "Jaillet et al., Online Scheduling for LLM Inference with KV Cache Constraints, "
    "Algorithm 1 (all arrivals at 0) and Algorithm 2 (online), equation (1)",
    factory=MCSF,
)

__all__ = ["MCSF", "profile_ok"]
