"""Sustainable-rate search: the highest Poisson arrival rate at which a policy still meets a
target on a metric (EcoServe's "sustained request rate" at similar normalised latency,
section 4; Apt-Serve's "effective throughput" is the same search with its TTFT and P99 TBT
SLOs).

The workload keeps the trace's requests (prompt and output lengths, in trace order) and
replaces the arrival times by a Poisson process of the probed rate: one seeded draw of
standard-exponential gaps, divided by the rate (:func:`at_rate`), so every probe scales the
same arrival pattern. The search probes ``lo`` and ``hi``, then bisects geometrically
between the highest rate that met the target and the lowest that did not, ``probes`` times
in all; it assumes the metric gets worse with the rate and reports every probe so that a
non-monotone curve is visible. Every run is judged by the one evaluator.

Metrics are plug-ins of the metric registry (:mod:`optsched.metrics.registry`:
:func:`register_metric` adds one -- a name, whether lower or higher is better, and a function
of the run; :data:`METRICS` holds them; the five built-in ones are in
:mod:`optsched.metrics.rate`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import OptschedError
from ..evaluation import evaluate
from ..instance import Instance, Request
from ..metrics.registry import METRICS, RateMetric, register_metric
from ..metrics.serving import JctSlo, serving_metrics
from ..policies import SimStats, SimulationTimeout, get_spec, simulate_policy
from .load import achievable_rate, arrival_rate, certified_rate


class RateSearchError(OptschedError, ValueError):
    """A bad search setting (rates, target, metric)."""


@dataclass(frozen=True)
class Run:
    """What a metric function sees: the instance at the probed rate, its schedule,
    evaluation, the decision-time stats and the search's settings."""

    instance: Instance
    schedule: Any
    evaluation: Any
    stats: SimStats
    settings: dict[str, Any]

    def metrics(self) -> dict[str, Any]:
        s = self.settings
        return serving_metrics(self.instance, self.evaluation, slo=s.get("slo"),
                               stats=self.stats, schedule=self.schedule,
                               ttft_slo=s.get("ttft_slo"), tbt_slo=s.get("tbt_slo"))


def at_rate(instance: Instance, rate: float, seed: int = 0) -> Instance:
    """``instance`` with Poisson arrivals of ``rate`` per time unit (module docstring)."""
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise RateSearchError(f"rate must be a finite number > 0, got {rate!r}")
    gaps = np.random.default_rng(seed).standard_exponential(instance.n)
    if gaps.size:
        gaps[0] = 0.0
    arrival = np.cumsum(gaps) / rate
    if all(_plain(r) for r in instance.requests):  # the same instance, checked on columns
        return Instance.from_columns(instance.name, instance.limits, instance.cost_model,
                                     instance.ids, arrival, instance.prompt, instance.output)
    reqs = tuple(r.__class__(**{**r.to_dict(), "arrival": float(a)})
                 for r, a in zip(instance.requests, arrival, strict=True))
    return instance.replace(requests=reqs)


def _plain(r: Request) -> bool:
    """A request with nothing but id, arrival, prompt and output (what
    :meth:`Instance.from_columns` builds): a rate search's probe instance is then built from
    columns, ~10x faster than 19K validated constructions (``optsched capacity``)."""
    return r.predicted_output is None and r.cls is None and r.ttft_slo is None \
        and r.tpot_slo is None and r.deadline is None and not r.prefix


def trace_rate(instance: Instance) -> float:
    """The instance's own mean arrival rate (requests per time unit; 0 if all at once):
    :func:`optsched.serving.load.arrival_rate`."""
    return arrival_rate(instance) or 0.0


def work_limit_rate(instance: Instance) -> float | None:
    """The rate total work allows: the certified side of the mix's saturated throughput,
    ``mu_cert = n / W`` (:func:`optsched.serving.load.certified_rate`, docs/semantics.md
    section 4, offered load). Over a long trace of this mix no schedule finishes requests
    faster, so a "sustainable" rate above it only reflects a trace too short for the queue
    to build up. It replaced ``n / (k0 max(ceil(T / C), max O) + k1 T)``, which counted no
    decode attention (``kdm m``), charged decode tokens ``k1`` even when ``kdr < 0`` (the
    BLIS presets: not a bound there) and a ``max O`` term that a longer trace does not
    repeat. None when the floor is unknown or zero."""
    return certified_rate(instance)


