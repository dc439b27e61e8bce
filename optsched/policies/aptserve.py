"""Apt-Serve (Gao et al., *Apt-Serve*, paper 004, sections 4.2 and 5): value-based adaptive
scheduling over a hybrid KV / hidden cache (docs/semantics.md section 6, "Hidden cache").

Every iteration (one batch):

1. **Runtime information** (section 4.2): for each arrived, unfinished request its pending
   time ``p`` (now minus its arrival before the first token, minus the time of its last
   token after) and its maximum memory requirement ``m`` (KV tokens after this iteration,
   in whole blocks: ``S`` for a (re)prefill, ``m + 1`` for a decode).
2. **Value model** (eqs. 5, 6, 8): ``g = p - beta (|W| + |R|) rho m`` with ``rho`` the cost
   model's hidden-cache coefficient (semantics section 5); a request already past its SLO
   (TTFT before its first token, TBT after) is demoted to the near-zero value
   ``fallback * p`` (:class:`ValueModel`).
3. **Iteration type** (section 5): prefill when the waiting queue ``W`` (requests holding no
   cache) has the larger total pending time, decode otherwise; as in the authors' code, a
   prefill iteration that can admit nothing falls back to decode and an empty queue gives
   the other type (:func:`iteration_type`).
4. **Per-iteration memory limit** (section 5): ``M^e = M - sum_R m`` (the running requests'
   current caches) for prefill iterations, ``M^e = M`` for decode iterations.
5. **Batch choice**: :func:`optsched.policies.aptserve_problem.greedy`, the one implementation the
   claim checker ``check-claim aptserve-2approx`` tests -- repaired (keeps its ratio 2) by
   default, as described with ``repaired=False`` -- returns each candidate's choice: none,
   hidden or KV.

How a choice becomes a batch (the parts the paper leaves to its implementation):

* prefill iteration: each chosen waiting request prefills all its ``S`` known tokens with
  the chosen cache type, in decreasing ``g / m`` while the prefill budget (``P`` or ``C``)
  and ``max_batch_size`` allow; a first request larger than the budget is prefilled in
  chunks in the iterations that follow (nothing else runs meanwhile, as in a vLLM without
  chunked prefill).
* decode iteration: a chosen running request with its current cache type decodes one
  token; one whose chosen type differs switches (the cache is discarded -- an eviction --
  and recomputed in the chosen type by a later prefill, section 5's last paragraph); a
  request not chosen waits, and is evicted (recompute preemption) only if the decoding
  requests' growth needs its memory, lowest value first. A request switches at most
  ``max_switches`` times (default 2: to hidden cache under memory pressure and back);
  after that its cache type is fixed, so switching cannot livelock.

Where this differs from the authors' implementation (github.com/eddiegaoo/Apt-Serve, read
for comparison; see also :mod:`optsched.oracles.aptserve`): their decode step preempts
every running request the greedy leaves out and every request it assigns hidden cache (even
one already on hidden cache); we preempt only for memory and for a change of cache type,
and bound the switches per request (``max_switches``), which rules out a
switch-and-recompute livelock their code does not guard against. Two choices of their code
that the paper does not describe are the parameter ``value_model=code`` (default
``paper``): the scaling factor ``|W| + |R|`` excludes requests past their SLO, and the
hidden-cache coefficient is the QKV projection's timing slope divided by 5
(:func:`code_coefficient`) instead of the K/V re-projection cost ``rho``.

``aptserve-kv-only`` is the same scheduler with hidden cache off (the paper's ablation,
section 6.5). ``aptserve`` uses hidden cache only on instances that enable it
(``limits.hidden_cache``); elsewhere it is ``aptserve-kv-only``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .aptserve_problem import HIDDEN, KV, NONE, AptProblem, AptSelection, greedy
from .registry import Param, non_negative, positive, register
from .simulator import Plan, Policy

APTSERVE = "Gao et al., Apt-Serve (paper 004)"


@dataclass(frozen=True)
class ValueModel:
    """Apt-Serve's quantification model (section 4.2, eqs. 5-6) with its SLO-aware fallback."""

    ttft_slo: float = 1.0
    tbt_slo: float = 1.0
    #: a request past its SLO is worth ``fallback * p`` ("a near-zero constant")
    fallback: float = 1e-6

    def pending(self, now: float, last_token: np.ndarray) -> np.ndarray:
        """``p``: time since the last token, or since arrival before the first (section 4.2)."""
        return np.maximum(now - last_token, 0.0)

    def violated(self, p: np.ndarray, started: np.ndarray) -> np.ndarray:
        """Already past its SLO: TBT once it has a token, TTFT before."""
        return np.where(started, p > self.tbt_slo, p > self.ttft_slo)

    def values(self, p: np.ndarray, started: np.ndarray) -> np.ndarray:
        """The ``p`` part of ``g`` (eq. 5), demoted to ``fallback * p`` past the SLO."""
        return np.where(self.violated(p, started), self.fallback * p, p)

    @staticmethod
    def scale(n_waiting: int, n_running: int, rho: float) -> float:
        """``K = (|W| + |R|) rho`` of eq. 8: the hidden-cache penalty per unit of ``m``."""
        return (n_waiting + n_running) * rho


