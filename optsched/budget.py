"""``--time-limit`` is a budget for the whole command: size a model *before* building it.

:func:`estimate_model` predicts the size of the model a formulation would build, and the
seconds it takes to build it and hand it to the solver (everything a solver time limit does
not cover), from the warm start's batch count. :func:`plan_solve` decides, before anything
is built, whether the model fits the time left and how many seconds the solver may use;
when it does not fit, the caller says so and falls back to bounds and heuristics.

The per-variable figures were measured on the 20-request Azure conversation slice
(``generate azure --limit 20 --kv-capacity 4000``) and its first 5 and 10 requests, tight
InferMax model, HiGHS, 10 s solver limit, on the shared 2-core machine: 42k / 286k / 1.32M
variables took 6.5 / 10.6 / 49 s beyond the limit (build, hand-over to HiGHS, presolve,
warm-start encoding, decode and replay). The model is ~47 variables and ~118 rows per
request and batch slot (``optsched.formulations.infermax.build`` on those slices).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from .instance import Instance
from .solve_types import Objective, Status, relative_gap

#: fixed seconds beyond the solver limit for any MILP (imports, warm start, decode, replay)
OVERHEAD_SECONDS = 3.0
#: seconds per model variable beyond the solver limit (build, hand-over, presolve): the
#: measured 3.5e-5 with a margin of 1.4 for a machine busier than at measurement
SECONDS_PER_VARIABLE = 5e-5
#: tight InferMax model size per (request, batch slot)
TIGHT_VARS_PER_SLOT = 47
TIGHT_ROWS_PER_SLOT = 118
#: fill model rows per (request, batch slot), measured (see estimate_model)
FILL_ROWS_PER_SLOT = 2.5
#: the solver gets at most this share of what is left; the rest is the estimate's margin
MIN_SOLVER_SECONDS = 1.0


@dataclass(frozen=True)
class ModelEstimate:
    """Predicted size and overhead of a formulation's model on one instance."""

    formulation: str
    variables: int
    constraints: int
    seconds: float  # beyond the solver's own time limit
    detail: str

    def describe(self) -> str:
        return (f"{self.detail}: ~{self.variables:,} variables, ~{self.constraints:,} rows; "
                f"building and handing it to the solver takes ~{self.seconds:.0f} s")


@dataclass(frozen=True)
class SolvePlan:
    """Whether to build the model, and the solver's seconds if so."""

    build: bool
    solver_seconds: float | None
    estimate: ModelEstimate | None
    note: str


def _horizon(instance: Instance, objective: str, warm_batches: int, warm_objective) -> int:
    """The InferMax horizon ``J`` the formulation would choose (infermax.md section 4)."""
    from .formulations.infermax import entry_batches_upper_bound

    J = warm_batches + 2
    jmax = entry_batches_upper_bound(instance, objective, warm_objective)
    if jmax is not None and warm_batches <= jmax <= 2 * warm_batches + 4:
        J = max(J, jmax)
    return J


def estimate_model(instance: Instance, formulation: str, objective: str, params: dict,
                   warm_batches: int, warm_objective: float | None) -> ModelEstimate | None:
    """The model ``formulation`` would build, or None when no estimate is known (the
    exhaustive search has no model and honours its time limit; hindsight is sized by its
    own time line)."""
    if formulation != "infermax":
        return None
    from .formulations import Hypotheses
    from .formulations.infermax import FLOW_MAX_ARCS, fill
    from .formulations.infermax import flow as infermax_flow
    from .formulations.infermax.solve import fill_fits

    J = _horizon(instance, objective, warm_batches, warm_objective)
    variant = str(params.get("variant", "auto"))
    if params.get("batches") is not None:
        try:
            J = max(1, int(params["batches"]))
        except (TypeError, ValueError):
            return None  # the formulation names the bad parameter
    if variant in ("auto", "fill") and fill.applicable(instance, objective, Hypotheses()) is None \
            and (variant == "fill" or fill_fits(instance)):
        arcs = fill.size_estimate(instance, J)
        # its per-batch cardinality rows (eq. G5) outnumber the arcs: ~2.4 per request and
        # slot on 400 identical requests (21,781 rows for 713 columns at J = 23)
        rows = max(arcs, int(FILL_ROWS_PER_SLOT * instance.n * J))
        return ModelEstimate("infermax", arcs, rows, _seconds(arcs + rows),
                             f"InferMax fill model with J = {J} batch slots")
    if variant in ("auto", "flow") and infermax_flow.applicable(instance, objective,
                                                                Hypotheses()) is None:
        arcs = infermax_flow.size_estimate(instance, J)
        if variant == "flow" or arcs <= FLOW_MAX_ARCS:
            return ModelEstimate("infermax", arcs, arcs, _seconds(arcs),
                                 f"InferMax flow model with J = {J} batch slots")
    nJ = instance.n * J
    v = TIGHT_VARS_PER_SLOT * nJ
    return ModelEstimate("infermax", v, TIGHT_ROWS_PER_SLOT * nJ, _seconds(v),
                         f"InferMax Big-M model ({instance.n} requests x J = {J} batch slots)")


