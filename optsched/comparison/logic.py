"""Policies (and schedule files) against the optimum: the library behind ``optsched compare``.

Every schedule -- simulated, loaded, or the solver's -- goes through :func:`optsched.evaluate`;
objective values are ``Evaluation.objective``. With ``optimal=True`` the reference is the
solver's objective when it is proven optimal, else its bound (:func:`reference` says which);
gaps are ``(objective - reference) / |reference|`` (:func:`gap`), so a gap to the bound is an
upper bound on the gap to the (unknown) optimum.

``compare(instance, ["vllm", "my_policy.py:MyPolicy"], optimal=True)`` returns a
:class:`~optsched.comparison.rows.Comparison` (one :class:`~optsched.comparison.rows.Row` per
schedule, and the SLO goodput beside its certified upper bound, :func:`goodput_gap`);
:func:`optsched.comparison.report.write_report` writes the report. Notebooks and benches use
this package, never :mod:`optsched.cli`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..bounds import Budget, bound_methods, lower_bound
from ..bounds.goodput import goodput_bound
from ..errors import OptschedError
from ..evaluation import OBJECTIVES, evaluate
from ..instance import Instance
from ..plugins import is_reference
from ..policies import SimulationTimeout, get_spec, list_policies, simulate
from ..progress import phase
from ..schedule import Schedule
from ..search.lns import LNSOptions, improve
from ..serving.load import load_deadline, offered_load
from ..solve_types import BoundResult, SolveOptions, SolveReport, Status, WarmStart, relative_gap
from ..solving import run as solve_pipeline
from .rows import Comparison, GoodputGap, GoodputGapError, GoodputRow, Row, RowKind, objective_key


class CompareInputError(OptschedError):
    """Nothing to compare, or an unknown policy."""


def policy_names(spec: str | Sequence[str]) -> list[str]:
    """Policy names from ``"a,b"`` (or a list): ``"all"`` is every registered policy; a
    ``file.py:Class`` / ``module:Class`` reference is loaded (a bad one raises)."""

    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [s.strip() for s in items if s.strip()]
    if not names:
        return []
    known = [p.name for p in list_policies()]
    if names == ["all"]:
        return known
    for n in names:
        if is_reference(n) or (n.endswith(".py") and n not in known):
            get_spec(n)  # a bare file.py names its one Policy subclass, or the error lists them
        elif n not in known:
            raise CompareInputError(f"--policies: unknown policy {n!r}; known: {', '.join(known)}")
    return names


def evaluated_row(label: str, kind: str, inst: Instance, sched: Schedule, objective: str,
                  runtime: float | None, search_method: str | None = None) -> Row:
    """A row for ``sched``, replayed by the evaluator."""
    ev = evaluate(inst, sched)
    return Row(label, RowKind(kind), Status.FEASIBLE if ev.feasible else Status.INFEASIBLE,
               sched, ev, ev.objective(objective), runtime, search_method=search_method)


def run_policies(inst: Instance, names: Sequence[str], objective: str = "makespan",
                 deadline: float | None = None) -> list[Row]:
    """Simulate and evaluate each policy; a policy that fails is a row with status ``error``,
    one that does not finish by ``deadline`` (a ``time.perf_counter()`` value) a row with
    status ``no_solution`` (out of time: no failure, the command still exits 0)."""

    rows = []
    for name in names:
        t0 = time.perf_counter()
        phase(f"simulating {name}")
        try:
            sched = simulate(inst, name, deadline=deadline)
        except SimulationTimeout as e:  # out of time, not a failure: the row says so
            rows.append(Row(name, RowKind.POLICY, Status.NO_SOLUTION,
                            runtime=time.perf_counter() - t0, message=str(e)))
            continue
        except OptschedError as e:
            rows.append(Row(name, RowKind.POLICY, Status.ERROR, runtime=time.perf_counter() - t0,
                            message=str(e)))
            continue
        rows.append(evaluated_row(name, "policy", inst, sched, objective, time.perf_counter() - t0))
    return rows


def run_optimum(inst: Instance, candidates: Sequence[Row], *, formulation: str = "infermax",
                objective: str = "makespan", solver: str = "highs",
                time_limit: float | None = 60.0, threads: int | None = None
                ) -> tuple[Row, SolveReport]:
    """Solve through the one pipeline (:func:`optsched.solving.pipeline.run`); the best feasible
    compared schedule is the warm start (else ``"auto"``)."""
    opts = SolveOptions(solver=solver, time_limit=time_limit, threads=threads, progress=False)
    rep = solve_pipeline(inst, formulation, objective, options=opts,
                         warm_start=_warm_start_of(candidates))
    return optimum_row(rep, formulation, objective), rep


def _warm_start_of(rows: Sequence[Row]) -> WarmStart | str:
    """The best feasible row as an evaluated warm start (its replay is not repeated), else
    ``"auto"``."""
    feas = [r for r in rows if r.evaluation is not None and r.evaluation.feasible
            and r.schedule is not None and r.objective is not None and math.isfinite(r.objective)]
    if not feas:
        return "auto"
    best = min(feas, key=objective_key)
    assert best.schedule is not None and best.evaluation is not None  # feas keeps only those
    return WarmStart(best.schedule, best.evaluation, best.label)


def optimum_row(rep: SolveReport, formulation: str, objective: str) -> Row:
    """The optimum row of a solve's report (its schedule replayed by the pipeline)."""
    label = {Status.OPTIMAL: f"optimal ({formulation})",
             Status.RESTRICTED_OPTIMAL: f"best found ({formulation}, restricted-optimal)",
             Status.FEASIBLE: f"best found ({formulation})"}.get(rep.status, formulation)
    ev = rep.evaluation if rep.status.has_solution else None
    return Row(label, RowKind.OPTIMUM, rep.status, rep.schedule if ev is not None else None, ev,
               None if ev is None else ev.objective(objective), rep.runtime,
               message=rep.message, solve=rep)


