"""Bound ``exact``: the existing exact models, when they fit the budget (``bounds.md`` B8).

* ``exhaustive`` (A* over all schedule states, :mod:`optsched.formulations.exhaustive`) on
  instances of at most :data:`EXHAUSTIVE_MAX_REQUESTS` requests: when it finishes its
  optimum is the bound;
* the InferMax fill model (``formulations/infermax.md`` section 11) when the formulation's
  automatic routing picks it (eq. G1's conditions hold and it fits), else
* the InferMax flow model (``formulations/infermax.md`` section 9) when it applies and has
  at most :data:`FLOW_MAX_ARCS` arcs: the solver's dual bound counts only when the
  formulation states that its optimum is global (horizon ``J >= Jmax``), because a
  restricted model's bound is not a bound on the true optimum.

Which model applies and how big it is are the registered formulation's ``applicable`` and
``estimate`` hooks (``optsched.formulations.base.FormulationInfo``); every solve goes through
the one pipeline (:func:`optsched.solving.pipeline.solve`), which the caller hands down in the budget
(:attr:`Budget.exact_solve <optsched.bounds.base.Budget>`): the pipeline imports this package,
so this package does not import it (no upward import). Without it the rung says so.

Any other answer (time out, restriction, model too large) raises :class:`BoundError`
naming the reason, so ``best`` can say what it could not do.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..errors import OptschedError
from ..evaluation import evaluate
from ..formulations.base import FORMULATIONS, SizeHint
from ..policies import simulate
from ..solve_types import BoundUnavailable, SolveOptions, Status
from .base import BoundError, BoundResult, Budget, ExactSolve, register_bound
from .floors import Floors

EXHAUSTIVE_MAX_REQUESTS = 6
FLOW_MAX_ARCS = 45_000
#: most seconds the exhaustive search gets (it either proves fast or not at all)
EXHAUSTIVE_SECONDS = 10.0
#: below this many seconds left an exact model is not started
MIN_SECONDS = 0.5
#: an exact model is sized against 1 / MILP_SAFETY of the time left: a rung is optional,
#: and a solver's limit is not honoured while it loads and presolves (fill model on 400
#: identical requests: 8 s past a 2.3 s limit at load 10), so it must not risk the budget
MILP_SAFETY = 3.0


@dataclass(frozen=True)
class _Outcome:
    """What the rung reads of a solve (small enough to send back from a child process)."""

    status: Status
    objective: float | None
    bound: float | None
    global_bound: float | None
    message: str | None


def _solve(solve: ExactSolve, instance, formulation: str, objective: str, seconds: float,
           params: dict, deadline: float | None = None) -> _Outcome:
    """Solve in ``seconds``; with ``deadline`` (a ``time.perf_counter()`` value) in a forked
    child process that is killed at the deadline: a MILP solver does not honour its limit
    while it loads and presolves (the fill and flow models on 400 identical requests ran 8
    and 16 s past limits of 2.3 and 2.6 s), and a rung must not break the command's budget."""
    if seconds < MIN_SECONDS:
        raise BoundUnavailable(f"exact: {formulation}: {max(0.0, seconds):.2g} s left, not started")
    if deadline is None or not hasattr(os, "fork"):
        return _solve_here(solve, instance, formulation, objective, seconds, params)
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, solve, instance, formulation, objective,
                                             seconds, params), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(max(0.0, deadline - time.perf_counter())):
            raise BoundUnavailable(f"exact: {formulation}: stopped at the time limit")
        out = receive.recv()
    except EOFError:
        raise BoundUnavailable(f"exact: {formulation}: the solve ended without an answer") from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
    if isinstance(out, str):
        raise BoundUnavailable(out)
    return out


def _child(send, solve, instance, formulation, objective, seconds, params) -> None:
    """The forked solve: sends an :class:`_Outcome`, or the BoundError's text."""
    try:
        send.send(_solve_here(solve, instance, formulation, objective, seconds, params))
    except BoundError as e:
        send.send(str(e))
    finally:
        send.close()


def _solve_here(solve: ExactSolve, instance, formulation: str, objective: str, seconds: float,
                params: dict) -> _Outcome:
    opts = SolveOptions(time_limit=seconds, progress=False, params=params)
    try:
        rep = solve(instance, formulation, objective, options=opts, warm_start="auto")
    except OptschedError as e:
        raise BoundUnavailable(f"exact: {formulation}: {e}") from None
    return _Outcome(rep.status, rep.objective, rep.bound, rep.global_bound, rep.message)


@register_bound("exact", "the exhaustive search or the InferMax fill/flow MILP when they fit the "
                "budget and prove a global bound (B8)", rank=200)
