"""What one cell runs: a policy, a formulation or a bound method, through the library calls
the CLI uses (``policies.simulate_policy``, the one solve pipeline ``pipeline.solve``,
``optsched.bounds``).

Each runner takes ``(instance, method)`` and returns the method's part of a result row
(:data:`optsched.sweep.results.SCHEMA`): status, objective, bound, gap, feasible, solver and
solver version. Every schedule is replayed by :func:`optsched.evaluate` (``solve``
does it for formulations); objectives are ``Evaluation.objective``. A runner registers by
kind with :func:`method_kind`, so a new kind is one function.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ..evaluation import evaluate
from ..formulations import SolveOptions
from ..instance import Instance
from ..policies import get_spec, simulate_policy
from ..solve_types import Status, finite_or_none
from ..solving import solve
from .bound_methods import BoundsUnavailable, bounds_module, check_bound_method
from .clusters import CLUSTER_BOUND, cluster_bound, metrics_json
from .spec import MethodSpec

Runner = Callable[[Instance, MethodSpec], dict[str, Any]]
_KINDS: dict[str, Runner] = {}

#: the Python distribution behind each solver name (for the solver-version column)
#: the router of a policy on a cluster instance that names none (``optsched simulate``'s)
DEFAULT_ROUTER = "rr"

SOLVER_PACKAGES = {"highs": "highspy", "gurobi": "gurobipy", "cbc": "pulp", "cpsat": "ortools"}


def method_kind(kind: str) -> Callable[[Runner], Runner]:
    def deco(fn: Runner) -> Runner:
        _KINDS[kind] = fn
        return fn

    return deco


def run_method(instance: Instance, method: MethodSpec) -> dict[str, Any]:
    return _KINDS[method.kind](instance, method)


def solver_version(solver: str | None) -> str | None:
    """``"highs 1.16.0"`` for a solver name (None for unknown names such as ``exhaustive``)."""
    if not solver:
        return None
    base = solver.split("/")[0].split()[0].lower()
    pkg = SOLVER_PACKAGES.get(base)
    if pkg is None:
        return solver

    try:
        return f"{base} {version(pkg)}"
    except PackageNotFoundError:
        return base


@method_kind("policy")
def run_policy(instance: Instance, method: MethodSpec) -> dict[str, Any]:
    """Simulate the policy (as ``optsched simulate``) and replay its schedule; with a
    ``router``, or on a cluster instance (router ``rr`` then, as the CLI's), the policy runs
    on every engine behind the router (:func:`optsched.cluster.simulate`) and the row keeps
    the evaluator's cluster metrics."""

    router = method.option.get("router")
    if router is None and instance.cluster is None:
        policy = get_spec(method.name).make(**dict(method.params))
        sched = simulate_policy(instance, policy)
    else:
        from ..cluster import simulate as simulate_cluster

        sched = simulate_cluster(instance, method.name, router or DEFAULT_ROUTER,
                                 params=dict(method.params))
    ev = evaluate(instance, sched)
    row = {"status": Status.FEASIBLE if ev.feasible else Status.INFEASIBLE,
           "objective": finite_or_none(ev.objective(method.objective)) if ev.feasible else None,
           "feasible": ev.feasible, "evictions": int(ev.metrics["evictions"]),
           "error": None if ev.feasible else f"infeasible schedule: {dict(ev.violation_counts)}"}
    if router is not None or instance.cluster is not None:
        row["metrics"] = metrics_json(ev.metrics)
    return row


@method_kind("formulation")
def run_formulation(instance: Instance, method: MethodSpec) -> dict[str, Any]:
    """Solve as ``optsched solve`` does; ``solve`` replays the decoded schedule."""

    o = method.option
    ws = o["warm_start"]
    if ws == "none":
        ws = None
    opts = SolveOptions(solver=o["solver"], time_limit=o["time_limit"], threads=o["threads"],
                        rel_gap=o["gap"], progress=False, params=dict(method.params))
    rep = solve(instance, method.name, method.objective, options=opts, warm_start=ws)
    ev = rep.evaluation
    has_schedule = rep.status.has_solution and ev is not None
    return {"status": str(rep.status),
            "objective": finite_or_none(rep.objective) if has_schedule else None,
            "bound": finite_or_none(rep.bound),
            "gap": finite_or_none(rep.gap),
            "feasible": bool(ev.feasible) if ev is not None else None,
            "restricted": bool(rep.restricted),
            "evictions": int(ev.metrics["evictions"]) if has_schedule and ev is not None else None,
            "solver": rep.solver or o["solver"],
            "solver_version": solver_version(rep.solver or o["solver"]),
            "error": rep.message if rep.status == Status.ERROR else None}


@method_kind("improve")
def run_improve(instance: Instance, method: MethodSpec) -> dict[str, Any]:
    """``optsched improve`` on a cluster: the router's schedule, then the local search over
    the request-to-engine assignment (:func:`optsched.search.assignment.improve_assignment`,
    seed 0, ``time_limit`` seconds of search or ``max_moves`` candidates); the result is the
    best schedule the evaluator confirmed, replayed once more here."""
    from ..cluster import simulate as simulate_cluster
    from ..search.assignment import AssignmentOptions, improve_assignment

    o, params = method.option, dict(method.params)
    spec = get_spec(method.name)
    start = simulate_cluster(instance, method.name, o["router"], params=params)
    res = improve_assignment(instance, start, lambda: spec.make(**params), method.objective,
                             AssignmentOptions(time_limit=o["time_limit"], seed=0,
                                               max_moves=o.get("max_moves")))
    ev = evaluate(instance, res.schedule)
    return {"status": Status.FEASIBLE if ev.feasible else Status.INFEASIBLE,
            "objective": finite_or_none(ev.objective(method.objective)) if ev.feasible else None,
            "feasible": ev.feasible, "evictions": int(ev.metrics["evictions"]),
            "solver": f"improve: {res.moves_tried} tried, {res.moves_accepted} accepted, "
                      f"start {res.start_objective:.6g}",
            "metrics": metrics_json(ev.metrics),
            "error": None if ev.feasible else f"infeasible schedule: {dict(ev.violation_counts)}"}


@method_kind("bound")
def run_bound(instance: Instance, method: MethodSpec) -> dict[str, Any]:
    """A certified lower bound (as ``optsched bound``): ``optsched.bounds.lower_bound`` with the
    one solve for the ``exact`` rung; no schedule, so no objective -- the value goes to the
    ``bound`` column. ``cluster``: B17's cluster floors (:func:`~optsched.sweep.clusters.
    cluster_bound`), all of them in the ``metrics`` column."""
    if method.name == CLUSTER_BOUND:
        value, floors = cluster_bound(instance, method.objective)
        return {"status": "bound", "bound": finite_or_none(value), "solver": "bound:cluster",
                "metrics": metrics_json(floors)}
    res = bounds_module().lower_bound(instance, method.objective, method=method.name,
                                      time_limit=method.option["time_limit"], exact_solve=solve)
    return {"status": "bound", "bound": finite_or_none(res.value), "solver": f"bound:{res.method}"}


__all__ = ["run_method", "method_kind", "check_bound_method", "BoundsUnavailable", "solver_version"]
