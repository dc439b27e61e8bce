"""The compiled router path (optsched/cluster/fast.py) is the Python router loop
(optsched/cluster/replicas.py): for every router it covers and the unified-family policies, on
random and seeded clusters (engines that differ in memory and cost model), the schedules are
equal batch for batch (entries, tokens, evictions, stated starts, engines) and so are the
evaluator's metrics. The Python path (``fast=False``) is the reference; the kernel itself must
answer (a fallback would make the comparison vacuous)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schedule_checks import COLUMNS

from optsched.cluster import replicate, simulate
from optsched.cluster.base import get_router
from optsched.cluster.engine import EngineRun
from optsched.cluster.fast import ROUTER_CODES, simulate_replicas_fast
from optsched.cluster.lor import LeastOutstanding
from optsched.cluster.replicas import fitting_engines
from optsched.cost import UnitCost, preset
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, Request
from optsched.policies.fast import HAVE_NUMBA
from optsched.policies.registry import get_spec
from optsched.testing import online_instances
from optsched.workloads.generators import infermax_mix

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed: no fast path")

ROUTERS = sorted(ROUTER_CODES)
#: unified-family policies (the kernel's walk orders: decode-first, prefill-first, single)
POLICIES = ["vllm", "sarathi", "fcfs", "rank-o", "vllm-ef", "vllm-hy", "sarathi-nohy"]


def _compiled(inst: Instance, policy: str, router: str):
    """The kernel's own answer (None when it does not apply or gives up)."""
    engines = [EngineRun(inst.for_engine(k), get_spec(policy).make(), k)
               for k in range(inst.n_engines)]
    return simulate_replicas_fast(inst, [e.policy for e in engines], get_router(router).make(),
                                  fitting_engines(inst))


def assert_identical(inst: Instance, policy: str, router: str):
    """Compiled and Python cluster schedules equal batch for batch, metrics to the digit;
    returns the Python schedule."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = _compiled(inst, policy, router)
        assert fast is not None, (policy, router)
        ref = simulate(inst, policy, router, fast=False)
        # through the router layer (engines of equal limits and cost model share a policy)
        via = simulate(inst, policy, router, fast=True)
    assert np.array_equal(via.entry_req, fast.entry_req) and \
        np.array_equal(via.placement.batch_engine, fast.placement.batch_engine)
    assert fast.ids == ref.ids
    for col in COLUMNS:
        assert np.array_equal(getattr(fast, col), getattr(ref, col)), (policy, router, col)
    assert np.array_equal(fast.start, ref.start, equal_nan=True), (policy, router)
    assert fast.placement.engines == ref.placement.engines
    for col in ("batch_engine", "transfer_ptr", "transfer_req", "transfer_to"):
        assert np.array_equal(getattr(fast.placement, col), getattr(ref.placement, col)), col
    ef, er = evaluate(inst, fast), evaluate(inst, ref)
    assert ef.feasible and er.feasible, er.violation_counts
    for k, v in er.metrics.items():
        w = ef.metrics[k]
        assert (w == v) or (isinstance(v, float) and math.isnan(v) and math.isnan(w)), k
    return ref


@st.composite
def replica_clusters(draw):
    """1-3 engines of role ``both`` around an online instance; an engine may have more
    memory than the instance's or the other cost model (each still fits every request)."""
    inst = draw(online_instances())
    engines = []
    for k in range(draw(st.integers(1, 3))):
        lim = inst.limits
        if draw(st.booleans()):
            lim = Limits(kv_capacity=lim.kv_capacity + 8 * lim.block_size,
                         max_batch_tokens=lim.max_batch_tokens,
                         max_prefill_tokens=lim.max_prefill_tokens,
                         block_size=lim.block_size, max_batch_size=lim.max_batch_size)
        cost = UnitCost() if draw(st.booleans()) else None
        engines.append(Engine(str(k), limits=lim, cost_model=cost))
    return inst.replace(cluster=Cluster(tuple(engines)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=replica_clusters(), policy=st.sampled_from(POLICIES),
       router=st.sampled_from(ROUTERS))
def test_compiled_router_path_equals_python_on_random_clusters(inst, policy, router):
    assert_identical(inst, policy, router)


def _seeded(seed: int) -> Instance:
    """60 requests (prompts 1-64, outputs 1-64 tokens) arriving as a Poisson stream of 40 a
    second, M = 160 KV tokens, C = 96, on InferMax's Llama-2-7B/A100 preset: a few
    milliseconds a batch, so requests overlap, replicas queue and evict."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / 40, 60))
    reqs = tuple(Request(f"r{i}", float(t[i]), int(rng.integers(1, 65)), int(rng.integers(1, 65)))
                 for i in range(60))
    return Instance("seeded", Limits(kv_capacity=160, max_batch_tokens=96),
                    preset("infermax-llama2-7b-a100"), reqs)


@pytest.mark.parametrize("router", ROUTERS)
def test_compiled_router_path_equals_python_on_seeded_streams(router):
    evictions = 0
    for seed in range(3):
        ref = assert_identical(replicate(_seeded(seed), 3), "vllm", router)
        evictions += ref.evict_req.size
        assert len(set(ref.placement.batch_engine.tolist())) == 3
    assert evictions > 0  # eviction is exercised, not only admission


def test_what_the_kernel_does_not_cover_takes_the_python_path():
    inst = replicate(infermax_mix("LILO", 6, seed=0), 2)
    assert _compiled(inst, "orca", "lor") is None  # no compiled twin
    assert _compiled(inst, "infermax", "lor") is None  # histogram reservation
    assert _compiled(inst, "mcsf", "lor") is None  # another kernel

    class Slower(LeastOutstanding):  # a subclass may change the rule: no compiled rule
        pass

    engines = [EngineRun(inst.for_engine(k), get_spec("vllm").make(), k) for k in range(2)]
    assert simulate_replicas_fast(inst, [e.policy for e in engines], Slower(),
                                  fitting_engines(inst)) is None
    # the fallback runs the Python path: the same schedule as asking for it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = simulate(inst, "orca", "lor", fast=True)
        b = simulate(inst, "orca", "lor", fast=False)
    assert np.array_equal(a.entry_req, b.entry_req)
