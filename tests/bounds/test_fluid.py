"""The fluid relaxation of :mod:`optsched.bounds.fluid` (formulations/bounds.md, "What
did not help": memory concurrency). Its schedules of the relaxation R are schedules of the
KV-share relaxation that ``dual`` and ``spread`` bound, so neither may exceed their value
(``coupled`` and ``srpt`` also keep token- and count-share floors, which R does not bound:
five one-token requests with ``C = 1`` put ``coupled`` at 15 against R's 9); both schedules
(with and without the memory row) complete every request, none faster than its memory-full
chain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from optsched.bounds import lower_bound
from optsched.bounds.fluid import fluid_completions, relaxation
from optsched.testing import assert_bound_valid, constrained_instances


def _fluid(inst, cap_mem: float) -> np.ndarray:
    a = inst.arrival.astype(np.float64)
    x, dur, first, reserve = relaxation(inst)
    return fluid_completions(a, x, dur, first, reserve, cap_mem, 0.0) - a


# slow step: 40 examples of the numba fluid schedule and the dual rung, ~25 s quiet, ~75 s at load 10
@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=constrained_instances(max_requests=6, max_prompt=8, max_output=5))
def test_fluid_rungs_stay_below_the_fluid_schedule(inst):
    lat = _fluid(inst, math.inf)
    x, dur, first, _ = relaxation(inst)
    chain = np.add.reduceat(dur, first)
    assert np.all(np.isfinite(lat))
    assert np.all(lat >= chain * (1 - 1e-9) - 1e-12)  # no request beats its memory-full chain
    value = float(lat.sum())
    bounds = {m: lower_bound(inst, "total-latency", m).value for m in ("spread", "dual")}
    assert_bound_valid(bounds, value, "the fluid schedule of R", inst)
    mem = _fluid(inst, float(inst.limits.kv_capacity))
    assert np.all(np.isfinite(mem)) and np.all(mem >= chain * (1 - 1e-9) - 1e-12)


def test_one_request_alone_by_hand():
    # alone, a request runs each piece at rate min(1, x_k / dur_k): the piece takes
    # x_k / min(1, x_k / dur_k) = max(x_k, dur_k), so it completes at a + sum_k max(x_k, dur_k)
    from optsched.bounds.fluid import fluid_completions, relaxation
    from optsched.cost import LinearCost
    from optsched.instance import Instance, Limits, Request

    inst = Instance("h", Limits(kv_capacity=64, max_batch_tokens=16),
                    LinearCost(k0=0.01, k1=0.001, kdm=0.0002), (Request("a", 2.0, 5, 4),))
    x, dur, first, reserve = relaxation(inst)
    a = inst.arrival.astype(np.float64)
    done = fluid_completions(a, x, dur, first, reserve, math.inf)
    assert done.tolist() == pytest.approx([2.0 + float(np.maximum(x, dur).sum())], rel=1e-12)
    assert reserve.tolist() == [5 + 4 - 1]



def test_a_step_of_no_work_is_a_timer_not_a_livelock():
    """A cost model whose only terms are per block (kpb) and per step (kpl) gives R pieces of no
    work (x = 0) but positive duration; the schedule once waited forever for them at rate 0 (the
    slow test's hang). Such a piece is a timer: it takes its duration and no capacity, so with
    room for all three requests each ends at its own chain (the sum of its step durations), and
    with room for one of the 10-token reservations at a time (M = 11; reservations I + O - 1 =
    10, 10, 4, admitted in index order as every key is 0) the chains run one after the other."""
    from optsched.bounds.fluid import _fluid_srpt
    from optsched.cost import LinearCost
    from optsched.instance import Instance, Limits, Request

    cost = LinearCost(k0=0.0, k1=0.0, kpq=0.0, kpm=0.0, kdm=0.0, kpr=0.0, kdr=0.0, kpl=0.0001,
                      kpb=0.1, kdb=0.0)
    inst = Instance("timer", Limits(kv_capacity=28, max_batch_tokens=5, block_size=2), cost,
                    (Request("q0", 0.0, 6, 5), Request("q1", 0.0, 6, 5), Request("q2", 0.0, 1, 4)))
    x, dur, first, reserve = relaxation(inst)
    assert np.all(x == 0) and np.all(dur[first] > 0)
    chain = np.add.reduceat(dur, first)
    a = inst.arrival.astype(np.float64)
    for cap in (math.inf, 28.0):
        assert _fluid_srpt(a, x, dur, first, reserve, cap, 0.0) == pytest.approx(chain)
    assert _fluid_srpt(a, x, dur, first, reserve, 11.0, 0.0) == pytest.approx(np.cumsum(chain))
