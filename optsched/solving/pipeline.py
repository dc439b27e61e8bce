"""The one solve pipeline: every solve of optsched goes through :func:`run`.

``optsched solve``, the Python :func:`solve`, ``compare``'s optimum row, the sweep's
formulation cells and the ``exact`` bound rung all call :func:`run`, which, in this order:

1. checks the arguments (:func:`optsched.formulations.base.prepare_solve`) and asks the
   registered formulation whether the requested model applies (its ``applicable`` hook);
2. optionally computes the certified lower bound (``optsched.bounds``, combinatorial rungs)
   inside the budget;
3. picks the warm start -- a policy, a schedule, the best of a few policies, or a compared
   row already evaluated -- simulating each candidate once and replaying it once through
   :func:`optsched.evaluate` (:func:`pick_warm_start`), stopping at
   :data:`~optsched.solving.budget.WARM_SHARE` of the budget;
4. sizes the model with the formulation's ``estimate`` hook and plans the solver's seconds
   (:func:`optsched.solving.budget.plan_solve`);
5. builds, solves and checks the answer through the one evaluator
   (:func:`optsched.formulations.base.solve_model`), or, when the model does not fit, reports
   ``no_solution`` with the warm start as the fallback, improved by large-neighbourhood
   search (:mod:`optsched.search.lns`) in the time left;
6. returns one :class:`~optsched.solve_types.SolveReport`: the model's checked answer, the
   lower bound, the plan and the fallback.

``--time-limit`` is the whole command's budget (``tests/solving/test_budget.py``): the caller
gives the deadline (a ``time.perf_counter()`` value) or ``options.time_limit`` counts from
the call.

:func:`lower_bound` is :func:`optsched.bounds.lower_bound` with this module's :func:`solve`
handed to the ``exact`` rung (the bounds sit below the pipeline and may not import it): the
top-level ``optsched.lower_bound``, ``optsched bound`` and the sweep's bound cells.

This package sits above formulations, policies, bounds and LNS and below the CLI and
``optsched.comparison`` (the layer contract in ``pyproject.toml``).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import replace as dc_replace
from typing import TYPE_CHECKING, Any

from .. import bounds
from ..bounds import BoundResult, Budget
from ..errors import OptschedError
from ..evaluation import evaluate
from ..formulations.base import (
    FORMULATIONS,
    FormulationError,
    Hypotheses,
    arrival_origin,
    bound_is_global,
    prepare_solve,
    shift_instance,
    solve_model,
)
from ..instance import Instance
from ..policies import SimulationTimeout, list_policies, simulate
from ..policies.registry import PolicyWarning
from ..progress import phase, value
from ..schedule import Schedule
from ..solve_types import (
    Fallback,
    SearchRun,
    SolveOptions,
    SolveReport,
    Status,
    WarmStart,
    WarmStartInfo,
)
from .budget import (
    LADDER_SHARE,
    MIN_LNS_SECONDS,
    RESERVE_SECONDS,
    WARM_SHARE,
    SolvePlan,
    estimate_model,
    overrun_note,
    plan_solve,
    upper_gap,
)

if TYPE_CHECKING:
    from ..search.lns import LNSResult

#: the policies ``warm_start="auto"`` tries, best objective wins
AUTO_POLICIES = ("vllm", "sarathi", "fcfs", "mcsf", "infermax", "vllm-ef", "sarathi-ef")


def solve(instance: Instance, formulation: str = "infermax", objective: str = "makespan", *,
          options: SolveOptions | None = None, hypotheses: Hypotheses | None = None,
          warm_start: Any = "auto") -> SolveReport:
    """Solve ``instance`` with a registered formulation, decode, replay and check:
    :func:`run` without a lower bound or a fallback (the top-level ``optsched.solve``).

    With a time limit (the default 60 s) the limit is the whole call's budget, as for the
    CLI: the warm start stops at its share, the model is sized before it is built and
    skipped (``no_solution``, saying so in the notes) when it cannot fit, and a call that
    still overruns says so in its notes and on stderr."""
    return run(instance, formulation, objective, options=options, hypotheses=hypotheses,
               warm_start=warm_start)


def lower_bound(instance: Instance, objective: str = "makespan", method: str = "best",
                time_limit: float | None = None, budget: Budget | None = None) -> BoundResult:
    """A certified lower bound on the optimum of ``objective`` (``formulations/bounds.md``):
    :func:`optsched.bounds.lower_bound` with :func:`solve` as the ``exact`` rung's solve (the
    top-level ``optsched.lower_bound``)."""
    return bounds.lower_bound(instance, objective, method, time_limit, budget, exact_solve=solve)


def run(instance: Instance, formulation: str = "infermax", objective: str = "makespan", *,
        options: SolveOptions | None = None, hypotheses: Hypotheses | None = None,
        warm_start: Any = "auto", deadline: float | None = None,
        lower: BoundResult | str | None = None, fallback: bool = False,
        improve_fallback: bool = False) -> SolveReport:
    """The one solve (module docstring, steps 1-6).

    ``warm_start``: None/False, a policy name, ``"auto"``, a :class:`Schedule` or an
    evaluated :class:`WarmStart` (used as given, not replayed again). ``deadline``: the
    command's end as a ``time.perf_counter()`` value (default: ``options.time_limit`` from
    now; none without a limit). ``lower``: ``"combinatorial"`` computes the certified bound
    first, a :class:`BoundResult` is taken as computed, None skips it. ``fallback``: when
    the model is skipped, the feasible warm start is the answer, improved by LNS with
    ``improve_fallback``."""
    t0 = time.perf_counter()
    hyp = hypotheses or Hypotheses()
    objective, options = prepare_solve(instance, formulation, objective,
                                       options or SolveOptions(), hyp, warm_start)
    why = FORMULATIONS.get(formulation).applicable(instance, objective, options, hyp)
    if why is not None:
        raise FormulationError(f"{formulation}: {why}")
    if deadline is None:
        deadline = math.inf if options.time_limit is None else t0 + float(options.time_limit)
    budget = Budget(None if math.isinf(deadline) else deadline, exact_solve=solve)
    bound = _lower_bound(instance, objective, lower, budget)
    total, t_ws = deadline - t0, time.perf_counter()
    # the warm start stops at its share of what the bound left (the rest: model or LNS)
    ws, ws_info = pick_warm_start(instance, objective, warm_start, hyp,
                                  None if math.isinf(total) else
                                  t_ws + WARM_SHARE * (deadline - t_ws))
    plan = _plan(instance, formulation, objective, options, hyp, ws, deadline)
    rep = _model(instance, formulation, objective, options, hyp, ws, ws_info, plan, t0, deadline)
    rep = _with_notes(rep, list(ws_info.stopped if ws_info is not None else ()),
                      overrun_note(f"solve ({formulation})", t0,
                                   total if math.isfinite(total) else None))
    if fallback and not plan.build and ws is not None and ws.feasible:
        rep = _fallback(instance, objective, ws, bound, budget, rep, improve_fallback,
                        options.seed or 0)
    lb = _with_solver_bound(bound, rep, formulation)
    if not hyp.any:  # under hypotheses the solver's bound is the hypothesis problem's
        rep = _certified(rep, lb)
    return dc_replace(rep, lower_bound=lb, plan=plan)


def _lower_bound(instance: Instance, objective: str, lower: BoundResult | str | None,
                 budget: Budget) -> BoundResult | None:
    """Step 2: the certified lower bound asked for (``formulations/bounds.md``); on a cluster
    of several engines, B17's (:func:`cluster_bound`)."""
    if lower is None or isinstance(lower, BoundResult):
        return lower
    if not instance.single_engine:
        return cluster_bound(instance, objective)
    phase(f"lower bound ({lower} rungs)")
    if lower == "best":
        return ladder_bound(instance, objective, budget)
    res = bounds.lower_bound(instance, objective, lower, budget=budget)
    phase(f"lower bound {value(res.value, instance)} ({res.method})")
    return res