def repeat_trace(instance: Instance, times: int) -> Instance:
    """``instance``'s requests ``times`` times in a row (ids suffixed ``#k``): the same mix,
    a longer trace, for checking that a sustainable rate holds (arrivals are replaced by
    :func:`at_rate` anyway)."""
    if times < 1:
        raise RateSearchError(f"times must be >= 1, got {times!r}")
    reqs = tuple(r.__class__(**{**r.to_dict(), "id": r.id if k == 0 else f"{r.id}#{k}"})
                 for k in range(times) for r in instance.requests)
    return instance.replace(requests=reqs)


#: the stability check (:func:`confirm`): a sustainable rate counts only if, on the trace
#: repeated ``CONFIRM_FACTOR`` times at the same rate, the target is still met and the mean
#: latency is at most ``LATENCY_GROWTH`` times what it was. A stable queue's mean latency
#: converges as the trace grows (the longer run only adds a little warm-up); an overloaded
#: one grows about in proportion to the trace (~3x here)
CONFIRM_FACTOR, LATENCY_GROWTH = 3, 1.5
#: checks at most, when the sustainable rate does not hold (the rates below it are bisected)
CONFIRM_TRIES = 5


@dataclass(frozen=True)
class Probe:
    rate: float
    value: float | None
    meets: bool
    seconds: float
    metrics: dict[str, Any] = field(repr=False, default_factory=dict)
    #: the probed workload's offered load (its arrival rate over the mix's saturated rate,
    #: docs/semantics.md section 4; None: unknown)
    load: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rate": self.rate, "value": self.value, "meets": self.meets,
                "seconds": self.seconds, "load": self.load, "metrics": self.metrics}


@dataclass(frozen=True)
class Check:
    """The stability check at one rate: the probe on the trace (``probe``) and on the trace
    repeated ``factor`` times at the same rate (``longer``; None when ``probe`` missed the
    target and the longer run was not needed)."""

    probe: Probe
    longer: Probe | None
    factor: int

    @property
    def rate(self) -> float:
        return self.probe.rate

    @property
    def latency_growth(self) -> float | None:
        """Mean latency on the longer trace over the trace's (None: not run, or no mean)."""
        if self.longer is None:
            return None
        a, b = self.probe.metrics.get("mean_jct"), self.longer.metrics.get("mean_jct")
        return None if a is None or b is None or a <= 0 else b / a

    @property
    def holds(self) -> bool:
        """The target met on both traces and the mean latency grown at most
        :data:`LATENCY_GROWTH` times."""
        g = self.latency_growth
        return bool(self.probe.meets and self.longer is not None and self.longer.meets
                    and g is not None and g <= LATENCY_GROWTH)

    def to_dict(self) -> dict[str, Any]:
        return {"rate": self.rate, "factor": self.factor, "holds": self.holds,
                "latency_growth": self.latency_growth,
                "value": self.probe.value, "longer_value": None if self.longer is None
                else self.longer.value, "load": self.probe.load,
                "longer": None if self.longer is None else self.longer.to_dict()}


