"""The ``tail`` rung (bounds.md B16, P99 TTFT): below the exact optimum of tiny instances
(every prefill-only schedule with at most two evictions a request, :mod:`first_tokens`), below
every policy's P99 on random instances up to 200 requests, and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from first_tokens import best_first_tokens, p99
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.bounds import Budget, lower_bound
from optsched.bounds.tail import Counter, order_statistic, percentile_position
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate
from optsched.testing import instances

OBJ = "p99-ttft"


def _below(bound: float, value: float, what: str, inst) -> None:
    assert bound <= value * (1 + 1e-9) + 1e-12, f"tail {bound} above {what} {value}: {inst}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(max_requests=3, max_prompt=3, max_output=2))
def test_tail_below_the_exact_first_token_optimum(inst):
    opt = best_first_tokens(inst, p99, max_nodes=50_000)
    if opt is None:
        return  # beyond the oracle's node budget: nothing is claimed
    _below(lower_bound(inst, OBJ, "tail").value, opt, "the exact optimum", inst)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(max_requests=4, max_prompt=5, max_output=2))
def test_tail_below_the_exact_first_token_optimum_more(inst):
    opt = best_first_tokens(inst, p99, max_nodes=400_000)
    if opt is None:
        return
    _below(lower_bound(inst, OBJ, "tail").value, opt, "the exact optimum", inst)


def test_two_prompts_one_token_a_batch_by_hand():
    # C = 1, both one-token prompts at 0, unit time: first tokens at 1 and 2 at best, so the
    # P99 of (1, 2) is 1 + 0.99 * (2 - 1) = 1.99; no request can have a first token before 1
    # and at most one by any time below 2, so the bound is the same up to its bisection
    inst = Instance("h", Limits(kv_capacity=4, max_batch_tokens=1), UnitCost(),
                    (Request("a", 0.0, 1, 1), Request("b", 0.0, 1, 1)))
    assert best_first_tokens(inst, p99) == pytest.approx(1.99)
    assert lower_bound(inst, OBJ, "tail").value == pytest.approx(1.99, rel=1e-6)


def test_the_oracles_p99_is_numpys():
    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 4, 7, 150):
        x = rng.random(n)
        assert p99(x) == pytest.approx(float(np.percentile(x, 99)), rel=1e-12)


def test_percentile_position_is_numpys():
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 99, 100, 101, 1200):
        x = np.sort(rng.random(n))
        K, f = percentile_position(n)
        ref = x[K] if f == 0 else (1 - f) * x[K] + f * x[K + 1]
        assert ref == pytest.approx(np.percentile(x, 99), rel=1e-12)


def test_order_statistic_is_below_every_policy_and_checked():
    rng = np.random.default_rng(3)
    reqs = tuple(Request(f"r{i}", float(t), int(p), int(o)) for i, (t, p, o) in enumerate(
        zip(np.cumsum(rng.exponential(0.05, 40)), rng.integers(50, 900, 40),
            rng.integers(1, 40, 40))))
    inst = Instance("o", Limits(kv_capacity=4000, max_batch_tokens=2048),
                    __import__("optsched.cost", fromlist=["preset"]).preset(
                        "infermax-llama2-7b-a100"), reqs)
    k, count = 30, Counter(inst)
    tau = order_statistic(count, k, Budget.seconds(None))
    assert count(tau) <= k  # the value returned was checked
    for name in ("vllm", "sarathi", "fcfs"):
        ttft = np.sort(evaluate(inst, simulate(inst, name)).ttft)
        assert tau <= ttft[k] * (1 + 1e-12)


@st.composite
def online(draw, max_requests=200):
    n = draw(st.integers(1, max_requests))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    arr = rng.exponential(draw(st.sampled_from([0.005, 0.05, 0.5])), n).cumsum()
    reqs = tuple(Request(f"r{i}", float(arr[i]), int(rng.integers(1, 600)),
                         int(rng.integers(1, 60))) for i in range(n))
    peak = max(r.prompt + r.output - 1 for r in reqs)
    from optsched.cost import preset

    return Instance("tail", Limits(kv_capacity=peak * draw(st.integers(1, 6)),
                                   max_batch_tokens=draw(st.sampled_from([512, 2048, 8192]))),
                    draw(st.sampled_from([UnitCost(), preset("infermax-llama2-7b-a100")])), reqs)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=online(max_requests=60))
def test_tail_below_two_policies(inst):
    b = lower_bound(inst, OBJ, "tail").value
    for name in ("vllm", "ttft-first"):
        _below(b, evaluate(inst, simulate(inst, name)).objective(OBJ), name, inst)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=online())
def test_tail_below_every_policy(inst):
    b = lower_bound(inst, OBJ, "tail").value
    for spec in list_policies():
        ev = evaluate(inst, simulate(inst, spec.name))
        assert ev.feasible
        _below(b, ev.objective(OBJ), spec.name, inst)
