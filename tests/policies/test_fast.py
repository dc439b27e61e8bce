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
from paths import SHARED_DATA
from schedule_checks import COLUMNS

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import get_policy, list_policies, simulate
from optsched.policies.fast import HAVE_NUMBA, KERNELS, fast_config, simulate_fast
from optsched.policies.simulator import SimStats, SimView, _Sim, known_outputs
from optsched.policies.svf import SVF
from optsched.policies.unified import UnifiedScheduler
from optsched.testing import online_instances
from optsched.workloads.generators import infermax_mix, poisson_trace
from optsched.workloads.traces import read_trace, seeded_window, trace_to_instance

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed: no fast path")

#: every registered policy whose class declares a compiled twin (``PolicySpec.compiled``: the
#: UnifiedScheduler configurations -- vLLM, SARATHI, their variants, -ef, ranking, InferMax,
#: FCFS --, MC-SF, SVF, WAIT, A_min and the alpha-protection policies): each is held to its
#: Python path below
FAST = [s.name for s in list_policies() if s.compiled]
#: the alpha-protection policies (parameters alpha, beta, seed; no watermark)
ALPHA = [s.name for s in list_policies() if s.compiled == "alpha"]


def _bound(inst: Instance, name: str, **params):
    p = get_policy(name, **params)
    p.bind(SimView(_Sim(inst), known_outputs(inst, p.hypothetical, p.output_fallback)))
    return p


def assert_identical(inst: Instance, name: str, **params) -> None:
    """Fast and Python schedules equal batch for batch; metrics equal to the last digit.
    The kernel itself must answer (``simulate(fast=True)`` falls back to the Python path
    when it gives up, which would make the comparison vacuous)."""
    bound = _bound(inst, name, **params)
    assert fast_config(inst, bound) is not None, name
    known = known_outputs(inst, bound.hypothetical, bound.output_fallback)
    assert simulate_fast(inst, bound, known, 10**9) is not None, name
    fast = simulate(inst, name, fast=True, **params)
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
    assert {"vllm", "sarathi", "fcfs", "infermax", "vllm-ef", "rank-o", "mcsf", "svf",
            "wait", "amin", "alpha-greedy", "alpha-beta-clearing"} <= set(FAST)


def test_every_declared_twin_is_a_kernel():
    """A policy declares a compiled twin by naming one of the kernels (``KERNELS``) as its
    class's ``fast_kernel``; the declaration is the class's own (a subclass, which may change
    the rules, declares none and runs the Python path)."""
    declared = {s.name: s.compiled for s in list_policies() if s.compiled}
    # "cached": the prefix-caching kernel (optsched/policies/fast_cached.py; the unified one
    # without block ids)
    assert set(declared.values()) <= set(KERNELS) | {"cached"}, declared
    for name, kernel in declared.items():
        assert vars(type(get_policy(name))).get("fast_kernel") == kernel, name




@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=online_instances(), policy=st.sampled_from(FAST),
       watermark=st.sampled_from([None, 0.0, 0.2]), seqs=st.sampled_from([None, 0, 2]))
def test_fast_equals_python_on_random_instances(inst, policy, watermark, seqs):
    params: dict[str, float] = {}
    if policy in ("mcsf", "svf", "wait", "amin") or policy in ALPHA:  # no watermark / max_num_seqs parameters
        watermark = seqs = None
    if watermark is not None:
        params["watermark"] = watermark
    if seqs is not None:
        params["max_num_seqs"] = seqs
    assert_identical(inst, policy, **params)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=online_instances(), policy=st.sampled_from(ALPHA),
       alpha=st.sampled_from([0.0, 0.1, 0.5, 0.9]), beta=st.sampled_from([0.05, 0.5, 1.0]),
       seed=st.integers(0, 3))
def test_alpha_kernels_equal_python_on_random_instances(inst, policy, alpha, beta, seed):
    # the threshold from 0 (clear at once) to a 0.9 M reserve (the head admitted alone);
    # beta from rare clearings (many numpy draws per overflow) to clearing all at once
    params: dict[str, float] = {"alpha": alpha}
    if policy == "alpha-beta-clearing":
        params.update(beta=beta, seed=seed)
    assert_identical(inst, policy, **params)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=online_instances(), types=st.sampled_from([1, 2, 3, 5]),
       scale=st.sampled_from([0.05, 0.3, 1.0]))
def test_wait_kernel_equals_python_on_random_instances(inst, types, scale):
    # small scales give quotas of 1 per type (batches wait for arrivals, the gate), large
    # ones let every type admit; one type is MC-SF in arrival order
    assert_identical(inst, "wait", types=types, scale=scale)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=online_instances(), alpha=st.sampled_from([0.1, 0.5, 1.0]))
