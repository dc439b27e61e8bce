"""The LNS's priority decoders (optsched/search/lns_decode.py) and trace-scale moves (optsched/search/lns.py):
a replayed prefix keeps the evaluator's timing, a decoder resumed on its own schedule at a
handover point rebuilds the same schedule, and improve never ends worse than its start."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.evaluation import OBJECTIVES, evaluate
from optsched.policies import simulate
from optsched.schedule import Schedule
from optsched.search.decoder import resumable_decoders
from optsched.search.lns import LNSOptions, _free_starts, _handover_points, improve
from optsched.search.lns_decode import decode
from optsched.testing import instances, valid_schedules

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))


def _batches(s: Schedule) -> list:
    """Non-empty batches, entries sorted (the order of entries in a batch has no meaning,
    semantics section 3; a resumed MC-SF lists its running requests by rank, not admission)."""
    return [(sorted(b.entries), sorted(b.evict)) for b in s if b.entries or b.evict]


@settings(max_examples=40, **SETTINGS)
@given(data=st.data(), dec=st.sampled_from(resumable_decoders()))
def test_a_whole_prefix_is_replayed_with_the_evaluators_timing(data, dec):
    """Resuming after every batch of a feasible schedule gives back its non-empty batches,
    and (free starts, semantics section 4) the same objectives."""
    inst = data.draw(instances(max_requests=4, max_prompt=6, max_output=3))
    s = _free_starts(data.draw(valid_schedules(inst)).schedule, inst.ids)
    key = np.arange(inst.n, dtype=np.float64)
    got = decode(inst, dec, key, prefix=s, j0=s.n_batches)
    assert _batches(got) == _batches(s)
    a, b = evaluate(inst, got), evaluate(inst, _free_starts(s, inst.ids))
    assert a.feasible
    for obj in OBJECTIVES:
        assert a.objective(obj) == pytest.approx(b.objective(obj), rel=1e-12)


@settings(max_examples=30, **SETTINGS)
@given(inst=instances(max_requests=5, max_prompt=8, max_output=4),
       dec=st.sampled_from(resumable_decoders()), seed=st.integers(0, 9))
def test_resuming_a_decoder_on_its_own_schedule_changes_nothing(inst, dec, seed):
    """At a handover point no (re)fill is under way, so the state a decoder rebuilds (running,
    waiting, evicted, reservations) is the state it had: the same key gives the same batches."""
    key = np.random.default_rng(seed).random(inst.n)
    full = decode(inst, dec, key)
    for j0 in _handover_points(inst, full).tolist():
        assert _batches(decode(inst, dec, key, prefix=full, j0=j0)) == _batches(full), j0


def test_handover_points_skip_a_refill_under_way():
    """C = 2: a's 3-token prompt is chunked 2 + 1. Batch 0 leaves it part-prefilled, so
    batch 1 is no handover point; after batch 1 (a: 3/4/1, decoding) batch 2 is."""
    from optsched.instance import Instance, Limits, Request

    inst = Instance("h", Limits(kv_capacity=10, max_batch_tokens=2),
                    requests=(Request("a", 0.0, 3, 3),))
    s = Schedule.from_batches([([("a", 2)], []), ([("a", 1)], []), ([("a", 1)], []),
                               ([("a", 1)], [])])
    assert _handover_points(inst, s).tolist() == [2, 3]


@settings(max_examples=20, **SETTINGS)
@given(inst=instances(max_requests=5, max_prompt=8, max_output=4, online=True),
       objective=st.sampled_from(OBJECTIVES),
       start=st.sampled_from(["ttft-first", "vllm", "mcsf", "sarathi"]), seed=st.integers(0, 3))
def test_priority_moves_never_end_worse_than_the_start(inst, objective, start, seed):
    """Every neighbourhood (seed keys with both decoders, block, crowded batch, key mix, time
    window) only replaces the best by a strictly better evaluated schedule."""
    s = simulate(inst, start)
    res = improve(inst, s, objective, LNSOptions(time_limit=5.0, max_iterations=25, seed=seed,
                                                 priority_share=1.0, progress=False))
    ev = evaluate(inst, res.schedule)
    assert ev.feasible
    assert res.objective == pytest.approx(ev.objective(objective), rel=1e-12)
    assert res.objective <= evaluate(inst, s).objective(objective) * (1 + 1e-12)
    assert (res.method == "start") == (res.improvements == 0)
