"""The gap attribution (optsched/bounds/attribution.py; ``studies/bounds/gap_attribution.py``).

* ``srpt_total_flow`` is preemptive SRPT: on random jobs it is no worse than serving in arrival
  order or in any static priority order without preemption (SRPT is optimal for total flow
  time on one preemptive server), equals the sum of works when jobs never overlap, and
  matches a hand-computed preemption;
* ``attribute`` splits a feasible schedule's total latency as its docstring says: TTFT plus the
  decode spans, own works that sum to the busy time, SRPT at those works below the total
  latency (the schedule itself serves each request its own work between its arrival and its
  completion on one machine), on random valid schedules; ``alone_work`` by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.bounds.attribution import alone_work, attribute, own_work, srpt_total_flow
from optsched.cost import LinearCost, UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule
from optsched.testing import instances, valid_schedules


def srpt_total(work, arrival):
    return srpt_total_flow(arrival, work)






def _nonpreemptive(work, arrival, priority):
    """Serve whole jobs, at each free moment the arrived one of smallest ``priority``."""
    t, total, left = 0.0, 0.0, set(range(len(work)))
    while left:
        ready = [i for i in left if arrival[i] <= t + 1e-12]
        if not ready:
            t = min(arrival[i] for i in left)
            continue
        i = min(ready, key=lambda j: (priority[j], j))
        t += work[i]
        total += t - arrival[i]
        left.remove(i)
    return total


jobs = st.lists(st.tuples(st.floats(0.0, 10.0), st.floats(0.01, 5.0)), min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(jobs)
def test_srpt_is_no_worse_than_nonpreemptive_orders(js):
    arrival = np.array([a for a, _ in js])
    work = np.array([w for _, w in js])
    s = srpt_total(work, arrival)
    assert s <= _nonpreemptive(work, arrival, arrival) + 1e-9
    assert s <= _nonpreemptive(work, arrival, work) + 1e-9
    assert s >= work.sum() - 1e-9  # every job waits at least its own work


def test_srpt_separate_jobs_and_one_preemption():
    assert srpt_total(np.array([1.0, 2.0]), np.array([0.0, 5.0])) == pytest.approx(3.0)
    # job 0 (work 4) at 0; job 1 (work 1) at 1 preempts it: done at 2; job 0 done at 5
    assert srpt_total(np.array([4.0, 1.0]), np.array([0.0, 1.0])) == pytest.approx(1.0 + 5.0)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_attribution_of_a_random_valid_schedule(data):
    inst = data.draw(instances(max_requests=5))
    s = data.draw(valid_schedules(inst)).schedule
    r = attribute(inst, s)
    assert r.ttft + r.decode_span == pytest.approx(r.total_latency, rel=1e-9, abs=1e-9)
    assert own_work(inst, s).sum() == pytest.approx(r.busy, rel=1e-9, abs=1e-9)
    assert r.srpt_own <= r.total_latency * (1 + 1e-9) + 1e-9


def test_attribution_by_hand():
    # unit time; a (I = 2, O = 2) and b (I = 1, O = 1) at 0; batch 0: a 2 + b 1 (b done at 1,
    # a's first token), batch 1: a decodes (done at 2). Own work: batch 0's second split 2:1,
    # so a gets 2/3 + 1 = 5/3, b 1/3. Total latency 2 + 1 = 3, TTFT 1 + 1 = 2, decode spans
    # 1 + 0. SRPT on (0, 5/3), (0, 1/3): b done at 1/3, a at 2 -> 7/3.
    inst = Instance("h", Limits(kv_capacity=8, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0.0, 2, 2), Request("b", 0.0, 1, 1)))
    s = Schedule.from_batches([([("a", 2), ("b", 1)], []), ([("a", 1)], [])])
    r = attribute(inst, s)
    assert (r.total_latency, r.busy, r.ttft, r.decode_span) == (3.0, 2.0, 2.0, 1.0)
    assert own_work(inst, s).tolist() == pytest.approx([5 / 3, 1 / 3])
    assert r.srpt_own == pytest.approx(7 / 3)


def test_alone_work_by_hand():
    # linear k0 = 1, k1 = 0.5 per token, kdm = 0.25 per cached token of a decode entry (and
    # k1 for its token): a (I = 2, O = 3) alone: prefill 1 + 0.5 * 2 = 2; decodes at 2 and 3
    # cached tokens: 1 + 0.5 + 0.25 * 2 = 2, 1 + 0.5 + 0.25 * 3 = 2.25 -> 4.25
    inst = Instance("h", Limits(kv_capacity=8, max_batch_tokens=8), LinearCost(k0=1.0, k1=0.5, kdm=0.25),
                    (Request("a", 0.0, 2, 3),))
    pre, dec = alone_work(inst)
    assert pre.tolist() == pytest.approx([2.0]) and dec.tolist() == pytest.approx([4.25])


def test_an_infeasible_schedule_is_refused():
    inst = Instance("h", Limits(kv_capacity=8, max_batch_tokens=8), UnitCost(), (Request("a", 0.0, 2, 2),))
    with pytest.raises(ValueError, match="infeasible"):
        attribute(inst, Schedule.from_batches([([("a", 5)], [])]))
