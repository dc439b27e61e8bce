"""The formulation contract (optsched/formulations/base.py): a restricted model's optimum is never
taken for the optimum, hypotheses restrict, and what a model cannot represent (swaps, hidden
cache) is refused."""

from __future__ import annotations

import pytest
from handworked import shared_instance, two_hidden
from paths import REPO

from optsched.comparison import compare
from optsched.cost import (
    LinearCost,
    UnitCost,
)
from optsched.formulations import SolveOptions
from optsched.formulations.base import FORMULATIONS, FormulationError, bound_is_global
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule
from optsched.solving import solve


def test_formulations_refuse_hidden_instances_and_schedules():
    from optsched.formulations.base import FormulationError
    from optsched.solving import solve

    for name in ("infermax", "hindsight", "exhaustive"):
        with pytest.raises(FormulationError, match=f"{name}: cannot represent hidden cache"):
            solve(two_hidden(), name, warm_start=None)
    hidden = Schedule.from_dict({"batches": [
        {"entries": [["a", 2, "hidden"], ["b", 2]]}, {"entries": [["a", 1, "hidden"], ["b", 1]]}]})
    for name in ("infermax", "hindsight", "exhaustive"):
        with pytest.raises(FormulationError, match="the schedule uses hidden cache"):
            solve(two_hidden(hidden=False), name, warm_start=hidden)


def test_direct_entry_points_and_bounds_refuse_hidden_cache():
    from optsched.bounds import BoundError, lower_bound
    from optsched.formulations import hindsight, infermax
    from optsched.formulations.base import FormulationError
    from optsched.formulations.exhaustive import search
    from optsched.search.lns import LNSError, improve

    with pytest.raises(FormulationError, match="exhaustive: cannot represent hidden"):
        search(two_hidden())
    with pytest.raises(FormulationError, match="hindsight: cannot represent hidden"):
        hindsight.check_instance(two_hidden())
    with pytest.raises(FormulationError, match="infermax: cannot represent hidden"):
        infermax.build(two_hidden(), J=2)
    # a KV-only bound may exceed the optimum when half-memory caches are allowed: refused
    for method in ("best", "request", "work"):
        with pytest.raises(BoundError, match="hidden cache"):
            lower_bound(two_hidden(), "makespan", method)
    kv = Schedule.from_dict({"batches": [{"entries": [["a", 2], ["b", 2]]},
                                         {"entries": [["a", 1], ["b", 1]]}]})
    with pytest.raises(LNSError, match="hidden cache"):
        improve(two_hidden(), kv)


def test_formulations_refuse_swap_instances_and_schedules():
    inst = Instance("t", Limits(kv_capacity=8, max_batch_tokens=8, host_capacity=8), UnitCost(),
                    (Request("a", 0, 2, 2), Request("b", 0, 2, 2)))
    for name in ("infermax", "hindsight", "exhaustive"):
        with pytest.raises(FormulationError, match=f"{name}: cannot represent swap preemption"):
            solve(inst, name, warm_start=None)
    no_host = inst.replace(limits=Limits(kv_capacity=8, max_batch_tokens=8))
    swapping = Schedule.from_dict({"batches": [
        {"entries": [["a", 2]]}, {"entries": [["b", 2]], "swap_out": [["a", 2]]},
        {"entries": [["a", 1], ["b", 1]], "swap_in": ["a"]}]})
    for name in ("infermax", "hindsight", "exhaustive"):
        with pytest.raises(FormulationError, match="the schedule swaps KV"):
            solve(no_host, name, warm_start=swapping)


def test_direct_entry_points_refuse_swaps():
    from optsched.formulations import hindsight, infermax
    from optsched.formulations.exhaustive import search

    inst = Instance("t", Limits(kv_capacity=8, max_batch_tokens=8, host_capacity=0), UnitCost(),
                    (Request("a", 0, 2, 2),))
    with pytest.raises(FormulationError, match="exhaustive: cannot represent swap"):
        search(inst)
    with pytest.raises(FormulationError, match="hindsight: cannot represent swap"):
        hindsight.check_instance(inst)
    with pytest.raises(FormulationError, match="infermax: cannot represent swap"):
        infermax.build(inst, J=2)


#: every registered formulation that does not model prefix reuse
REUSE_BLIND = [name for name in FORMULATIONS.names() if not FORMULATIONS.get(name).reuse_aware]


