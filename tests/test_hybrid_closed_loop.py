"""Closed-loop BE submission (BROS section 7.1, optsched.workloads.hybrid.closed_loop_be): each BE
batch arrives exactly when the previous one completes under the policy measured."""

import numpy as np
import pytest

from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import get_policy, simulate
from optsched.workloads.generators import generate
from optsched.workloads.hybrid import bros_workload, closed_loop_be

LIM = Limits(kv_capacity=4000, max_batch_tokens=1024)


def _workload() -> Instance:
    pool = generate("chat-like", n=200, rate=1.0, seed=2, limits=LIM)
    return bros_workload(pool, 12, 3.0, seed=1, be_batch=4, limits=LIM)


def _batch_span(inst, ev, k):
    idx = [i for i, r in enumerate(inst.requests) if r.id.startswith(f"be{k}-")]
    return {inst.requests[i].arrival for i in idx}, float(np.max(ev.completion[idx]))


@pytest.mark.parametrize("policy", ["bros", "vllm"])
def test_each_batch_arrives_when_the_previous_completes(policy):
    base = _workload()
    run = closed_loop_be(base, lambda: get_policy(policy))
    inst, ev = run.instance, run.evaluation
    horizon = max(r.arrival for r in inst.requests if r.cls == "rt")
    assert run.batches >= 2 and run.simulations == run.batches
    prev_done = 0.0
    for k in range(run.batches):
        arrivals, done = _batch_span(inst, ev, k)
        assert arrivals == {prev_done}  # batch 0 at t = 0, then the previous completion
        prev_done = done
    # submissions stop at the first completion after the last RT arrival
    assert _batch_span(inst, ev, run.batches - 2)[1] <= horizon < prev_done
    # the run is an ordinary instance: re-simulating and re-evaluating it gives the same
    again = evaluate(inst, simulate(inst, get_policy(policy)))
    assert np.array_equal(again.completion, ev.completion)


def test_instance_without_be_batches_is_an_error():
    inst = Instance("x", LIM, generate("fixed", n=1, prompt=4, output=2).cost_model,
                    (Request("r0", 0.0, 4, 2, cls="rt"),))
    with pytest.raises(Exception, match="no BE request"):
        closed_loop_be(inst, lambda: get_policy("vllm"))
