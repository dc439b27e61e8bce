"""InferMax flow model, latency objectives (formulations/infermax.md section 11, eqs. F11-F13).

* every random feasible schedule (with arrivals, random linear costs) encodes into a point
  that satisfies every row of the total-latency / mean-TTFT model, priced exactly;
* the first-token reduction (F12): a schedule's first-token prefix is no worse, and the
  completed prefix has exactly the prefix's first-token times;
* optima equal the exhaustive search's (no MILP) on tiny instances, with arrivals;
* the family's mean-TTFT optimum is below every policy.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optsched.evaluation import evaluate
from optsched.formulations import Hypotheses, SolveOptions
from optsched.formulations.infermax import canonical
from optsched.formulations.infermax.flow import FlowModel, applicable, entry_batches
from optsched.formulations.infermax.flow_objectives import (
    complete,
    first_token_instance,
    first_token_prefix,
    rank_form_applies,
    whole_prefills,
    whole_prefills_apply,
)
from optsched.formulations.infermax.horizon import entry_batches_upper_bound
from optsched.instance import Limits
from optsched.policies import simulate
from optsched.solving import solve
from optsched.testing import instances, linear_cost_models, valid_schedules
from optsched.workloads.generators import eviction_family

SET = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SET
@given(st.data(), st.sampled_from(["total-latency", "mean-ttft"]), st.booleans(), st.booleans())
def test_every_feasible_schedule_is_priced_exactly(data, objective, random_cost, per_request):
    """Eq. F11 (offline and online) and, for total latency with arrivals and one class per
    request, F14 with the phase products: the encoded point satisfies every row, and the model
    objective equals the evaluator's."""
    inst = data.draw(instances(max_requests=5, max_prompt=8, max_output=4))
    if random_cost:
        inst = inst.replace(cost_model=data.draw(linear_cost_models()))
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    assert applicable(inst, objective, Hypotheses()) is None
    s = canonical(inst, trace.schedule, dominance=True, symmetry=None, compact=True)
    ev = evaluate(inst, s)
    assert ev.feasible
    fm = FlowModel(inst, entry_batches(s) + data.draw(st.integers(0, 2)), Hypotheses(), None,
                   objective, per_request=per_request)
    assert (fm.rank is not None) == (per_request and rank_form_applies(inst, objective))
    x = fm.encode(s)
    assert fm.model.check(x) == []
    assert fm.objective_seconds(x) == pytest.approx(ev.objective(objective), rel=1e-9, abs=1e-12)
    d = fm.decode(x)
    assert evaluate(inst, d).objective(objective) == pytest.approx(ev.objective(objective),
                                                                   rel=1e-9, abs=1e-12)


def _whole_prefill_case(inst, cost, offline_C):
    """``inst`` made to satisfy eq. F15's conditions: one arrival, ``kpm >= 2 kpq``,
    ``C = P = offline_C >= M``."""
    reqs = tuple(type(r)(r.id, 0.0, r.prompt, r.output) for r in inst.requests)
    lim = inst.limits
    return inst.replace(requests=reqs, cost_model=cost, limits=Limits(
        kv_capacity=lim.kv_capacity, max_batch_tokens=lim.kv_capacity + offline_C,
        block_size=lim.block_size))


@SET
@given(st.data(), st.sampled_from(["total-latency", "mean-ttft"]), st.booleans(),
       st.booleans())
