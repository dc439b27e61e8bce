"""The fluid relaxation of :mod:`optsched.bounds.fluid` (formulations/bounds.md, "What
did not help": memory concurrency). Its schedules of the relaxation R are schedules of the
KV-share relaxation that ``dual`` and ``spread`` bound, so neither may exceed their value
(``coupled`` and ``srpt`` also keep token- and count-share floors, which R does not bound:
five one-token requests with ``C = 1`` put ``coupled`` at 15 against R's 9); both schedules
(with and without the memory row) complete every request, none faster than its memory-full
chain."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_bounds import _assert_below, instances

from optsched.bounds import lower_bound
from optsched.bounds.fluid import fluid_completions, relaxation


def _fluid(inst, cap_mem: float) -> np.ndarray:
    a = inst.arrival.astype(np.float64)
    x, dur, first, reserve = relaxation(inst)
    return fluid_completions(a, x, dur, first, reserve, cap_mem, 0.0) - a


# slow step: 40 examples of the numba fluid schedule and the dual rung, ~25 s quiet, ~75 s at load 10
@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(max_requests=6, max_prompt=8, max_output=5))
def test_fluid_rungs_stay_below_the_fluid_schedule(inst):
    lat = _fluid(inst, math.inf)
    x, dur, first, _ = relaxation(inst)
    chain = np.add.reduceat(dur, first)
    assert np.all(np.isfinite(lat))
    assert np.all(lat >= chain * (1 - 1e-9) - 1e-12)  # no request beats its memory-full chain
    value = float(lat.sum())
    bounds = {m: lower_bound(inst, "total-latency", m).value for m in ("spread", "dual")}
    _assert_below(bounds, value, "the fluid schedule of R", inst)
    mem = _fluid(inst, float(inst.limits.kv_capacity))
    assert np.all(np.isfinite(mem)) and np.all(mem >= chain * (1 - 1e-9) - 1e-12)
