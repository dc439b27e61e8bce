"""The formulation-neutral contract: hypotheses, the report, the registry, the model run.

A *formulation* turns an instance into an optimisation model (InferMax Big-M,
hindsight IP, exhaustive search...). Every formulation registers a function

    run(instance, objective, hypotheses, options, warm_start) -> RawSolution

and, optionally, two hooks the solve pipeline (:mod:`optsched.solving.pipeline`) asks before any
model is built: ``applicable(instance, objective, options, hypotheses)`` (None, or why the
requested model cannot represent the instance) and ``estimate(instance, objective, options,
hint, hypotheses)`` (the :class:`ModelSize` it would build). :func:`solve_model` runs the
formulation on an already evaluated warm start and :func:`_check` replays its answer:

1. calls the formulation (on arrivals shifted to start at 0, :func:`arrival_origin`);
2. replays the decoded schedule through :func:`optsched.evaluate`;
3. checks that the solver's objective equals the evaluator's within 1e-6
   relative (else the report's status is ``error``: it fails loudly);
4. returns a :class:`SolveReport` with the JSON contract of ``optsched solve --json``.

Picking the warm start, sizing the model against the budget and the fallback live one floor
up, in :func:`optsched.solving.pipeline.run`.

A formulation that builds a MILP hands the solve path a :class:`BuiltModel` (the InferMax
Big-M and flow models, the hindsight model): the model, its variable blocks, the time scale,
the horizon, whether it is a restriction, and the maps between schedules and vectors.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import OptschedError
from ..evaluation import Evaluation, evaluate
from ..instance import Instance
from ..plugins import ParamSpec, Registry, describe_object, parse_params
from ..schedule import Schedule

if TYPE_CHECKING:
    import numpy as np

    from .. import milp

from ..solve_types import (
    MODELLED,
    OBJECTIVES,
    STATUSES,
    Objective,
    SolveOptions,
    SolveReport,
    Status,
    WarmStart,
    WarmStartInfo,
    relative_gap,
)

REL_TOL = 1e-6


class FormulationError(OptschedError):
    """A formulation cannot handle this instance/objective/hypothesis (say why)."""


@dataclass(frozen=True)
class Hypotheses:
    """Extra constraints for proof by example ("is there a schedule that ...?").

    * ``no_evictions`` -- forbid evictions;
    * ``at_most`` -- objective <= this absolute value (feasibility form of
      "k times a value or a policy's objective", resolved by :func:`solve`);
    * ``force`` / ``forbid`` -- ``(request id, 0-based batch)`` pairs: the request
      must / must not have an entry in that batch;
    * ``order`` -- ``(first, second)`` request-id pairs: ``first`` completes no
      later than ``second``.
    """

    no_evictions: bool = False
    at_most: float | None = None
    force: tuple[tuple[str, int], ...] = ()
    forbid: tuple[tuple[str, int], ...] = ()
    order: tuple[tuple[str, str], ...] = ()

    def check_against(self, instance: Instance) -> None:
        for rid, j in (*self.force, *self.forbid):
            if rid not in instance.index:
                raise FormulationError(f"hypothesis names unknown request {rid!r}")
            if not isinstance(j, int) or j < 0:
                raise FormulationError(f"hypothesis batch for {rid!r} must be an integer >= 0, got {j!r}")
        for a, b in self.order:
            for rid in (a, b):
                if rid not in instance.index:
                    raise FormulationError(f"order hypothesis names unknown request {rid!r}")
        if self.at_most is not None and not math.isfinite(self.at_most):
            raise FormulationError(f"at_most must be finite, got {self.at_most}")

    def broken_by(self, instance: Instance, schedule: Schedule, ev: Evaluation,
                  objective: str) -> list[str]:
        """Which hypotheses a (feasible) schedule breaks: the decoded answer is checked too."""
        broken = []
        if self.no_evictions and ev.metrics["evictions"]:
            broken.append(f"no_evictions: schedule evicts {ev.metrics['evictions']} times")
        if self.at_most is not None:
            v = ev.objective(objective)
            if v > self.at_most * (1 + REL_TOL) + 1e-9:
                broken.append(f"at_most: objective {v} > {self.at_most}")
        members = [
            {schedule.ids[r] for r in schedule.entry_req[schedule.batch_ptr[j]:schedule.batch_ptr[j + 1]]}
            for j in range(schedule.n_batches)
        ]
        for rid, j in self.force:
            if j >= len(members) or rid not in members[j]:
                broken.append(f"force: {rid!r} not in batch {j}")
        for rid, j in self.forbid:
            if j < len(members) and rid in members[j]:
                broken.append(f"forbid: {rid!r} is in batch {j}")
        for a, b in self.order:
            ca, cb = ev.completion[instance.index[a]], ev.completion[instance.index[b]]
            if ca > cb + 1e-9:
                broken.append(f"order: {a!r} completes at {ca} after {b!r} at {cb}")
        return broken

    @property
    def any(self) -> bool:
        return bool(self.no_evictions or self.at_most is not None or self.force or self.forbid or self.order)

    def to_dict(self) -> dict[str, Any]:
        return {
            "no_evictions": self.no_evictions,
            "at_most": self.at_most,
            "force": [list(x) for x in self.force],
            "forbid": [list(x) for x in self.forbid],
            "order": [list(x) for x in self.order],
        }


class BuiltModel(Protocol):
    """What a built model exposes to the solve path (encode a warm start, solve, decode).

    ``model`` is the MILP, ``variables`` its variable blocks by name; times in the model are
    seconds times ``scale``; ``horizon`` is the number of batch slots (InferMax) or time slots
    (hindsight) it was built with; ``restricted`` says whether its optimum is only optimal
    among schedules that fit that horizon / model (:attr:`RawSolution.restricted`).
    ``encode(schedule)`` is a full column vector (a warm start that passes
    ``model.check``), ``decode(values)`` the schedule a solution vector describes.
    """

    @property
    def instance(self) -> Instance: ...

    @property
    def objective(self) -> str: ...

    @property
    def model(self) -> milp.Model: ...

    @property
    def variables(self) -> Mapping[str, milp.VarBlock]: ...

    @property
    def scale(self) -> float: ...

    @property
    def horizon(self) -> int: ...

    @property
    def restricted(self) -> bool: ...

    def encode(self, schedule: Schedule) -> np.ndarray: ...

    def decode(self, values: np.ndarray) -> Schedule: ...


@dataclass(frozen=True)
class RawSolution:
    """What a formulation returns to :func:`solve_model` (before the evaluator's check).
    ``status`` may be given by its name; a name that is not a :class:`Status` makes the
    solution an ``error`` saying so (the formulation is broken, the solve is not)."""

    status: Status
    objective: float | None = None  # the solver's own objective value (model units)
    bound: float | None = None
    schedule: Schedule | None = None
    runtime: float = 0.0
    solver: str = ""
    nodes: int | None = None
    #: True if ``objective`` prices the schedule exactly like evaluate; False if the
    #: model relaxes a term (then ``objective``/``bound`` are lower bounds, say so in notes)
    exact: bool = True
    #: True if the model solves a *restriction* of the problem of docs/semantics.md (fewer
    #: batch slots, no preemption, unit time slots, a pruned search...): its optimum is then
    #: only an upper bound on the true optimum and its bound is a bound on the restriction,
    #: never a lower bound on the true optimum (say which restriction in ``notes``)
    restricted: bool = False
    notes: tuple[str, ...] = ()
    message: str | None = None
    #: solver progress ``(elapsed, incumbent, bound)``, e.g. ``SolveResult.history``
    history: tuple = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            object.__setattr__(self, "message",
                               f"formulation returned unknown status {self.status!r}")
            object.__setattr__(self, "status", Status.ERROR)
        object.__setattr__(self, "status", Status(self.status))


def bound_is_global(rep: SolveReport) -> bool:
    """A solver's bound is a bound on the true optimum unless its formulation solved a
    restricted problem (fewer batch slots, no preemption, unit slots...; the formulation
    sets :attr:`SolveReport.restricted` and says which in its notes); such a bound, and such
    a "proven optimum", is never used as a gap reference."""
    return rep.global_bound is not None


@dataclass(frozen=True)
class SizeHint:
    """What the warm start says about the model before it is built: its batch count and
    objective (in the time frame the model sees, :func:`arrival_origin`), from which a
    formulation picks its horizon (``formulations/infermax.md`` section 4)."""

    batches: int
    objective: float | None = None

    def __post_init__(self) -> None:
        if int(self.batches) != self.batches or self.batches < 0:
            raise FormulationError(f"size hint: batches must be an integer >= 0, got "
                                   f"{self.batches!r}")


@dataclass(frozen=True)
class ModelSize:
    """The model a formulation would build (its ``estimate`` hook): which ``variant``, its
    ``columns`` and ``rows``, and ``build_units``, the count its build and hand-over time
    grows with (:func:`optsched.solving.budget.estimate_model` prices it in seconds)."""

    variant: str
    columns: int
    rows: int
    build_units: int
    detail: str

    def __post_init__(self) -> None:
        for name in ("columns", "rows", "build_units"):
            if getattr(self, name) < 0:
                raise FormulationError(f"model size: {name} must be >= 0, got "
                                       f"{getattr(self, name)!r}")


# --- registry ------------------------------------------------------------------------

RunFn = Callable[[Instance, str, Hypotheses, SolveOptions, "WarmStart | None"], RawSolution]
#: ``applicable(instance, objective, options, hypotheses) -> None | reason``
ApplicableFn = Callable[[Instance, str, SolveOptions, Hypotheses], "str | None"]
#: ``estimate(instance, objective, options, hint, hypotheses) -> ModelSize | None``
EstimateFn = Callable[[Instance, str, SolveOptions, SizeHint, Hypotheses], "ModelSize | None"]


@dataclass(frozen=True)
class FormulationInfo:
    name: str
    run: RunFn
    description: str
    objectives: tuple[str, ...] = MODELLED
    #: True if the model needs a warm-start schedule (e.g. to size the batch horizon)
    needs_warm_start: bool = True
    #: the ``--param`` knobs; :func:`solve` hands ``run`` every one of them, checked and with
    #: its default filled in. ``None``: undeclared, ``options.params`` is passed on as given
    params: tuple[ParamSpec, ...] | None = ()
    #: the hooks behind :meth:`applicable` and :meth:`estimate` (None: always applies, size
    #: unknown in advance)
    applicable_hook: ApplicableFn | None = None
    estimate_hook: EstimateFn | None = None
    #: whether the model represents prefix reuse (docs/semantics.md section 6, "Prefix
    #: reuse"); a formulation that does not is refused an instance with block ids
    reuse_aware: bool = False
    #: when the model may solve a restriction of docs/semantics.md (``RawSolution.restricted``),
    #: which one, in a few words: reports name the model each figure belongs to with it
    restriction: str | None = None
    #: whether the model represents a cluster of engines (docs/semantics.md section 6,
    #: "Clusters"); every other formulation is refused an instance that is not one engine
    cluster_aware: bool = False

    def applicable(self, instance: Instance, objective: str, options: SolveOptions,
                   hypotheses: Hypotheses | None = None) -> str | None:
        """None when the model ``options.params`` ask for represents ``instance`` under
        ``hypotheses``, else why not (asked before any warm start or model is built)."""
        if self.applicable_hook is None:
            return None
        return self.applicable_hook(instance, objective, options, hypotheses or Hypotheses())

    def estimate(self, instance: Instance, objective: str, options: SolveOptions,
                 hint: SizeHint, hypotheses: Hypotheses | None = None) -> ModelSize | None:
        """The model this formulation would build with ``options`` and a warm start like
        ``hint``, or None when its size is not known in advance (the exhaustive search
        honours its time limit; hindsight is sized by its own time line)."""
        if self.estimate_hook is None:
            return None
        return self.estimate_hook(instance, objective, options, hint, hypotheses or Hypotheses())

    def parse_params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        if self.params is None:
            return dict(given)
        return parse_params(self.params, given, f"formulation {self.name!r}", FormulationError)


def _adapt(label: str, obj: Any) -> FormulationInfo:
    """A ``run`` function loaded from ``file.py:run`` / ``module:run`` or an entry point; its
    ``objectives``, ``needs_warm_start``, ``params``, ``applicable`` and ``estimate``
    attributes, when set, are those of :class:`FormulationInfo`."""
    if isinstance(obj, FormulationInfo):
        return obj
    if not callable(obj):
        raise FormulationError(f"{label}: not a formulation (a run function)")
    return FormulationInfo(label, obj, describe_object(obj) or f"user formulation {label}",
                           tuple(getattr(obj, "objectives", MODELLED)),
                           bool(getattr(obj, "needs_warm_start", False)),
                           getattr(obj, "params", None), getattr(obj, "applicable", None),
                           getattr(obj, "estimate", None))


#: every formulation: the modules of ``optsched.formulations`` register theirs on import;
#: installed distributions add theirs through the ``optsched.formulations`` entry points
FORMULATIONS: Registry[FormulationInfo] = Registry(
    "formulation", packages=("optsched.formulations",), group="optsched.formulations",
    error=FormulationError, adapt=_adapt,
)


def register_formulation(name: str, description: str, objectives: Sequence[str] = MODELLED,
                         needs_warm_start: bool = True,
                         params: Sequence[ParamSpec] = (), *,
                         applicable: ApplicableFn | None = None,
                         estimate: EstimateFn | None = None,
                         reuse_aware: bool = False,
                         restriction: str | None = None,
                         cluster_aware: bool = False) -> Callable[[RunFn], RunFn]:
    """Decorator: ``@register_formulation("infermax", "...", params=(...), applicable=...,
    estimate=...)`` on a ``run`` function (hooks: :class:`FormulationInfo`)."""

    def deco(fn: RunFn) -> RunFn:
        info = FormulationInfo(name, fn, description, tuple(objectives), needs_warm_start,
                               tuple(params), applicable, estimate, reuse_aware, restriction,
                               cluster_aware)
        FORMULATIONS.add(name, info, fn)
        return fn

    return deco


def formulations() -> dict[str, FormulationInfo]:
    """Every registered formulation by name."""
    return {info.name: info for info in FORMULATIONS.entries()}


# --- swap preemption: no formulation here represents it ---------------------------------
def refuse_swaps(who: str, instance: Instance | None = None, schedule: Schedule | None = None
                 ) -> None:
    """Refuse what ``who`` cannot represent (semantics section 6, swap preemption): an
    instance where swapping is part of the semantics (``limits.host_capacity`` given; its
    optimum over swap-free schedules is not the instance's optimum) or a schedule that swaps
    (it would be mis-priced)."""
    refuse_hidden_cache(who, instance, schedule)
    if instance is not None and instance.limits.swapping:
        raise FormulationError(
            f"{who}: cannot represent swap preemption, and this instance allows it "
            f"(limits.host_capacity = {instance.limits.host_capacity}); its optimum over "
            "schedules without swaps would not be this instance's optimum. Drop host_capacity "
            "to solve the swap-free problem")
    if schedule is not None and schedule.has_swaps:
        raise FormulationError(
            f"{who}: the schedule swaps KV (swap_out/swap_in), which this formulation cannot "
            "represent; it would be mis-priced")


def refuse_prefix_reuse(who: str, instance: Instance | None = None,
                        schedule: Schedule | None = None) -> None:
    """Refuse what ``who`` cannot represent (docs/semantics.md section 6, "Prefix reuse"): an
    instance whose requests list block ids (a schedule that hits cached blocks can beat every
    reuse-blind one, so a reuse-blind optimum is not this instance's) or a schedule with hits
    or drops (it would be mis-priced)."""
    if instance is not None and instance.has_prefix:
        raise FormulationError(
            f"{who}: cannot represent prefix reuse, and this instance's requests list prefix "
            "block ids; its reuse-blind optimum would not be this instance's optimum. Remove "
            "the 'prefix' fields to solve the problem without reuse")
    if schedule is not None and (schedule.has_hits or schedule.has_drops):
        raise FormulationError(
            f"{who}: the schedule hits or drops prefix blocks, which this formulation cannot "
            "represent; it would be mis-priced")


def refuse_hidden_cache(who: str, instance: Instance | None = None,
                        schedule: Schedule | None = None) -> None:
    """Refuse what ``who`` cannot represent (semantics section 6, hidden cache): an instance
    that enables hidden cache (``limits.hidden_cache``; half-memory caches can beat every
    KV-only schedule, so a KV-only optimum or bound would be wrong) or a schedule with hidden
    entries (it would be mis-priced). :func:`refuse_swaps` calls this too."""
    if instance is not None and instance.limits.hidden_cache:
        raise FormulationError(
            f"{who}: cannot represent hidden cache, and this instance enables it "
            "(limits.hidden_cache = true); its KV-only optimum would not be this instance's "
            "optimum. Set hidden_cache to false to solve the KV-only problem")
    if schedule is not None and schedule.has_hidden:
        raise FormulationError(
            f"{who}: the schedule uses hidden cache, which this formulation cannot represent; "
            "it would be mis-priced")


# --- the model run --------------------------------------------------------------

#: formulations whose models have continuous columns (times in seconds): CP-SAT cannot take them
CONTINUOUS_FORMULATIONS = ("infermax",)


def prepare_solve(instance: Instance, formulation: str, objective: str, options: SolveOptions,
                  hyp: Hypotheses, warm_start: Any) -> tuple[str, SolveOptions]:
    """Every check of a solve's arguments that needs no work (a bad argument fails before
    the warm start runs): the objective, the formulation and its parameters, the
    hypotheses, swaps. Returns the objective and the options with parsed parameters."""
    if objective not in OBJECTIVES:
        raise FormulationError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    objective = Objective(objective)
    info = FORMULATIONS.get(formulation)
    if objective not in info.objectives:
        raise FormulationError(
            f"formulation {formulation!r} does not support objective {objective!r} "
            f"(supports {', '.join(info.objectives)})"
        )
    hyp.check_against(instance)
    if not info.cluster_aware:
        instance.require_one_engine(f"formulation {formulation!r}")  # section 6, clusters
    options = replace(options, params=info.parse_params(options.params))
    if options.solver == "cpsat" and formulation in CONTINUOUS_FORMULATIONS:
        raise FormulationError(
            f"solver cpsat needs an all-integer model, and formulation {formulation!r} has "
            "continuous times (seconds); use --formulation hindsight (integer time slots, "
            "which CP-SAT solves) or --solver highs")
    ws = (warm_start.schedule if isinstance(warm_start, WarmStart) else
          warm_start if isinstance(warm_start, Schedule) else None)
    refuse_swaps(formulation, instance, ws)
    if not info.reuse_aware:
        refuse_prefix_reuse(formulation, instance, ws)
    return objective, options


def solve_model(instance: Instance, formulation: str, objective: str, *,
                options: SolveOptions, hypotheses: Hypotheses, warm_start: WarmStart | None,
                warm_info: WarmStartInfo | None = None) -> SolveReport:
    """Build, solve, decode, replay and check, from a warm start the caller has picked and
    evaluated (:func:`optsched.solving.pipeline.run` does both, once) and with the solver's time
    already sized; arguments as checked by :func:`prepare_solve`."""
    info = FORMULATIONS.get(formulation)
    t0 = time.perf_counter()
    offset = arrival_origin(instance)
    if not offset:
        raw = info.run(instance, objective, hypotheses, options, warm_start)
    else:
        raw = _solve_shifted(instance, info, Objective(objective), hypotheses, options,
                             warm_start, offset)
    return _check(instance, formulation, objective, hypotheses, raw, warm_info,
                  time.perf_counter() - t0, rounding=_time_rounding(instance, offset))


def _time_rounding(instance: Instance, origin: float) -> float:
    """How far the evaluator's objective can be from the shifted model's by float rounding
    alone: each of the ``n`` completion times near ``origin`` is rounded to within one ulp
    (``origin * 2**-52``), and a latency subtracts two such times."""
    return 4.0 * max(instance.n, 1) * origin * 2.0**-52


def arrival_origin(instance: Instance) -> float:
    """The earliest arrival when :func:`solve` shifts the time origin to it (else 0.0).

    Every rule of docs/semantics.md sections 3-4 is invariant under one common shift of all
    arrivals, stated starts and deadlines: a batch starts after the previous one ends and
    after its requests arrive, and durations do not depend on the clock. So an instance whose
    arrivals are Unix-epoch seconds (1.7e9) is solved with arrivals shifted to start at 0 and
    the answer shifted back: a formulation never sees a time of 1e9 next to batch durations
    of 1e-2 (its big-M constants and batch-count estimates would be scaled by the offset).
    Latency objectives are unchanged by the shift; the makespan moves by the offset. No shift
    when a deadline is not after the earliest arrival (it would not stay > 0)."""
    if instance.n == 0:
        return 0.0
    origin = float(instance.arrival.min())
    if origin <= 0 or any(r.deadline is not None and r.deadline <= origin
                          for r in instance.requests):
        return 0.0
    return origin


def shift_instance(instance: Instance, offset: float) -> Instance:
    """``instance`` with every arrival and deadline ``offset`` earlier (:func:`arrival_origin`)."""
    return instance.replace(requests=tuple(
        replace(r, arrival=r.arrival - offset,
                deadline=None if r.deadline is None else r.deadline - offset)
        for r in instance.requests))


def _shift_time(value: float | None, offset: float, objective: Objective) -> float | None:
    """An objective value moved by ``offset`` when it is a point in time (the makespan)."""
    if value is None or objective is not Objective.MAKESPAN:
        return value
    return value + offset


def _shifted_warm_start(work: Instance, warm_start: WarmStart, offset: float) -> WarmStart:
    """The warm start in the model's time frame (``work``, arrivals ``offset`` earlier): its
    stated starts moved by ``-offset`` and replayed on ``work``. The one replay besides the
    pipeline's own, for instances whose arrivals do not start at 0."""
    sched = warm_start.schedule.replace_starts(warm_start.schedule.start - offset)
    return WarmStart(sched, evaluate(work, sched), warm_start.source)


def _solve_shifted(instance: Instance, info: Any, objective: Objective, hyp: Hypotheses,
                   options: SolveOptions, warm_start: WarmStart | None, offset: float
                   ) -> RawSolution:
    """Run the formulation on ``instance`` shifted by ``-offset`` (:func:`arrival_origin`) and
    shift its answer back: stated starts, and the makespan's objective, bound and history."""
    work = shift_instance(instance, offset)
    ws = None if warm_start is None else _shifted_warm_start(work, warm_start, offset)
    hyp_w = hyp
    if hyp.at_most is not None and objective is Objective.MAKESPAN:
        hyp_w = replace(hyp, at_most=hyp.at_most - offset)
    raw = info.run(work, objective, hyp_w, options, ws)
    sched = raw.schedule
    return replace(
        raw,
        objective=_shift_time(raw.objective, offset, objective),
        bound=_shift_time(raw.bound, offset, objective),
        schedule=None if sched is None else sched.replace_starts(sched.start + offset),
        history=tuple((t, _shift_time(inc, offset, objective), _shift_time(b, offset, objective))
                      for t, inc, b in raw.history),
        notes=(*raw.notes, f"arrivals shifted by -{offset:.17g} s to start at 0 for the model "
                           "(docs/semantics.md section 4: the rules are invariant under a "
                           "common shift); the answer is shifted back"),
    )


def _check(instance: Instance, formulation: str, objective: str, hyp: Hypotheses,
           raw: RawSolution, ws_info: WarmStartInfo | None, elapsed: float,
           rounding: float = 0.0) -> SolveReport:
    """The evaluator's verdict on a formulation's answer. ``rounding`` is the absolute float
    error of replaying at a shifted time origin (:func:`_time_rounding`); a bound within it
    above the objective is the same number."""
    notes = list(raw.notes)
    status, message = raw.status, raw.message
    ev = None
    sched = raw.schedule
    obj = raw.objective
    if sched is not None and status in (Status.OPTIMAL, Status.FEASIBLE):
        ev = evaluate(instance, sched)
        if not ev.feasible:
            status = Status.ERROR
            message = "decoded schedule is infeasible: " + "; ".join(str(v) for v in ev.violations[:5])
        else:
            true = ev.objective(objective)
            broken = hyp.broken_by(instance, sched, ev, objective)
            if broken:
                status, message = Status.ERROR, "decoded schedule breaks hypotheses: " + "; ".join(broken)
            elif raw.exact and obj is not None and abs(obj - true) > REL_TOL * max(1.0, abs(true)) + rounding:
                status = Status.ERROR
                message = (f"solver objective {obj!r} != evaluator objective {true!r} for the decoded "
                           f"schedule (relative tolerance {REL_TOL})")
            elif not raw.exact:
                notes.append(f"model objective {obj} is a relaxation; the evaluator prices the decoded "
                             f"schedule at {true}")
            obj = true if status != Status.ERROR else obj
    elif status in (Status.OPTIMAL, Status.FEASIBLE):
        status, message = Status.ERROR, "formulation reported a solution but returned no schedule"
    bound = raw.bound
    if status == Status.OPTIMAL and bound is None and obj is not None:
        bound = obj
    if bound is not None and obj is not None and status != Status.ERROR:
        if bound > obj * (1 + REL_TOL) + 1e-9 + rounding:
            status, message = Status.ERROR, f"bound {bound} exceeds the objective {obj}"
        elif bound > obj:  # solver tolerance: a dual bound a hair above the incumbent
            bound = obj
    if status == Status.OPTIMAL and not raw.exact:
        notes.append("optimal for the relaxed model only")
    if status == Status.OPTIMAL and raw.restricted and formulation == "infermax":
        # an optimum among schedules of at most J batches with entries (J below the certified
        # Jmax): its bound holds for the restriction only. The hindsight model's restriction
        # (no preemption, unit slots) keeps "optimal" with ``restricted`` set, as before:
        # its tests, the manifest and the claims read it that way
        status = Status.RESTRICTED_OPTIMAL
        notes.append("restricted-optimal: optimal for the restricted model only, no proof for "
                     "the problem; the bound reported is the certified one where one was asked")
    return SolveReport(
        status=status,
        objective=obj if status in (Status.OPTIMAL, Status.RESTRICTED_OPTIMAL, Status.FEASIBLE,
                                    Status.ERROR) else None,
        bound=bound,
        gap=relative_gap(obj, bound) if status.has_solution else None,
        runtime=elapsed,
        solver=raw.solver,
        formulation=formulation,
        objective_kind=objective,
        warm_start=ws_info,
        evaluation=ev,
        schedule=sched if status.has_solution or status == Status.ERROR else None,
        notes=tuple(notes),
        message=message,
        nodes=raw.nodes,
        history=tuple(raw.history),
        restricted=raw.restricted or hyp.any,
        model_bound=bound,
        model_restriction=(FORMULATIONS.get(formulation).restriction or "a restriction of the "
                           "problem (the notes say which)") if raw.restricted else None,
    )


def with_at_most(hyp: Hypotheses, k: float, than: float) -> Hypotheses:
    """``objective <= k * than``."""
    return replace(hyp, at_most=k * than)