@dataclass(frozen=True)
class RateSearchResult:
    policy: str
    metric: str
    target: float
    sustainable_rate: float | None
    lowest_failing_rate: float | None
    probes: tuple[Probe, ...]
    #: :func:`work_limit_rate` of the searched trace (None: unknown cost model)
    work_limit: float | None = None
    #: stability checks (:func:`confirm`), the sustainable rate's first, then the rates below
    #: it probed for one that holds; empty when not checked
    checks: tuple[Check, ...] = ()
    #: the search or its stability check stopped at the deadline (``--time-limit``): the
    #: rates are those probed until then
    stopped: bool = False

    @property
    def at_rate(self) -> Probe | None:
        """The probe at the sustainable rate."""
        for p in self.probes:
            if p.rate == self.sustainable_rate:
                return p
        return None

    @property
    def throughput(self) -> float | None:
        """Requests per time unit finished at the sustainable rate (its probe's
        ``completion_rate``: finished requests over the makespan)."""
        p = self.at_rate
        return None if p is None else p.metrics.get("completion_rate")

    @property
    def confirm_factor(self) -> int:
        return self.checks[0].factor if self.checks else 0

    @property
    def confirmation(self) -> Probe | None:
        """The sustainable rate on the longer trace (None: not checked)."""
        c = self._check_at_sustainable
        return None if c is None else c.longer

    @property
    def _check_at_sustainable(self) -> Check | None:
        for c in self.checks:
            if c.rate == self.sustainable_rate:
                return c
        return None

    @property
    def latency_growth(self) -> float | None:
        """Mean latency on the longer trace over the trace's, at the sustainable rate."""
        c = self._check_at_sustainable
        return None if c is None else c.latency_growth

    @property
    def holds(self) -> bool | None:
        """The stability check at the sustainable rate (None: not checked)."""
        c = self._check_at_sustainable
        return None if c is None else c.holds

    @property
    def stable_rate(self) -> float | None:
        """The highest checked rate that holds (None: none, or not checked)."""
        held = [c.rate for c in self.checks if c.holds]
        return max(held) if held else None

    @property
    def counted_rate(self) -> float | None:
        """The rate that may be claimed: the highest checked rate that holds on the longer
        trace and is at most the work limit (a rate near saturation can pass the latency
        check on a short trace; above the work limit it is not sustainable); unchecked, the
        sustainable rate if at most the work limit."""
        lim = math.inf if self.work_limit is None else self.work_limit
        if not self.checks:
            r = self.sustainable_rate
            return r if r is not None and r <= lim else None
        ok = [c.rate for c in self.checks if c.holds and c.rate <= lim]
        return max(ok) if ok else None

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "metric": self.metric, "target": self.target,
                "sustainable_rate": self.sustainable_rate,
                "lowest_failing_rate": self.lowest_failing_rate,
                "throughput": self.throughput, "work_limit": self.work_limit,
                "confirm_factor": self.confirm_factor or None,
                "holds_on_longer_trace": None if self.confirmation is None
                else self.confirmation.meets,
                "latency_growth": self.latency_growth, "stable": self.holds,
                "load": None if self.at_rate is None else self.at_rate.load,
                "stable_rate": self.stable_rate, "counted_rate": self.counted_rate,
                "checks": [c.to_dict() for c in self.checks],
                "probes": [p.to_dict() for p in self.probes],
                "stopped_at_time_limit": self.stopped}


def probe(instance: Instance, policy: str, rate: float, metric: RateMetric, target: float,
          *, seed: int = 0, params: dict[str, Any] | None = None,
          settings: dict[str, Any] | None = None, saturated: float | None = None,
          deadline: float | None = None) -> Probe:
    """Simulate ``policy`` at ``rate``, evaluate, and judge ``metric`` against ``target``;
    ``saturated``: the mix's saturated rate (``OfferedLoad.achievable_rate``) for the
    probe's load."""
    t0 = time.perf_counter()
    inst = at_rate(instance, rate, seed)
    stats = SimStats()
    schedule = simulate_policy(inst, get_spec(policy).make(**(params or {})), stats=stats,
                               deadline=deadline)
    ev = evaluate(inst, schedule)
    if not ev.feasible:
        raise RateSearchError(f"policy {policy!r} produced an infeasible schedule at rate "
                              f"{rate:g}: {ev.violation_counts}")
    run = Run(inst, schedule, ev, stats, dict(settings or {}))
    value = metric.fn(run)
    value = None if value is None else float(value)
    lam = arrival_rate(inst)
    load = None if lam is None or not saturated else lam / saturated
    return Probe(rate, value, metric.meets(value, target), time.perf_counter() - t0,
                 run.metrics(), load)