def test_rank_form_prices_every_reduced_schedule_exactly(data, objective, random_cost, whole):
    """Eq. F14 (one class per request, ranks) and F15 (whole prefills): every schedule of an
    instance with ``O = 1`` encodes into a point that satisfies every row, priced exactly,
    after relabelling identical requests into rank order; F15's transformation of a schedule
    is feasible and no worse."""
    inst = data.draw(instances(max_requests=5, max_prompt=8, max_output=4))
    cost = data.draw(linear_cost_models()) if random_cost else inst.cost_model
    if whole:
        if random_cost:
            cost = dataclasses.replace(cost, kpm=max(cost.kpm, 2 * cost.kpq))
        inst = _whole_prefill_case(inst, cost, data.draw(st.integers(0, 4)))
    else:
        inst = inst.replace(cost_model=cost)
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    reduced = first_token_instance(inst)
    s = canonical(reduced, first_token_prefix(inst, trace.schedule), dominance=True,
                  symmetry=None, compact=True)
    v = evaluate(reduced, s).objective(objective)
    if whole:
        assert whole_prefills_apply(reduced, objective)
        s = whole_prefills(reduced, s)
        ev_w = evaluate(reduced, s)
        assert ev_w.feasible, ev_w.violations[:3]
        assert ev_w.objective(objective) <= v * (1 + 1e-12) + 1e-12
        v = ev_w.objective(objective)
    fm = FlowModel(reduced, entry_batches(s) + data.draw(st.integers(0, 2)), Hypotheses(), None,
                   objective, per_request=True, whole_prefills=whole)
    assert fm.rank is not None
    x = fm.encode(s)
    assert fm.model.check(x) == []
    assert fm.objective_seconds(x) == pytest.approx(v, rel=1e-9, abs=1e-12)
    assert evaluate(reduced, fm.decode(x)).objective(objective) == pytest.approx(v, rel=1e-9,
                                                                                 abs=1e-12)


@SET
@given(st.data(), st.booleans())
def test_first_token_prefix_is_no_worse_and_completion_keeps_it(data, random_cost):
    """Eq. F12's two halves on random schedules (with arrivals): the prefix (a schedule of the
    reduced instance) has first tokens no later than the schedule's, and its completion is a
    feasible schedule of the instance with exactly the prefix's first-token times."""
    inst = data.draw(instances(max_requests=5, max_prompt=8, max_output=4))
    if random_cost:
        inst = inst.replace(cost_model=data.draw(linear_cost_models()))
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    ev = evaluate(inst, trace.schedule)
    reduced = first_token_instance(inst)
    prefix = first_token_prefix(inst, trace.schedule)
    ev_p = evaluate(reduced, prefix)
    assert ev_p.feasible, ev_p.violations[:3]
    assert (ev_p.first_token <= ev.first_token + 1e-9 * (1 + ev.first_token)).all()
    full = complete(inst, prefix)
    ev_f = evaluate(inst, full)
    assert ev_f.feasible, ev_f.violations[:3]
    assert ev_f.first_token == pytest.approx(ev_p.first_token, rel=1e-12, abs=1e-12)
    assert ev_f.objective("mean-ttft") == pytest.approx(ev_p.objective("mean-ttft"), rel=1e-12)
    # the prefix of the completion is the prefix again (what the model re-encodes)
    assert evaluate(reduced, first_token_prefix(inst, full)).objective("mean-ttft") == \
        pytest.approx(ev_p.objective("mean-ttft"), rel=1e-12)


@SET
@given(st.data(), st.sampled_from(["total-latency", "mean-ttft"]), st.booleans())
def test_batch_bound_holds_for_every_schedule(data, objective, no_evictions):
    """Eq. F13: a schedule with objective v has at most ``entry_batches_upper_bound(v)`` batches
    with entries (up to its last first token for mean TTFT)."""
    inst = data.draw(instances(max_requests=5, max_prompt=8, max_output=4))
    inst = inst.replace(cost_model=data.draw(linear_cost_models()))
    trace = data.draw(valid_schedules(inst, evict_prob=0.0 if no_evictions else 0.15))
    assume(len(trace.completion_batch) == inst.n)
    s = trace.schedule
    # the bound without evictions covers only schedules without evictions; evict_prob=0 still
    # evicts when the drawn schedule would otherwise deadlock on memory
    assume(not no_evictions or not any(b.evict for b in s))
    if objective == "mean-ttft" and not no_evictions:  # bounded on the reduced instance
        inst, s = first_token_instance(inst), first_token_prefix(inst, s)
    v = evaluate(inst, s).objective(objective)
    jmax = entry_batches_upper_bound(inst, objective, v, no_evictions)
    assert jmax is not None
    assert entry_batches(s) <= jmax


