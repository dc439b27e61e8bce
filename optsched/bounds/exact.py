"""Bound ``exact``: the existing exact models, when they fit the budget (``bounds.md`` B8).

* ``exhaustive`` (A* over all schedule states, :mod:`optsched.oracles.exhaustive`) on
  instances of at most :data:`EXHAUSTIVE_MAX_REQUESTS` requests: when it finishes its
  optimum is the bound;
* the InferMax fill model (``formulations/infermax.md`` section 11) when eq. G1's conditions
  hold and it fits ``solve.fill_fits``, else
* the InferMax flow model (``formulations/infermax.md`` section 9) when it applies and has
  at most :data:`FLOW_MAX_ARCS` arcs: the solver's dual bound counts only when the
  formulation states that its optimum is global (horizon ``J >= Jmax``), because a
  restricted model's bound is not a bound on the true optimum.

Any other answer (time out, restriction, model too large) raises :class:`BoundError`
naming the reason, so ``best`` can say what it could not do.
"""

from __future__ import annotations

from .base import BoundError, BoundResult, Budget, register_bound

EXHAUSTIVE_MAX_REQUESTS = 6
FLOW_MAX_ARCS = 45_000
#: most seconds the exhaustive search gets (it either proves fast or not at all)
EXHAUSTIVE_SECONDS = 10.0
#: below this many seconds left an exact model is not started
MIN_SECONDS = 0.5


def _solve(instance, formulation: str, objective: str, seconds: float, params: dict):
    from ..errors import OptschedError
    from ..formulations import SolveOptions, solve

    if seconds < MIN_SECONDS:
        raise BoundError(f"exact: {formulation}: {max(0.0, seconds):.2g} s left, not started")
    opts = SolveOptions(time_limit=seconds, progress=False, params=params)
    try:
        return solve(instance, formulation, objective, options=opts, warm_start="auto")
    except OptschedError as e:
        raise BoundError(f"exact: {formulation}: {e}") from None


@register_bound("exact", "the exhaustive search or the InferMax fill/flow MILP when they fit the "
                "budget and prove a global bound (B8)", rung=10)
def exact_bound(instance, objective: str, budget: Budget) -> BoundResult:
    left = budget.left()
    if left < MIN_SECONDS:
        raise BoundError(f"exact: {left:.2g} s left, not started")
    if instance.n <= EXHAUSTIVE_MAX_REQUESTS:
        rep = _solve(instance, "exhaustive", objective, min(left / 2, EXHAUSTIVE_SECONDS),
                     {"max_states": 300_000})
        if rep.status == "optimal" and rep.objective is not None:
            return BoundResult(rep.objective, "exact", objective,
                               notes=("exhaustive search: optimum",))
        reason = f"exhaustive search stopped ({rep.status}: {rep.message or 'no proof'})"
    else:
        reason = f"{instance.n} requests > {EXHAUSTIVE_MAX_REQUESTS} for the exhaustive search"
    from ..formulations import Hypotheses
    from ..formulations.infermax import fill
    from ..formulations.infermax import flow as infermax_flow
    from ..formulations.infermax.solve import fill_fits

    if fill.applicable(instance, objective, Hypotheses()) is None and fill_fits(instance):
        rep = _solve(instance, "infermax", objective, budget.left(), {"variant": "fill"})
        if rep.global_bound is not None:
            return BoundResult(rep.bound, "exact", objective,
                               notes=(f"infermax fill model: {rep.status}, bound {rep.bound:.6g}",))
        reason += f"; fill model gave no global bound ({rep.status})"
    why = infermax_flow.applicable(instance, objective, Hypotheses())
    if why is not None:
        raise BoundError(f"exact: {reason}; flow model: {why}")
    from .floors import Floors

    J_least = int(Floors.of(instance).own_batches.max())  # any schedule needs this many batches
    size = infermax_flow.size_estimate(instance, J_least)
    if size > FLOW_MAX_ARCS:
        raise BoundError(f"exact: {reason}; flow model would have over {size:,} arcs "
                         f"(> {FLOW_MAX_ARCS:,}) even with J = {J_least}")
    J = _flow_horizon(instance, budget)
    size = infermax_flow.size_estimate(instance, J)
    if size > FLOW_MAX_ARCS:
        raise BoundError(f"exact: {reason}; flow model would have ~{size:,} arcs "
                         f"(> {FLOW_MAX_ARCS:,}) with J = {J}")
    if budget.left() < MIN_SECONDS:
        raise BoundError(f"exact: {reason}; no time left for the flow model")
    rep = _solve(instance, "infermax", objective, budget.left(), {"variant": "flow"})
    if rep.global_bound is None:
        raise BoundError(f"exact: {reason}; flow model gave no global bound ({rep.status})")
    return BoundResult(rep.bound, "exact", objective,
                       notes=(f"infermax flow model: {rep.status}, bound {rep.bound:.6g}",))


def _flow_horizon(instance, budget: Budget) -> int:
    """Batches of the best quick policy schedule plus the formulation's slack (an estimate
    of ``J`` for sizing only; the formulation computes its own); the policies stop at the
    budget's deadline."""
    from ..evaluate import evaluate
    from ..policies import simulate

    best = None
    for name in ("vllm", "sarathi"):
        try:
            s = simulate(instance, name, deadline=budget.deadline)
        except Exception:  # noqa: BLE001 - sizing only (a timeout included)
            continue
        if evaluate(instance, s).feasible:
            best = s.n_batches if best is None else min(best, s.n_batches)
    return (best or int(instance.output.sum() + instance.prompt.sum())) + 2
