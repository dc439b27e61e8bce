"""The ``srpt`` rung (optsched/bounds/srpt.py, formulations/bounds.md B7): preemptive SRPT by hand,
the sharing mixes, and the indicative prefill-only values."""

from __future__ import annotations

import numpy as np

from optsched.bounds.srpt import prefill_indicative, srpt_total_completion
from optsched.cost import preset
from optsched.instance import Instance, Limits, Request

PRESET = "infermax-llama2-7b-a100"


def test_indicative_values_order():
    reqs = tuple(Request(f"r{i}", 0.05 * i, 200 + 97 * (i % 7), 3) for i in range(30))
    inst = Instance("gen", Limits(kv_capacity=30_000, max_batch_tokens=8192), preset(PRESET), reqs)
    lo, hi = prefill_indicative(inst)
    f = preset(PRESET)
    assert hi >= lo + f.k0 + f.kpb - 1e-12  # every prompt's own fixed time at least


def test_srpt_hand_worked():
    # jobs (release, work): (0, 3), (1, 1): at t=1 job 2 (1 left) preempts job 1 (2 left):
    # job 2 completes at 2, job 1 at 4 -> 6 (non-preemptive order 1,2 would give 3 + 4 = 7)
    assert srpt_total_completion(np.array([0.0, 1.0]), np.array([3.0, 1.0])) == 6.0
    # idle gap: (5, 2) alone completes at 7
    assert srpt_total_completion(np.array([5.0]), np.array([2.0])) == 7.0


def test_promising_mixes_keeps_the_largest_proxies():
    from optsched.bounds.srpt import PROMISING, promising_mixes

    works = {(1.0, 0.0, 0.0): np.array([3.0, 1.0]), (0.0, 1.0, 0.0): np.array([1.0, 1.0]),
             (0.0, 0.0, 1.0): np.array([2.0, 2.0])}
    assert promising_mixes(works, 10) == list(works)  # small: every mix gets a pass
    # SPT totals with releases at 0: 1 + 4 = 5, 1 + 2 = 3, 2 + 4 = 6
    assert promising_mixes(works, 10_000) == [(0.0, 0.0, 1.0), (1.0, 0.0, 0.0)][:PROMISING]
