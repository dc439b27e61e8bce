"""The compiled simulator (optsched.policies.fast) is the same simulator as the Python path:
for every built-in policy with a kernel, on random and generator instances, the schedules
are equal batch for batch (entries, tokens, evictions, stated starts, ids) and so are the
evaluator's metrics, to the last digit. The Python path (``fast=False``) is the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import LinearCost, UnitCost
from optsched.evaluate import evaluate
from optsched.generators import infermax_mix, poisson_trace
from optsched.instance import Instance, Limits, Request
from optsched.policies import get_policy, list_policies, simulate
from optsched.policies.fast import HAVE_NUMBA, fast_config
from optsched.policies.simulator import SimStats, SimView, _Sim, known_outputs
from optsched.policies.unified import UnifiedScheduler

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed: no fast path")

#: every registered policy that is a UnifiedScheduler configuration (vLLM, SARATHI, their
#: variants, -ef, ranking, InferMax, FCFS): each must have a kernel
FAST = [s.name for s in list_policies() if isinstance(get_policy(s.name), UnifiedScheduler)]
COLUMNS = ("batch_ptr", "entry_req", "entry_tokens", "evict_ptr", "evict_req",
           "swap_out_ptr", "swap_in_ptr", "entry_hidden")


def _bound(inst: Instance, name: str, **params):
    p = get_policy(name, **params)
    p.bind(SimView(_Sim(inst), known_outputs(inst, p.hypothetical, p.output_fallback)))
    return p


def assert_identical(inst: Instance, name: str, **params) -> None:
    """Fast and Python schedules equal batch for batch; metrics equal to the last digit."""
    assert fast_config(inst, _bound(inst, name, **params)) is not None, name
    fast = simulate(inst, name, **params)
    ref = simulate(inst, name, fast=False, **params)
    assert fast.ids == ref.ids
    for col in COLUMNS:
        assert np.array_equal(getattr(fast, col), getattr(ref, col)), (name, col)
    assert np.array_equal(fast.start, ref.start, equal_nan=True), name
    ef, er = evaluate(inst, fast), evaluate(inst, ref)
    assert ef.feasible and er.feasible
    for k, v in er.metrics.items():
        w = ef.metrics[k]
        assert (w == v) or (isinstance(v, float) and math.isnan(v) and math.isnan(w)), (name, k)


def test_every_unified_policy_has_a_kernel():
    # the registry's vLLM family, SARATHI, FCFS, ranking and InferMax policies
    assert {"vllm", "sarathi", "fcfs", "infermax", "vllm-ef", "rank-o"} <= set(FAST)


@st.composite
def online_instances(draw):
    """Small online instances with tight memory (evictions) and either cost model."""
    n = draw(st.integers(1, 14))
    reqs = [Request(f"r{i}", float(draw(st.integers(0, 12))), draw(st.integers(1, 40)),
                    draw(st.integers(1, 12))) for i in range(n)]
    peak = max(r.prompt + r.output - 1 for r in reqs)
    block = draw(st.sampled_from([1, 1, 4]))
    M = -(-draw(st.integers(peak, 3 * peak)) // block) * block + block
    C = draw(st.integers(max(1, peak // 3), 2 * peak))
    P = draw(st.sampled_from([None, None, max(1, C // 2)]))
    bs = draw(st.sampled_from([None, None, 3]))
    cost = (LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02,
                       kpb=0.003, kdb=0.001)
            if draw(st.booleans()) else UnitCost())
    return Instance("fast", Limits(kv_capacity=M, max_batch_tokens=C, max_prefill_tokens=P,
                                   block_size=block, max_batch_size=bs), cost, tuple(reqs))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=online_instances(), policy=st.sampled_from(FAST),
       watermark=st.sampled_from([None, 0.0, 0.2]), seqs=st.sampled_from([None, 0, 2]))
def test_fast_equals_python_on_random_instances(inst, policy, watermark, seqs):
    params = {}
    if watermark is not None:
        params["watermark"] = watermark
    if seqs is not None:
        params["max_num_seqs"] = seqs
    assert_identical(inst, policy, **params)


@pytest.mark.parametrize("policy", FAST)
def test_fast_equals_python_on_generators(policy):
    # Poisson arrivals over the mix generator's lengths, tight memory so requests are
    # evicted and refilled; 4-token blocks on the second instance
    pool = infermax_mix("LILO", 60, seed=1)
    for k, (M, b) in enumerate(((2_500, 1), (3_000, 4))):
        lim = Limits(kv_capacity=M, max_batch_tokens=1024, block_size=b)
        inst = poisson_trace(pool, 40, rate=4.0, seed=k, limits=lim, replace=True)
        assert_identical(inst, policy)


def test_fast_path_evicts_on_a_generator_instance():
    # the identity above covers evictions: under vLLM this instance evicts (M below the
    # running set's growth), so the kernel's eviction path is exercised, not only decodes
    pool = infermax_mix("LILO", 60, seed=1)
    inst = poisson_trace(pool, 40, rate=4.0, seed=0,
                         limits=Limits(kv_capacity=2_500, max_batch_tokens=1024), replace=True)
    ev = evaluate(inst, simulate(inst, "vllm"))
    assert ev.feasible and ev.metrics["evictions"] > 0


def test_stats_and_user_policies_take_the_python_path():
    inst = infermax_mix("SISO", 10, seed=0)
    stats = SimStats()
    simulate(inst, "vllm", stats=stats)
    assert stats.decisions >= stats.batches > 0  # filled by the Python loop's timers

    class Sub(UnifiedScheduler):  # a user subclass: its overrides must run
        pass

    assert fast_config(inst, _bound_obj(inst, Sub())) is None
    assert fast_config(inst, _bound(inst, "mcsf")) is None


def _bound_obj(inst: Instance, p):
    p.bind(SimView(_Sim(inst), known_outputs(inst, False, False)))
    return p