@pytest.mark.parametrize("name", REUSE_BLIND)
def test_every_reuse_blind_formulation_refuses_prefix_ids_and_hit_schedules(name):
    """A schedule that hits cached blocks can beat every reuse-blind one (docs/semantics.md
    section 6, "Prefix reuse"), so a reuse-blind optimum is not the instance's: refused in one
    line before any warm start; a warm start stating hits or drops would be mis-priced."""
    objective = FORMULATIONS.get(name).objectives[0]  # one it models (hindsight-ff: total latency)
    with pytest.raises(FormulationError, match=f"{name}: cannot represent prefix reuse") as e:
        solve(shared_instance(), name, objective, warm_start=None)
    assert "\n" not in str(e.value)
    hits = Schedule.from_dict({"batches": [{"entries": [["a", 5]]},
                                           {"entries": [["a", 1], ["b", 3]], "hits": [["b", 2]]},
                                           {"entries": [["b", 1]]}]})
    plain = shared_instance().replace(requests=tuple(
        Request(r.id, r.arrival, r.prompt, r.output) for r in shared_instance().requests))
    with pytest.raises(FormulationError, match="hits or drops prefix blocks"):
        solve(plain, name, objective, warm_start=hits)


def test_direct_entry_points_refuse_prefix_ids():
    from optsched.formulations import hindsight, infermax

    with pytest.raises(FormulationError, match="hindsight: cannot represent prefix reuse"):
        hindsight.check_instance(shared_instance())
    with pytest.raises(FormulationError, match="infermax: cannot represent prefix reuse"):
        infermax.build(shared_instance(), J=2)


SEQ = Instance.load(REPO / "instances" / "seq-unit-3.json")


OPTS = SolveOptions(time_limit=30, progress=False)


def test_hindsight_optimum_is_flagged_restricted_and_lies_above_the_true_optimum():
    rep = solve(SEQ, "hindsight", "makespan", options=OPTS)
    true = solve(SEQ, "exhaustive", "makespan", options=OPTS)
    assert rep.status == "optimal" and true.status == "optimal"
    assert rep.restricted and rep.global_bound is None and not bound_is_global(rep)
    assert not true.restricted and true.global_bound == true.objective
    # the restriction costs something here, so using it as a lower bound would be wrong
    assert rep.objective > true.objective
    assert rep.to_dict()["restricted"] is True


def test_compare_never_measures_gaps_against_a_restricted_optimum():
    cmp = compare(SEQ, ["fcfs"], optimal=True, formulation="hindsight", objective="makespan",
                  time_limit=30)
    assert cmp.optimum is not None and cmp.optimum.objective is not None
    assert cmp.reference_kind == "bound" and cmp.reference is not None
    assert cmp.reference <= solve(SEQ, "exhaustive", "makespan", options=OPTS).objective + 1e-9
    assert all(r.gap is None or r.gap >= -1e-9 for r in cmp.rows)


def test_hypotheses_restrict_the_problem():
    from optsched.formulations import Hypotheses

    rep = solve(SEQ, "exhaustive", "makespan", hypotheses=Hypotheses(no_evictions=True),
                options=OPTS)
    assert rep.restricted and rep.global_bound is None


def test_uncertified_batch_horizon_is_flagged_restricted():
    """k0 = 1/64 per batch, kpr = 1/16 per prefill entry, all else free; q0 (I=1, O=1), q1 and
    q2 (I=1, O=2), total latency. One request at a time in 5 batches ends at 5, 11, 17 (q0; q2's
    prefill + decode; q1's): 33/64. The InferMax models' horizon is J = 4 batches, whose best is
    q0 alone (5) then q1 and q2 together (prefill 9, decode 1): 5 + 15 + 15 = 35/64."""
    from optsched.instance import Limits, Request

    inst = Instance("horizon", Limits(kv_capacity=5, max_batch_tokens=3),
                    LinearCost(k0=1 / 64, kpr=1 / 16),
                    (Request("q0", 0.0, 1, 1), Request("q1", 0.0, 1, 2), Request("q2", 0.0, 1, 2)))
    ex = solve(inst, "exhaustive", "total-latency", options=OPTS)
    assert ex.status == "optimal" and ex.objective * 64 == 33
    for variant in ("flow", "tight"):
        rep = solve(inst, "infermax", "total-latency",
                    options=SolveOptions(time_limit=30, progress=False, params={"variant": variant}))
        assert rep.objective * 64 >= 35 - 1e-9
        assert rep.restricted and rep.global_bound is None, variant