def code_coefficient(rho: float, hidden_ratio: float) -> float:
    """The hidden-cache coefficient of the authors' code (``_get_coef`` of their engine):
    the slope of the whole QKV projection's time (all layers) per cached unit, divided by 5.
    Our ``rho`` is the K/V part of that slope (:data:`optsched.cost.RHO_FITTED`: QKV slope
    x K/V share x layers); the K/V share of the QKV output is ``2 kv_dim / (hidden + 2
    kv_dim) = 1 / (1 + r)`` with ``r`` the hidden ratio (``limits.hidden_ratio``), so their
    coefficient is ``rho (1 + r) / 5`` -- ``0.3 rho`` for multi-head attention. Their slope
    is per KV block and multiplies a block count, so per token it is the same."""
    return rho * (1.0 + hidden_ratio) / 5.0


def iteration_type(pending_waiting: float, pending_running: float, n_waiting: int,
                   n_running: int) -> str:
    """Section 5: ``prefill`` when the waiting queue's total pending time is larger (or
    nothing runs), ``decode`` otherwise (or nothing waits)."""
    if n_running == 0:
        return "prefill"
    if n_waiting == 0:
        return "decode"
    return "prefill" if pending_waiting > pending_running else "decode"


class AptServe(Policy):
    """Apt-Serve's scheduler (module docstring)."""

    def __init__(self, hidden: bool = True, repaired: bool = True, compare: bool = True,
                 ttft_slo: float = 1.0, tbt_slo: float = 1.0, fallback: float = 1e-6,
                 record: bool = False, max_switches: int = 2, value_model: str = "paper"):
        self.use_hidden = hidden
        self.code_values = value_model == "code"
        self.repaired = repaired
        self.compare = compare
        self.value_model = ValueModel(ttft_slo, tbt_slo, fallback)
        self.record = record
        self.max_switches = max_switches

    def bind(self, view) -> None:
        super().bind(view)
        self.hidden_on = self.use_hidden and view.limits.hidden_cache
        self.rho = code_coefficient(float(view.cost_model.rho), view.limits.hidden_ratio) \
            if self.code_values else float(view.cost_model.rho)
        self.active: list[int] = []
        self.last_token = view.arrival.astype(np.float64).copy()
        #: cache-type switches so far, and the type a switch evicted a request for
        #: (-1 none, 0 KV, 1 hidden): its next prefill uses that type
        self.switches = np.zeros(view.n, np.int64)
        self.target = np.full(view.n, -1, np.int64)
        self.budget = view.limits.prefill_budget
        #: per iteration (when ``record``): the problem solved and the greedy's selection
        self.problems: list[tuple[str, AptProblem, AptSelection]] = []
        self._g_before = np.zeros(0, np.int64)

    def on_arrivals(self, idx: list[int]) -> None:
        self.active.extend(idx)

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        v = self.view
        req = np.asarray(plan.req, np.int64)
        if req.size:
            got = req[v.g[req] > self._g_before]
            self.last_token[got] = v.now
        if len(finished):
            done = set(np.asarray(finished).tolist())
            self.active = [i for i in self.active if i not in done]

    # -- one iteration ---------------------------------------------------------------
    def next_batch(self) -> Plan | None:
        if not self.active:
            return None
        v = self.view
        act = np.array(self.active, np.int64)
        m, S, g = v.m[act], v.S[act], v.g[act]
        ready = (g >= 1) & (m == S - 1)
        partial = act[(m > 0) & ~ready]
        if partial.size:  # a chunked prefill in progress continues alone
            r = int(partial[0])
            return self._plan([r], [min(int(v.S[r] - v.m[r]), self.budget)],
                              [bool(v.hidden[r])], [])
        W, R = act[m == 0], act[ready]
        p = self.value_model.pending(v.now, self.last_token[act])
        pw, pr = float(p[m == 0].sum()), float(p[ready].sum())
        if self.code_values:  # the authors' count: requests past their SLO excluded
            ok = ~self.value_model.violated(p, g >= 1)
            K = ValueModel.scale(int((ok & (m == 0)).sum()), int((ok & ready).sum()), self.rho)
        else:
            K = ValueModel.scale(W.size, R.size, self.rho)
        kind = iteration_type(pw, pr, W.size, R.size)
        if kind == "prefill":
            plan = self._prefill(W, K)
            if plan is not None:
                return plan
        return self._decode(R, K)

    def _problem(self, reqs: np.ndarray, tokens: np.ndarray, K: float, capacity: float,
                 only: np.ndarray) -> AptProblem:
        """Definition 1 over ``reqs`` after ``tokens`` cached tokens each. ``only`` fixes a
        request's cache type (-1 free, 0 KV, 1 hidden; module docstring): a KV-only request
        offers its KV item alone (its hidden memory is stated as ``m``, which the hull test
        drops); a hidden-only one offers its hidden cache alone, weight ``h`` and value
        ``p - K m``, stated as a KV-kind item of weight ``h``."""
        v, lim = self.view, self.view.limits
        p = self.value_model.pending(v.now, self.last_token[reqs])
        vals = self.value_model.values(p, v.g[reqs] >= 1)
        kv = lim.kv_footprint(tokens).astype(np.float64)
        h = lim.hidden_footprint(tokens).astype(np.float64)
        if not self.hidden_on:
            return AptProblem(tuple(vals.tolist()), tuple(kv.tolist()), K, float(capacity),
                              allow_hidden=False)
        vals = np.where(only == 1, vals - K * kv, vals)
        mem = np.where(only == 1, h, kv)
        hm = np.where(only == 0, kv, h)
        return AptProblem(tuple(vals.tolist()), tuple(mem.tolist()), K, float(capacity),
                          hidden_memory=tuple(hm.tolist()))

    @staticmethod
    def _hidden_choice(choice: np.ndarray, only: np.ndarray) -> np.ndarray:
        """Whether each chosen request gets hidden cache (``only`` as in :meth:`_problem`)."""
        return (choice != NONE) & ((only == 1) | (choice == HIDDEN))

    def _choose(self, prob: AptProblem, kind: str) -> AptSelection:
        sel = greedy(prob, compare=self.compare, repaired=self.repaired)
        if self.record:
            self.problems.append((kind, prob, sel))
        return sel

    def _held(self, reqs: np.ndarray) -> int:
        v = self.view
        return int(v.limits.footprint(v.m[reqs], v.hidden[reqs]).sum()) if reqs.size else 0

    def _prefill(self, W: np.ndarray, K: float) -> Plan | None:
        """Section 5, prefill iteration: ``M^e = M - sum_R m``; whole (re)prefills of the
        chosen waiting requests within the prefill budget (module docstring)."""
        v, lim = self.view, self.view.limits
        R = np.array([i for i in self.active if v.m[i] > 0], np.int64)
        only = self.target[W]
        prob = self._problem(W, v.S[W], K, lim.kv_capacity - self._held(R), only)
        sel = self._choose(prob, "prefill")
        hidden = self._hidden_choice(np.array(sel.choice), only)
        chosen = [k for k, c in enumerate(sel.choice) if c != NONE]
        if not chosen:
            return None
        chosen.sort(key=lambda k: -prob.value(k, sel.choice[k]) / prob.weight(k, sel.choice[k]))
        reqs: list[int] = []
        toks: list[int] = []
        hid: list[bool] = []
        left = self.budget
        for k in chosen:
            if lim.max_batch_size is not None and len(reqs) >= lim.max_batch_size:
                break
            need = int(v.S[W[k]])
            if need > left:
                if reqs:
                    continue
                need = left  # the first one alone: chunked over the next iterations
            reqs.append(int(W[k]))
            toks.append(need)
            hid.append(bool(hidden[k]))
            left -= need
        self.target[reqs] = -1
        return self._plan(reqs, toks, hid, [])

    def _decode(self, R: np.ndarray, K: float) -> Plan | None:
        """Section 5, decode iteration: ``M^e = M``; chosen requests decode with their cache
        type or switch it (evicted now, recomputed by a later prefill); the others wait,
        evicted only when the decoders' growth needs their memory."""
        v, lim = self.view, self.view.limits
        if not R.size:
            return None
        cur_hidden = v.hidden[R].copy()
        only = np.where(self.switches[R] >= self.max_switches, cur_hidden.astype(np.int64), -1)
        prob = self._problem(R, v.m[R] + 1, K, lim.kv_capacity, only)
        want = np.array(self._choose(prob, "decode").choice)
        want_hidden = self._hidden_choice(want, only)
        switch = (want != NONE) & (want_hidden != cur_hidden)
        if K <= 0:  # the upgrade back to KV gains K m = 0: not worth a recompute
            switch &= ~cur_hidden
        order = np.argsort(-np.asarray(prob.pending), kind="stable").tolist()
        cap_n = lim.max_batch_tokens if lim.max_batch_size is None \
            else min(lim.max_batch_tokens, lim.max_batch_size)
        dec_idx = [k for k in order if want[k] != NONE and not switch[k]][:cap_n]
        decoding = np.zeros(R.size, bool)
        decoding[dec_idx] = True
        self.switches[R[switch]] += 1
        self.target[R[switch]] = want_hidden[switch].astype(np.int64)
        evict = np.flatnonzero(switch).tolist()
        # memory after the batch: decoders grow by one token, waiting ones keep theirs
        after = lim.footprint(v.m[R] + decoding, cur_hidden)
        after[switch] = 0
        total = int(after.sum())
        for k in order[::-1]:  # least valuable first
            if total <= lim.kv_capacity:
                break
            if not decoding[k] and not switch[k]:
                total -= int(after[k])
                evict.append(k)
        reqs = [int(R[k]) for k in dec_idx]
        return self._plan(reqs, [1] * len(reqs), [bool(cur_hidden[k]) for k in dec_idx],
                          [int(R[k]) for k in evict])

    def _plan(self, reqs, toks, hid, evict) -> Plan:
        r = np.asarray(reqs, np.int64)
        self._g_before = self.view.g[r].copy()
        return Plan(r, np.asarray(toks, np.int64), np.asarray(evict, np.int64),
                    hidden=np.asarray(hid, bool) if any(hid) else ())


