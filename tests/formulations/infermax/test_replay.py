"""The replay the InferMax flow and fill ``encode`` share (optsched/formulations/infermax/replay.py):
on random feasible schedules it walks every request to its output (semantics section 3), one
step per batch with entries, and never processes more tokens than a request has available."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.evaluation import evaluate
from optsched.formulations.base import FormulationError
from optsched.formulations.infermax.replay import folded_batches
from optsched.testing import instances, valid_schedules


@st.composite
def scheduled(draw):
    inst = draw(instances(max_requests=4))
    return inst, draw(valid_schedules(inst, evict_prob=0.3)).schedule


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(scheduled())
def test_the_replay_walks_every_request_to_its_output(case):
    inst, s = case
    assert evaluate(inst, s).feasible
    with_entries = sum(1 for bt in s if bt.entries)
    batches = list(folded_batches(inst, s, with_entries, "test"))
    assert len(batches) == with_entries
    prompt = {r.id: r.prompt for r in inst.requests}
    last = {rid: (0, 0) for rid in inst.ids}
    for moves in batches:
        assert [mv.rid for mv in moves] == list(inst.ids)
        for mv in moves:
            assert (mv.g, mv.m) == last[mv.rid]  # each batch starts where the last one ended
            available = prompt[mv.rid] + mv.g - (0 if mv.evicted else mv.m)
            assert 0 <= mv.tokens <= available
            assert mv.g1 == mv.g + (1 if mv.tokens and mv.tokens == available else 0)
            last[mv.rid] = (mv.g1, mv.m1)
    assert {rid: g for rid, (g, _) in last.items()} == {r.id: r.output for r in inst.requests}


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(scheduled())
def test_the_replay_refuses_more_batches_than_the_horizon(case):
    inst, s = case
    with_entries = sum(1 for bt in s if bt.entries)
    with pytest.raises(FormulationError, match=f"model encode: more than J = {with_entries - 1}"):
        list(folded_batches(inst, s, with_entries - 1, "model"))
