"""Offered load: the work an instance's arrivals bring per unit time against the engine's
best sustainable rate for that mix (docs/semantics.md section 4, "Offered load").

Definitions (all in that section, with the arguments):

* ``lambda`` -- the instance's arrival rate, ``(n - 1) / (a_max - a_min)`` requests per
  time unit (:func:`arrival_rate`; None when every request arrives at once);
* ``mu*`` -- the saturated throughput of the mix: ``sup_k k n / T*(X^k)``, ``T*(X^k)`` the
  optimal makespan of ``k`` copies of the requests, all queued at time 0;
* the certified side ``mu_cert = n / W >= mu*`` (:func:`certified_rate`): ``W`` is B4's
  busy-time floor of the mix without its ceilings (``formulations/bounds.md`` B4), which
  ``k`` copies pay ``k`` times over, so ``T*(X^k) >= k W``;
* the achievable side ``mu_ach = k n / T_P(X^k) <= mu*`` (:func:`achievable_rate`): a
  reference policy's makespan on ``k`` queued copies; schedules of ``X^k`` run back to back
  serve ``X^{jk}``, so ``T*`` is subadditive and no rate a schedule reaches exceeds ``mu*``.

The load ``rho = lambda / mu*`` therefore lies in ``[lambda / mu_cert, lambda / mu_ach]``
(:class:`OfferedLoad` ``lower`` and ``upper``). The point figure is the **upper** side
(``lambda / mu_ach``, the load against the best schedule found for the queued mix): a
conservative reading for stability, and the one :func:`scale_to_load` targets, so an
instance scaled to 0.7 has a certified load of at most 0.7.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..bounds.base import SAFETY
from ..bounds.floors import Floors
from ..cost import UnitCost
from ..errors import OptschedError
from ..evaluation import evaluate
from ..instance import Instance

#: reference policies of the achievable side, run in this order while the time allows (the
#: best one is kept): ``svf`` and ``mcsf`` reserve their peaks, so no eviction storm when
#: everything is queued (the best on the Azure windows), ``vllm`` where memory is ample
REFERENCES = ("svf", "mcsf", "sarathi", "vllm")
#: the references of a small instance (fewer than :data:`KERNEL_MIN_REQUESTS`), run in the
#: Python simulator (~0.1-0.3 ms a batch): the two that were best on small instances
#: (``svf``; ``sarathi`` when chunking pays)
SMALL_REFERENCES = ("svf", "sarathi")
#: from this many requests the references run in their compiled kernels on enough copies
#: for :data:`KERNEL_QUEUED` queued requests: the drain at the end (the longest requests
#: decoding alone) then weighs little (100 ShareGPT-like requests: 8.6 req/s on one copy,
#: 16.1 on 20, against a certified 16.4). Loading the kernels costs ~0.5-1 s CPU once per
#: process.
KERNEL_MIN_REQUESTS, KERNEL_QUEUED = 50, 2_000
#: the share of a command's --time-limit its load may use (:func:`load_deadline`)
LOAD_SHARE = 0.05
#: above this many simulated requests only :data:`LARGE_REFERENCE` runs (the full Azure
#: trace: ~0.3-0.5 s CPU a policy); within 3% of the best of :data:`REFERENCES` on both
#: full traces at M = 30,000 and 100,000
LARGE = 5_000
LARGE_REFERENCE = "mcsf"
#: copies of a small instance are simulated until at least this many requests are queued ...
MIN_QUEUED = 100
#: ... but no more copies than hold this many output tokens (the Python simulator: the load
#: of a 4-request instance costs ~0.1 s, not seconds)
MAX_COPY_TOKENS = 5_000
#: a load above this (certified, or on the achievable side) is reported as overloaded
OVERLOAD = 1.0
#: what commands print when an instance is overloaded
OVERLOAD_HINT = "latency grows with the window's length; see --load"


class LoadError(OptschedError, ValueError):
    """A bad load target or a load that cannot be computed."""


def arrival_rate(instance: Instance) -> float | None:
    """``lambda = (n - 1) / (a_max - a_min)`` requests per time unit (None: fewer than two
    requests, or all at one time)."""
    a = instance.arrival
    span = float(a.max() - a.min()) if a.size > 1 else 0.0
    return (instance.n - 1) / span if span > 0 else None


#: the busiest stretch reported beside the average: this share of the requests, consecutive
#: in arrival order (at least two)
PEAK_SHARE = 0.1


def peak_arrival_rate(instance: Instance) -> tuple[float | None, int]:
    """``(rate, m)``: the highest arrival rate over ``m = max(2, ceil(PEAK_SHARE n))``
    requests consecutive in arrival order, ``(m - 1) / (a_(k+m-1) - a_(k))`` (None: fewer
    than two requests per stretch, fewer than 20 requests, or ``m`` of them at one time)."""
    n = instance.n
    m = max(2, math.ceil(PEAK_SHARE * n - 1e-9))
    if n < 20:
        return None, m
    a = np.sort(instance.arrival)
    span = float((a[m - 1:] - a[:n - m + 1]).min())
    return ((m - 1) / span if span > 0 else None), m


def _floors(instance: Instance) -> Floors:
    """The per-request floors; with hidden cache the KV area is charged at the smaller of
    the KV and hidden footprints (B12e, ``optsched.bounds.goodput_memory``)."""
    if instance.limits.hidden_cache:
        from ..bounds.goodput_memory import ChargeFloors  # lazy: hidden instances only

        return ChargeFloors(instance)
    return Floors.of(instance)


def steady_busy(instance: Instance) -> float:
    """``W``: busy time that every copy of the mix costs in any schedule of ``k`` copies,
    ``T*(X^k) >= k W`` (docs/semantics.md section 4). B4 (``formulations/bounds.md``) bounds
    the batches of a set by ``N >= max(sum F2 / C, sum A / M, sum F1 / Bmax)`` (rounded up
    there; the rounding and the ``max_i F1`` term do not grow with ``k`` and are dropped),
    prefill batches by ``Np >= max(sum I / P, sum kmin / Bmax)``, and charges
    ``k0 N + kpb Np + kdb (N - Np) + sum F4`` (``kpb N`` when ``kdb > kpb``). Every term is
    linear in the copies, so ``k`` copies cost ``k W``. Lowered by ``SAFETY``."""
    if instance.n == 0:
        return 0.0
    f = _floors(instance)
    lim, k = instance.limits, f.k
    n_b = max(float(f.tokens.sum()) / lim.max_batch_tokens,
              float(f.area.sum()) / lim.kv_capacity,
              float(f.own_batches.sum()) / f.max_entries)
    p0 = max(float(instance.prompt.sum()) / lim.prefill_budget,
             float(f.kmin.sum()) / f.max_entries)
    n_b = max(n_b, p0)
    flags = k["kpb"] * p0 + k["kdb"] * (n_b - p0) if k["kdb"] <= k["kpb"] else k["kpb"] * n_b
    w = k["k0"] * n_b + flags + float(f.entry_cost.sum())
    return w * (1 - SAFETY)


def certified_rate(instance: Instance) -> float | None:
    """``mu_cert = n / W``: no schedule serves this mix faster in the long run (requests per
    time unit; None for an empty instance, a zero floor or a cost model without floors).
    None with prefix block ids: ``W`` prices every prompt token, and cache hits skip some
    (docs/semantics.md section 6, "Prefix reuse"), so ``n / W`` is not certified there."""
    if instance.has_prefix:
        return None
    try:
        w = steady_busy(instance)
    except TypeError:  # a cost model the floors do not know
        return None
    return instance.n / w if w > 0 else None


def queued(instance: Instance, copies: int) -> Instance:
    """``copies`` copies of ``instance``'s requests, every one queued at time 0 (ids
    suffixed ``#k``); plain requests: the lengths are the mix, SLOs and classes are not, nor
    prefix block ids (a schedule of the copies without reuse is one with reuse that drops
    every block nobody holds, at the same times: the achievable side stays achievable)."""
    ids = tuple(rid if k == 0 else f"{rid}#{k}" for k in range(copies) for rid in instance.ids)
    return Instance.from_columns(f"{instance.name}-queued-x{copies}", instance.limits,
                                 instance.cost_model, ids, np.zeros(len(ids)),
                                 np.tile(instance.prompt, copies),
                                 np.tile(instance.output, copies))


def copies_for(instance: Instance) -> int:
    """Copies simulated for the achievable side (at least one): enough for
    :data:`KERNEL_QUEUED` requests from :data:`KERNEL_MIN_REQUESTS` requests on; below, enough
    for :data:`MIN_QUEUED` requests but at most :data:`MAX_COPY_TOKENS` output tokens."""
    n = max(instance.n, 1)
    if n >= KERNEL_MIN_REQUESTS:
        return max(1, -(-KERNEL_QUEUED // n))
    cap = MAX_COPY_TOKENS // max(int(instance.output.sum()), 1)
    return max(1, min(-(-MIN_QUEUED // n), cap))


def load_deadline(time_limit: float | None) -> float | None:
    """A ``time.perf_counter()`` deadline for a load computed within a command's budget of
    ``time_limit`` seconds: :data:`LOAD_SHARE` of it (None: no limit)."""
    return None if time_limit is None else time.perf_counter() + LOAD_SHARE * time_limit


def achievable_rate(instance: Instance, references: tuple[str, ...] | None = None,
                    deadline: float | None = None) -> tuple[float | None, str | None, int]:
    """``(mu_ach, policy, copies)``: the best saturated throughput of the reference
    policies on ``copies`` queued copies of the mix, each schedule judged by the evaluator
    (a reference that fails or is infeasible is skipped; None when none runs). The first
    reference always runs; the others only before ``deadline`` (a ``time.perf_counter()``
    value), so that the figure never depends on the time limit's length but its refinement
    does."""
    from ..policies import simulate  # lazy: the policies load only when a load is asked for

    if instance.n == 0:
        return None, None, 1
    keep = references is None and deadline is None  # the default: kept with the instance
    cached = instance.__dict__.get("_achievable_rate") if keep else None
    if cached is not None:
        return cached
    k = copies_for(instance)
    q = queued(instance, k)
    kernel = instance.n >= KERNEL_MIN_REQUESTS
    if references is None:
        references = SMALL_REFERENCES if not kernel else \
            REFERENCES if q.n <= LARGE else (LARGE_REFERENCE,)
    best: tuple[float | None, str | None] = (None, None)
    for k_ref, name in enumerate(references):
        late = None if k_ref == 0 else deadline
        if late is not None and time.perf_counter() >= late:
            break
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e.g. vLLM's "prompt longer than C" note
                ev = evaluate(q, simulate(q, name, deadline=late, fast=kernel or None))
        except (OptschedError, ValueError):  # SimulationTimeout is one
            continue
        span = ev.metrics["makespan"]
        if ev.feasible and span > 0 and (best[0] is None or q.n / span > best[0]):
            best = (q.n / span, name)
    if keep:
        instance.__dict__["_achievable_rate"] = (best[0], best[1], k)
    return best[0], best[1], k


@dataclass(frozen=True)
class OfferedLoad:
    """An instance's offered load (module docstring): the arrival rate, both sides of the
    saturated throughput ``mu*``, and the loads they give. JSON round-trips
    (:meth:`to_dict` / :meth:`from_dict`)."""

    requests: int
    #: ``lambda``, requests per time unit (None: every request at once, or fewer than two)
    arrival_rate: float | None
    #: ``mu_cert >= mu*`` (None: unknown cost model or empty instance)
    certified_rate: float | None
    #: ``mu_ach <= mu*`` (None: no reference ran)
    achievable_rate: float | None
    #: the reference policy that gave ``achievable_rate`` and the copies it served
    reference: str | None = None
    copies: int = 1
    #: the time unit of the rates: ``s`` (a linear cost model) or ``step`` (unit time)
    unit: str = "s"
    #: the busiest stretch: the highest arrival rate over ``peak_requests`` consecutive
    #: requests (:func:`peak_arrival_rate`; None: too few requests)
    peak_arrival_rate: float | None = None
    peak_requests: int = 2
    definition: str = field(default="docs/semantics.md section 4, offered load", repr=False)

    def __post_init__(self) -> None:
        for name in ("arrival_rate", "certified_rate", "achievable_rate", "peak_arrival_rate"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)
                                      and v > 0):
                raise LoadError(f"offered load: {name} must be a finite number > 0 or None, "
                                f"got {v!r}")
        if not (isinstance(self.requests, int) and self.requests >= 0):
            raise LoadError(f"offered load: requests must be an integer >= 0, got "
                            f"{self.requests!r}")
        if self.unit not in ("s", "step"):
            raise LoadError(f"offered load: unit must be 's' or 'step', got {self.unit!r}")
        if not (isinstance(self.copies, int) and self.copies >= 1):
            raise LoadError(f"offered load: copies must be an integer >= 1, got {self.copies!r}")
        mc, ma = self.certified_rate, self.achievable_rate
        if mc is not None and ma is not None and ma > mc * (1 + 1e-6):
            raise LoadError(  # a schedule above the certified rate is a bug, never a result
                f"offered load: achievable rate {ma:.6g} above the certified rate {mc:.6g}")

    @property
    def lower(self) -> float | None:
        """``lambda / mu_cert``: the load is at least this (certified)."""
        if self.arrival_rate is None or self.certified_rate is None:
            return None
        return self.arrival_rate / self.certified_rate

    @property
    def upper(self) -> float | None:
        """``lambda / mu_ach``: the load is at most this (a schedule reaches ``mu_ach``)."""
        if self.arrival_rate is None or self.achievable_rate is None:
            return None
        return self.arrival_rate / self.achievable_rate

    @property
    def peak(self) -> float | None:
        """The busiest stretch's load against ``mu_ach`` (the upper side, as ``point``): a
        window at an average load below 1 may hold bursts above it."""
        if self.peak_arrival_rate is None or self.achievable_rate is None:
            return None
        return self.peak_arrival_rate / self.achievable_rate

    @property
    def point(self) -> float | None:
        """The figure reported as "the load": the upper side (module docstring)."""
        return self.upper

    @property
    def status(self) -> str:
        """``offline`` (no arrival rate), ``overloaded`` (certified: ``lower > 1``),
        ``overloaded-achievable`` (only against the reference's rate: ``upper > 1 >=
        lower``), ``stable`` (``upper <= 1``: a schedule keeps up), or ``unknown``."""
        if self.arrival_rate is None:
            return "offline"
        lo, up = self.lower, self.upper
        if lo is not None and lo > OVERLOAD:
            return "overloaded"
        if up is not None and up > OVERLOAD:
            return "overloaded-achievable"
        if up is not None:
            return "stable"
        return "unknown"

    @property
    def overloaded(self) -> bool:
        """Certified, or against the best reference schedule (``status`` says which)."""
        return self.status in ("overloaded", "overloaded-achievable")

    def describe(self) -> str:
        """One line for humans (stderr): the point figure, both sides, the verdict."""
        if self.arrival_rate is None:
            return "offered load: none (every request arrives at once: an offline instance)"
        parts = [f"offered load {_f(self.point)}"]
        side = []
        if self.lower is not None:
            side.append(f">= {_f(self.lower)} certified (mu <= {_f(self.certified_rate)}/{self.unit})")
        if self.upper is not None:
            side.append(f"<= {_f(self.upper)} against {self.reference}'s queued rate "
                        f"{_f(self.achievable_rate)}/{self.unit}")
        if side:
            parts.append(f"({'; '.join(side)}; arrivals {_f(self.arrival_rate)}/{self.unit})")
        verdict = {"overloaded": "OVERLOADED (certified)",
                   "overloaded-achievable": f"overloaded against {self.reference}'s rate "
                                            "(not certified)",
                   "stable": "stable", "unknown": "unknown"}[self.status]
        burst = ""
        if self.peak is not None and self.peak > OVERLOAD:
            burst = (f"; its busiest {self.peak_requests} consecutive requests arrive at load "
                     f"{_f(self.peak)}")
        return " ".join(parts) + f": {verdict}{burst}"

    def warning(self) -> str | None:
        """The stderr warning of an overloaded instance (None otherwise)."""
        if not self.overloaded:
            return None
        how = ("certified: load >= " + _f(self.lower) if self.status == "overloaded" else
               f"load {_f(self.upper)} against {self.reference}'s queued rate, not certified")
        return f"the instance is overloaded ({how}): {OVERLOAD_HINT}"

    def to_dict(self) -> dict[str, Any]:
        return {"point": self.point, "lower": self.lower, "upper": self.upper,
                "status": self.status, "overloaded": self.overloaded,
                "arrival_rate": self.arrival_rate, "certified_rate": self.certified_rate,
                "achievable_rate": self.achievable_rate, "reference": self.reference,
                "copies": self.copies, "requests": self.requests, "unit": self.unit,
                "peak": self.peak, "peak_arrival_rate": self.peak_arrival_rate,
                "peak_requests": self.peak_requests,
                "point_is": "upper", "definition": self.definition}

    @classmethod
    def from_dict(cls, d: Any) -> OfferedLoad:
        if not isinstance(d, dict):
            raise LoadError(f"offered load: expected an object, got {type(d).__name__}")
        keys = ("requests", "arrival_rate", "certified_rate", "achievable_rate", "reference",
                "copies", "unit", "peak_arrival_rate", "peak_requests")
        missing = [k for k in keys if k not in d]
        if missing:
            raise LoadError(f"offered load: missing field {missing[0]!r}")
        return cls(**{k: d[k] for k in keys})


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def offered_load(instance: Instance, references: tuple[str, ...] | None = None,
                 deadline: float | None = None) -> OfferedLoad:
    """The offered load of ``instance`` (module docstring), computed once per instance and
    kept with it (instances are immutable) for the default references; the references run
    until ``deadline`` (a ``time.perf_counter()`` value, :func:`load_deadline`)."""
    cached = instance.__dict__.get("_offered_load") if references is None else None
    if isinstance(cached, OfferedLoad):
        return cached
    lam = arrival_rate(instance)
    mu_c = certified_rate(instance)
    # an offline instance has no load: its reference runs would only cost time
    mu_a, ref, k = (achievable_rate(instance, references, deadline) if lam is not None
                    else (None, None, 1))
    unit = "step" if isinstance(instance.cost_model, UnitCost) else "s"
    peak, m = peak_arrival_rate(instance)
    load = OfferedLoad(instance.n, lam, mu_c, mu_a, ref, k, unit, peak, m)
    if references is None:
        instance.__dict__["_offered_load"] = load
    return load


def scale_to_load(instance: Instance, target: float, load: OfferedLoad | None = None
                  ) -> Instance:
    """``instance`` with its arrival offsets from the first arrival stretched so that its
    point load (the upper side) is ``target``; the mix, hence ``mu*``, is unchanged, so the
    certified load is then at most ``target``. Deadlines keep their distance to the
    arrival. Refuses an offline instance (no arrival rate to scale)."""
    if isinstance(target, bool) or not isinstance(target, (int, float)) \
            or not math.isfinite(target) or target <= 0:
        raise LoadError(f"--load must be a finite number > 0, got {target!r}")
    load = load or offered_load(instance)
    if load.arrival_rate is None:
        raise LoadError(f"instance {instance.name!r}: every request arrives at once; a load "
                        "needs arrivals spread in time")
    if load.point is None:
        raise LoadError(f"instance {instance.name!r}: no reference policy ran on its mix, so "
                        "its load is unknown")
    stretch = load.point / float(target)
    a0 = float(instance.arrival.min())
    new_arr = a0 + (instance.arrival - a0) * stretch
    if all(_plain(r) for r in instance.requests):
        return Instance.from_columns(instance.name, instance.limits, instance.cost_model,
                                     instance.ids, new_arr, instance.prompt, instance.output)
    reqs = []
    for r, a in zip(instance.requests, new_arr.tolist(), strict=True):
        d = {**r.to_dict(), "arrival": a}
        if r.deadline is not None:
            d["deadline"] = a + (r.deadline - r.arrival)
        reqs.append(r.__class__(**d))
    return instance.replace(requests=tuple(reqs))


def _plain(r: Any) -> bool:
    return r.predicted_output is None and r.cls is None and r.ttft_slo is None \
        and r.tpot_slo is None and r.deadline is None and not r.prefix


__all__ = ["LoadError", "OfferedLoad", "OVERLOAD_HINT", "REFERENCES", "achievable_rate",
           "arrival_rate", "certified_rate", "copies_for", "load_deadline", "offered_load",
           "peak_arrival_rate",
           "queued", "scale_to_load", "steady_busy"]