def _params() -> tuple[Param, ...]:
    return (
        Param("repaired", bool, True, "the greedy's repaired form (keeps its ratio 2); false: "
              "as described in the paper"),
        Param("compare", bool, True, "compare the first item that does not fit alone with the "
              "greedy's prefix (the 2-approximation's last step)"),
        Param("ttft_slo", float, 1.0, "TTFT SLO in seconds (the SLO-aware fallback)", positive),
        Param("tbt_slo", float, 1.0, "TBT SLO in seconds (the SLO-aware fallback)", positive),
        Param("fallback", float, 1e-6, "value factor of a request past its SLO (near zero)",
              non_negative),
        Param("record", bool, False, "keep every iteration's problem and selection "
              "(policy.problems)"),
        Param("max_switches", int, 2, "cache-type switches allowed per request (each one an "
              "eviction and a recompute); then its type is fixed", non_negative),
        Param("value_model", str, "paper", "eq. 8's hidden-cache penalty: paper = (|W| + |R|) "
              "rho; code = the authors' code, (requests not past their SLO) x QKV slope / 5 "
              "(code_coefficient)", choices=("paper", "code")),
    )


register("aptserve", "Apt-Serve: value-based greedy batch choice (pending time, SLO fallback) "
         "over a hybrid KV / hidden cache (hidden only where limits.hidden_cache)",
         f"{APTSERVE}, sections 4.2 and 5", params=_params(),
         factory=lambda **p: AptServe(hidden=True, **p))
register("aptserve-kv-only", "Apt-Serve's scheduler with KV cache only (no hidden cache)",
         f"{APTSERVE}, sections 5 and 6.5 (ablation)", params=_params(),
         factory=lambda **p: AptServe(hidden=False, **p))

__all__ = ["AptServe", "ValueModel", "code_coefficient", "iteration_type", "KV", "HIDDEN", "NONE"]
