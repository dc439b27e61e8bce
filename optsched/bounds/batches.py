"""Bound ``batches``: how many batches the memory lets the tokens share (``formulations/bounds.md``
B18), for makespan.

Number the batches in which some request generates a token ``1..N`` (its *generating
batches*); ``X`` batches generate nothing. In the batch generating its ``g``-th token a
request holds exactly ``fp(I + g - 1)`` KV after the batch (F3). Between its ``g``-th and
``(g+1)``-th token it is either *held* (never evicted: it holds at least ``fp(I + g - 1)``
after every batch in between) or *dropped* (evicted, or swapped out: then it recomputes the
``S = I + g`` tokens, at least ``ref_g`` instead of ``min(dec_g, ref_g)``, eq. B2; with a host
for swaps the drop is priced 0). Its first prefill's last pass has ``k`` chunks in ``k``
distinct batches up to its first generating batch, so ``k <= b_1 + X`` and the pass costs at
least ``P(k)`` (eq. B1). Each batch costs at least ``k0 + min(kpb, kdb)``. So

    makespan >= h (N + X) + sum_i P_i(min(b_i1 + X, I_i)) + sum_i steps_i + sum dropped extras

minimised over slot assignments whose held and generating memory fits ``M`` in every slot
(and at most ``max_entries`` generating entries a slot): a small CP-SAT model whose proven
objective bound (not only its optimum) is a bound. The coefficients are rounded down to
integers, so the scaled model's bound is below the real one. Arrivals are dropped (a
relaxation). Declines instances with more than :data:`MAX_EVENTS` generating events; stops after
:data:`MAX_WORK` (deterministic seconds).
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np

from ..solve_types import BoundError
from .base import BoundResult, Budget, register_bound
from .floors import Floors

#: the most generating events (sum of O) the model is built for; beyond, the rung declines
MAX_EVENTS = 160
#: the most work the model may take, in CP-SAT's deterministic time (about seconds on an idle
#: core, the same on a loaded one; it stops with its proven bound so far): the rung pays off
#: on a handful of requests with a large fixed batch time, and ``best`` climbs it on every
#: instance it accepts. The k0-dominated eviction family of ``instances/regressions`` is
#: solved in 0.2
MAX_WORK = 1.0
#: the scaled objective's magnitude (integer coefficients for CP-SAT)
SCALE_TARGET = 1e12


def prefill_table(f: Floors, i: int) -> np.ndarray:
    """``P_i(k)`` for ``k = 1..I_i`` (index ``k - 1``): the least entry cost of a pass over
    ``i``'s prompt in at most ``k`` chunks (and at least ``kmin``), eq. B1: ``k1 I + kpm I^2/2
    + min_k' (k' kpr + a Q)`` with ``Q >= I^2 / k'`` (``a = kpq - kpm/2 > 0``) or ``Q`` at its
    largest (``a <= 0``). Nonincreasing; constant from ``k = I`` on (a chunk has >= 1 token)."""
    k = f.k
    I = int(f.instance.prompt[i])
    kmin = int(f.kmin[i])
    a = k["kpq"] - k["kpm"] / 2
    base = k["k1"] * I + k["kpm"] * I * I / 2
    kk = np.arange(1, I + 1, dtype=np.float64)
    if a <= 0:
        v = np.full(I, kmin * k["kpr"] + a * I * min(I, f.prefill_cap))
    else:
        raw = kk * k["kpr"] + a * I * I / kk
        raw[: kmin - 1] = np.inf  # fewer than kmin chunks is impossible
        v = np.minimum.accumulate(raw)
        v[: kmin - 1] = v[kmin - 1]  # a slot bound below kmin still has kmin chunks: price so
    return base + v


def drop_extras(f: Floors, i: int) -> np.ndarray:
    """Per gap ``g = 1..O-1``: what a dropped gap adds to the step floor, ``ref_g - min(dec_g,
    ref_g)`` (eq. B2), or 0 when swaps are allowed (a swapped request recomputes nothing)."""
    inst, k = f.instance, f.k
    O = int(inst.output[i])
    if O <= 1 or inst.limits.swapping:
        return np.zeros(max(O - 1, 0))
    S = int(inst.prompt[i]) + np.arange(1, O, dtype=np.float64)
    dec = (k["k1"] + k["kdr"] - k["kdm"]) + k["kdm"] * S
    ref = k["kpr"] + k["k1"] * S + f._quad_floor(S)
    return np.maximum(ref - np.minimum(dec, ref), 0.0)


def _scale(top: float) -> float:
    """Integer units per second: the model's largest objective near :data:`SCALE_TARGET`
    (1 when every coefficient is 0 and the bound is 0)."""
    return SCALE_TARGET / top if top > 0 else 1.0


def _model(f: Floors, scale: float):
    """The CP-SAT model of the module docstring; returns (model, objective constant)."""
    from ortools.sat.python import cp_model

    inst = f.instance
    lim = inst.limits
    n = inst.n
    O = inst.output.astype(int)
    H = int(O.sum())
    Imax = int(inst.prompt.max())
    h = f.batch_overhead
    m = cp_model.CpModel()

    def down(x: float) -> int:
        return math.floor(x * scale)

    X = m.new_int_var(0, Imax, "X")
    N = m.new_int_var(int(O.max()), H, "N")
    obj = [down(h) * N, down(h) * X]
    mem_iv, mem_d, gen_iv = [], [], []
    firsts = []
    for i in range(n):
        I = int(inst.prompt[i])
        b = [m.new_int_var(g + 1, H - (O[i] - 1 - g), f"b{i}_{g}") for g in range(O[i])]
        for g in range(O[i] - 1):
            m.add(b[g + 1] >= b[g] + 1)
        extra = drop_extras(f, i)
        for g in range(O[i]):
            fp = int(lim.kv_footprint(I + g))
            gen_iv.append(m.new_fixed_size_interval_var(b[g], 1, f"gen{i}_{g}"))
            if g == O[i] - 1:
                mem_iv.append(gen_iv[-1])
            else:
                d = m.new_bool_var(f"d{i}_{g}")
                end = m.new_int_var(1, H + 1, f"e{i}_{g}")
                m.add(end == b[g] + 1).only_enforce_if(d)
                m.add(end == b[g + 1]).only_enforce_if(d.Not())
                size = m.new_int_var(1, H, f"s{i}_{g}")
                mem_iv.append(m.new_interval_var(b[g], size, end, f"m{i}_{g}"))
                obj.append(down(float(extra[g])) * d)
            mem_d.append(fp)
        m.add(N >= b[-1])
        # the first prefill's chunks: k <= min(b_1 + X, I), priced by the table
        q = m.new_int_var(1, I, f"q{i}")
        m.add_min_equality(q, [b[0] + X, m.new_constant(I)])
        table = [down(float(v)) for v in prefill_table(f, i)]
        cost = m.new_int_var(min(table), max(table), f"p{i}")
        m.add_element(q - 1, table, cost)
        obj.append(cost)
        firsts.append((int(inst.prompt[i]), int(O[i]), b[0]))
    m.add_cumulative(mem_iv, mem_d, int(lim.kv_capacity))
    if f.max_entries < n:
        m.add_cumulative(gen_iv, [1] * len(gen_iv), int(f.max_entries))
    # identical requests (arrivals are dropped) are interchangeable: order their first slots
    for j in range(1, n):
        if firsts[j][:2] == firsts[j - 1][:2]:
            m.add(firsts[j][2] >= firsts[j - 1][2])
    m.minimize(sum(obj))
    return m, float(f.step_entry_cost.sum())


def batches_floor(instance, budget: Budget) -> tuple[float, str]:
    """The relaxation's proven bound (module docstring) and the solver's status name."""
    if importlib.util.find_spec("ortools") is None:  # e.g. the demo's lean environment
        raise BoundError("bound method 'batches' needs CP-SAT (the ortools package), which is "
                         "not installed: the other rungs still answer")
    from ortools.sat.python import cp_model

    f = Floors.of(instance)
    events = int(instance.output.sum())
    if events > MAX_EVENTS:
        raise BoundError(f"bound method 'batches': {events} generating events (sum of output "
                         f"lengths) exceed its limit of {MAX_EVENTS}")
    top = f.batch_overhead * (events + int(instance.prompt.max())) + float(
        sum(prefill_table(f, i)[0] for i in range(instance.n))) + float(
        sum(drop_extras(f, i).sum() for i in range(instance.n)))
    scale = _scale(top)
    model, const = _model(f, scale)
    solver = cp_model.CpSolver()
    left = budget.left()
    solver.parameters.max_time_in_seconds = float(min(left, 3600.0))
    solver.parameters.max_deterministic_time = MAX_WORK
    solver.parameters.num_workers = 1
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:  # every instance has a schedule: a modelling defect
        raise BoundError("bound method 'batches': the relaxation is infeasible (a defect)")
    lb = solver.best_objective_bound if status != cp_model.UNKNOWN else -math.inf
    if not math.isfinite(lb):
        raise BoundError("bound method 'batches': no bound within the time limit")
    return const + lb / scale, solver.status_name(status)


@register_bound("batches", "generating batches that fit the KV together: held or dropped "
                "between tokens, chunks no more than the batches before the first token "
                "(B18), a small CP-SAT model, makespan", objectives=("makespan",), rank=145)
def batches_bound(instance, objective: str, budget: Budget) -> BoundResult:
    v, status = batches_floor(instance, budget)
    return BoundResult(v, "batches", objective, notes=(f"batches: CP-SAT {status.lower()}",))