def cluster_bound(instance: Instance, objective: str) -> BoundResult:
    """The certified bound of a cluster: B17 over identical engines (``formulations/bounds.md``,
    :mod:`optsched.bounds.cluster`); over engines that differ, the per-request floors of
    ``formulations/cluster.md`` eq. K8 (each request's own batches on its cheapest engine)."""
    from ..bounds.cluster import cluster_request_floors
    from ..formulations.cluster.model import min_latency

    t0 = time.perf_counter()
    key = {"makespan": "makespan", "total-latency": "total_latency", "mean-ttft": "mean_ttft"}
    try:
        floors = cluster_request_floors(instance)
    except OptschedError:
        if instance.has_prefix:  # K8's floors price every prompt token too: no fallback
            raise
        first = objective == "mean-ttft"
        floor = min_latency(instance, first_token=first)
        v = (float((instance.arrival + floor).max()) if objective == "makespan" else
             float(floor.mean()) if first else float(floor.sum()))
        return BoundResult(v, "cluster per-request floors (formulations/cluster.md K8)",
                           objective, time.perf_counter() - t0)
    if objective not in key:
        raise FormulationError(f"no cluster bound for objective {objective!r}")
    return BoundResult(floors[key[objective]], "cluster (B17)", objective,
                       time.perf_counter() - t0)