def reference(opt: Row | None, lower: BoundResult | None = None
              ) -> tuple[float | None, str | None, str | None]:
    """(value, "optimum" | "bound", source) the gaps are measured against.

    The proven optimum when the solve proved one; else the largest *global* lower bound:
    the solver's bound unless its model was a restriction (:func:`bound_is_global`), or the
    certified bound of ``optsched.bounds``."""
    rep = None if opt is None else opt.solve
    if rep is not None and opt is not None and rep.proven_optimal and opt.objective is not None:
        return opt.objective, "optimum", f"proven optimum ({rep.formulation})"
    cands: list[tuple[float, str]] = []
    if lower is not None and math.isfinite(lower.value):
        cands.append((lower.value, f"certified lower bound ({lower.method}, "
                                   "formulations/bounds.md)"))
    b = None if rep is None else rep.global_bound
    if rep is not None and b is not None and math.isfinite(b):
        cands.append((b, f"solver bound ({rep.formulation})"))
    if not cands:
        return None, None, None
    value, source = max(cands)
    return value, "bound", source


def gap(value: float | None, ref: float | None) -> float | None:
    """``(value - ref) / |ref|``: the one gap formula per reference
    (:func:`optsched.solve_types.relative_gap` with ``per="bound"``)."""
    return relative_gap(value, ref, per="bound")


