"""InferMax fill variant (formulations/infermax.md section 11): distinct requests.

Random feasible schedules are merged (eq. G1) -- never worse, still feasible -- encoded and
checked against every row, and priced exactly as the evaluator prices them. Optima are
compared with the exhaustive search (no MILP) on tiny distinct-request instances.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optsched.cost import PRESETS, LinearCost
from optsched.evaluation import evaluate
from optsched.formulations import Hypotheses, SolveOptions
from optsched.formulations.infermax.fill import (
    FillModel,
    applicable,
    merge_prefills,
)
from optsched.formulations.infermax.flow import entry_batches
from optsched.instance import Limits
from optsched.solving import solve
from optsched.testing import instances, valid_schedules
from optsched.workloads.generators import infermax_mix

SET = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def fill_costs(draw):
    """Random linear cost models the fill model is exact for: ``kpm >= 2 kpq`` (eq. G1)."""
    kpq = draw(st.one_of(st.just(0.0), st.floats(1e-5, 1e-2)))
    kpm = draw(st.one_of(st.just(2 * kpq), st.floats(2.0, 10.0).map(lambda r: r * kpq),
                         st.floats(1e-5, 3e-2).map(lambda v: 2 * kpq + v)))
    small = st.one_of(st.just(0.0), st.floats(1e-4, 1e-1))
    return LinearCost(k0=draw(st.floats(0.01, 1.0)), k1=draw(small), kpq=kpq, kpm=kpm,
                      kpl=draw(small), kpr=draw(small), kdm=draw(small), kdr=draw(small),
                      kpb=draw(small), kdb=draw(small))


@st.composite
def fill_instances(draw, max_requests=5, max_prompt=8, max_output=4, random_cost=True):
    """Offline instances with ``M <= C`` (so eq. G1 applies), unit, preset-like or random cost."""
    inst = draw(instances(max_requests=max_requests, max_prompt=max_prompt,
                          max_output=max_output, online=False))
    lim = inst.limits
    C = draw(st.integers(lim.kv_capacity, 2 * lim.kv_capacity))
    inst = inst.replace(limits=replace(lim, max_batch_tokens=C))
    if random_cost and draw(st.booleans()):
        inst = inst.replace(cost_model=draw(fill_costs()))
    return inst


@SET
@given(st.data(), st.sampled_from(["makespan", "total-latency"]))
def test_merged_schedules_are_no_worse_encode_and_satisfy_every_row(data, objective):
    inst = data.draw(fill_instances())
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    assert applicable(inst, objective, Hypotheses()) is None
    ev = evaluate(inst, trace.schedule)
    assert ev.feasible
    merged = merge_prefills(inst, trace.schedule)
    ev_m = evaluate(inst, merged)
    # eq. G1: merging keeps feasibility and never raises the objective
    assert ev_m.feasible, ev_m.violations[:2]
    assert ev_m.objective(objective) <= ev.objective(objective) * (1 + 1e-12) + 1e-12
    fm = FillModel(inst, entry_batches(merged) + data.draw(st.integers(0, 2)), Hypotheses(),
                   None, objective)
    x = fm.encode(trace.schedule)
    assert fm.model.check(x) == []
    assert fm.objective_seconds(x) == pytest.approx(ev_m.objective(objective), rel=1e-9)
    # decode(encode(s)) replays to a feasible schedule priced the same
    d = fm.decode(x)
    ev_d = evaluate(inst, d)
    assert ev_d.feasible
    assert ev_d.objective(objective) == pytest.approx(ev_m.objective(objective), rel=1e-9)


def _solve(inst, formulation, objective="makespan", **params):
    return solve(inst, formulation, objective,
                 options=SolveOptions(time_limit=30, progress=False, params=params))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["makespan", "total-latency"]), st.data())
def test_fill_optimum_equals_exhaustive_search(objective, data):
    inst = data.draw(fill_instances(max_requests=3, max_prompt=4, max_output=3))
    ex = _solve(inst, "exhaustive", objective, max_states=200_000)
    assume(ex.status == "optimal")
    fi = _solve(inst, "infermax", objective, variant="fill")
    assert fi.status in ("optimal", "restricted-optimal", "feasible"), (fi.status, fi.message, fi.notes)
    assert any("variant fill" in n for n in fi.notes)
    assert fi.bound is None or fi.bound <= fi.objective * (1 + 1e-9)
    # any schedule the fill model returns is one of the search's candidates
    assert fi.objective >= ex.objective * (1 - 1e-7)
    if fi.restricted:  # the horizon J is not certified: optimal among J batches only
        assert fi.global_bound is None
        return
    if fi.status == "feasible":  # out of time under load: the bound must still be valid
        assert fi.bound is None or fi.bound <= ex.objective * (1 + 1e-7)
        return
    assert fi.objective == pytest.approx(ex.objective, rel=1e-7)


@pytest.mark.parametrize("objective", ["makespan", "total-latency"])
def test_small_mix_matches_exhaustive_search_and_auto_routes_to_fill(objective):
    # three distinct requests from the SISO sizes, scaled down so the search can prove them
    inst = infermax_mix("SISO", 3, seed=1, limits=Limits(64, 64),
                        cost_model=PRESETS["infermax-llama2-7b-a100"])
    small = tuple(replace(r, prompt=r.prompt // 4, output=r.output // 4) for r in inst.requests)
    # M = the two largest peaks: memory binds (not all three fit), every request fits alone
    peaks = sorted(r.prompt + r.output - 1 for r in small)
    inst = inst.replace(requests=small, limits=Limits(peaks[-1] + peaks[-2], 64))
    auto = _solve(inst, "infermax", objective)
    ex = _solve(inst, "exhaustive", objective, max_states=400_000)
    assert any("variant fill" in n for n in auto.notes)
    assert auto.status == ex.status == "optimal"
    assert auto.objective == pytest.approx(ex.objective, rel=1e-9)


def test_fill_refuses_what_it_cannot_model():
    inst = infermax_mix("SISO", 3, seed=1, limits=Limits(64, 4096))
    assert applicable(inst, "makespan", Hypotheses()) is None
    assert applicable(inst, "mean-ttft", Hypotheses()) is not None
    big_m = inst.replace(limits=Limits(64, 32))  # M > C: merging could overflow a batch
    assert "M <= min(C, P)" in applicable(big_m, "makespan", Hypotheses())
    low_kpm = inst.replace(cost_model=replace(PRESETS["infermax-llama2-7b-a100"], kpm=1e-9,
                                                 preset=None))
    assert "kpm >= 2 kpq" in applicable(low_kpm, "makespan", Hypotheses())
    online = inst.replace(requests=(inst.requests[0], replace(inst.requests[1], arrival=1.0),
                                    inst.requests[2]))
    assert "arrive" in applicable(online, "makespan", Hypotheses())
    # a common arrival after 0 shifts the makespan, which the model (clock from 0) omits
    late = inst.replace(requests=tuple(replace(r, arrival=2.0) for r in inst.requests))
    assert "arrive" in applicable(late, "makespan", Hypotheses())
    assert applicable(inst, "makespan", Hypotheses(order=(("r0", "r1"),))) is not None
    # auto takes the Big-M / flow path where fill does not apply, and fill refuses loudly
    r = solve(big_m, "infermax", "makespan", options=SolveOptions(time_limit=5, progress=False))
    assert not any("variant fill" in n for n in r.notes)
    with pytest.raises(Exception, match="M <= min"):
        _solve(big_m, "infermax", variant="fill")
