"""The ``reuse-request`` rung (optsched/bounds/reuse_request.py): each request's own chain with
prefix reuse (formulations/bounds.md B19, B3), by hand."""

from __future__ import annotations

import pytest

from optsched.bounds import lower_bound
from optsched.cost import LinearCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule


def test_a_hit_request_is_charged_its_last_token_after_the_hit():
    # `a` computes all 9 tokens (blocks 1, 2 and its last token) in one batch:
    # 1 + 0.1 * 9 + 0.01 * 81 = 2.71; `b` then hits 8 and computes 1 at m = 8:
    # 1 + 0.1 + 0.01 + 0.02 * 8 = 1.27, done at 2.71 + 1.27 = 3.98: total latency 6.69.
    # The rung charges `a` and `b` each 1.27 (either may hit): 2.54, below that schedule
    cost = LinearCost(k0=1.0, k1=0.1, kpq=0.01, kpm=0.02)
    reqs = (Request("a", 0, 9, 1, prefix=(1, 2)), Request("b", 0, 9, 1, prefix=(1, 2)))
    inst = Instance("two", Limits(64, 10, block_size=4), cost, reqs)
    sched = Schedule.from_batches([([("a", 9)],), {"entries": [["b", 1]], "hits": [["b", 8]]}])
    ev = evaluate(inst, sched)
    assert ev.feasible and ev.objective("total-latency") == pytest.approx(6.69)
    assert lower_bound(inst, "total-latency", "reuse-request").value == pytest.approx(2.54)
    assert lower_bound(inst, "mean-ttft", "reuse-request").value == pytest.approx(1.27)
    # the reuse-blind chain charges each 2.71: 5.42, below 6.69 here but not a bound with
    # reuse (it ignores that `b` could hit)
    blind = inst.replace(requests=tuple(Request(r.id, 0, 9, 1) for r in reqs))
    assert lower_bound(blind, "total-latency", "request").value == pytest.approx(5.42)