def ladder_bound(instance: Instance, objective: str, budget: Budget) -> BoundResult:
    """The certified bound ``solve`` and ``compare`` start from: the ``best`` ladder within
    :data:`LADDER_SHARE` of what is left of ``budget``, so the best rung that fits is kept,
    not the cheapest (conversation 10-minute window: combinatorial 15,001 against 23,577 from
    the ladder in 9 s); the combinatorial rungs when the ladder finds nothing in its share.
    The ``exact`` rung is left out (no solve handed down): it solves the model the pipeline
    solves next, whose bound joins the certified one (seen: on the k0-dominated eviction
    family its exhaustive search took 5 s of a 25 s budget and found nothing)."""
    share = None if budget.deadline is None else \
        time.perf_counter() + LADDER_SHARE * budget.left()
    try:
        res = bounds.lower_bound(instance, objective, "best", budget=Budget(share))
    except bounds.BoundError:
        res = bounds.lower_bound(instance, objective, "combinatorial", budget=budget)
    phase(f"lower bound {value(res.value, instance)} ({res.method})")
    return res


def _plan(instance: Instance, formulation: str, objective: str, options: SolveOptions,
          hyp: Hypotheses, ws: WarmStart | None, deadline: float) -> SolvePlan:
    """Step 4: size the model with the formulation's ``estimate`` hook and plan the solver's
    seconds. The model sees arrivals shifted to start at 0
    (:func:`optsched.formulations.base.arrival_origin`): it is sized on the shifted
    instance, with the warm start's makespan shifted too."""
    origin = arrival_origin(instance)
    shift = origin if objective == "makespan" else 0.0
    ws_obj = None if ws is None or not ws.feasible else ws.objective(objective) - shift
    est = estimate_model(shift_instance(instance, origin) if origin else instance, formulation,
                         objective, dict(options.params),
                         ws.schedule.n_batches if ws is not None else int(instance.output.sum()),
                         ws_obj, hyp)
    return plan_solve(est, deadline - time.perf_counter() - RESERVE_SECONDS)


def _model(instance: Instance, formulation: str, objective: str, options: SolveOptions,
           hyp: Hypotheses, ws: WarmStart | None, ws_info: WarmStartInfo | None,
           plan: SolvePlan, t0: float, deadline: float) -> SolveReport:
    """Step 5: build, solve and check the model with the plan's solver seconds, or the
    ``no_solution`` report saying why it was skipped."""
    phase(f"model: {plan.note}")
    if plan.build:
        # the run gets every second left but the reserve: the formulation's time limit covers
        # its own build (the estimate only decides whether to build), so a build faster than
        # estimated leaves the solver the difference instead of ending the command early
        opts = options if plan.solver_seconds is None else dc_replace(
            options, time_limit=max(plan.solver_seconds,
                                    deadline - time.perf_counter() - RESERVE_SECONDS))
        return solve_model(instance, formulation, objective, options=opts, hypotheses=hyp,
                           warm_start=ws, warm_info=ws_info)
    return SolveReport(status=Status.NO_SOLUTION, objective=None, bound=None, gap=None,
                       runtime=time.perf_counter() - t0, solver=options.solver,
                       formulation=formulation, objective_kind=objective,
                       warm_start=ws_info, evaluation=None, schedule=None,
                       notes=(plan.note,), message=plan.note)