#: models below this many variables (columns plus rows in :func:`plan_solve`) take
#: :data:`SMALL_OVERHEAD_SECONDS` fixed instead of :data:`OVERHEAD_SECONDS`: the warm start,
#: which the 3 s covered, is now timed on its own (:func:`sized_solve` runs it first), and a
#: small model is built, decoded and replayed in well under a second, so a short time limit
#: still solves a small instance
SMALL_MODEL_VARIABLES, SMALL_OVERHEAD_SECONDS = 20_000, 1.0
#: a small model is still built with this many seconds left (and gets half of them)
SMALL_MIN_SECONDS = 0.5


def _seconds(variables: int) -> float:
    fixed = SMALL_OVERHEAD_SECONDS if variables < SMALL_MODEL_VARIABLES else OVERHEAD_SECONDS
    return fixed + SECONDS_PER_VARIABLE * variables


def plan_solve(estimate: ModelEstimate | None, seconds_left: float) -> SolvePlan:
    """Build only if the estimated overhead leaves the solver at least a second; the solver
    gets what is left after the overhead."""
    if not math.isfinite(seconds_left):
        return SolvePlan(True, None, estimate, "no time limit")
    if estimate is None:
        return SolvePlan(True, max(MIN_SOLVER_SECONDS, seconds_left - OVERHEAD_SECONDS), None,
                         "model size unknown in advance; the solver gets the time left")
    solver = seconds_left - estimate.seconds
    if solver < MIN_SOLVER_SECONDS \
            and estimate.variables + estimate.constraints < SMALL_MODEL_VARIABLES \
            and seconds_left >= SMALL_MIN_SECONDS:
        # a small model is built and solved in a fraction of a second: it gets half of what
        # is left rather than nothing (an overrun stays within the 10% + 1 s slack)
        return SolvePlan(True, seconds_left / 2, estimate,
                         f"{estimate.describe()}; small, so the solver gets half of the "
                         f"{seconds_left:.1f} s left")
    if solver < MIN_SOLVER_SECONDS:
        return SolvePlan(False, None, estimate,
                         f"model skipped: {estimate.describe()}, more than the "
                         f"{max(0.0, seconds_left):.0f} s left of the time limit")
    return SolvePlan(True, solver, estimate,
                     f"{estimate.describe()}; the solver gets {solver:.0f} s")


@dataclass(frozen=True, eq=False)
class BudgetedSolve:
    """A solve run inside a whole-command budget, with the certified lower bound and, when
    the model was skipped, the best heuristic schedule as the fallback answer."""

    report: Any  # SolveReport
    lower_bound: Any  # BoundResult: the largest global lower bound known
    plan: SolvePlan
    fallback: dict[str, Any] | None  # {"policy", "objective", "gap"} when the model was skipped

    @property
    def gap(self) -> float | None:
        """(objective - lower bound) / objective of the answer (the solver's, else the
        fallback's); an upper bound on its distance to the optimum."""
        v = self.report.objective if self.report.objective is not None else \
            (self.fallback or {}).get("objective")
        return upper_gap(v, self.lower_bound.value)

    def to_dict(self) -> dict[str, Any]:
        d = self.report.to_dict(include_schedule=False)
        d["lower_bound"] = self.lower_bound.to_dict()
        d["gap_to_lower_bound"] = self.gap
        d["budget"] = {"model_built": self.plan.build, "note": self.plan.note,
                       "estimate": None if self.plan.estimate is None else {
                           "variables": self.plan.estimate.variables,
                           "constraints": self.plan.estimate.constraints,
                           "seconds": self.plan.estimate.seconds}}
        d["fallback"] = self.fallback
        return d


def upper_gap(upper: float | None, lower: float | None) -> float | None:
    """How far above a lower bound a schedule can be at most: the one gap formula
    (:func:`optsched.solve_types.relative_gap`, ``(upper - lower) / |upper|``) of its
    objective against the bound, 0 when the bound reaches the objective (it cannot exceed
    the optimum: a bound above is tolerance) and for a zero objective a zero bound allows."""
    if upper is None or lower is None or not math.isfinite(upper) or not math.isfinite(lower):
        return None
    if upper == 0:
        return 0.0 if lower <= 0 else None
    return relative_gap(upper, lower) if lower < upper else 0.0


