"""Group-synchronous batching, the machinery GBA, GSA and Sorted-F share (not a policy).

The three offline-batch algorithms of the 2025-2026 theory papers (Feng, Yang, Zhang,
arXiv 2601.22996; Wang, Ye, Zhou, arXiv 2508.06133) form a *group* of requests, run it, and
form the next group when it is over. What they differ in is which group they pick and how
long a member may run; that is :meth:`GroupPolicy.form_group`. What is common:

* **Lockstep.** Every member processes its whole prefill ``S`` in the group's first batch
  (the group's prefills fit ``min(C, P)`` together) and one token in every later batch, so
  after the group's ``t``-th batch a member holds ``S + t`` KV tokens (semantics section 3).
  With ``q_i`` the tokens member ``i`` may generate in this group (its *quota*), it holds
  KV ``S_i + t`` for ``t = 0 .. q_i - 1``: the group fits ``M`` at every batch iff equation
  (1) of the online paper (:func:`optsched.policies.mcsf.profile_ok`, base ``S_i``, finishing
  offset ``q_i - 1``) holds -- that is the membership test.
* **Quota.** A member that has generated ``q_i`` tokens in the group and is unfinished is
  evicted (recompute) in the next batch and handed back to :meth:`GroupPolicy.on_slice_end`.
  Run-to-completion algorithms set ``q_i = O_i - g_i`` and never evict.
* **Long prompts.** A prompt (``S``) longer than ``min(C, P)`` can only be one group alone,
  its prefill chunked by ``min(C, P)`` (as MC-SF, :mod:`optsched.policies.mcsf`).
* **Budgets.** A group has at most ``min(C, max_batch_size)`` members, so every later batch
  (one token each) fits the token budget.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable

import numpy as np

from .mcsf import profile_ok
from .simulator import Plan, Policy, SimView

_BIG = 1 << 62


class GroupPolicy(Policy):
    """Runs one group at a time in lockstep (module docstring); subclasses pick the groups."""

    def bind(self, view: SimView) -> None:
        super().bind(view)
        lim = view.limits
        self.M, self.C, self.b = lim.kv_capacity, lim.max_batch_tokens, lim.block_size
        self.capM = (self.M // self.b) * self.b
        self.cap = min(self.C, lim.max_batch_size or _BIG)
        self.Pb = min(self.C, lim.prefill_budget)
        self.group: list[int] = []
        self.quota: dict[int, int] = {}  # tokens member i may still generate in this group
        self.g0: dict[int, int] = {}
        self.ev: list[int] = []

    # -- what a subclass defines -------------------------------------------------------
    @abstractmethod
    def form_group(self, exclude: set[int]) -> list[tuple[int, int]]:
        """The next group as ``(request, quota)`` pairs, the waiting queues updated; empty
        when nothing waits. ``exclude``: requests evicted in this batch (not eligible)."""

    @abstractmethod
    def on_slice_end(self, i: int) -> None:
        """Member ``i`` used its quota unfinished and is evicted: queue it again."""

    # -- shared helpers ----------------------------------------------------------------
    def pack(self, cands: list[int], quota: Callable[[int], int]) -> list[tuple[int, int]]:
        """Greedy lockstep packing of ``cands`` in order: a candidate joins while the group's
        prefills fit ``min(C, P)``, its size ``min(C, max_batch_size)`` and equation (1)
        (module docstring); a prompt longer than ``min(C, P)`` is a group alone, and only
        first. Stops at the first candidate that does not fit (the order is the priority)."""
        S = self.view.S
        out: list[tuple[int, int]] = []
        base: list[int] = []
        fin: list[int] = []
        ntok = 0
        for i in cands:
            Si, qi = int(S[i]), int(quota(i))
            if Si > self.Pb:
                if not out:
                    out.append((i, qi))
                break
            if len(out) + 1 > self.cap or ntok + Si > self.Pb:
                break
            nb, nf = np.array(base + [Si], np.int64), np.array(fin + [qi - 1], np.int64)
            if not profile_ok(nb, nf, self.M, self.b):
                if not out:  # cannot happen when I + O - 1 <= M; a group of one always runs
                    out.append((i, qi))
                break
            out.append((i, qi))
            base.append(Si)
            fin.append(qi - 1)
            ntok += Si
        return out

    # -- the simulator's hooks ---------------------------------------------------------
    def next_batch(self) -> Plan | None:
        v = self.view
        S, m, g = v.S, v.m, v.g
        self.ev = [i for i in self.group if int(g[i]) - self.g0[i] >= self.quota[i]]
        if self.ev:
            gone = set(self.ev)
            self.group = [i for i in self.group if i not in gone]
        if not self.group:
            for i, q in self.form_group(set(self.ev)):
                self.group.append(i)
                self.quota[i] = q
                self.g0[i] = int(g[i])
        req, tok = [], []
        for i in self.group:
            left = int(S[i] - m[i])
            req.append(i)
            tok.append(min(left, self.Pb) if left > 0 else 1)
        return Plan(req, tok, self.ev)

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        for i in self.ev:
            self.on_slice_end(i)
        if finished.size:
            done = set(finished.tolist())
            self.group = [i for i in self.group if i not in done]


__all__ = ["GroupPolicy"]


class ShortestOutputGroups(GroupPolicy):
    """The clairvoyant group policies' waiting list (GBA, Sorted-F): requests in order of
    (true output length, prompt, arrival, index), each run to completion once grouped."""

    def bind(self, view: SimView) -> None:
        super().bind(view)
        self.O = np.asarray(view.known_output, np.int64)
        self.key: dict[int, tuple] = {}  # request -> sort key (O, I, arrival, index)
        self.waiting: list[int] = []

    def on_arrivals(self, idx: list[int]) -> None:
        v = self.view
        for i in idx:
            self.key[i] = (int(self.O[i]), int(v.prompt[i]), float(v.arrival[i]), i)
        self.waiting.extend(idx)
        self.waiting.sort(key=self.key.__getitem__)

    def on_slice_end(self, i: int) -> None:  # quotas are O - g: a member always finishes
        raise AssertionError(f"{type(self).__name__} runs every member to completion")


def checked_base(base: float) -> float:
    """GBA's and GSA's geometric ratio, checked (> 1)."""
    if not base > 1:
        raise ValueError(f"base must be > 1, got {base!r}")
    return base
