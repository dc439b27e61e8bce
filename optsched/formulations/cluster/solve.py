"""The ``cluster`` formulation (``formulations/cluster.md``): the cluster MILP of :mod:`.model`
behind :func:`optsched.solving.pipeline.solve`, warm-started by the best router.

``run`` refuses clusters with ``prefill`` or ``decode`` engines (transfers are not modelled),
computes the best router schedule (every registered replica router behind ``vllm`` and
``sarathi``, each replayed by the evaluator) and takes the better of it and the warm start it
is given, sizes the batch slots per engine (section 3), builds and solves the model, decodes
the answer into one cluster schedule and returns the better of it and the warm start. The
model's optimum is optimal among schedules in which every request runs on one engine
(section 4: a restriction, since a request evicted on one engine may be recomputed on
another), so ``RawSolution.restricted`` is always set.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ... import milp
from ...evaluation import evaluate
from ...instance import Instance
from ...plugins import ParamSpec, parse_params
from ...solve_types import SolveOptions, Status, WarmStart
from ..base import FormulationError, Hypotheses, RawSolution, register_formulation
from .model import build, horizon

#: the replica routers and engine policies whose schedules warm-start the model
ROUTERS = ("rr", "lor", "least-kv", "p2c")
ENGINE_POLICIES = ("vllm", "sarathi")

RESTRICTION = ("each request runs on one engine (no re-routing after an eviction), at most J "
               "batch slots per engine where the notes say so")

PARAMS = (
    ParamSpec("batches", int, None, "batch slots per engine (default: section 3 of "
              "formulations/cluster.md)", lo=1),
    ParamSpec("slack", int, 2, "slots beyond the warm start's busiest engine when Jmax is "
              "too large", lo=0),
    ParamSpec("method", str, "milp", "milp: the model of section 2; bnb: branch and bound "
              "over assignments with the exhaustive search per engine (section 6)",
              choices=("milp", "bnb")),
    ParamSpec("max_states", int, 2_000_000, "bnb: states per engine search", lo=1),
)


def refuse(instance: Instance) -> None:
    """One line when the model cannot represent ``instance``: engines not all of role
    ``both`` (a disaggregated cluster needs transfers, which the model does not have), or
    prefix block ids (the model has no prefix reuse)."""
    roles = sorted({instance.engine(k).role for k in range(instance.n_engines)})
    if roles != ["both"]:
        raise FormulationError(
            f"cluster: the engines have roles {roles}; the model assigns requests to engines "
            "of role 'both' and has no KV transfers (simulate a disaggregated cluster with "
            "optsched simulate --router pd)")
    if instance.has_prefix:
        raise FormulationError("cluster: the requests list prefix block ids, and the model "
                               "prices every prompt token as computed (no prefix reuse); "
                               "simulate the cluster with a router instead")


def applicable(instance: Instance, objective: str, options: SolveOptions,
               hypotheses: Hypotheses) -> str | None:
    roles = sorted({instance.engine(k).role for k in range(instance.n_engines)})
    if roles != ["both"]:
        return (f"the engines have roles {roles}; the model assigns requests to engines of role "
                "'both' and has no KV transfers")
    if hypotheses.force or hypotheses.forbid or hypotheses.order:
        return "supports only the no_evictions and at_most hypotheses"
    return None


def best_router(instance: Instance, objective: str, deadline: float | None = None,
                policies: tuple[str, ...] = ENGINE_POLICIES) -> WarmStart | None:
    """The best feasible schedule of :data:`ROUTERS` x ``policies``, each replayed by the
    evaluator (None when none is feasible or the deadline passed first)."""
    from ...cluster import simulate  # the router layer sits below formulations
    from ...errors import OptschedError

    best: WarmStart | None = None
    for policy in policies:
        for router in ROUTERS:
            if deadline is not None and time.perf_counter() > deadline:
                return best
            try:
                sched = simulate(instance, policy, router)
            except OptschedError:
                continue
            ev = evaluate(instance, sched)
            if not ev.feasible:
                continue
            if best is None or ev.objective(objective) < best.objective(objective):
                best = WarmStart(sched, ev, f"{policy}+{router}")
    return best


def _batches_per_engine(instance: Instance, ws: WarmStart) -> list[int]:
    """Batches with entries each engine runs in the warm start."""
    pl = ws.schedule.placement
    counts = np.zeros(instance.n_engines, int)
    has = np.diff(ws.schedule.batch_ptr) > 0
    pos = {e: k for k, e in enumerate(instance.engine_ids)}
    for j in np.flatnonzero(has).tolist():
        b = -1 if pl is None else int(pl.batch_engine[j])
        counts[0 if b < 0 else pos[pl.engines[b]]] += 1  # type: ignore[union-attr]
    return counts.tolist()


@register_formulation(
    "cluster",
    "replicas of role 'both': request-to-engine assignment plus InferMax's tight batch model "
    "per engine (formulations/cluster.md)",
    objectives=("makespan", "total-latency", "mean-ttft"),
    needs_warm_start=False,
    params=PARAMS,
    applicable=applicable,
    restriction=RESTRICTION,
    cluster_aware=True,
)
def run(instance: Instance, objective: str, hypotheses: Hypotheses, options: SolveOptions,
        warm_start: WarmStart | None) -> RawSolution:
    """Solve the cluster MILP (module docstring)."""
    t0 = time.perf_counter()
    refuse(instance)
    if hypotheses.force or hypotheses.forbid or hypotheses.order:
        raise FormulationError("cluster: supports only the no_evictions and at_most hypotheses")
    p = parse_params(PARAMS, options.params, "formulation 'cluster'", FormulationError)
    limit = options.time_limit
    deadline = None if limit is None else t0 + 0.2 * float(limit)
    routed = best_router(instance, objective, deadline) if warm_start is None else None
    ws = _better(objective, warm_start, routed, hypotheses.no_evictions)
    notes = [] if ws is None else [f"warm start: {ws.source or 'schedule'} "
                                   f"({ws.objective(objective):.6g})"]
    if p["method"] == "bnb":
        return _run_bnb(instance, objective, hypotheses, ws, notes, p["max_states"],
                        None if limit is None else float(limit) - (time.perf_counter() - t0), t0)
    ub = None if ws is None else ws.objective(objective)
    base = [1] * instance.n_engines if ws is None else _batches_per_engine(instance, ws)
    if p["batches"] is not None:
        J = [int(p["batches"])] * instance.n_engines
        full, _ = horizon(instance, objective, ub, base, p["slack"])
        j_cut = any(a < b for a, b in zip(J, full)) or ub is None
    else:
        J, j_cut = horizon(instance, objective, ub, base, p["slack"])
    notes.append(f"batch slots per engine: {J}" + (
        " (a restriction: fewer than the proven bound Jmax of formulations/cluster.md "
        "section 3)" if j_cut else " (>= Jmax: every schedule at least as good as the warm "
        "start fits)"))
    model = build(instance, objective, hypotheses, J, ub=ub)
    left = None if limit is None else max(1.0, float(limit) - (time.perf_counter() - t0))
    start = None if ws is None else model.partial_start(ws.schedule)
    res = milp.solve(model.model, options.solver, replace(options, time_limit=left, params={}),
                     warm_start=start)
    notes += list(res.notes)
    bound = None if res.bound is None or not math.isfinite(res.bound) else \
        res.bound / model.scale
    common = dict(runtime=time.perf_counter() - t0, solver=res.solver, nodes=res.nodes,
                  restricted=True)
    if res.values is not None and res.status in (Status.OPTIMAL, Status.FEASIBLE):
        sched = model.decode(res.values)
        ev = evaluate(instance, sched)
        value = model.objective_value(res.values)
        if res.status == Status.OPTIMAL:
            return RawSolution(Status.OPTIMAL, value, bound, sched, notes=tuple(notes),
                               **common)  # type: ignore[arg-type]
        true = ev.objective(objective) if ev.feasible else math.inf
        if ws is None or true < ws.objective(objective):
            notes.append(f"incumbent priced {value:.6g} by the model and {true:.6g} by the "
                         "evaluator (replayed at the earliest starts)")
            return RawSolution(Status.FEASIBLE, true, bound, sched, notes=tuple(notes),
                               **common)  # type: ignore[arg-type]
    if ws is None:
        return RawSolution(res.status if res.status != Status.FEASIBLE else Status.NO_SOLUTION,
                           message=res.message, notes=tuple(notes), **common)  # type: ignore[arg-type]
    notes.append(f"the model found nothing better than the warm start ({res.status})")
    return RawSolution(Status.FEASIBLE, ws.objective(objective), bound, ws.schedule,
                       notes=tuple(notes), **common)  # type: ignore[arg-type]


def _run_bnb(instance: Instance, objective: str, hypotheses: Hypotheses, ws: WarmStart | None,
             notes: list[str], max_states: int, left: float | None, t0: float) -> RawSolution:
    """``method=bnb``: :func:`.bnb.branch_and_bound` from the warm start (section 6)."""
    from .bnb import branch_and_bound

    if hypotheses.no_evictions or hypotheses.at_most is not None:
        raise FormulationError("cluster: method=bnb supports no hypotheses (use method=milp)")
    inc = None if ws is None else (ws.objective(objective), ws.schedule)
    r = branch_and_bound(instance, objective, incumbent=inc, max_states=max_states,
                         time_limit=None if left is None else max(0.0, left))
    c = r.counts
    notes.append(f"bnb: {c['assignments']} assignments, {c['pruned']} pruned, {c['solved']} "
                 f"solved, {c['open']} open; {c['searches']} engine searches")
    return RawSolution(r.status, r.value, r.bound, r.schedule, runtime=time.perf_counter() - t0,
                       solver="bnb", restricted=True, notes=tuple(notes))


def _better(objective: str, a: WarmStart | None, b: WarmStart | None,
            no_evictions: bool) -> WarmStart | None:
    """The better feasible warm start (under ``no_evictions``, one without evictions)."""
    ok = [w for w in (a, b) if w is not None and w.feasible and
          math.isfinite(w.objective(objective)) and
          not (no_evictions and w.evaluation.metrics["evictions"])]
    return min(ok, key=lambda w: w.objective(objective), default=None)
