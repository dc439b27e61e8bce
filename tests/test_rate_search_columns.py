"""``at_rate`` builds a plain instance's probe from columns (issue 31, ``optsched capacity``):
the same instance, request for request, as rebuilding each request with its new arrival."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.serving.rate_search import _plain, at_rate
from optsched.workloads.generators import infermax_mix


def _rebuilt(instance, rate: float, seed: int):
    """The probe as ``at_rate`` always built it: each request re-made with its arrival."""
    gaps = np.random.default_rng(seed).standard_exponential(instance.n)
    gaps[0] = 0.0
    arrival = np.cumsum(gaps) / rate
    return instance.replace(requests=tuple(
        dataclasses.replace(r, arrival=float(a)) for r, a in zip(instance.requests, arrival)))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), rate=st.floats(0.01, 1e4), seed=st.integers(0, 2**16))
def test_plain_probe_from_columns_is_the_rebuilt_instance(n, rate, seed):
    inst = infermax_mix("LILO", n, seed=seed % 7)
    assert all(_plain(r) for r in inst.requests)  # the columns path is the one taken
    got = at_rate(inst, rate, seed)
    want = _rebuilt(inst, rate, seed)
    assert got == want
    assert np.array_equal(got.arrival, want.arrival)
    assert got.ids == want.ids and got.content_hash == want.content_hash


def test_requests_with_slos_keep_them():
    inst = infermax_mix("LILO", 12, seed=1).with_default_slos(ttft_slo=2.0, tpot_slo=0.1)
    assert not any(_plain(r) for r in inst.requests)  # the per-request path
    got = at_rate(inst, 3.0, 5)
    assert got == _rebuilt(inst, 3.0, 5)
    assert all(r.ttft_slo == 2.0 and r.tpot_slo == 0.1 for r in got.requests)
