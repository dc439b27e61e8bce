"""Closed-loop BE submission (BROS section 7.1, optsched.workloads.hybrid.closed_loop_be): each BE
batch arrives exactly when the previous one completes under the policy measured."""

import numpy as np
import pytest

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import get_policy, simulate
from optsched.schedule import Schedule
from optsched.workloads.generators import generate
from optsched.workloads.hybrid import bros_workload, closed_loop_be, hybrid_metrics

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


# -- BROS metrics -------------------------------------------------------
def test_tpot_attainment_per_token_and_be_throughput_while_rt_requests_are_served():
    # r (RT, I = 1, O = 4, TPOT SLO 2) and y (BE, I = 1, O = 1) at 0; z (BE, I = 1, O = 1)
    # at 7. Unit time: B0 [0,1] r's prefill and y (y done at 1); B1 [1,2] r; B2 stated start
    # 4 -> [4,5]; B3 [5,6] r's last token; B4 [7,8] z.  r's tokens at 1, 2, 5, 6: gaps 1, 3, 1
    # -> 2 of 3 within 2 s; its mean TPOT (6 - 1) / 3 = 1.67 <= 2 meets the per-request
    # reading. RT in the system over [0, 6]: one BE request (y) finished inside: 1 / 6 per s;
    # over the makespan 8: 2 / 8.
    inst = Instance("h", Limits(kv_capacity=16, max_batch_tokens=8), UnitCost(),
                    (Request("r", 0, 1, 4, cls="rt", ttft_slo=10.0, tpot_slo=2.0),
                     Request("y", 0, 1, 1, cls="be"), Request("z", 7, 1, 1, cls="be")))
    s = Schedule.from_batches([([("r", 1), ("y", 1)], []), ([("r", 1)], []),
                               ([("r", 1)], [], 4.0), ([("r", 1)], []), ([("z", 1)], [])])
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations
    m = hybrid_metrics(inst, ev, s)
    assert m["rt_tpot_attainment"] == 1.0 and m["rt_tpot_token_attainment"] == 2 / 3
    assert m["be_throughput"] == 2 / 8 and m["be_throughput_coserving"] == 1 / 6
