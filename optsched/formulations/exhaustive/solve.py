"""The ``exhaustive`` formulation: the exact state-graph search of :mod:`.search` behind
:func:`optsched.solving.pipeline.solve`, for tiny instances (its restrictions and pruning rules are
documented there)."""

from __future__ import annotations

import math
from dataclasses import replace

from ...evaluation import evaluate
from ...instance import Instance
from ...plugins import ParamSpec, parse_params
from ...solve_types import MODELLED, SolveOptions, Status, WarmStart
from ..base import FormulationError, Hypotheses, RawSolution, register_formulation
from .reuse import too_large
from .search import DEFAULT_MAX_STATES, SearchOptions, search

_BOOL_PARAMS = ("no_evictions", "no_chunking", "no_pausing")

PARAMS = (
    ParamSpec("max_states", int, DEFAULT_MAX_STATES, "states expanded before giving up", lo=1),
    ParamSpec("no_evictions", bool, False, "forbid evictions"),
    ParamSpec("no_chunking", bool, False, "every entry processes all S - m available tokens"),
    ParamSpec("no_pausing", bool, False,
              "a resident request is processed in every batch until it finishes"),
)


def applicable(instance: Instance, objective: str, options: SolveOptions,
               hypotheses: Hypotheses) -> str | None:
    """The size guard of the search with prefix reuse (:mod:`.reuse`), asked before any warm
    start is simulated."""
    return too_large(instance) if instance.has_prefix else None


@register_formulation(
    "exhaustive",
    "exact A*/Dijkstra search over schedule states (evictions, chunking, arrivals); tiny instances",
    objectives=MODELLED,
    needs_warm_start=False,
    params=PARAMS,
    reuse_aware=True,
    applicable=applicable,
    restriction="the search with the restricting params asked for (no_evictions, no_chunking, "
    "no_pausing)",
)
def run(instance: Instance, objective: str, hypotheses: Hypotheses, options: SolveOptions,
        warm_start: WarmStart | None) -> RawSolution:
    """The ``exhaustive`` formulation: :func:`search`, then the evaluator's objective."""
    if hypotheses.force or hypotheses.forbid or hypotheses.order:
        raise FormulationError("exhaustive: supports only the no_evictions and at_most hypotheses")
    if instance.n == 0:
        raise FormulationError("exhaustive: the instance has no requests")
    p = parse_params(PARAMS, options.params, "formulation 'exhaustive'", FormulationError)
    so = SearchOptions(
        max_states=p["max_states"],
        time_limit=options.time_limit,
        no_evictions=p["no_evictions"] or hypotheses.no_evictions,
        no_chunking=p["no_chunking"],
        no_pausing=p["no_pausing"],
    )
    notes = []
    ub = None
    if warm_start is not None and not so.restricted:
        ev = warm_start.evaluation
        if ev.feasible and math.isfinite(ev.objective(objective)):
            ub = ev.objective(objective)
    if hypotheses.at_most is not None:
        ub = hypotheses.at_most if ub is None else min(ub, hypotheses.at_most)
    so = replace(so, upper_bound=ub)
    res = search(instance, objective, so)
    stats = f"{res.expanded} states expanded, {res.generated} generated"
    notes.append(stats)
    restr = [k for k in _BOOL_PARAMS if getattr(so, k)]
    if restr:
        notes.append("restricted search: " + ", ".join(restr))
    if res.status != Status.OPTIMAL:
        status = res.status
        msg = res.message
        if (res.status == Status.NO_SOLUTION and hypotheses.at_most is not None
                and "upper bound" in (msg or "")):
            status, msg = Status.INFEASIBLE, f"no schedule with objective <= {hypotheses.at_most}"
        return RawSolution(status=status, runtime=res.runtime, solver="exhaustive",
                           nodes=res.expanded, notes=tuple(notes), message=msg)
    if res.schedule is None or res.objective is None:
        return RawSolution(status=Status.ERROR, runtime=res.runtime, solver="exhaustive",
                           nodes=res.expanded, notes=tuple(notes),
                           message="exhaustive: internal error: optimal without a schedule")
    ev = evaluate(instance, res.schedule)
    true = ev.objective(objective)
    if not ev.feasible or abs(true - res.objective) > 1e-6 * max(1.0, abs(true)):
        return RawSolution(status=Status.ERROR, objective=res.objective, schedule=res.schedule,
                           runtime=res.runtime, solver="exhaustive", nodes=res.expanded,
                           notes=tuple(notes),
                           message=f"exhaustive: internal error: search cost {res.objective} but the "
                                   f"evaluator gives {true} (feasible={ev.feasible})")
    return RawSolution(status=Status.OPTIMAL, objective=true, bound=true, schedule=res.schedule,
                       runtime=res.runtime, solver="exhaustive", nodes=res.expanded,
                       restricted=so.restricted, notes=tuple(notes))