def compare(instance: Instance, policies: str | Sequence[str] = (),
            schedules: Mapping[str, Schedule] | Sequence[tuple[str, Schedule]] = (), *,
            optimal: bool = False,
            formulation: str = "infermax", objective: str = "makespan", solver: str = "highs",
            time_limit: float | None = 60.0, threads: int | None = None,
            improve_seconds: float = 0.0, seed: int = 0) -> Comparison:
    """Simulate ``policies``, evaluate ``schedules`` (label -> schedule) and, with
    ``optimal``, solve ``formulation``; every feasible row gets its gap to the reference.
    ``schedules`` may also be ``(label, schedule)`` pairs. Every row label (policy name or
    schedule label) must be unique: rows are reported, charted and filed by label. With
    ``improve_seconds`` > 0, large-neighbourhood search (:mod:`optsched.search.lns`) runs that long
    (within the budget) from the best feasible row and adds an ``lns`` row."""
    if objective not in OBJECTIVES:
        raise CompareInputError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    names = policy_names(policies)
    pairs = list(schedules.items()) if isinstance(schedules, Mapping) else list(schedules)
    if not names and not pairs and not optimal:
        raise CompareInputError("nothing to compare: give --policies, --schedule or --optimal")
    labels = names + [label for label, _ in pairs]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise CompareInputError(f"row label {twice[0]!r} is given twice (policies and --schedule "
                                "labels name the rows; each must be unique)")
    _refuse_optimal_with_prefix(instance, optimal, formulation)
    budget = Budget.seconds(time_limit)
    load = offered_load(instance, deadline=load_deadline(time_limit))
    # the policies may use at most POLICY_SHARE of the budget: the rest is for the bound, the
    # model (or LNS in its place) and the report
    policy_deadline = None if budget.deadline is None else \
        time.perf_counter() + POLICY_SHARE * budget.left()
    rows = run_policies(instance, names, objective, policy_deadline) if names else []
    rows += [evaluated_row(label, "schedule", instance, s, objective, None)
             for label, s in pairs]
    notes: list[str] = []
    if improve_seconds > 0:
        rows += _lns_row(instance, rows, objective, min(improve_seconds, budget.left()), seed)
    if instance.limits.hidden_cache:  # no bound or formulation models it (semantics section 6)
        if optimal:
            raise CompareInputError("--optimal: the instance enables hidden cache "
                                    "(limits.hidden_cache), which no formulation represents; "
                                    "compare the policies without --optimal")
        lower = None
        notes.append("no certified lower bound: the instance enables hidden cache, which the "
                     "bounds do not model (docs/semantics.md section 6)")
    elif instance.has_prefix and not any(m.reuse_aware and objective in m.objectives
                                         for m in bound_methods().values() if m.name != "best"):
        lower = None
        notes.append(f"no certified lower bound: the instance's requests list prefix block "
                     f"ids, and no bound of {objective} models prefix reuse "
                     "(docs/semantics.md section 6)")
    else:  # with block ids ``best`` climbs the reuse-aware rungs only
        lower = lower_bound(instance, objective, "best", budget=_bound_budget(budget, optimal))
    opt, rep = None, None
    if optimal:
        done = _optimum_within(instance, rows, budget, lower, formulation=formulation,
                               objective=objective, solver=solver, threads=threads,
                               seed=seed, search=improve_seconds <= 0)
        opt, rep = _optimum(done, formulation, objective, notes)
        rows += _skipped_lns_row(instance, done, objective, notes) + [opt]
    ref, ref_kind, source = reference(opt, lower)
    rows = [replace(r, gap=gap(r.objective, ref))
            if r.evaluation is not None and r.evaluation.feasible else r for r in rows]
    opt = next((r for r in rows if r.kind == RowKind.OPTIMUM), None)
    return Comparison(instance, objective, rows, opt, rep, ref_kind, ref, time_limit, solver,
                      lower, source, notes, goodput_gap(instance, rows), load)


def _refuse_optimal_with_prefix(instance: Instance, optimal: bool, formulation: str) -> None:
    """``--optimal`` on an instance with prefix block ids needs a formulation that models
    reuse (docs/semantics.md section 6): refused before any policy runs."""
    from ..formulations.base import FORMULATIONS

    if optimal and instance.has_prefix and formulation in FORMULATIONS.names() \
            and not FORMULATIONS.get(formulation).reuse_aware:
        raise CompareInputError(f"--optimal: the instance's requests list prefix block ids, "
                                f"and formulation {formulation!r} does not model prefix reuse "
                                "(docs/semantics.md section 6); compare the policies without "
                                "--optimal")


#: the policies' share of the budget (the rest: the bound, the pipeline's model or its LNS
#: fallback, and the report); seconds of the budget kept for the report (charts are skipped
#: past the deadline)
POLICY_SHARE, REPORT_SECONDS = 0.6, 1.0
#: the bound's share of what is left when a model is solved after it (``optimal``)
BOUND_SHARE = 0.5


def _bound_budget(budget: Budget, optimal: bool) -> Budget:
    """The ladder (``best``, formulations/bounds.md) climbs for what is left less the report's
    seconds, half of it when the model is solved afterwards."""
    if budget.deadline is None:
        return budget
    left = max(0.0, budget.left() - REPORT_SECONDS) * (BOUND_SHARE if optimal else 1.0)
    return Budget(time.perf_counter() + left)


