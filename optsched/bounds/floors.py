"""Per-request floors every bound method builds on (``formulations/bounds.md`` section 2).

For each request ``i`` (prompt ``I``, output ``O``) and ANY feasible schedule:

* ``own_batches`` (F1): the batches containing ``i`` number at least
  ``kmin + O - 1``, ``kmin = ceil(I / min(C, P))`` (a batch generates at most one token of
  ``i`` and processes at most ``min(C, P)`` of its prefill tokens);
* ``tokens`` (F2): ``i`` is processed for at least ``I + O - 1`` tokens;
* ``area`` (F3): in the batch that generates its ``g``-th token, ``i`` holds
  ``fp(I + g - 1)`` KV after the batch, so its generating batches hold
  ``sum_{g=1..O} fp(I + g - 1)`` KV-slots in all;
* ``entry_cost`` (F4): the entry terms of the cost model summed over ``i``'s entries
  (without the per-batch ``k0``, ``kpb``, ``kdb``);
* ``prefill_chain`` / ``chain`` (F5): the summed *durations* of the batches that contain
  ``i`` up to its first token / its last token; those batches run one after another after
  ``i`` arrives, so ``first token >= a_i + prefill_chain`` and
  ``completion >= a_i + chain``.

The unit-time model is the linear model with ``k0 = 1`` and every other coefficient 0
(every non-empty batch takes 1), so one set of formulas serves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Self

import numpy as np

from ..cost import LinearCost, UnitCost
from ..instance import Instance

_KEYS = ("k0", "k1", "kpq", "kpm", "kdm", "kpr", "kdr", "kpl", "kpb", "kdb")


def coefficients(instance: Instance) -> dict[str, float]:
    """The cost model as linear coefficients (unit time: ``k0 = 1``, the rest 0)."""
    cm = instance.cost_model
    if isinstance(cm, UnitCost):
        return {k: (1.0 if k == "k0" else 0.0) for k in _KEYS}
    if isinstance(cm, LinearCost):
        return dict(cm.coefficients)
    raise TypeError(f"no lower bound is known for cost model kind {cm.kind!r}")


def block_area(lo: np.ndarray, hi: np.ndarray, b: int) -> np.ndarray:
    """``sum_{x=lo..hi} ceil(x / b) * b`` elementwise (0 where ``hi < lo``), exact in int64."""
    def prefix(n):  # sum_{x=1..n} ceil(x / b)
        n = np.maximum(n, 0)
        q, r = n // b, n % b
        return b * q * (q + 1) // 2 + r * (q + 1)

    if b == 1:
        lo_ = lo.astype(np.int64)
        hi_ = np.maximum(hi.astype(np.int64), lo_ - 1)
        return (hi_ * (hi_ + 1) - (lo_ - 1) * lo_) // 2
    return b * (prefix(hi) - prefix(lo - 1))


@dataclass(frozen=True, eq=False)
class Floors:
    """Floors F1-F5 for every request of an instance (arrays in instance order)."""

    instance: Instance

    @classmethod
    def of(cls, instance: Instance) -> Self:
        """The floors of ``instance``, computed once and kept with it (instances are frozen
        and cache their arrays the same way), so the rungs of one ``best`` or
        ``combinatorial`` call share them instead of recomputing the O(sum O) steps. Each
        subclass (the reuse floors, B19) keeps its own copy beside them."""
        key = f"_bound_floors_{cls.__name__}"
        f = instance.__dict__.get(key)
        if type(f) is not cls:
            f = cls(instance)
            instance.__dict__[key] = f
        return f

    @cached_property
    def k(self) -> dict[str, float]:
        return coefficients(self.instance)

    @cached_property
    def prefill_cap(self) -> int:
        """Most prefill tokens of one request in one batch: ``min(C, P)``."""
        lim = self.instance.limits
        return min(lim.max_batch_tokens, lim.prefill_budget)

    @cached_property
    def max_entries(self) -> int:
        """Most entries in one batch: ``max_batch_size``, ``C`` (>= 1 token each), ``M``
        (each entry's request holds >= 1 KV after it)."""
        lim = self.instance.limits
        cap = min(lim.max_batch_tokens, lim.kv_capacity)
        return min(cap, lim.max_batch_size) if lim.max_batch_size is not None else cap

    @cached_property
    def computed_prompt(self) -> np.ndarray:
        """Prompt tokens ``i``'s last prefill pass computes at least: all ``I`` of them
        (:class:`~optsched.bounds.reuse_floors.ReuseFloors` subtracts the possible hits)."""
        return self.instance.prompt

    @cached_property
    def hit_offset(self) -> np.ndarray:
        """Where those computed tokens start at the latest: 0 (position of the first; a hit
        of ``L`` tokens starts them at ``L``, bounds.md B19)."""
        return np.zeros(self.instance.n, np.int64)

    @cached_property
    def refill_offset(self) -> np.ndarray:
        """Where a refill's computed tokens start at the latest: 0 (B2; with hits, B19)."""
        return np.zeros(self.instance.n, np.int64)

    @cached_property
    def kmin(self) -> np.ndarray:
        return -(-self.computed_prompt // self.prefill_cap)

    @cached_property
    def own_batches(self) -> np.ndarray:  # F1
        return self.kmin + self.instance.output - 1

    @cached_property
    def tokens(self) -> np.ndarray:  # F2
        return self.instance.prompt + self.instance.output - 1

    @cached_property
    def area(self) -> np.ndarray:  # F3
        I, O = self.instance.prompt, self.instance.output
        return block_area(I, I + O - 1, self.instance.limits.block_size)

    @cached_property
    def prefill_area(self) -> np.ndarray:
        """KV ``i`` holds after the batch generating its first token: ``fp(I)`` (F3)."""
        return self.instance.limits.kv_footprint(self.instance.prompt)

    # --- prefill (first token) ----------------------------------------------------------
    def _prefill_entries(self, per_chunk: float) -> np.ndarray:
        """Least ``k * per_chunk + k1 I + quad`` over chunkings of ``I`` into ``k >= kmin``
        chunks of at most ``min(C, P)`` tokens (F4/F5, prefill part, bounds.md eq. B1).

        With ``Q = sum c^2``: ``sum c*m = (I^2 - Q) / 2``, so the quadratic terms are
        ``kpm I^2 / 2 + (kpq - kpm / 2) Q`` with ``I^2 / k <= Q <= I * min(I, cap)``;
        ``kpl * m >= 0`` is dropped. With hits (B19) ``I`` is the computed part ``u`` starting
        at position ``L``, which adds ``kpm * L * u`` (every computed token sees the ``L``
        tokens before it)."""
        k = self.k
        I = self.computed_prompt.astype(np.float64)
        L = self.hit_offset.astype(np.float64)
        kmin = self.kmin.astype(np.float64)
        a = k["kpq"] - k["kpm"] / 2
        base = k["k1"] * I + k["kpm"] * I * I / 2 + k["kpm"] * L * I
        if a <= 0:  # fewer, larger chunks are cheaper: Q at its largest, k at its least
            return base + a * I * np.minimum(I, self.prefill_cap) + kmin * per_chunk
        # k * per_chunk + a I^2 / k: convex in k, best at sqrt(a I^2 / per_chunk)
        if per_chunk <= 0:
            return base + a * I  # k = I chunks of one token: Q = I
        kstar = np.floor(np.sqrt(a * I * I / per_chunk))
        best = None
        for cand in (kstar - 1, kstar, kstar + 1, kstar + 2):
            kk = np.clip(cand, kmin, I)
            v = kk * per_chunk + a * I * I / kk
            best = v if best is None else np.minimum(best, v)
        assert best is not None  # the loop above runs over four candidates
        return base + best

    @cached_property
    def prefill_entry_cost(self) -> np.ndarray:
        """Entry terms of ``i``'s prefill, without per-batch terms (F4, prefill part)."""
        return self._prefill_entries(self.k["kpr"])

    @cached_property
    def prefill_chain(self) -> np.ndarray:
        """Summed durations of the batches holding ``i``'s prefill (F5, first token)."""
        k = self.k
        return self._prefill_entries(k["k0"] + k["kpb"] + k["kpr"])

    # --- tokens 2..O ----------------------------------------------------------------------
    def _quad_floor(self, S: np.ndarray) -> np.ndarray:
        """Least ``kpq sum c^2 + kpm sum c m`` over chunkings of a pass of ``S`` tokens from
        ``m = 0`` (B1 with ``Q >= S`` when ``kpq >= kpm / 2``, ``Q <= S min(S, cap)`` else)."""
        k = self.k
        a = k["kpq"] - k["kpm"] / 2
        Q = S if a >= 0 else S * np.minimum(S, self.prefill_cap)
        return k["kpm"] * S * S / 2 + a * Q

    @cached_property
    def _step_floors(self) -> tuple[np.ndarray, np.ndarray]:
        """Per request, ``sum_{g=1..O-1} min(dec_g, ref_g)`` (bounds.md eq. B2) and the same
        with the per-batch terms of the batch holding the step's last entry,
        ``sum_g min(k0 + kdb + dec_g, k0 + kpb + ref_g)`` (F5), in one pass over the steps.
        Between generating token ``g`` and token ``g + 1`` the request's entries are either
        one decode entry (``c = 1``, ``m = I + g - 1``: ``dec_g = k1 + kdr + kdm m``) or,
        after an eviction, a refill pass over all ``S = I + g`` tokens from ``m = 0``. A pass
        whose last entry is a one-token decode costs at least ``dec_g``; otherwise its
        entries are prefill entries costing ``>= ref_g = kpr + k1 S + quad(S)``. The steps of
        a request are contiguous, so its sums are one ``np.add.reduceat`` segment (O(sum O))."""
        k = self.k
        inst = self.instance
        steps = inst.output - 1
        has = steps > 0
        total = int(steps.sum())
        if total == 0:
            return np.zeros(inst.n), np.zeros(inst.n)
        first = (np.cumsum(steps) - steps)[has]  # offset of each request's first step
        # S = I + g, g = 1..O-1: the position in the flat array plus a per-request offset
        S = (np.arange(total, dtype=np.int64)
             + np.repeat(inst.prompt[has] + 1 - first, steps[has])).astype(np.float64)
        dec = (k["k1"] + k["kdr"] - k["kdm"]) + k["kdm"] * S
        # a refill computes the S - L tokens after its possible hits, each seeing >= L (B19)
        L = np.repeat(self.refill_offset[has], steps[has]).astype(np.float64)
        ref = k["kpr"] + k["k1"] * (S - L) + k["kpm"] * L * (S - L) + self._quad_floor(S - L)
        entry, chain = np.zeros(inst.n), np.zeros(inst.n)
        entry[has] = np.add.reduceat(np.minimum(dec, ref), first)
        dec += k["k0"] + k["kdb"]
        ref += k["k0"] + k["kpb"]
        chain[has] = np.add.reduceat(np.minimum(dec, ref), first)
        return entry, chain

    @cached_property
    def step_entry_cost(self) -> np.ndarray:
        return self._step_floors[0]

    @cached_property
    def entry_cost(self) -> np.ndarray:  # F4
        return self.prefill_entry_cost + self.step_entry_cost

    @cached_property
    def chain(self) -> np.ndarray:  # F5
        return self.prefill_chain + self._step_floors[1]

    @cached_property
    def batch_overhead(self) -> float:
        """Least per-batch time beyond the entries: ``k0 + min(kpb, kdb)``."""
        return self.k["k0"] + min(self.k["kpb"], self.k["kdb"])