#: the warm start's share of the budget: its policies stop there (the rest goes to the bound,
#: the model or, when the model is skipped, to large-neighbourhood search)
WARM_SHARE = 0.5
#: seconds kept back from any stage for what follows it (replay, report, output)
RESERVE_SECONDS = 0.5
#: a run may end this late: ``RUN_SLACK_SHARE * limit + RUN_SLACK_SECONDS`` past its limit
#: before it says that it overran (issue 30: within 10% + 1 s of ``--time-limit``)
RUN_SLACK_SHARE, RUN_SLACK_SECONDS = 0.1, 1.0


@dataclass(frozen=True, eq=False)
class SizedSolve:
    """A solve sized before it was built (:func:`sized_solve`): its report, the plan, and
    the warm start (the best policy schedule, the fallback when the model was skipped)."""

    report: Any  # SolveReport
    plan: SolvePlan
    warm_start: Any  # WarmStart | None
    warm_info: dict[str, Any] | None


def overrun_note(what: str, started: float, limit: float | None) -> str | None:
    """A note (also written to stderr) when ``what`` took longer than ``limit`` seconds plus
    the slack of :data:`RUN_SLACK_SHARE` and :data:`RUN_SLACK_SECONDS`; None when in time."""
    if limit is None or not math.isfinite(limit):
        return None
    took = time.perf_counter() - started
    if took <= limit * (1 + RUN_SLACK_SHARE) + RUN_SLACK_SECONDS:
        return None
    import sys

    note = f"{what} overran its time limit: {took:.1f} s for a limit of {limit:g} s"
    print(f"optsched: warning: {note}", file=sys.stderr, flush=True)
    return note


def sized_solve(instance: Instance, formulation: str, objective: str, *, options,
                hypotheses, warm_start: Any = "auto", deadline: float | None = None
                ) -> SizedSolve:
    """:func:`optsched.formulations.solve` with ``options.time_limit`` as the budget of the
    whole call (or ``deadline``, a ``time.perf_counter()`` value, when given): the warm start
    stops at :data:`WARM_SHARE` of it, the model is sized (:func:`estimate_model`) and built
    only if it fits what is left (:func:`plan_solve`), the solver gets the rest. Arguments
    must have passed :func:`optsched.formulations.base.prepare_solve`."""
    from dataclasses import replace as dc_replace

    from .formulations.base import (
        SolveReport,
        _warm_start,
        arrival_origin,
        shift_instance,
        solve_model,
    )
    from .progress import phase

    t0 = time.perf_counter()
    limit = options.time_limit
    if deadline is None:
        deadline = math.inf if limit is None else t0 + float(limit)
    total = deadline - t0
    ws, ws_info = _warm_start(instance, objective, warm_start, hypotheses,
                              None if not math.isfinite(total) else t0 + WARM_SHARE * total)
    ws_obj = None if ws is None or not ws.feasible else ws.objective(objective)
    # the model sees arrivals shifted to start at 0 (formulations.base.arrival_origin): it is
    # sized on the shifted instance, with the makespan shifted too
    origin = arrival_origin(instance)
    shift = origin if objective == Objective.MAKESPAN else 0.0
    est = estimate_model(shift_instance(instance, origin) if origin else instance, formulation,
                         objective, dict(options.params),
                         ws.schedule.n_batches if ws is not None else int(instance.output.sum()),
                         None if ws_obj is None else ws_obj - shift)
    plan = plan_solve(est, deadline - time.perf_counter() - RESERVE_SECONDS)
    phase(f"model: {plan.note}")
    if plan.build:
        opts = options if plan.solver_seconds is None else \
            dc_replace(options, time_limit=plan.solver_seconds)
        rep = solve_model(instance, formulation, objective, options=opts, hypotheses=hypotheses,
                          warm_start=None if ws is None else ws.schedule)
        if ws_info is not None and rep.warm_start is not None:
            rep = dc_replace(rep, warm_start={**rep.warm_start, "policy": ws_info["policy"]})
    else:
        rep = SolveReport(status=Status.NO_SOLUTION, objective=None, bound=None, gap=None,
                          runtime=time.perf_counter() - t0, solver=options.solver,
                          formulation=formulation, objective_kind=objective,
                          warm_start=ws_info, evaluation=None, schedule=None,
                          notes=(plan.note,), message=plan.note)
    extra = list((ws_info or {}).get("stopped", ()))
    late = overrun_note(f"solve ({formulation})", t0, total if math.isfinite(total) else None)
    if late:
        extra.append(late)
    if extra:
        rep = dc_replace(rep, notes=tuple(rep.notes) + tuple(extra))
    return SizedSolve(rep, plan, ws, ws_info)


