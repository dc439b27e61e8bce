"""(H22) deadline-cardinality floors (formulations/hindsight.md): hand-derived floors, the
max-count MILP against brute force, floors below every feasible schedule's completions, the
rows below the proven optimum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import UnitCost
from optsched.formulations import SolveOptions
from optsched.formulations.hindsight import (
    HindsightParams,
    build,
    footprint,
    serial_starts,
    starts_from_schedule,
)
from optsched.formulations.hindsight.deadline import (
    completion_floors,
    cpsat_at_least,
    dominated_pairs,
    max_completed_by,
)
from optsched.instance import Instance, Limits, Request
from optsched.milp import lp_relaxation_value
from optsched.solving import solve
from optsched.workloads.generators import online_paper_random


def inst_of(M, reqs, block=1):
    rs = tuple(Request(f"r{k}", float(a), i, o) for k, (a, i, o) in enumerate(reqs))
    return Instance("t", Limits(kv_capacity=M, max_batch_tokens=M, block_size=block), UnitCost(), rs)


def brute_max_count(inst, D):
    """N(D) by enumeration: every request either absent or started at e_i..D - O_i."""
    n, I, O, M = inst.n, inst.prompt, inst.output, inst.limits.kv_capacity
    e = np.ceil(inst.arrival).astype(int)
    choices = [[None] + list(range(e[i], D - O[i] + 1)) for i in range(n)]
    best = 0
    for starts in itertools.product(*choices):
        used = [i for i in range(n) if starts[i] is not None]
        if len(used) <= best:
            continue
        mem = np.zeros(D + 1)
        for i in used:
            mem[starts[i]:starts[i] + O[i]] += footprint(inst, I[i] + np.arange(O[i]))
        if mem.max() <= M:
            best = len(used)
    return best


def test_hand_derived_floors_of_three_requests_that_cannot_overlap_much():
    # M = 10, I = 2, O = 6, Q = 7 > M/2: in the first one's last slot it holds 7, so the next
    # holds <= 3 = I + age, age <= 1: it starts 2 slots before, completes 4 after.
    # Completions 6, 10, 14, so N(9) = 1 and N(13) = 2: L = (6, 10, 14).
    inst = inst_of(10, [(0, 2, 6)] * 3)
    for upper in (None, np.array([6, 10, 14])):
        cf = completion_floors(inst, upper, probe_limit=20)
        assert cf.floors.tolist() == [6, 10, 14]
        assert cf.proven.all()
    assert max_completed_by(inst, 13, np.array([6, 10]), time_limit=20) == (2, True)
    # the floors are the optimal completions, so their sum is the optimum and a valid bound
    res = solve(inst, "hindsight", "total-latency",
                options=SolveOptions(time_limit=30, threads=1, progress=False,
                                     params={"deadline": 10}))
    assert res.status == "optimal" and res.objective == 30 and res.bound == 30


def test_dominated_pairs_cover_the_order():
    I, O, e = np.array([2, 3, 2, 2]), np.array([5, 5, 7, 5]), np.zeros(4, int)
    # 0 dominates 1 and 2 (covering); 3 is identical to 0 and after it: 0 -> 3 -> 1, 3 -> 2
    assert sorted(dominated_pairs(I, O, e)) == [(0, 3), (3, 1), (3, 2)]


requests = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4), st.integers(1, 5)),
                    min_size=1, max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=st.integers(6, 12), reqs=requests, D=st.integers(1, 9), block=st.sampled_from([1, 2]))
def test_max_count_equals_brute_force(M, reqs, D, block):
    cap = (M // block) * block  # the largest footprint that fits
    reqs = [(a, min(i, cap), max(1, min(o, cap - min(i, cap) + 1))) for a, i, o in reqs]
    inst = inst_of(M, reqs, block)
    assert max_completed_by(inst, D, np.zeros(0, int), time_limit=20) == (brute_max_count(inst, D), True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=st.integers(6, 12), reqs=requests, D=st.integers(1, 9), block=st.sampled_from([1, 2]))
def test_cpsat_probe_agrees_with_brute_force(M, reqs, D, block):
    pytest.importorskip("ortools")
    cap = (M // block) * block
    reqs = [(a, min(i, cap), max(1, min(o, cap - min(i, cap) + 1))) for a, i, o in reqs]
    inst = inst_of(M, reqs, block)
    best = brute_max_count(inst, D)
    none = np.zeros(0, int)
    if best >= 1:
        assert cpsat_at_least(inst, D, best, none, time_limit=20) is True
    assert cpsat_at_least(inst, D, best + 1, none, time_limit=20) is False


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 6), seed=st.integers(0, 10_000), perm=st.randoms(use_true_random=False))
def test_floors_lie_below_every_feasible_schedules_completions(n, seed, perm):
    inst = online_paper_random(n, seed)
    schedules = []
    for _ in range(6):
        order = list(range(n))
        perm.shuffle(order)
        schedules.append(serial_starts(inst, np.array(order)) + inst.output)
    # the bisection tops come from the first schedule; every other one must lie above the floors
    cf = completion_floors(inst, schedules[0], probe_limit=20)
    for completions in schedules:
        assert np.all(np.sort(completions) >= cf.floors)


@pytest.mark.parametrize("n,seed", [(5, 0), (6, 3), pytest.param(7, 1, marks=pytest.mark.slow)])
def test_rows_keep_the_lp_below_the_proven_optimum_and_raise_it(n, seed):
    inst = online_paper_random(n, seed)
    res = solve(inst, "hindsight", "total-latency",
                options=SolveOptions(time_limit=60, threads=1, progress=False))
    assert res.status == "optimal"
    opt = res.objective
    starts = starts_from_schedule(inst, res.schedule)
    cf = completion_floors(inst, starts + inst.output, probe_limit=20)
    assert np.all(np.sort(starts + inst.output) >= cf.floors)
    assert cf.floors.sum() <= opt
    plain = lp_relaxation_value(build(inst, "total-latency", ub_starts=starts).model)
    cut = lp_relaxation_value(build(inst, "total-latency", ub_starts=starts, floors=cf.floors).model)
    assert plain - 1e-6 <= cut <= opt + 1e-6
    # and the solve with the rows proves the same optimum, replayed by the evaluator in solve()
    with_rows = solve(inst, "hindsight", "total-latency",
                      options=SolveOptions(time_limit=60, threads=1, progress=False,
                                           params={"deadline": 30}))
    assert with_rows.status == "optimal" and with_rows.objective == pytest.approx(opt)
    assert any("(H22)" in note for note in with_rows.notes)


def test_deadline_param_is_validated():
    with pytest.raises(Exception, match="deadline"):
        HindsightParams.from_dict({"deadline": "-1"})
