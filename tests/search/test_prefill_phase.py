"""Prefill-first schedules (optsched/search/prefill_phase.py): feasible under the one evaluator for
any key and packing, every first token before any later token, and on a tiny instance the
mean TTFT derived by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schedule_checks import assert_first_tokens_first

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.search.prefill_phase import PrefillPhaseError, prefill_first_schedule
from optsched.testing import online_instances


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=online_instances(), pack=st.sampled_from([1, 2, 3, 1 << 30]),
       chunk=st.sampled_from([0, 0, 1, 3, 8]), seed=st.integers(0, 2**16))
def test_feasible_and_first_tokens_first(inst, pack, chunk, seed):
    key = np.random.default_rng(seed).integers(0, 5, inst.n).astype(np.float64)
    s = prefill_first_schedule(inst, key, pack, chunk)
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations[:3]
    assert_first_tokens_first(inst, s)


def test_mean_ttft_by_hand():
    # unit cost: every batch takes 1. Requests (arrival, I, O): a (0, 4, 1), b (0, 2, 3),
    # c (0.5, 1, 2); C = 8, M = 20. Key b < c < a.
    # pack=1: t=0 pending {a, b}: b first (batch 1, ends 1); at t=1 pending {a, c}: c (ends
    # 2), then a (ends 3). TTFT: b 1, c 2 - 0.5 = 1.5, a 3 -> mean 5.5 / 3.
    # pack=8: t=0 pending {a, b}: b and a packed (6 tokens, ends 1); c at t=1 (ends 2).
    # TTFT: a 1, b 1, c 1.5 -> mean 3.5 / 3.
    inst = Instance("hand", Limits(kv_capacity=20, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0.0, 4, 1), Request("b", 0.0, 2, 3),
                     Request("c", 0.5, 1, 2)))
    key = np.array([3.0, 1.0, 2.0])
    one = evaluate(inst, prefill_first_schedule(inst, key, 1))
    packed = evaluate(inst, prefill_first_schedule(inst, key, 8))
    assert one.feasible and packed.feasible
    assert one.objective("mean-ttft") == pytest.approx(5.5 / 3)
    assert packed.objective("mean-ttft") == pytest.approx(3.5 / 3)


def test_a_chunked_prefill_is_overtaken_by_a_smaller_key():
    # unit cost. a (0, I=4, O=1), b (1, I=1, O=1); chunk 2, key b < a. Batch 1 (t 0-1): a's
    # tokens 1-2; at t=1 b has arrived with the smaller key: batch 2 (1-2) is b's prompt,
    # TTFT 2 - 1 = 1; batch 3 (2-3) a's tokens 3-4, TTFT 3. Mean (3 + 1) / 2 = 2.
    inst = Instance("hand", Limits(kv_capacity=20, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0.0, 4, 1), Request("b", 1.0, 1, 1)))
    s = prefill_first_schedule(inst, np.array([2.0, 1.0]), 1, chunk=2)
    ev = evaluate(inst, s)
    assert ev.feasible
    a, b = s.ids.index("a"), s.ids.index("b")
    assert [s.entry_req[s.batch_ptr[j]:s.batch_ptr[j + 1]].tolist()
            for j in range(s.n_batches)] == [[a], [b], [a]]
    assert ev.objective("mean-ttft") == pytest.approx(2.0)


def test_bad_pack_is_refused():
    inst = Instance("hand", Limits(kv_capacity=20, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0.0, 4, 1),))
    with pytest.raises(PrefillPhaseError, match="pack"):
        prefill_first_schedule(inst, np.zeros(1), 0)


def test_packed_prompts_that_fit_m_only_alone_go_in_separate_batches():
    # regression (Hypothesis, 2026-11-26): two 8-token prompts, M = 12, pack = 2. Each fits M
    # alone, both together (16) do not; packing them raised PrefillPhaseError instead of
    # prefilling them one after the other (unit cost: a at 1, b at 2 after a is evicted).
    inst = Instance("two", Limits(kv_capacity=12, max_batch_tokens=100), UnitCost(),
                    (Request("a", 0.0, 8, 2), Request("b", 0.0, 8, 2)))
    s = prefill_first_schedule(inst, np.zeros(2), 2, 0)
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations[:3]
    assert [len(s.batch(j).entries) for j in range(2)] == [1, 1]