def _solve(inst, formulation, objective, hyp=None, **params):
    return solve(inst, formulation, objective, hypotheses=hyp,
                 options=SolveOptions(time_limit=20, progress=False, params=params))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["total-latency", "mean-ttft", "mean-ttft-ef"]), st.data(), st.booleans())
def test_optimum_equals_exhaustive_search(objective, data, random_cost):
    """Online total latency and mean TTFT (via F12; "-ef": the exact form without evictions)
    against the exhaustive search, with arrivals and random linear costs."""
    hyp = Hypotheses(no_evictions=objective.endswith("-ef"))
    objective = objective.removesuffix("-ef")
    inst = data.draw(instances(max_requests=3, max_prompt=4, max_output=3))
    if random_cost:
        inst = inst.replace(cost_model=data.draw(linear_cost_models()))
    ex = _solve(inst, "exhaustive", objective, hyp, max_states=200_000)
    assume(ex.status == "optimal")
    fl = _solve(inst, "infermax", objective, hyp, variant="flow")
    # restricted-optimal: proven among schedules of at most J batches (J not certified)
    assert fl.status in ("optimal", "restricted-optimal", "feasible"), (fl.status, fl.message,
                                                                        fl.notes)
    assert fl.bound is None or fl.bound <= fl.objective * (1 + 1e-9)
    assert fl.objective >= ex.objective * (1 - 1e-7)
    if fl.restricted:  # J not certified: optimal among schedules of at most J batches only
        assert fl.global_bound is None
        return
    if fl.status == "feasible":  # out of time under load: the bound must still be valid
        assert fl.bound is None or fl.bound <= ex.objective * (1 + 1e-7)
        return
    assert fl.objective == pytest.approx(ex.objective, rel=1e-7)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["total-latency", "mean-ttft"]))
def test_whole_prefill_optimum_equals_exhaustive_search(data, objective):
    """Eq. F15 does not cut the optimum: mean TTFT (reduced, whole prefills) and total latency
    of ``O = 1`` instances under its conditions, against the exhaustive search (which chunks)."""
    inst = data.draw(instances(max_requests=3, max_prompt=4, max_output=3))
    cost = data.draw(linear_cost_models())
    inst = _whole_prefill_case(inst, dataclasses.replace(cost, kpm=max(cost.kpm, 2 * cost.kpq)),
                               data.draw(st.integers(0, 3)))
    if objective == "total-latency":
        inst = first_token_instance(inst)
    ex = _solve(inst, "exhaustive", objective, max_states=200_000)
    assume(ex.status == "optimal")
    fl = _solve(inst, "infermax", objective, variant="flow")
    assert any("eq. F15" in n for n in fl.notes)
    assert fl.status == "optimal", (fl.status, fl.message, fl.notes)
    assert not fl.restricted
    assert fl.objective == pytest.approx(ex.objective, rel=1e-7)


@pytest.mark.parametrize("I", [1, 2, 8])
def test_family_mean_ttft_is_below_every_policy(I):
    inst = eviction_family(I)
    r = _solve(inst, "infermax", "mean-ttft")
    assert r.status == "optimal"
    assert any("first-token reduction" in n for n in r.notes)
    for p in ("vllm", "sarathi", "vllm-ef", "infermax", "fcfs"):
        assert r.objective <= evaluate(inst, simulate(inst, p)).objective("mean-ttft") * (1 + 1e-9)
    if I <= 2:  # the exhaustive search proves these
        ex = _solve(inst, "exhaustive", "mean-ttft", max_states=400_000)
        assert ex.status == "optimal"
        assert r.objective == pytest.approx(ex.objective, rel=1e-9)