def _with_notes(rep: SolveReport, extra: list[str], late: str | None) -> SolveReport:
    if late:
        extra.append(late)
    return dc_replace(rep, notes=tuple(rep.notes) + tuple(extra)) if extra else rep


def _certified(rep: SolveReport, lb: BoundResult | None) -> SolveReport:
    """The report whose ``bound`` is certified: the certified lower bound ``lb`` replaces a
    solver bound that is weaker (seen: a flow model's dual bound of -3,182 s against a
    certified 35.15 s) or that holds for a restricted model only; ``gap`` is then the
    certified gap ``(objective - bound) / objective`` (:func:`~optsched.solve_types.upper_gap`),
    and a certified bound that meets the objective proves it optimal."""
    if lb is None or rep.objective is None or not rep.status.has_solution:
        return rep
    own = rep.global_bound
    if own is not None and own >= lb.value:
        return rep
    gap = upper_gap(rep.objective, lb.value)
    why = "holds for the restricted model only" if rep.bound is not None and own is None \
        else f"was {rep.bound:.6g}" if rep.bound is not None else "was none"
    note = (f"bound: the certified lower bound {lb.value:.6g} ({lb.method}); the solver's "
            f"{why}")
    # the rungs subtract a relative 1e-9 for float safety: a bound that close is a proof
    status = Status.OPTIMAL if gap is not None and gap <= 1e-7 else rep.status
    return dc_replace(rep, bound=lb.value, gap=gap, status=status,
                      notes=tuple(rep.notes) + (note,))


def _with_solver_bound(bound: BoundResult | None, rep: SolveReport,
                       formulation: str) -> BoundResult | None:
    """The larger of the certified bound and the solver's global bound."""
    if bound is None or not bound_is_global(rep) or rep.bound is None or rep.bound <= bound.value:
        return bound
    return BoundResult(rep.bound, f"solver ({formulation})", bound.objective, bound.runtime,
                       {**bound.ladder, f"solver ({formulation})": rep.bound}, bound.notes)


# -- step 3: the warm start ----------------------------------------------------------------
def pick_warm_start(instance: Instance, objective: str, warm_start: Any, hyp: Hypotheses,
                    deadline: float | None = None
                    ) -> tuple[WarmStart | None, WarmStartInfo | None]:
    """Resolve the warm start: an evaluated :class:`WarmStart` (kept as is), a Schedule, a
    policy name, or "auto" (best of :data:`AUTO_POLICIES`), each simulated and evaluated
    here once. Past ``deadline`` (a ``time.perf_counter()`` value: the command's budget) no
    further policy starts and a running one stops; the info's ``"stopped"`` says which."""
    if warm_start is None or warm_start is False:
        return None, None
    if isinstance(warm_start, Schedule):
        warm_start = WarmStart(warm_start, evaluate(instance, warm_start))
    if isinstance(warm_start, WarmStart):
        return warm_start, WarmStartInfo(warm_start.source or "schedule",
                                         warm_start.objective(objective), warm_start.feasible)
    if not instance.single_engine:  # a cluster: the policy behind every replica router
        from ..formulations.cluster.solve import ENGINE_POLICIES, best_router

        ws = best_router(instance, objective, deadline,
                         ENGINE_POLICIES if warm_start == "auto" else (warm_start,))
        return ws, None if ws is None else WarmStartInfo(ws.source, ws.objective(objective),
                                                         ws.feasible)
    names = _candidates(warm_start, hyp)
    best: tuple[WarmStart, float] | None = None
    stopped: list[str] = []
    for k, name in enumerate(names):
        if deadline is not None and time.perf_counter() >= deadline:
            stopped.append(f"warm start: {', '.join(names[k:])} not run (time limit)")
            break
        try:
            ws = _simulated(instance, name, deadline, strict=warm_start != "auto")
        except SimulationTimeout as e:
            stopped.append(f"warm start: {e}")
            break
        if ws is None or not ws.feasible or (hyp.no_evictions and ws.evaluation.metrics["evictions"]):
            continue
        v = ws.objective(objective)
        if best is None or v < best[1]:
            best = (ws, v)
    if best is None:
        return None, (WarmStartInfo(None, None, stopped=tuple(stopped)) if stopped else None)
    return best[0], WarmStartInfo(best[0].source, best[1], stopped=tuple(stopped))


