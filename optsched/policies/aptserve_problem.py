"""Apt-Serve's per-iteration problem (Definition 1, eqs. 7-9) and the paper's greedy: the batch
choice of the ``aptserve`` policies (:mod:`optsched.policies.aptserve`).

The problem statement, the greedy's reconstruction, its 2-approximation argument, the
counterexample and the comparison with the authors' implementation are in
:mod:`optsched.oracles.aptserve`, which holds the greedy up against exact solvers and
re-exports these names. Here so that the policy does not import the oracle that checks it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

NONE, HIDDEN, KV = 0, 1, 2
_CHOICE_NAMES = {NONE: "none", HIDDEN: "hidden", KV: "kv"}


@dataclass(frozen=True)
class AptProblem:
    """Definition 1 at one iteration: pending times ``p``, KV memory ``m``, ``K = (|W|+|R|) rho``,
    memory budget ``M`` (eq. 7)."""

    pending: tuple[float, ...]
    memory: tuple[float, ...]
    scale: float
    capacity: float
    #: hidden-cache memory per request (default ``m_i / 2``, eq. 7); see the module docstring
    hidden_memory: tuple[float, ...] | None = None
    #: False: the KV-only problem (every ``beta_i = 0``)
    allow_hidden: bool = True

    def __post_init__(self):
        if len(self.pending) != len(self.memory):
            raise ValueError("pending and memory differ in length")
        if any(m <= 0 for m in self.memory) or self.scale < 0 or self.capacity < 0:
            raise ValueError("need m_i > 0, K >= 0, M >= 0")
        if self.hidden_memory is not None and (
                len(self.hidden_memory) != len(self.memory)
                or any(not 0 < h for h in self.hidden_memory)):
            raise ValueError("hidden_memory: one positive value per request")

    @property
    def n(self) -> int:
        return len(self.pending)

    def value(self, i: int, choice: int) -> float:
        """``g_i alpha_i`` of eq. 8."""
        if choice == NONE:
            return 0.0
        return self.pending[i] - (self.scale * self.memory[i] if choice == HIDDEN else 0.0)

    def weight(self, i: int, choice: int) -> float:
        """``(1 - beta_i/2) m_i alpha_i`` of eq. 7 (``hidden_memory[i]`` for hidden cache when
        given)."""
        if choice == NONE:
            return 0.0
        if choice == KV:
            return self.memory[i]
        return self.memory[i] * 0.5 if self.hidden_memory is None else self.hidden_memory[i]

    @property
    def choices(self) -> tuple[int, ...]:
        return (NONE, HIDDEN, KV) if self.allow_hidden else (NONE, KV)

    def evaluate(self, choice: tuple[int, ...]) -> tuple[float, float]:
        return (sum(self.value(i, c) for i, c in enumerate(choice)),
                sum(self.weight(i, c) for i, c in enumerate(choice)))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pending": list(self.pending), "memory": list(self.memory),
                             "K": self.scale, "M": self.capacity}
        if self.hidden_memory is not None:
            d["hidden_memory"] = list(self.hidden_memory)
        if not self.allow_hidden:
            d["allow_hidden"] = False
        return d


@dataclass(frozen=True)
class AptSelection:
    """A choice per request (``none``/``hidden``/``kv``) with its value and memory."""

    choice: tuple[int, ...]
    value: float
    weight: float
    how: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"choice": [_CHOICE_NAMES[c] for c in self.choice], "value": self.value,
                "memory": self.weight, "how": self.how}


def _selection(prob: AptProblem, choice, how: str) -> AptSelection:
    v, w = prob.evaluate(tuple(choice))
    return AptSelection(tuple(choice), v, w, how)


@dataclass(frozen=True)
class _Item:
    theta: float
    req: int
    dm: float
    kind: int  # HIDDEN (first half), KV (direct, or the upgrade after hidden)
    upgrade: bool = False


def greedy_items(prob: AptProblem, repaired: bool = False) -> list[_Item]:
    """The candidate schedule set Upsilon (eq. 10) with the refined marginal gains, sorted by
    decreasing theta (a request's hidden item before its upgrade)."""
    K, M = prob.scale, prob.capacity
    items: list[tuple[float, int, int, _Item]] = []
    for i, (p, m) in enumerate(zip(prob.pending, prob.memory)):
        h = prob.weight(i, HIDDEN)
        th_kv = p / m
        if not prob.allow_hidden:
            if m <= M or not repaired:
                items.append((-th_kv, i, 0, _Item(th_kv, i, m, KV)))
            continue
        kv_fits = m <= M or not repaired
        hidden_fits = h <= M or not repaired
        if prob.hidden_memory is None:  # the paper's h = m/2 (the formulas as printed)
            th_h, th_up = 2 * p / m - 2 * K, 2 * K
        else:
            th_h = (p - K * m) / h
            th_up = K * m / (m - h) if h < m else -math.inf
        # th_kv is a weighted mean of th_h and th_up, so th_h >= th_kv implies th_up <= th_h:
        # clamping only undoes rounding (p = 15, m = 20, h = 12, K = 0.3 gives th_up one ulp
        # above th_h), which would put the upgrade before its hidden item and take a KV cache
        # whose first 12 units were never counted
        th_up = min(th_up, th_h)
        if repaired and not kv_fits:
            if hidden_fits and p - K * m > 0:
                items.append((-th_h, i, 0, _Item(th_h, i, h, HIDDEN)))
            continue
        if h < m and th_h >= th_kv and hidden_fits:
            items.append((-th_h, i, 0, _Item(th_h, i, h, HIDDEN)))
            items.append((-th_up, i, 1, _Item(th_up, i, m - h, KV, upgrade=True)))
        else:
            items.append((-th_kv, i, 0, _Item(th_kv, i, m, KV)))
    items.sort(key=lambda t: (t[0], t[1], t[2]))
    return [t[3] for t in items]


def greedy(prob: AptProblem, compare: bool = True, repaired: bool = False) -> AptSelection:
    """Apt-Serve's greedy (module docstring): take items by decreasing marginal gain per unit
    memory while they fit; stop at the first that does not and, if ``compare``, return that
    item's request scheduled alone (its cache type after the item) when that is better."""
    M = prob.capacity
    eps = 1e-9 * max(1.0, M)
    choice = [NONE] * prob.n
    used = 0.0
    critical = None
    for it in greedy_items(prob, repaired):
        if used + it.dm <= M + eps:
            used += it.dm
            choice[it.req] = it.kind
        else:
            critical = it
            break
    taken = _selection(prob, choice, "greedy prefix")
    if not compare or critical is None:
        return taken
    alone = [NONE] * prob.n
    alone[critical.req] = critical.kind
    alone_sel = _selection(prob, alone, "critical item alone")
    if alone_sel.weight <= M + eps and alone_sel.value > taken.value:
        return alone_sel
    return taken


__all__ = ["HIDDEN", "KV", "NONE", "AptProblem", "AptSelection", "greedy", "greedy_items"]
