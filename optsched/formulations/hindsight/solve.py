"""``run``: the registered ``hindsight`` formulation (``formulations/hindsight.md``): the best
known starts (H8, H21), the model solved with the late-start bucket that certifies the horizon
(H12), the objective-integrality gap (H15) and the deadline floors (H22)."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ... import milp
from ...evaluation import evaluate
from ...instance import Instance
from ...schedule import Schedule
from ...solve_types import Objective, Status, WarmStart
from ..base import Hypotheses, RawSolution, SolveOptions, register_formulation
from .deadline import completion_floors
from .heuristics import greedy_starts, improve_starts
from .model import PARAMS, HindsightParams, build
from .starts import (
    NotRepresentable,
    applicable,
    check_instance,
    objective_of_starts,
    schedule_from_starts,
    starts_from_schedule,
)


# ----------------------------------------------------------------------------- run
def _integral_step(instance: Instance, objective: str) -> float | None:
    """(H15) the objective's granularity when all arrivals are integers (None otherwise)."""
    if not np.all(instance.arrival == np.round(instance.arrival)):
        return None
    if objective == Objective.MEAN_TTFT:
        return 1.0 / max(instance.n, 1)
    return 1.0


def best_known_starts(instance: Instance, objective: str, warm_start: Schedule | None,
                      search_seconds: float = 0.0, seed: int = 0) -> tuple[np.ndarray, str, list[str]]:
    """The best representable schedule among the warm start and the greedy orders (H8 source),
    then improved by the local search (H21) for ``search_seconds``."""
    notes = []
    cands: list[tuple[float, str, np.ndarray]] = []
    if warm_start is not None:
        try:
            s = starts_from_schedule(instance, warm_start)
            cands.append((objective_of_starts(instance, objective, s), "warm start", s))
        except NotRepresentable as exc:
            notes.append(f"warm start not representable in the hindsight model ({exc}); "
                         "using list scheduling instead")
    for order in ("mcsf", "fcfs"):
        for skip in (False, True):
            s = greedy_starts(instance, order, skip)
            cands.append((objective_of_starts(instance, objective, s),
                          f"greedy-{order}" + ("-skip" if skip else ""), s))
    cands.sort(key=lambda c: c[0])
    val, src, best = cands[0]
    if search_seconds > 0 and instance.n > 1:
        t = time.perf_counter()
        found, iters = improve_starts(instance, objective, best, time_limit=search_seconds, seed=seed)
        new = objective_of_starts(instance, objective, found)
        notes.append(f"(H21) local search: {iters} moves in {time.perf_counter() - t:.1f} s, "
                     f"{src} {val:g} -> {new:g}")
        if new < val - 1e-9:
            best, src = found, f"local search from {src}"
    return best, src, notes