def resolve_metric(metric: str, settings: dict[str, Any]) -> str:
    """``slo-attainment`` means the share of requests meeting *their* SLOs: EcoServe's JCT SLO
    by default, Apt-Serve's TTFT and P99 TBT SLOs when ``ttft_slo`` or ``tbt_slo`` is set
    (then it is ``ttft-tbt-attainment``, which needs both). Every other name is itself."""
    if metric == "slo-attainment" and (settings.get("ttft_slo") is not None
                                       or settings.get("tbt_slo") is not None):
        return "ttft-tbt-attainment"
    return metric


def check_settings(metric: str, settings: dict[str, Any]) -> RateMetric:
    metric = resolve_metric(metric, settings)
    if metric not in METRICS:
        raise RateSearchError(f"unknown metric {metric!r}; known: {', '.join(sorted(METRICS))}")
    m = METRICS[metric]
    missing = [k for k in m.needs if settings.get(k) is None]
    if missing:
        raise RateSearchError(f"metric {metric!r} needs {', '.join(missing)}")
    return m


def search(instance: Instance, policy: str, metric: str, target: float, lo: float, hi: float,
           *, probes: int = 8, seed: int = 0, params: dict[str, Any] | None = None,
           settings: dict[str, Any] | None = None, progress: bool = True,
           confirm_factor: int = CONFIRM_FACTOR,
           confirm_tries: int = CONFIRM_TRIES, deadline: float | None = None) -> RateSearchResult:
    """The highest probed rate in ``[lo, hi]`` meeting ``target`` (module docstring), then
    the stability check on the trace repeated ``confirm_factor`` times, at most
    ``confirm_tries`` checks (:func:`confirm`; ``confirm_factor = 0`` skips it, and the rate
    is then not checked). ``deadline`` (a ``time.perf_counter()`` value, a command's
    ``--time-limit``): no probe starts after it and a probe running past it stops; the result
    keeps the probes done and says :attr:`RateSearchResult.stopped`."""
    if not (math.isfinite(target)):
        raise RateSearchError(f"target must be a finite number, got {target!r}")
    if not (0 < lo < hi and math.isfinite(hi)):
        raise RateSearchError(f"rates must satisfy 0 < LO < HI, got {lo!r}:{hi!r}")
    if probes < 2:
        raise RateSearchError(f"probes must be >= 2, got {probes!r}")
    settings = dict(settings or {})
    m = check_settings(metric, settings)
    get_spec(policy).make(**(params or {}))  # bad policy or parameters fail before any work
    if confirm_factor < 0:
        raise RateSearchError(f"confirm_factor must be >= 0, got {confirm_factor!r}")
    done: list[Probe] = []
    saturated = achievable_rate(instance)[0]  # the mix's: arrivals are redrawn anyway

    def run(rate: float) -> Probe:
        if deadline is not None and time.perf_counter() >= deadline:
            raise SimulationTimeout(f"{policy}: no time left for the probe at {rate:g} req/s")
        p = probe(instance, policy, rate, m, target, seed=seed, params=params,
                  settings=settings, saturated=saturated, deadline=deadline)
        done.append(p)
        if progress:
            val = "n/a" if p.value is None else f"{p.value:.6g}"
            print(f"  {policy} rate {rate:.6g}: {metric} {val} "
                  f"({'meets' if p.meets else 'misses'} {target:g}; {p.seconds:.1f} s)",
                  file=sys.stderr, flush=True)
        return p

    good, bad = None, None
    stopped = False
    try:
        if run(lo).meets:
            good = lo
            if run(hi).meets:
                good, bad = hi, None
            else:
                bad = hi
        else:
            bad = lo
        while good is not None and bad is not None and len(done) < probes:
            mid = math.sqrt(good * bad)
            if run(mid).meets:
                good = mid
            else:
                bad = mid
    except SimulationTimeout:
        stopped = True
    res = RateSearchResult(policy, m.name, float(target), good, bad, tuple(done),
                           work_limit=work_limit_rate(instance), stopped=stopped)
    if confirm_factor and not stopped:
        res = confirm(res, instance, confirm_factor, seed=seed, params=params,
                      settings=settings, lo=lo, tries=confirm_tries, progress=progress,
                      deadline=deadline)
    return res


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _check(instance: Instance, result: RateSearchResult, rate: float, factor: int,
           m: RateMetric, saturated: float | None, **kw: Any) -> Check:
    """The probe at ``rate`` (the search's, when it ran one there) and, if it meets the
    target, the same rate on the trace repeated ``factor`` times."""
    p = next((q for q in result.probes if q.rate == rate), None)
    if p is None:
        p = probe(instance, result.policy, rate, m, result.target, saturated=saturated, **kw)
    if not p.meets:
        return Check(p, None, factor)
    longer = probe(repeat_trace(instance, factor), result.policy, rate, m, result.target,
                   saturated=saturated, **kw)
    return Check(p, longer, factor)