def _candidates(warm_start: str, hyp: Hypotheses) -> list[str]:
    """The policies to try: the one named, or the registered ones of :data:`AUTO_POLICIES`
    (eviction-free ones first under ``no_evictions``)."""
    if warm_start != "auto":
        return [warm_start]
    known = {spec.name for spec in list_policies()}
    names = [p for p in AUTO_POLICIES if p in known]
    if hyp.no_evictions:
        names = [p for p in names if p.endswith("-ef") or p == "mcsf"] or names
    return names


def _simulated(instance: Instance, name: str, deadline: float | None,
               strict: bool) -> WarmStart | None:
    """Policy ``name``'s schedule and its one replay; None when the policy fails and
    ``strict`` is off (a named warm start that fails raises)."""
    phase(f"warm start: simulating {name}")
    try:
        with warnings.catch_warnings():  # a warm start is any feasible schedule: how a
            warnings.simplefilter("ignore", PolicyWarning)  # policy departs is moot
            s = simulate(instance, name, deadline=deadline)
    except SimulationTimeout:
        raise
    except OptschedError:
        if strict:
            raise
        return None
    return WarmStart(s, evaluate(instance, s), name)


# -- step 5: the fallback when the model is skipped --------------------------------------------
def _fallback(instance: Instance, objective: str, ws: WarmStart, bound: BoundResult | None,
              budget: Budget, rep: SolveReport, search: bool, seed: int) -> SolveReport:
    """The report with the warm start as its answer (:class:`~optsched.solve_types.Fallback`),
    and with ``search``, large-neighbourhood search from it in what is left of the budget
    (its schedule when it is better)."""
    lb = None if bound is None else bound.value
    ws_obj = ws.objective(objective)
    start = Fallback(ws.source or "schedule", ws_obj, ws.schedule, upper_gap(ws_obj, lb))
    better = _improve(instance, ws, objective, budget, seed) if search else None
    if better is None:
        return dc_replace(rep, fallback=start)
    answer = dc_replace(start, search=SearchRun(better.schedule, better.objective,
                                                better.runtime, better.method))
    if answer.improved:
        answer = dc_replace(answer, gap=upper_gap(better.objective, lb))
        note = (f"the {budget.left() + better.runtime:.0f} s left went to large-neighbourhood "
                f"search (optsched/search/lns.py): {ws_obj:.6g} -> {better.objective:.6g}")
    else:
        note = (f"the {better.runtime:.0f} s left went to large-neighbourhood search "
                f"(optsched/search/lns.py), which found nothing better than {ws_obj:.6g}")
    return dc_replace(rep, notes=tuple(rep.notes) + (note,), fallback=answer)


def _improve(instance: Instance, ws: WarmStart, objective: str, budget: Budget,
             seed: int) -> LNSResult | None:
    """LNS from the warm start in what is left of ``budget`` (less a reserve for the
    report); None when there is too little time or LNS cannot run here."""
    seconds = budget.left() - 2 * RESERVE_SECONDS
    schedule = ws.schedule
    if seconds < MIN_LNS_SECONDS or instance.limits.swapping or instance.limits.hidden_cache \
            or schedule.has_swaps or schedule.has_hidden or instance.has_prefix:
        return None
    phase(f"model skipped: large-neighbourhood search for {seconds:.1f} s from the best policy")
    # lazy: LNS loads the compiled simulator (numba, seconds of start-up) that a solve whose
    # model runs never needs; its import counted against every solve's --time-limit
    from ..search.lns import LNSError, LNSOptions, improve

    try:
        return improve(instance, schedule, objective,
                       LNSOptions(time_limit=seconds, seed=seed, progress=False),
                       evaluation=ws.evaluation)
    except LNSError:
        return None


__all__ = ["AUTO_POLICIES", "cluster_bound", "ladder_bound", "lower_bound", "pick_warm_start", "run", "solve"]