def test_amin_kernel_equals_python_on_random_instances(inst, alpha):
    # low alpha: estimates far below the truth, so they move while requests run and the
    # safety net evicts by A_min's own order; alpha = 1: exact lengths
    assert_identical(inst, "amin", alpha=alpha)


def test_alpha_beta_kernel_draws_from_the_policys_generator():
    # the seed must matter on an instance with clearings (else the test above could not
    # tell numpy's draws from any other), and the kernel must follow it: seeds 0 and 1 give
    # different schedules, each equal to its Python path's
    pool = infermax_mix("LILO", 60, seed=1)
    inst = poisson_trace(pool, 40, rate=4.0, seed=0, replace=True,
                         limits=Limits(kv_capacity=2_500, max_batch_tokens=1024))
    a = simulate(inst, "alpha-beta-clearing", fast=True, seed=0)
    b = simulate(inst, "alpha-beta-clearing", fast=True, seed=1)
    assert a.evict_req.size > 0 and not np.array_equal(a.evict_req, b.evict_req)
    for seed in (0, 1):
        assert_identical(inst, "alpha-beta-clearing", seed=seed)


@pytest.mark.skipif(not (SHARED_DATA / "traces").is_dir(),
                    reason=f"no trace data at {SHARED_DATA / 'traces'}")
@pytest.mark.parametrize("trace", ["conv", "code"])
@pytest.mark.parametrize("policy", [*ALPHA, "svf", "wait", "amin"])
def test_new_kernels_equal_python_on_seeded_trace_windows(trace, policy):
    # 150 consecutive requests from three seeded start rows of each Azure trace (the one
    # window definition), M = 8,000: beta-clearing clears in every window, alpha-greedy in
    # two of the code windows (3 and 4 evictions; checked when this test was written); SVF
    # admits by volume, so its schedule differs from MC-SF's on these windows
    raw = read_trace(SHARED_DATA / "traces" / f"AzureLLMInferenceTrace_{trace}.csv",
                     format="azure")
    for seed in range(3):
        inst = trace_to_instance(seeded_window(raw, 150, seed),
                                 Limits(kv_capacity=8_000, max_batch_tokens=2048),
                                 too_long="drop")
        assert_identical(inst, policy)


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
    ev = evaluate(inst, simulate(inst, "vllm", fast=True))
    assert ev.feasible and ev.metrics["evictions"] > 0


def test_stats_count_the_same_plans_and_batches_on_both_paths():
    inst = poisson_trace(infermax_mix("LILO", 30, seed=2), 20, rate=0.02, seed=3, replace=True,
                         limits=Limits(kv_capacity=2_500, max_batch_tokens=1024))
    fast, ref = SimStats(), SimStats()
    simulate(inst, "vllm", stats=fast, fast=True)
    simulate(inst, "vllm", stats=ref, fast=False)
    # idle plans (nothing to run before the next arrival) are counted by both
    assert (fast.decisions, fast.batches) == (ref.decisions, ref.batches)
    assert fast.decisions > fast.batches > 0 and fast.decision_seconds > 0


def test_user_policies_take_the_python_path():
    inst = infermax_mix("SISO", 10, seed=0)

    class Sub(UnifiedScheduler):  # a user subclass: its overrides must run
        pass

    assert fast_config(inst, _bound_obj(inst, Sub())) is None
    assert fast_config(inst, _bound(inst, "sorted-f")) is None  # no kernel: Python

    class SubSVF(SVF):  # a user subclass of a kernel policy: Python too
        pass

    assert fast_config(inst, _bound_obj(inst, SubSVF())) is None


def _bound_obj(inst: Instance, p):
    p.bind(SimView(_Sim(inst), known_outputs(inst, False, False)))
    return p


# --- the one-pass compiled evaluator (optsched.evaluation.fast) -----------------------------













def test_long_schedules_grow_the_kernel_buffers():
    # regression: the kernel sizes its batch buffers by sum(O) + n and grows them; with
    # long prompts cut into 3-token chunks there are far more batches (3 x ceil(100 / 3)
    # + decodes ~ 105 > 16), and the start column must grow with the batch pointers
    reqs = tuple(Request(f"r{i}", 0.0, 100, 2) for i in range(3))
    inst = Instance("chunks", Limits(kv_capacity=400, max_batch_tokens=3), UnitCost(), reqs)
    for policy in ("sarathi", "fcfs", "vllm"):
        assert_identical(inst, policy)
        assert simulate(inst, policy).n_batches > 100


def test_patched_hooks_take_the_python_path():
    # a hook replaced on the object (tests spy on next_batch this way) must run
    inst = infermax_mix("SISO", 10, seed=0)
    p = get_policy("vllm")
    seen = []
    inner = p.next_batch
    p.next_batch = lambda: seen.append(1) or inner()
    simulate(inst, p, fast=True)
    assert seen