def confirm(result: RateSearchResult, instance: Instance, factor: int = CONFIRM_FACTOR, *,
            seed: int = 0, params: dict[str, Any] | None = None,
            settings: dict[str, Any] | None = None, lo: float | None = None,
            tries: int = CONFIRM_TRIES, progress: bool = False,
            deadline: float | None = None) -> RateSearchResult:
    """``result`` with the stability check: its sustainable rate probed again on ``factor`` x
    the trace (:func:`repeat_trace`, the same rate); a rate holds if the target is met there
    too and the mean latency grew at most :data:`LATENCY_GROWTH` times. When the sustainable
    rate does not hold, rates below it (down to ``lo``, geometric bisection) are checked, at
    most ``tries`` checks in all, and the highest that holds is
    :attr:`RateSearchResult.stable_rate` (what :attr:`~RateSearchResult.counted_rate`
    counts)."""
    good_rate = result.sustainable_rate
    if good_rate is None:
        return result
    settings = dict(settings or {})
    m = check_settings(result.metric, settings)
    saturated = achievable_rate(instance)[0]
    kw: dict[str, Any] = {"seed": seed, "params": params, "settings": settings,
                          "deadline": deadline}
    checks: list[Check] = []

    def run(rate: float) -> bool:
        c = _check(instance, result, rate, factor, m, saturated, **kw)
        checks.append(c)
        if progress:
            longer = "not run (misses on the trace)" if c.longer is None else \
                f"{result.metric} {_fmt(c.longer.value)}, mean latency x{_fmt(c.latency_growth)}"
            print(f"  {result.policy} rate {rate:.6g} on the trace x{factor}: {longer}: "
                  f"{'holds' if c.holds else 'does not hold'}", file=sys.stderr, flush=True)
        return c.holds

    try:
        if not run(good_rate):
            bad: float = good_rate
            held: float | None = None
            low = lo if lo is not None else good_rate / 4
            if low < bad and len(checks) < tries and run(low):
                held = low
            while held is not None and len(checks) < tries:
                mid = math.sqrt(held * bad)
                if run(mid):
                    held = mid
                else:
                    bad = mid
    except SimulationTimeout:  # the checks done so far stand; no rate is counted unchecked
        return dataclasses.replace(result, checks=tuple(checks), stopped=True)
    return dataclasses.replace(result, checks=tuple(checks))


def slo_from_reference(instance: Instance, policy: str = "vllm", scale: float = 2.0) -> JctSlo:
    """EcoServe's ``t_p`` and ``t_g`` measured on ``instance`` as given (its own arrival
    times) under the reference ``policy``."""
    schedule = simulate_policy(instance, get_spec(policy).make())
    return JctSlo.measure(instance, evaluate(instance, schedule), scale)


__all__ = ["METRICS", "RateMetric", "RateSearchError", "RateSearchResult", "Probe", "Run",
           "at_rate", "trace_rate", "probe", "search", "register_metric", "slo_from_reference",
           "resolve_metric", "work_limit_rate", "repeat_trace", "confirm", "CONFIRM_FACTOR",
           "CONFIRM_TRIES", "LATENCY_GROWTH", "Check"]
