"""The InferMax batch horizon ``J`` (``formulations/infermax.md`` sections 4 and 6).

Owns the busy-time argument: per-request and per-batch lower bounds on the work any feasible
schedule does (eq. 21), hence the most batches with entries a schedule within an objective
bound can have (section 6), and the choice of ``J`` from a warm start or the sequential
schedule.
"""

from __future__ import annotations

import math

import numpy as np

from ...cost import LinearCost, UnitCost
from ...instance import Instance
from ...solve_types import Objective
from ..base import FormulationError


def _cost_coefs(cost) -> dict[str, float]:
    if isinstance(cost, UnitCost):
        return {"k0": 1.0}
    if isinstance(cost, LinearCost):
        return cost.coefficients
    raise FormulationError(f"infermax: unsupported cost model {type(cost).__name__}")



def request_work_lower_bound(inst: Instance, first_token: bool = False) -> np.ndarray:
    """Per request, a lower bound on the summed entry costs in ANY feasible schedule (eq. 21);
    with ``first_token``, on those up to its first token (eq. F13: ``O`` read as 1)."""
    k = _cost_coefs(inst.cost_model)
    g = lambda name: k.get(name, 0.0)  # noqa: E731
    if isinstance(inst.cost_model, UnitCost):
        return np.zeros(inst.n)
    I = inst.prompt.astype(float)
    O = np.ones(inst.n) if first_token else inst.output.astype(float)
    # first prefill: sum c = I, sum c*m = (I^2 - sum c^2)/2, sum c^2 in [I, I^2]
    a = g("kpq") - g("kpm") / 2
    sq = np.where(a >= 0, I, I * I)
    quad = a * sq + g("kpm") * I * I / 2
    per_gen_i = np.minimum(g("kdr") + g("kdm") * I, g("kpr"))
    return g("k1") * (I + O - 1) + g("kpr") + quad + (O - 1) * per_gen_i


def batch_overhead_lower_bound(inst: Instance) -> float:
    """Every batch with an entry costs at least this beyond its entries (eq. 21)."""
    if isinstance(inst.cost_model, UnitCost):
        return 1.0
    if not isinstance(inst.cost_model, LinearCost):
        raise FormulationError(f"infermax: unsupported cost model {type(inst.cost_model).__name__}")
    k = inst.cost_model.coefficients
    return k["k0"] + min(k["kpb"], k["kdb"])


def entry_batches_upper_bound(inst: Instance, objective: str, ub: float | None,
                              no_evictions: bool = False) -> int | None:
    """Max number of batches with entries in a schedule whose objective is <= ub (sec. 6;
    total latency also eq. F13; mean TTFT eq. F13 when ``O = 1`` or without evictions)."""
    if ub is None or not math.isfinite(ub):
        return None
    ovh = batch_overhead_lower_bound(inst)
    if ovh <= 0:
        return None
    if objective == Objective.MEAN_TTFT:
        first = first_token_batches_upper_bound(inst, ub)
        if first is None or not (no_evictions or bool((inst.output == 1).all())):
            return None
        # without evictions every later entry is a 1-token decode (the request stays caught up)
        return first + int((inst.output - 1).sum())
    if objective == Objective.MAKESPAN:
        busy = ub
    elif objective == Objective.TOTAL_LATENCY:
        busy = ub + float(inst.arrival.max(initial=0.0))
    else:
        return None
    work = float(request_work_lower_bound(inst).sum())
    jmax = max(0, int(math.floor((busy - work) / ovh + 1e-9)))
    if objective == Objective.TOTAL_LATENCY:
        jmax = min(jmax, _weighted_batches(inst, ub + float(inst.arrival.sum()), work, ovh))
    return jmax


def _weighted_batches(inst: Instance, sum_x: float, work: float, ovh: float) -> int:
    """(F13) ``sum_x`` bounds ``sum_j Delta_j u_j`` (the sum of completion or first-token
    times), where ``u_j >= 1`` in every batch with entries up to the last event and ``u_0 = N``;
    with ``Delta_j >= t_j >= ovh + (entry costs)``: ``sum_x >= ovh (b + N - 1) + work``."""
    return max(0, int(math.floor((sum_x - work) / ovh + 1e-9)) - inst.n + 1)


def first_token_batches_upper_bound(inst: Instance, ub: float | None) -> int | None:
    """(F13) Max number of batches with entries up to the last first token in a schedule of
    mean TTFT <= ub: ``N ub + sum_i a_i`` bounds the sum of first-token times."""
    if ub is None or not math.isfinite(ub) or inst.n == 0:
        return None
    ovh = batch_overhead_lower_bound(inst)
    if ovh <= 0:
        return None
    work = float(request_work_lower_bound(inst, first_token=True).sum())
    return _weighted_batches(inst, inst.n * ub + float(inst.arrival.sum()), work, ovh)


def _sequential_batches(inst: Instance) -> int:
    """Batches of the trivially feasible one-request-at-a-time schedule."""
    cap = inst.limits.prefill_budget
    return int(sum(-(-r.prompt // cap) + r.output - 1 for r in inst.requests))


def _horizon(base_J: int, jmax: int | None, J_param, slack: int) -> int:
    """Batch slots J (section 4): the warm start's batches plus ``slack``, raised to the
    proven bound ``jmax`` when that is affordable; ``batches=J`` overrides."""
    if J_param is not None:
        return max(int(J_param), 1)
    J = base_J + slack
    if jmax is not None and base_J <= jmax <= 2 * base_J + 4:
        J = max(J, jmax)
    return max(J, 1)
