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
from ..base import FormulationError


def _cost_coefs(cost) -> dict[str, float]:
    if isinstance(cost, UnitCost):
        return {"k0": 1.0}
    if isinstance(cost, LinearCost):
        return cost.coefficients
    raise FormulationError(f"infermax: unsupported cost model {type(cost).__name__}")



def request_work_lower_bound(inst: Instance) -> np.ndarray:
    """Per request, a lower bound on the summed entry costs in ANY feasible schedule (eq. 21)."""
    k = _cost_coefs(inst.cost_model)
    g = lambda name: k.get(name, 0.0)  # noqa: E731
    if isinstance(inst.cost_model, UnitCost):
        return np.zeros(inst.n)
    I = inst.prompt.astype(float)
    O = inst.output.astype(float)
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


def entry_batches_upper_bound(inst: Instance, objective: str, ub: float | None) -> int | None:
    """Max number of batches with entries in a schedule whose objective is <= ub (sec. 6)."""
    if ub is None or not math.isfinite(ub):
        return None
    ovh = batch_overhead_lower_bound(inst)
    if ovh <= 0:
        return None
    if objective == "makespan":
        busy = ub
    elif objective == "total-latency":
        busy = ub + float(inst.arrival.max(initial=0.0))
    else:
        return None
    work = float(request_work_lower_bound(inst).sum())
    return max(0, int(math.floor((busy - work) / ovh + 1e-9)))


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