@register_formulation(
    "hindsight",
    "hindsight-optimal time-indexed IP (online paper, appendix B): unit time, no preemption, "
    "no chunking; variants tight (default) and plain",
    needs_warm_start=False,
    params=PARAMS,
    applicable=applicable,
    restriction="the online paper's model: unit time, no preemption, no chunking, integer "
    "start slots",
)
def run(instance: Instance, objective: str, hypotheses: Hypotheses, options: SolveOptions,
        warm_start: WarmStart | None) -> RawSolution:
    """Build, solve, certify the horizon (H12), decode (H0)."""
    t0 = time.perf_counter()
    p = HindsightParams.from_dict(dict(options.params))
    check_instance(instance)
    notes = ["model: unit time, no preemption, no chunking, integer start slots; the optimum is "
             "optimal for the paper's model and an upper bound on the optimum under docs/semantics.md"]
    if not np.all(instance.arrival == np.round(instance.arrival)):
        notes.append("fractional arrivals: requests start at integer slots >= ceil(arrival) (H7)")
    if instance.n == 0:
        return RawSolution(Status.OPTIMAL, 0.0, 0.0, Schedule.empty(), solver=options.solver,
                           restricted=True, notes=tuple(notes))
    search = p.search
    if search is None:  # small instances close in seconds from the list schedules alone
        search = 0.0 if instance.n < 8 else instance.n / 4
        if options.time_limit is not None:
            search = min(search, 0.2 * options.time_limit)
    if hypotheses.any and search > 0:
        notes.append("(H21) local search skipped: it does not know the hypotheses")
        search = 0.0
    ws_sched = None if warm_start is None else warm_start.schedule
    ub_starts, ub_src, ws_notes = best_known_starts(instance, objective, ws_sched, search,
                                                    seed=options.seed or 0)
    notes += ws_notes
    ub_val = objective_of_starts(instance, objective, ub_starts)
    notes.append(f"upper bound {ub_val:g} from {ub_src}")
    step = _integral_step(instance, objective)
    cut = None
    deadline = None if options.time_limit is None else t0 + options.time_limit
    best: tuple[float, np.ndarray] | None = (ub_val, ub_starts)
    ub_valid = True
    if hypotheses.any:
        ub_sched = schedule_from_starts(instance, ub_starts)
        broken = hypotheses.broken_by(instance, ub_sched, evaluate(instance, ub_sched), objective)
        if broken:
            best = None
            ub_valid = not any(b.split(":")[0] in ("force", "forbid", "order") for b in broken)
    floors = _deadline_floors(instance, objective, p, ub_starts, options, deadline, notes)
    bound = None
    if floors is not None:  # (H22) total latency >= sum_k L_k - sum_i a_i, whatever the MILP does
        bound = float(np.sum(floors) - np.sum(instance.arrival))
    nodes = 0
    status = Status.NO_SOLUTION
    solver_name = options.solver
    for rnd in range(max(1, p.max_rounds)):
        hm = build(instance, objective, hypotheses, p, ub_starts, cut=cut, ub_valid=ub_valid,
                   floors=floors)
        notes += [n_ for n_ in hm.notes if n_ not in notes]
        ws = None
        if best is not None:
            try:
                ws = hm.encode_starts(best[1])
            except NotRepresentable:
                ws = None
        remaining = None if deadline is None else max(1e-3, deadline - time.perf_counter())
        abs_gap = options.abs_gap
        if step is not None:
            abs_gap = max(abs_gap, 0.999 * step)
        mopts = replace(options, time_limit=remaining, abs_gap=abs_gap)
        res = milp.solve(hm.model, options.solver, mopts, warm_start=ws, fallback="highs")
        solver_name = res.solver
        nodes += res.nodes or 0
        notes.append(f"round {rnd}: {res.summary()}; model {hm.sizes}")
        if res.status == Status.ERROR:
            return RawSolution(Status.ERROR, solver=solver_name, restricted=True, message=res.message,
                               notes=tuple(notes),
                               runtime=time.perf_counter() - t0)
        if res.status == Status.INFEASIBLE:  # every model is a relaxation of all longer horizons (H12)
            return RawSolution(Status.INFEASIBLE, solver=solver_name, restricted=True, notes=tuple(notes),
                               nodes=nodes,
                               runtime=time.perf_counter() - t0)
        b = res.bound
        if b is not None and step is not None:
            b = math.ceil(b / step - 1e-6) * step
        if b is not None:  # every round's model is a relaxation of the true problem
            bound = b if bound is None else max(bound, b)
        if res.values is not None:
            starts, late = hm.starts_of(res.values)
            if not late:
                val = objective_of_starts(instance, objective, starts)
                if best is None or val < best[0] - 1e-9:
                    best = (val, starts)
        else:
            late = 0
        if res.status == Status.OPTIMAL and not late:
            status = Status.OPTIMAL
            bound = best[0] if best is not None else bound
            break
        if res.status == Status.OPTIMAL and late:
            new_cut = 2 * hm.cut
            notes.append(f"(H12) the optimum uses the late bucket ({late} request(s) start at or after "
                         f"slot {hm.cut}): horizon cut doubled to {new_cut}")
            cut = new_cut
            if deadline is not None and time.perf_counter() >= deadline:
                break
            continue
        break  # time limit
    if best is None:
        return RawSolution(Status.NO_SOLUTION, bound=bound, solver=solver_name, restricted=True,
                           notes=tuple(notes), nodes=nodes, runtime=time.perf_counter() - t0)
    if status != Status.OPTIMAL:
        status = Status.FEASIBLE
        if bound is not None and best[0] - bound <= (step or 0) * 0.999 + 1e-9 * max(1, best[0]):
            status = Status.OPTIMAL
    sched = schedule_from_starts(instance, best[1])
    return RawSolution(status, best[0], min(bound, best[0]) if bound is not None else None, sched,
                       restricted=True,
                       runtime=time.perf_counter() - t0, solver=solver_name, nodes=nodes,
                       notes=tuple(notes))


def _deadline_floors(instance: Instance, objective: str, p: HindsightParams,
                     ub_starts: np.ndarray, options: SolveOptions, deadline: float | None,
                     notes: list[str]) -> np.ndarray | None:
    """(H22b) the completion floors within ``p.deadline`` seconds (and the time limit), from
    the upper bound's completions; None when off or not total latency."""
    if p.deadline <= 0 or objective != Objective.TOTAL_LATENCY or instance.n < 2:
        return None
    budget = p.deadline
    if deadline is not None:
        budget = min(budget, 0.5 * max(0.0, deadline - time.perf_counter()))
    cf = completion_floors(instance, ub_starts + instance.output, budget=budget,
                           probe_limit=max(1.0, budget / 10), solver=options.solver,
                           threads=options.threads)
    notes.append(f"(H22) completion floors: {cf.solves} max-count probes in {cf.seconds:.1f} s, "
                 f"{int(cf.proven.sum())} of {instance.n} closed, sum {int(cf.floors.sum())}")
    return cf.floors


def with_params(options: SolveOptions, **params) -> SolveOptions:
    """A copy of ``options`` with formulation params merged in."""
    return replace(options, params={**options.params, **params})
