"""WAIT, "Waiting for Accumulated Inference Threshold" (Ao, Luo, Simchi-Levi, Wang,
*Optimizing LLM Inference: Fluid-Guided Online Scheduling with Memory Constraints*, arXiv
2504.11320, the WAIT algorithm for known output lengths; v2 abstract), compared with the
authors' simulator code (GitHub Luoxiaogan/vidur_or, ``ModifiedBookingLimitReplicaScheduler``
and ``BookingLimitReplicaScheduler``, read to match behaviour, not copied).

What the paper and the code say
-------------------------------
Requests come in *types* ``j`` (prompt ``l_j``, output ``o_j``, arrival rate ``lambda_j``).
The fluid model's equilibrium holds, per batch, ``n_j`` type-``j`` requests at each of
their ``o_j`` stages; WAIT keeps the system near it with thresholds: new requests of a type
*wait* until enough have accumulated, so that memory never overflows (no eviction). In the
authors' code a type's budget ``L_j`` (requests in the system) is its share
``lambda_j (o_j + 1) / sum_k lambda_k (o_k + 1)`` of a configured ``total_limit``, its
per-stage threshold ``n_j = L_j / (o_j + 1)``; a batch is launched only when some type has
at least ``min(n_j, L_j - occupied_j)`` requests at stage 0 (else nothing runs, not even
the running requests), and then every running request advances one stage and each type
admits up to that many new requests.

What exactly is simulated, and every difference from the authors' code
-----------------------------------------------------------------------
1. **Types are a parameter, not hard-coded**: ``types`` bins of the output length at its
   quantiles (the code hard-codes two types with fixed lengths and rates). A type's
   volume ``V_j`` is its mean memory-time volume ``O I + O (O - 1) / 2`` (the KV it holds
   summed over its batches, :func:`optsched.policies.svf.volume`), its stage count the
   ceiling of its mean ``O``.
2. **The threshold comes from ``M``** (the code takes ``total_limit`` as a setting): the
   fluid memory ``sum_j n_j V_j`` must fit ``scale * M`` with ``n_j`` proportional to
   ``lambda_j``, so ``n_j = max(1, floor(scale * M * c_j / sum_k c_k V_k))`` with ``c_j``
   the type's request count (the rates' common time unit cancels); ``L_j = n_j * stages_j``.
3. **Memory is checked, not assumed**: an admission must also pass equation (1) of the
   online paper with the true lengths (MC-SF's test, :mod:`optsched.policies.mcsf`); the
   fluid threshold alone can overflow on a real instance, and our semantics never exceed
   ``M``. Token budget, batch size, prefill budget and long-prompt chunking are MC-SF's; the
   admission scan goes type by type (shortest type first, FIFO within a type) and stops at
   the first request that fails the memory or budget test.
4. **Nothing is dropped**: once no request is left to arrive the thresholds no longer hold
   batches back nor cap admissions (then WAIT is MC-SF with the type order; so on an
   instance with every request at 0 from the start) -- the code, after the last arrival,
   clears the queue and drops whatever has not started. Before that, as in the code, a
   batch waits for a type's threshold (the clock jumps to the next arrival) and running
   requests wait with it.
5. Knowing that more requests will arrive uses the instance's last arrival time (the code
   counts arrivals against the configured total). Output lengths are the true ones
   (*hypothetical*, semantics section 6).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..plugins import ParamSpec, open_unit_interval, positive
from .mcsf import MCSF
from .registry import register
from .simulator import Plan, SimView
from .svf import volume

_BIG = 1 << 62


def checked_types_scale(types: int, scale: float) -> tuple[int, float]:
    """WAIT's and Nested WAIT's two parameters, checked: ``types >= 1`` request types and a
    threshold ``scale`` in ``(0, 1]``."""
    if types < 1:
        raise ValueError(f"types must be >= 1, got {types!r}")
    if not 0.0 < scale <= 1.0:
        raise ValueError(f"scale must be in (0, 1], got {scale!r}")
    return types, scale


def length_types(output: np.ndarray, types: int) -> np.ndarray:
    """Type of each request: its bin among ``types`` quantile bins of ``output`` (bin edges
    at the ``k / types`` quantiles, ``k = 1 .. types - 1``; equal edges merge bins)."""
    o = np.asarray(output, np.float64)
    if o.size == 0 or types <= 1:
        return np.zeros(o.size, np.int64)
    edges = np.unique(np.quantile(o, [k / types for k in range(1, types)]))
    return np.searchsorted(edges, o, side="left").astype(np.int64)


def fluid_thresholds(prompt: np.ndarray, output: np.ndarray, typ: np.ndarray, M: int,
                     scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """``(n_j, L_j)`` per type: ``n_j = max(1, floor(scale M c_j / sum_k c_k V_k))`` (fluid
    memory ``sum_j n_j V_j <= scale M``, module docstring item 2), ``L_j = n_j ceil(mean O_j)``."""
    J = int(typ.max(initial=-1)) + 1
    vol = volume(prompt, output).astype(np.float64)
    c = np.bincount(typ, minlength=J).astype(np.float64)
    vbar = np.bincount(typ, weights=vol, minlength=J) / np.maximum(c, 1)
    obar = np.bincount(typ, weights=np.asarray(output, np.float64), minlength=J) / np.maximum(c, 1)
    x = scale * M / max(float((c * vbar).sum()), 1e-12)
    n = np.maximum(1, np.floor(x * c)).astype(np.int64)
    stages = np.maximum(1, np.ceil(obar)).astype(np.int64)
    return n, n * stages


class _TypeQueues:
    """FIFO queue per type; ``bool`` is "some type may still admit in this batch" (MC-SF's
    admission loop reads the queue's truth value, ``_head`` and ``_pop``)."""

    def __init__(self, J: int):
        self.q: list[deque[int]] = [deque() for _ in range(J)]
        self.left = [0] * J

    def __bool__(self) -> bool:
        return any(self.left[j] > 0 and self.q[j] for j in range(len(self.q)))

    def head_type(self) -> int:
        return next(j for j in range(len(self.q)) if self.left[j] > 0 and self.q[j])


class Wait(MCSF):
    """WAIT over MC-SF's memory-safe admission; see the module docstring."""

    #: this exact class runs on the compiled kernel (MC-SF's kernel with WAIT's queues and gate;
    #: :func:`optsched.policies.fast.fast_config`); a subclass runs the Python path
    fast_kernel = "wait"

    def __init__(self, types: int = 3, scale: float = 1.0):
        self.types, self.scale = checked_types_scale(types, scale)

    def bind(self, view: SimView) -> None:
        super().bind(view)
        self.typ = length_types(view.known_output, self.types)
        self.n_j, self.L_j = fluid_thresholds(view.prompt, view.known_output, self.typ,
                                              self.M, self.scale)
        self.tq = _TypeQueues(len(self.n_j))
        self.waiting = self.tq  # type: ignore[assignment]
        self.last_arrival = float(view.arrival.max(initial=0.0))

    def _push(self, i: int) -> None:
        self.tq.q[int(self.typ[i])].append(i)

    def _head(self) -> int:
        return self.tq.q[self.tq.head_type()][0]

    def _pop(self) -> None:
        j = self.tq.head_type()
        self.tq.q[j].popleft()
        self.tq.left[j] -= 1

    def quotas(self) -> list[int]:
        """Per type ``min(n_j, L_j - occupied_j)``: the authors' stage-0 threshold."""
        occ = np.bincount(self.typ[self.running], minlength=len(self.n_j)) if self.running \
            else np.zeros(len(self.n_j), np.int64)
        return [int(min(n, L - o)) for n, L, o in zip(self.n_j, self.L_j, occ)]

    def next_batch(self) -> Plan | None:
        need = self.quotas()
        flush = self.view.now >= self.last_arrival
        if not flush and not any(len(q) >= k for q, k in zip(self.tq.q, need)):
            return None  # wait for a threshold (the clock jumps to the next arrival)
        self.tq.left = [max(k, 0) for k in need] if not flush else [_BIG] * len(need)
        return super().next_batch()


register(
    "wait",
    "WAIT: output-length types (quantile bins); per-type thresholds n_j from the fluid "
    "equilibrium (sum n_j V_j <= M); a batch runs only when some type has min(n_j, L_j - "
    "occupied) requests waiting, then running requests advance and each type admits up to "
    "that many (MC-SF's memory test as a guard; true output lengths: hypothetical)",
    "Ao, Luo, Simchi-Levi, Wang, Optimizing LLM Inference: Fluid-Guided Online Scheduling "
    "with Memory Constraints, arXiv 2504.11320, WAIT (abstract) and the authors' vidur_or "
    "booking-limit scheduler (differences listed in optsched/policies/wait.py)",
    hypothetical=True,
    params=(ParamSpec("types", int, 3, "number of request types (quantile bins of the "
                      "output length)", check=positive),
            ParamSpec("scale", float, 1.0, "fraction of M the fluid thresholds may fill",
                      check=open_unit_interval)),
    factory=Wait,
)

__all__ = ["Wait", "length_types", "fluid_thresholds"]