def solve_within(instance: Instance, formulation: str, objective: str, *, options, hypotheses,
                 warm_start: Any = "auto", time_limit: float | None = None,
                 improve_fallback: bool = True) -> BudgetedSolve:
    """:func:`optsched.formulations.solve` inside ``time_limit`` seconds for everything: the
    certified bound, the warm start and the model only if its estimated build-and-hand-over
    time leaves the solver time (:func:`sized_solve`; else a ``no_solution`` report saying
    so, with the warm start as the fallback schedule). With ``improve_fallback``, the time
    left when the model is skipped goes to large-neighbourhood search (optsched/search/lns.py) from
    the fallback, which becomes the improved schedule."""
    from dataclasses import replace as dc_replace

    from .bounds import BoundResult, Budget, lower_bound
    from .formulations.base import prepare_solve
    from .progress import phase

    objective, options = prepare_solve(instance, formulation, objective, options, hypotheses,
                                       warm_start)
    options = dc_replace(options, time_limit=time_limit)
    budget = Budget.seconds(time_limit)
    phase("lower bound (combinatorial rungs)")
    lower = lower_bound(instance, objective, "combinatorial", budget=budget)
    from .verdict import value

    phase(f"lower bound {value(lower.value, instance)} ({lower.method})")
    deadline = math.inf if budget.deadline is None else budget.deadline
    sized = sized_solve(instance, formulation, objective, options=options,
                        hypotheses=hypotheses, warm_start=warm_start, deadline=deadline)
    rep, plan, ws, ws_info = sized.report, sized.plan, sized.warm_start, sized.warm_info
    fallback = None
    if not plan.build and ws is not None and ws.feasible:
        ws_obj = ws.objective(objective)
        fallback = {"policy": ws_info["policy"] if ws_info else "schedule",
                    "objective": ws_obj, "gap": upper_gap(ws_obj, lower.value)}
        if improve_fallback:
            better = _improve_fallback(instance, ws.schedule, objective, budget, options.seed)
            if better is not None and not better.objective < ws_obj:
                rep = dc_replace(rep, notes=tuple(rep.notes) + (
                    f"the {better.runtime:.0f} s left went to large-neighbourhood search "
                    f"(optsched/search/lns.py), which found nothing better than {ws_obj:.6g}",))
            if better is not None and better.objective < ws_obj:
                fallback = {"policy": f"lns ({fallback['policy']})", "objective": better.objective,
                            "gap": upper_gap(better.objective, lower.value),
                            "start_objective": ws_obj, "lns_seconds": better.runtime}
                rep = dc_replace(rep, notes=tuple(rep.notes) + (
                    f"the {budget.left() + better.runtime:.0f} s left went to large-neighbourhood "
                    f"search (optsched/search/lns.py): {ws_obj:.6g} -> {better.objective:.6g}",))
    from .compare import bound_is_global

    if bound_is_global(rep) and rep.bound is not None and rep.bound > lower.value:
        lower = BoundResult(rep.bound, f"solver ({formulation})", objective, lower.runtime,
                            {**lower.ladder, f"solver ({formulation})": rep.bound}, lower.notes)
    return BudgetedSolve(rep, lower, plan, fallback)


#: LNS is not started with less than this many seconds left
MIN_LNS_SECONDS = 1.0


def _improve_fallback(instance: Instance, schedule, objective: str, budget, seed: int | None):
    """Large-neighbourhood search from ``schedule`` in what is left of ``budget`` (less a
    reserve for the report); None when there is too little time or LNS cannot run here."""
    from .progress import phase
    from .search.lns import LNSError, LNSOptions, improve

    seconds = budget.left() - 2 * RESERVE_SECONDS
    if seconds < MIN_LNS_SECONDS or instance.limits.swapping or instance.limits.hidden_cache \
            or schedule.has_swaps or schedule.has_hidden:
        return None
    phase(f"model skipped: large-neighbourhood search for {seconds:.1f} s from the best policy")
    try:
        return improve(instance, schedule, objective,
                       LNSOptions(time_limit=seconds, seed=seed or 0, progress=False))
    except LNSError:
        return None


def command_seconds(time_limit: float) -> float:
    """What is left of a command's ``--time-limit`` at this point: the limit counts from the
    command's start, which for ``optsched ...`` run as a program is the process start
    (interpreter start-up and imports are part of the wall time a user sees,
    :func:`optsched.progress.process_age`); at least a tenth of a second."""
    from .progress import elapsed

    return max(0.1, float(time_limit) - elapsed())
