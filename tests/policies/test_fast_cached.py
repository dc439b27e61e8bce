"""The compiled path of the prefix-caching policies (optsched/policies/fast_cached.py) gives
the Python path's schedules batch for batch; what it does not cover falls back."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import LinearCost, UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import get_policy, simulate
from optsched.policies.fast import HAVE_NUMBA
from optsched.policies.fast_cached import simulate_cached_fast

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")

KERNEL = [("vllm-apc", {}), ("sarathi-apc", {}), ("lpm", {}), ("lpm", {"fcfs_above": 0}),
          ("lpm", {"fcfs_above": 3}), ("vllm-apc", {"max_num_seqs": 3, "watermark": 0.2})]


@st.composite
def shared_instances(draw):
    b = draw(st.sampled_from([1, 2, 4]))
    stems = draw(st.integers(1, 3))
    reqs = []
    for k in range(draw(st.integers(1, 12))):
        I = draw(st.integers(1, 20))
        P = draw(st.integers(0, I // b))
        own = draw(st.integers(0, P))
        stem = draw(st.integers(0, stems - 1))
        ids = tuple(1000 * stem + p + 1 if p < P - own else 100000 + 100 * k + p
                    for p in range(P))
        reqs.append(Request(f"q{k}", float(draw(st.integers(0, 8))), I,
                            draw(st.integers(1, 5)), prefix=ids))
    peak = max(-(-(r.prompt + r.output - 1) // b) * b for r in reqs)
    M = draw(st.integers(peak, 4 * peak))
    cost = draw(st.sampled_from([UnitCost(), LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-3,
                                                        kdm=1e-3, kpr=0.05, kdr=0.02)]))
    return Instance("h", Limits(M, draw(st.integers(max(b, 4), 30)), block_size=b), cost,
                    tuple(reqs))


def bound(inst, name, **params):
    """A fresh policy bound to a fresh simulation of ``inst`` (what simulate_policy hands the
    kernel)."""
    from optsched.policies.reuse import BlockState
    from optsched.policies.simulator import SimView, _Sim, known_outputs

    p = get_policy(name, **params)
    sim = _Sim(inst)
    sim.blocks = BlockState(inst.prefix_index) if inst.has_prefix else None
    p.bind(SimView(sim, known_outputs(inst, p.hypothetical, p.output_fallback)))
    return p


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_instances(), st.sampled_from(KERNEL))
def test_kernel_schedules_equal_the_python_path(inst, case):
    name, params = case
    py = simulate(inst, name, fast=False, **params)
    if not inst.has_prefix:  # no block ids: the unified kernel's business
        assert simulate_cached_fast(inst, bound(inst, name, **params), 10**6) is None
        return
    fast = simulate_cached_fast(inst, bound(inst, name, **params), 10**6)
    assert fast is not None  # the kernel answered (no fallback hides a difference)
    assert fast == py
    assert fast.entry_hit.tolist() == py.entry_hit.tolist()
    assert fast.drop_block.tolist() == py.drop_block.tolist()
    assert evaluate(inst, fast).feasible
    assert simulate(inst, name, fast=True, **params) == py


def test_the_kernel_answers_for_the_covered_policies_only():
    inst = Instance("h", Limits(64, 16, block_size=2), UnitCost(),
                    (Request("a", 0, 5, 2, prefix=(1, 2)), Request("b", 1, 5, 2, prefix=(1, 2))))
    for name, params in (("vllm-apc", {}), ("lpm", {}), ("sarathi-apc", {})):
        assert simulate_cached_fast(inst, bound(inst, name, **params), 1000) is not None, name
    for name, params in (("dfs", {}), ("k-lpm", {}), ("belady", {}), ("vllm-apc",
                                                                     {"cache": "belady"})):
        assert simulate_cached_fast(inst, bound(inst, name, **params), 1000) is None, name


def test_without_block_ids_the_unified_kernel_runs_them():
    from optsched.policies.fast import fast_config

    inst = Instance("h", Limits(64, 8, block_size=2), LinearCost(k0=1.0, k1=0.1),
                    tuple(Request(f"r{k}", k * 0.3, 3 + k % 5, 1 + k % 4) for k in range(30)))
    for name in ("vllm-apc", "lpm", "k-lpm", "dfs"):
        assert fast_config(inst, bound(inst, name)) is not None, name
        assert simulate(inst, name, fast=True) == simulate(inst, name, fast=False), name


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.sampled_from(KERNEL))
def test_long_decode_runs_equal_the_python_path(seed, case):
    """Long outputs behind long prompts: most batches repeat the last decode step (the
    kernel's steady runs, several blocks long, stopped by arrivals, block growth, finishes);
    the schedules, starts and prices included, are the Python path's."""
    import numpy as np

    rng = np.random.default_rng(seed)
    b = 4
    reqs = []
    for k in range(6):
        I = int(rng.integers(3, 24))
        P = I // b
        ids = tuple(range(1, P + 1)) if k % 2 else tuple(1000 + 100 * k + p for p in range(P))
        reqs.append(Request(f"q{k}", float(rng.integers(0, 40)), I, int(rng.integers(1, 40)),
                            prefix=ids))
    M = max(-(-(r.prompt + r.output - 1) // b) * b for r in reqs) + 8
    inst = Instance("runs", Limits(M, 16, block_size=b),
                    LinearCost(k0=0.5, k1=0.01, kdm=1e-3, kdr=0.02, kpr=0.05), tuple(reqs))
    name, params = case
    py = simulate(inst, name, fast=False, **params)
    fast = simulate_cached_fast(inst, bound(inst, name, **params), 10**6)
    assert fast is not None
    assert fast == py
    assert evaluate(inst, fast).metrics == evaluate(inst, py).metrics