def exact_bound(instance, objective: str, budget: Budget) -> BoundResult:
    """The rung (module docstring), solved by ``budget.exact_solve``."""
    solve = budget.exact_solve
    if solve is None:
        raise BoundError("exact: no solve was handed down (optsched.lower_bound and `optsched "
                         "bound` pass the pipeline's; optsched.bounds.lower_bound takes "
                         "exact_solve=optsched.solving.pipeline.solve)")
    left = budget.left()
    if left < MIN_SECONDS:
        raise BoundUnavailable(f"exact: {left:.2g} s left, not started")
    if instance.n <= EXHAUSTIVE_MAX_REQUESTS:
        rep = _solve(solve, instance, "exhaustive", objective, min(left / 2, EXHAUSTIVE_SECONDS),
                     {"max_states": 300_000})
        if rep.status == Status.OPTIMAL and rep.objective is not None:
            return BoundResult(rep.objective, "exact", objective,
                               notes=("exhaustive search: optimum",))
        reason = f"exhaustive search stopped ({rep.status}: {rep.message or 'no proof'})"
    else:
        reason = f"{instance.n} requests > {EXHAUSTIVE_MAX_REQUESTS} for the exhaustive search"
    return _infermax_bound(solve, instance, objective, budget, reason)


def _infermax_bound(solve: ExactSolve, instance, objective: str, budget: Budget,
                    reason: str) -> BoundResult:
    """The fill model when InferMax's automatic routing picks it, else the flow model when
    it applies and fits :data:`FLOW_MAX_ARCS` (asked of the formulation's hooks)."""
    info = FORMULATIONS.get("infermax")
    J_least = int(Floors.of(instance).own_batches.max())  # any schedule needs this many batches
    hint = SizeHint(J_least)
    auto = info.estimate(instance, objective, _variant("auto"), hint)
    if auto is not None and auto.variant == "fill":
        rep = _solve(solve, instance, "infermax", objective, budget.left() / MILP_SAFETY,
                     {"variant": "fill"}, _end(budget))
        if rep.global_bound is not None:
            return BoundResult(rep.global_bound, "exact", objective,
                               notes=(f"infermax fill model: {rep.status}, bound {rep.bound:.6g}",))
        reason += f"; fill model gave no global bound ({rep.status})"
    why = info.applicable(instance, objective, _variant("flow"))
    if why is not None:
        raise BoundUnavailable(f"exact: {reason}; flow model: {why}")
    size = _flow_size(instance, objective, J_least)
    if size > FLOW_MAX_ARCS:
        raise BoundUnavailable(f"exact: {reason}; flow model would have over {size:,} arcs "
                         f"(> {FLOW_MAX_ARCS:,}) even with J = {J_least}")
    J = _flow_horizon(instance, budget)
    size = _flow_size(instance, objective, J)
    if size > FLOW_MAX_ARCS:
        raise BoundUnavailable(f"exact: {reason}; flow model would have ~{size:,} arcs "
                         f"(> {FLOW_MAX_ARCS:,}) with J = {J}")
    if budget.left() < MIN_SECONDS:
        raise BoundUnavailable(f"exact: {reason}; no time left for the flow model")
    rep = _solve(solve, instance, "infermax", objective, budget.left() / MILP_SAFETY,
                 {"variant": "flow"}, _end(budget))
    if rep.global_bound is None:
        raise BoundUnavailable(f"exact: {reason}; flow model gave no global bound ({rep.status})")
    return BoundResult(rep.global_bound, "exact", objective,
                       notes=(f"infermax flow model: {rep.status}, bound {rep.global_bound:.6g}",))


def _variant(name: str, **params) -> SolveOptions:
    return SolveOptions(params={"variant": name, **params})


def _flow_size(instance, objective: str, J: int) -> int:
    """The flow model's arcs with ``J`` batch slots (the formulation's ``estimate``)."""
    size = FORMULATIONS.get("infermax").estimate(instance, objective, _variant("flow", batches=J),
                                                 SizeHint(J))
    assert size is not None  # infermax always sizes its model
    return size.columns


#: seconds before the command's deadline at which a forked exact solve is stopped
STOP_BEFORE_SECONDS = 0.3


def _end(budget: Budget) -> float | None:
    """When a forked exact solve must have answered (None: no limit, solve in-process)."""
    return None if budget.deadline is None else budget.deadline - STOP_BEFORE_SECONDS


def _flow_horizon(instance, budget: Budget) -> int:
    """Batches of the best quick policy schedule plus the formulation's slack (an estimate
    of ``J`` for sizing only; the formulation computes its own); the policies stop at the
    budget's deadline."""
    best = None
    for name in ("vllm", "sarathi"):
        try:
            s = simulate(instance, name, deadline=budget.deadline)
        except Exception:  # noqa: BLE001 - sizing only (a timeout included)
            continue
        if evaluate(instance, s).feasible:
            best = s.n_batches if best is None else min(best, s.n_batches)
    return (best or int(instance.output.sum() + instance.prompt.sum())) + 2
