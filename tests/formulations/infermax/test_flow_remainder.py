"""Flow model for ``0 <= kpm < 2 kpq`` (formulations/infermax.md F2c).

Continuing chunks run on a chain priced with ``kpq' = kpm/2`` plus the remainder
``delta c^2`` bounded per (batch, class, level) from the chunk count and token sum. Random
feasible schedules encode into points that satisfy every row at their exact price; the
smallest remainder the rows allow is at or below the exact one, and equal to it when the
chunks of a (batch, level) have one size; the optimum equals the exhaustive search's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optsched.cost import LinearCost
from optsched.evaluation import evaluate
from optsched.formulations import SolveOptions
from optsched.formulations.base import Hypotheses
from optsched.formulations.infermax import canonical
from optsched.formulations.infermax.flow import (
    FlowModel,
    entry_batches,
    split_remainder,
)
from optsched.instance import Limits
from optsched.policies import simulate
from optsched.solving import solve
from optsched.testing import instances, valid_schedules
from optsched.workloads.generators import infermax_fixed


@st.composite
def split_costs(draw):
    """Random linear cost models with ``0 <= kpm < 2 kpq`` (kpm = 0 included)."""
    kpq = draw(st.floats(1e-4, 1e-1))
    kpm = draw(st.one_of(st.just(0.0), st.floats(0.01, 0.99).map(lambda r: 2 * r * kpq)))
    small = st.one_of(st.just(0.0), st.floats(1e-4, 1e-1))
    return LinearCost(k0=draw(st.floats(0.01, 1.0)), k1=draw(small), kpq=kpq, kpm=kpm,
                      kpl=draw(small), kpr=draw(small), kdm=draw(small), kdr=draw(small),
                      kpb=draw(small), kdb=draw(small))


def test_split_applies_exactly_below_twice_kpq():
    base = dict(k0=1e-3, k1=1e-5, kpl=0.0, kpr=0.0, kdm=0.0, kdr=0.0, kpb=0.0, kdb=0.0)
    assert split_remainder(LinearCost(kpq=1.0, kpm=1.5, **base)) == pytest.approx(0.25)
    assert split_remainder(LinearCost(kpq=1.0, kpm=0.0, **base)) == pytest.approx(1.0)
    assert split_remainder(LinearCost(kpq=1.0, kpm=2.0, **base)) is None  # telescopes (F2)
    assert split_remainder(LinearCost(kpq=1.0, kpm=2.5, **base)) is None  # concave: F2b
    assert split_remainder(LinearCost(kpq=0.0, kpm=1.0, **base)) is None  # kpq = 0: F2b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["makespan", "total-latency", "mean-ttft"]))
def test_rows_hold_at_the_exact_price_and_the_cheapest_remainder_is_a_bound(data, objective):
    inst = data.draw(instances(max_requests=5, max_prompt=8, max_output=4))  # with arrivals too
    inst = inst.replace(cost_model=data.draw(split_costs()))
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    s = canonical(inst, trace.schedule, dominance=True, symmetry=None, compact=True)
    ev = evaluate(inst, s)
    fm = FlowModel(inst, entry_batches(s) + data.draw(st.integers(0, 2)), Hypotheses(), None,
                   objective)
    assert fm.rem is not None
    x = fm.encode(s)
    assert fm.model.check(x) == []
    assert fm.objective_seconds(x) == pytest.approx(ev.objective(objective), rel=1e-9, abs=1e-12)
    for ci, c in enumerate(fm.classes):  # the cheapest r the secant rows allow, per (j, g)
        r = fm.model.value(fm.rem.r[ci], x)
        sv = fm.model.value(fm.rem.s[ci], x)
        nv = fm.model.value(fm.rem.n[ci], x)
        for g in range(c.O):
            lam = np.arange(0, max(c.I + g - 1, 1))
            low = np.max((2 * lam[None, :] + 1) * sv[:, g, None]
                         - (lam * (lam + 1))[None, :] * nv[:, g, None], axis=1)
            low = np.maximum(low, 0.0)
            assert (low <= r[:, g] + 1e-9).all()
            one = nv[:, g] <= 1  # a single chunk c <= S - 1 is priced exactly: c^2
            assert low[one] == pytest.approx(r[one, g], abs=1e-9)
    d = fm.decode(x)
    ev_d = evaluate(inst, d)
    assert ev_d.feasible
    assert ev_d.objective(objective) == pytest.approx(ev.objective(objective), rel=1e-9,
                                                      abs=1e-12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_optimum_equals_exhaustive_search(data):
    inst = data.draw(instances(max_requests=3, max_prompt=5, max_output=3, online=False))
    inst = inst.replace(cost_model=data.draw(split_costs()))
    ex = solve(inst, "exhaustive", "makespan",
               options=SolveOptions(time_limit=60, progress=False,
                                    params={"max_states": 200_000}))
    assume(ex.status == "optimal")
    fl = solve(inst, "infermax", "makespan",
               options=SolveOptions(time_limit=20, progress=False, params={"variant": "flow"}))
    # restricted-optimal: proven among schedules of at most J batches (the horizon restriction)
    assert fl.status in ("optimal", "restricted-optimal", "feasible"), (fl.status, fl.message)
    assert fl.objective >= ex.objective * (1 - 1e-7)  # a decoded, replayed schedule
    if fl.restricted:  # optimal among schedules of at most J batches only: no global bound
        assert fl.global_bound is None
        return
    assert fl.bound is None or fl.bound <= ex.objective * (1 + 1e-7)
    if fl.status == "optimal":
        assert fl.objective == pytest.approx(ex.objective, rel=1e-7)


def _fitted_like() -> LinearCost:
    """The shape of ``optsched fit`` on the shipped profiling data (Llama-2-7B, A100):
    ``kpm = 0.88 kpq`` (< 2 kpq), ``kpr = 0``, ``k0`` dominant; rounded coefficients."""
    return LinearCost(k0=6.5e-3, k1=6.1e-5, kpq=5.3e-9, kpm=4.7e-9, kpl=2.2e-7, kpr=0.0,
                      kdm=2.8e-7, kdr=3.2e-5, kpb=5.5e-4, kdb=2.6e-4)


@pytest.mark.parametrize("I", [1, 2])
def test_eviction_family_fitted_like_cost_matches_exhaustive_and_beats_policies(I):
    inst = infermax_fixed(4, I, 4, limits=Limits(max(2 * I, I + 3), 4096),
                          cost_model=_fitted_like())
    fl = solve(inst, "infermax", "makespan",
               options=SolveOptions(time_limit=60, progress=False, params={"variant": "flow"}))
    assert fl.status == "optimal"
    assert any("flow" in n for n in fl.notes)
    ex = solve(inst, "exhaustive", "makespan",
               options=SolveOptions(time_limit=60, progress=False,
                                    params={"max_states": 400_000}))
    assert ex.status == "optimal", ex.message
    assert fl.objective == pytest.approx(ex.objective, rel=1e-9)
    for p in ("vllm", "sarathi", "vllm-ef", "infermax"):
        assert fl.objective <= evaluate(inst, simulate(inst, p)).objective("makespan") * (1 + 1e-9)
