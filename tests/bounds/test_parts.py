"""The ``parts`` bound (bounds.md, "What did not help": parts; not a registered rung): its
cuts by hand, below the exhaustive optimum on random small instances cut into parts of one or
two requests (arrivals, evictions, chunking, blocks, unit and linear cost), below the policies
on random windows up to 150 requests cut into many parts, certified at a spent time limit, and
additive over requests that never interact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windows import larger_windows

from optsched.bounds import BoundError, Budget, bound_methods
from optsched.bounds import parts as P
from optsched.bounds.combinatorial import combinatorial_bound
from optsched.cost import LinearCost, preset
from optsched.evaluation import evaluate
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate
from optsched.testing import instances

OBJ = "total-latency"
#: long entries against the batch term, so that ``stretch`` on a part bends (as test_stretch)
HEAVY = LinearCost(k0=0.002, k1=0.003, kpq=5e-6, kpm=1e-5, kdm=4e-3, kpr=5e-4, kdr=0.001,
                   kpl=3e-4, kpb=0.003, kdb=0.0006)


def _below(bound: float, value: float, what: str, inst) -> None:
    # the tolerance is the rungs' relative safety margin (bounds.md section 1)
    assert bound <= value * (1 + 1e-9) + 1e-12, f"parts {bound} above {what} {value}: {inst}"


def _parts(inst, max_part: int, time_limit: float | None = None) -> float:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(P, "MAX_PART", max_part)
        mp.setattr(P, "MIN_PART", 1)
        return P.parts_bound(inst, OBJ, Budget.seconds(time_limit)).value


def test_crossings_and_cuts_by_hand():
    # arrivals 0, 1, 2, 3 and completions 0.5, 2.5, 10, 4: when request 1 arrives (t = 1)
    # request 0 is done (0 in the system); at t = 2 request 1 is still in (1); at t = 3
    # request 2 is (1: request 1 left at 2.5)
    x = P.crossings(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.5, 2.5, 10.0, 4.0]))
    assert x.tolist() == [0, 0, 1, 1]
    # parts of at most 2: from 0 the cut is in {1, 2}, fewest crossings at 1; from 1 in {2, 3},
    # a tie, the latest (3); the last request is a part
    assert P.cut_points(x, max_part=2, min_part=1) == [0, 1, 3]
    assert P.cut_points(x, max_part=4, min_part=1) == [0]


@st.composite
def small(draw, max_requests=4):
    inst = draw(instances(max_requests=max_requests, max_prompt=6, max_output=3))
    return inst.replace(cost_model=HEAVY) if draw(st.booleans()) else inst


def _check_against_search(inst, max_states: int, max_part: int) -> None:
    res = search(inst, OBJ, SearchOptions(max_states=max_states, time_limit=5))
    if res.status != "optimal":
        return  # too large for the oracle within the limit: nothing is claimed
    _below(_parts(inst, max_part), evaluate(inst, res.schedule).objective(OBJ),
           "the exhaustive optimum", inst)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=small(max_requests=3), max_part=st.sampled_from([1, 2]))
def test_parts_below_exhaustive_optimum(inst, max_part):
    _check_against_search(inst, 300, max_part)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=small(), max_part=st.sampled_from([1, 2, 3]))
def test_parts_below_exhaustive_optimum_more(inst, max_part):
    _check_against_search(inst, 5_000, max_part)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=larger_windows(max_requests=80), max_part=st.sampled_from([3, 8]))
def test_parts_below_two_policies(inst, max_part):
    b = _parts(inst, max_part, time_limit=0.3)
    for name in ("vllm", "sarathi"):
        _below(b, evaluate(inst, simulate(inst, name)).objective(OBJ), name, inst)


@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=larger_windows(max_requests=150), max_part=st.sampled_from([3, 10, 40]))
def test_parts_below_every_policy(inst, max_part):
    b = _parts(inst, max_part, time_limit=3.0)
    for spec in list_policies():
        ev = evaluate(inst, simulate(inst, spec.name))
        assert ev.feasible
        _below(b, ev.objective(OBJ), spec.name, inst)


def _bursts(gap: float) -> Instance:
    burst = [(0.0, 300, 40), (0.01, 800, 20), (0.02, 50, 60), (0.05, 500, 30)]
    reqs = tuple(Request(f"r{k}{j}", t + k * gap, i, o)
                 for k in range(2) for j, (t, i, o) in enumerate(burst))
    return Instance("bursts", Limits(kv_capacity=4_000, max_batch_tokens=2048),
                    preset("infermax-llama2-7b-a100"), reqs)


def test_spent_time_limit_still_certifies():
    # no time at all: the reference schedule times out (each request at its own chain places
    # the cuts), no part runs stretch, and the value is the whole window's cheap bound or the
    # sum of the parts' cheap bounds, below the policies
    inst = _bursts(0.5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(P, "MAX_PART", 3)
        mp.setattr(P, "MIN_PART", 1)
        res = P.parts_bound(inst, OBJ, Budget.seconds(0.0))
    # 8 requests in parts of at most 3: at least 3 parts, cut by the own chains
    assert int(res.notes[0].split()[1]) >= 3 and "the own chains" in res.notes[0]
    assert "stretch ran on 0" in res.notes[0]
    whole = combinatorial_bound(inst, OBJ, Budget.seconds(None)).value
    assert res.value >= whole
    for name in ("vllm", "fcfs"):
        _below(res.value, evaluate(inst, simulate(inst, name)).objective(OBJ), name, inst)


def test_requests_that_never_meet_add_up():
    # two copies of a 4-request burst 100 s apart (each done in well under a second): with
    # parts of at most 4 the cut falls between them (nobody is in the system at the second
    # burst's first arrival), so the bound is twice the one burst's bound: the stretch
    # iterations translate with the arrivals, up to rounding of times near 100 s (the two
    # parts' values differ by 1.5e-5 relative)
    one = Instance("one", _bursts(100.0).limits, _bursts(100.0).cost_model,
                   _bursts(100.0).requests[:4])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(P, "MAX_PART", 4)
        mp.setattr(P, "MIN_PART", 1)
        two = P.parts_bound(_bursts(100.0), OBJ, Budget.seconds(None)).value
        single = P.parts_bound(one, OBJ, Budget.seconds(None)).value
    assert two == pytest.approx(2 * single, rel=1e-4)
    assert single > combinatorial_bound(one, OBJ, Budget.seconds(None)).value


def test_other_objectives_are_refused_and_it_is_no_rung():
    with pytest.raises(BoundError, match="total-latency"):
        P.parts_bound(_bursts(1.0), "makespan", Budget.seconds(None))
    # measured below or within 0.6% of the registered rungs: best does not climb it
    assert "parts" not in bound_methods()
