"""Every registered key decoder is valid (``optsched/search/decoder.py``): for random keys (ties
included) on random instances, the schedule it builds -- when it builds one -- is feasible by
the one evaluator and deterministic (the same decoder again, and a fresh one, build the same
schedule). A decoder with a resumable form (the one LNS runs) builds the same schedule
through it, and resumed on that schedule at any handover point it changes nothing.

Parametrised over the registry (``DECODERS``), so a decoder added as one new module is
tested here with no edit. A decoder that declines an instance (``DecoderError``: no compiled
kernel for it) or gives up on a key (None) claims nothing there: such examples are discarded
with ``assume`` (Hypothesis fails a test whose every example is discarded)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optsched.evaluation import evaluate
from optsched.schedule import Schedule
from optsched.search.decoder import DECODERS, DecoderError, get_decoder
from optsched.search.lns import _handover_points
from optsched.testing import instances

#: examples per decoder
EXAMPLES = 30


def _batches(s: Schedule) -> list:
    """Non-empty batches, entries sorted (the order of entries in a batch has no meaning,
    semantics section 3; a resumed MC-SF lists its running requests by rank, not admission)."""
    return [(sorted(b.entries), sorted(b.evict)) for b in s if b.entries or b.evict]


@pytest.mark.parametrize("name", DECODERS.names())
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=instances(max_requests=5, max_prompt=8, max_output=4), seed=st.integers(0, 2**16))
def test_decoder_feasible_deterministic_resumable(name, inst, seed):
    spec = get_decoder(name)
    key = np.random.default_rng(seed).integers(0, 4, inst.n).astype(np.float64)
    try:
        dec = spec.make(inst, name)
    except DecoderError:
        assume(False)  # the decoder declines this instance
    s = dec.decode(key)
    assume(s is not None)  # it gave up on this key
    ev = evaluate(inst, s)
    assert ev.feasible, (name, ev.violations[:3])
    assert dec.decode(key) == s, f"{name}: a second decode differs"
    assert spec.make(inst, name).decode(key) == s, f"{name}: a fresh decoder differs"
    if spec.resumable is None:
        return
    r = spec.resumable(inst, name)
    full = r.resume(key, None, 0, None)
    assert full == s, f"{name}: the resumable form builds another schedule"
    for j0 in _handover_points(inst, full).tolist():
        assert _batches(r.resume(key, full, j0, None)) == _batches(full), (name, j0)
