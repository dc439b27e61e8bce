"""The library code of the gap attribution (``studies/bounds/gap_attribution.py``).

* the coarsened cost model (:func:`optsched.cost.coarsened`) prices one decode unit as ``q``
  decode steps of the preset with ``q`` times the cached tokens, exactly (the identity its
  docstring states), and ``q = 1`` is the preset itself;
* ``srpt_total_flow`` is preemptive SRPT: on random jobs it is no worse than serving in arrival
  order or in any static priority order without preemption (SRPT is optimal for total flow
  time on one preemptive server), equals the sum of works when jobs never overlap, and
  matches a hand-computed preemption.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.bounds.attribution import srpt_total_flow
from optsched.cost import coarsened, preset

PRESET = "infermax-llama2-7b-a100"


def srpt_total(work, arrival):
    return srpt_total_flow(arrival, work)


@given(st.integers(1, 200), st.integers(1, 64), st.integers(0, 5000))
def test_coarse_decode_unit_is_q_real_steps(q, n, cached_units):
    real, coarse = preset(PRESET), coarsened(preset(PRESET), q)
    assert coarse.decode_batch_time(n, cached_units) == pytest.approx(
        q * real.decode_batch_time(n, q * cached_units), rel=1e-12
    )


def test_coarse_cost_of_one_is_the_preset():
    real, one = preset(PRESET), coarsened(preset(PRESET), 1)
    assert one.coefficients == pytest.approx(real.coefficients, rel=1e-12, abs=1e-15)


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
