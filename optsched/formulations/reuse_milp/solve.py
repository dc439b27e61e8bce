"""The ``reuse-milp`` formulation: the batch-slot MILP with prefix reuse of :mod:`.model`,
solved by HiGHS (``formulations/reuse-milp.md``)."""

from __future__ import annotations

import math

from ... import milp
from ...cost import UnitCost
from ...evaluation import evaluate
from ...instance import Instance
from ...policies import simulate
from ...schedule import Schedule
from ...solve_types import SolveOptions, Status, WarmStart
from ..base import FormulationError, Hypotheses, RawSolution, register_formulation
from .model import build, decode
from .slots import certified_slots

OBJECTIVES = ("makespan", "total-latency")


def applicable(instance: Instance, objective: str, options: SolveOptions,
               hypotheses: Hypotheses) -> str | None:
    """What the model does not cover, asked before any warm start is simulated."""
    if not isinstance(instance.cost_model, UnitCost):
        return ("models unit time only (every batch with entries takes 1); this "
                f"instance's cost model is {instance.cost_model.kind!r}")
    lim = instance.limits
    if lim.max_prefill_tokens is not None and lim.max_prefill_tokens < lim.max_batch_tokens:
        return "does not model a prefill budget max_prefill_tokens below C"
    if instance.n == 0:
        return "the instance has no requests"
    return None


#: reuse-aware policies whose best schedule sizes the slots and cuts the model (R0)
POLICIES = ("vllm-apc", "sarathi-apc", "lpm", "dfs", "k-lpm", "belady")


def _incumbent(instance: Instance, objective: str, warm_start: WarmStart | None
               ) -> tuple[float, Schedule | None, str | None]:
    """The best of the warm start and the reuse-aware policies (each replayed)."""
    best: tuple[float, Schedule | None, str | None] = (math.inf, None, None)
    if warm_start is not None and warm_start.evaluation.feasible:
        best = (warm_start.evaluation.objective(objective), warm_start.schedule,
                warm_start.source)
    for name in POLICIES:
        sched = simulate(instance, name)
        ev = evaluate(instance, sched)
        if ev.feasible and ev.objective(objective) < best[0]:
            best = (ev.objective(objective), sched, name)
    return best


def _upper(incumbent: float, hypotheses: Hypotheses) -> float:
    ub = incumbent
    if hypotheses.at_most is not None:
        ub = min(ub, hypotheses.at_most)
    if not math.isfinite(ub):
        raise FormulationError("reuse-milp: needs a feasible warm start or --at-most to size "
                               "its batch slots")
    return ub


@register_formulation(
    "reuse-milp",
    "batch-slot MILP with prefix reuse (resident blocks, hits, drops as decisions); unit time",
    objectives=OBJECTIVES,
    needs_warm_start=True,
    reuse_aware=True,
    applicable=applicable,
)
def run(instance: Instance, objective: str, hypotheses: Hypotheses, options: SolveOptions,
        warm_start: WarmStart | None) -> RawSolution:
    """Build with the certified slot count (R0), cut at the warm start's objective (and
    ``at_most``), solve, decode."""
    why = applicable(instance, objective, options, hypotheses)
    if why:
        raise FormulationError(f"reuse-milp: {why}")
    if hypotheses.force or hypotheses.forbid or hypotheses.order or hypotheses.no_evictions:
        raise FormulationError("reuse-milp: supports only the at_most hypothesis")
    if not instance.has_prefix:
        raise FormulationError("reuse-milp: the instance lists no prefix block ids; use "
                               "--formulation infermax")
    inc, inc_sched, inc_name = _incumbent(instance, objective, warm_start)
    ub = _upper(inc, hypotheses)
    slots = certified_slots(instance, objective, ub)
    rm = build(instance, objective, slots, ub)
    res = milp.solve(rm.model, options.solver, milp.SolveOptions(
        time_limit=options.time_limit, threads=options.threads, seed=options.seed,
        rel_gap=options.rel_gap, abs_gap=options.abs_gap, log_file=options.log_file,
        progress=options.progress, verbose=options.verbose), fallback="highs")
    notes = (f"{slots} batch slots (certified for objective <= {ub:g}; best reuse-aware "
             f"start {inc_name}: {inc:g}), {rm.model.num_vars} columns, "
             f"{rm.model.num_constraints} rows",)
    base = dict(runtime=res.runtime, solver=res.solver, nodes=res.nodes, notes=notes,
                history=tuple(res.history))
    if res.status == Status.INFEASIBLE:
        if hypotheses.at_most is not None and hypotheses.at_most <= ub:
            return RawSolution(status=Status.INFEASIBLE, bound=hypotheses.at_most,
                               message=f"no schedule with objective <= {hypotheses.at_most}",
                               **base)  # type: ignore[arg-type]
        return RawSolution(status=Status.ERROR, message="reuse-milp: internal error: the model "
                           "rejects the warm start's objective", **base)  # type: ignore[arg-type]
    if res.values is None or res.status not in (Status.OPTIMAL, Status.FEASIBLE):
        if inc_sched is not None and inc <= ub and res.status == Status.NO_SOLUTION:
            # the model found nothing better than the start in time: the start stands
            return RawSolution(status=Status.FEASIBLE, objective=inc, bound=res.bound,
                               schedule=inc_sched, **base)  # type: ignore[arg-type]
        return RawSolution(status=res.status, bound=res.bound, message=res.message,
                           **base)  # type: ignore[arg-type]
    sched = decode(rm, res.values)
    return RawSolution(status=res.status, objective=res.objective, bound=res.bound,
                       schedule=sched, **base)  # type: ignore[arg-type]