def _lns_row(instance: Instance, rows: list[Row], objective: str, seconds: float,
             seed: int) -> list[Row]:
    """An ``lns`` row improving the best feasible row (none without one or without time)."""

    feas = [r for r in rows if r.evaluation is not None and r.evaluation.feasible
            and r.schedule is not None and not r.schedule.has_swaps
            and not r.schedule.has_hidden
            and r.objective is not None and math.isfinite(r.objective)]
    if not feas or not seconds > 0 or instance.limits.swapping or instance.limits.hidden_cache \
            or instance.has_prefix:
        return []
    best = min(feas, key=objective_key)
    if best.schedule is None:  # feas keeps only rows with a schedule
        raise RuntimeError(f"compare: row {best.label!r} has no schedule to improve")

    phase(f"large-neighbourhood search for {seconds:.1f} s from {best.label}")
    res = improve(instance, best.schedule, objective,
                  LNSOptions(time_limit=seconds, seed=seed, progress=False))
    phase(f"large-neighbourhood search: {res.start_objective:.6g} -> {res.objective:.6g} "
          f"in {res.runtime:.1f} s")
    return [evaluated_row(f"lns ({best.label})", "lns", instance, res.schedule, objective,
                          res.runtime, search_method=res.method)]


def _optimum_within(instance: Instance, rows: list[Row], budget: Budget,
                    lower: BoundResult | None, *, formulation: str, objective: str,
                    solver: str, threads: int | None, seed: int, search: bool) -> SolveReport:
    """The solve pipeline (:func:`optsched.solving.pipeline.run`) in what is left of the budget,
    from the best compared row: the same plan, warm start and fallback as ``optsched
    solve`` (with ``search``, the skipped model's time goes to LNS, as there)."""
    # the report (table, charts) keeps REPORT_SECONDS of the command's budget
    deadline = None if budget.deadline is None else budget.deadline - REPORT_SECONDS
    limit = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
    opts = SolveOptions(solver=solver, time_limit=limit or None, threads=threads, seed=seed,
                        progress=False)
    return solve_pipeline(instance, formulation, objective, options=opts,
                          warm_start=_warm_start_of(rows), deadline=deadline,
                          lower=lower, fallback=True, improve_fallback=search)


def _optimum(done: SolveReport, formulation: str, objective: str,
             notes: list[str]) -> tuple[Row, SolveReport | None]:
    """The optimum row: the solver's answer, or, when the model was skipped (estimated
    before building, ``optsched.solving.budget``), a ``skipped`` row saying why, with the
    fallback ``optsched solve`` reports (the row's ``solve``; the comparison has no report)."""
    plan = done.plan
    if plan is None or plan.build:
        if plan is not None:
            notes.append(plan.note)
        return optimum_row(done, formulation, objective), done
    return Row(f"{formulation} (skipped)", RowKind.OPTIMUM, done.status, message=plan.note,
               solve=done), None


def _skipped_lns_row(instance: Instance, done: SolveReport, objective: str,
                     notes: list[str]) -> list[Row]:
    """The ``lns`` row of the search the pipeline ran in the skipped model's time."""
    fb = done.fallback
    if fb is None or fb.search is None:
        return []
    res = fb.search
    notes.append(f"the exact model was skipped; its {res.seconds:.0f} s went to "
                 "large-neighbourhood search (the lns row)")
    return [evaluated_row(f"lns ({fb.source})", "lns", instance, res.schedule, objective,
                          res.seconds, search_method=res.method)]


# -- SLO goodput (rows.py's module docstring: the gap of a maximisation objective) --
def goodput_gap_value(attainment: float, upper: float) -> float:
    """``(U - a) / U`` (module docstring), 0 when ``U = 0``."""
    g = relative_gap(attainment, upper, per="bound")  # compare's gap formula
    return 0.0 if g is None else max(0.0, -g)


def goodput_gap(instance: Instance, rows: Sequence[Row]) -> GoodputGap | None:
    """The goodput table of a comparison; None when no request of ``instance`` has an SLO."""
    if not any(r.ttft_slo is not None or r.tpot_slo is not None or r.deadline is not None
               for r in instance.requests):
        return None  # with prefix block ids the ceiling is B12r (formulations/bounds.md)
    t0 = time.perf_counter()
    gb = goodput_bound(instance)
    seconds = time.perf_counter() - t0
    ub = gb.attainment
    if ub is None:  # some request has an SLO, so with_slo >= 1
        raise GoodputGapError("goodput gap: the bound counted no request with an SLO")
    out = []
    for r in rows:
        ev = r.evaluation
        a = None if ev is None or not ev.feasible else ev.metrics.get("slo_attainment")
        out.append(GoodputRow(r.label, a, None if a is None else goodput_gap_value(a, ub)))
    return GoodputGap(gb, tuple(out), seconds)


__all__ = ["CompareInputError", "compare", "evaluated_row", "gap",
           "goodput_gap", "goodput_gap_value", "optimum_row", "policy_names", "reference",
           "run_optimum", "run_policies"]
