"""The ``reuse-srpt`` rung (optsched/bounds/reuse_srpt.py): B7 with prefix reuse
(formulations/bounds.md B19), by hand; its validity on random sharing instances is tested with
the other reuse-aware rungs in test_reuse_work.py."""

from __future__ import annotations

import pytest

from optsched.bounds import lower_bound
from optsched.bounds.floors import Floors
from optsched.bounds.reuse_floors import ReuseFloors
from optsched.bounds.srpt import job_works
from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request


def three_sharing() -> Instance:
    reqs = tuple(Request(x, 0, 9, 1, prefix=(1, 2)) for x in "abc")
    return Instance("three", Limits(kv_capacity=64, max_batch_tokens=10, block_size=4),
                    UnitCost(), reqs)


def test_a_request_is_charged_its_own_computed_tokens_only():
    inst = three_sharing()
    # unit time: h = k0 = 1 per batch, no entry terms. With the token rule (0, 1, 0) a
    # request's share is its computed prompt over P = C = 10: 1/10 with reuse (u = 1), 9/10
    # without (the reuse-blind B7 would charge the 8 tokens a hit skips)
    assert job_works(ReuseFloors.of(inst), "mean-ttft", (0.0, 1.0, 0.0)) == pytest.approx(
        [0.1] * 3)
    assert job_works(Floors.of(inst), "mean-ttft", (0.0, 1.0, 0.0)) == pytest.approx([0.9] * 3)
    # the KV rule (1, 0, 0): private fp(1) = 4 plus 4 * (1/3 + 1/3) of the two shared blocks,
    # over M = 64
    assert job_works(ReuseFloors.of(inst), "mean-ttft", (1.0, 0.0, 0.0)) == pytest.approx(
        [(4 + 8 / 3) / 64] * 3)


def test_reuse_srpt_is_at_least_each_request_own_chain():
    # SRPT completions 0.1, 0.2, 0.3 (at most) lie below each request's own chain of one
    # batch (1), so the bound is the k-th chain summed: 3 (vllm-apc achieves 5)
    assert lower_bound(three_sharing(), "total-latency", "reuse-srpt").value == pytest.approx(3)
