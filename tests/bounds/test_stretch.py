"""The ``stretch`` rung (bounds.md B15): below the exhaustive optimum on random small
instances (arrivals, evictions, chunking, blocks, unit and linear cost), below every policy
on random instances up to 200 requests, never below the chains it starts from, and its
pieces: the lower envelope of the rate-usage curve and the iterations' validity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windows import larger_windows

from optsched.bounds import Budget, Floors, lower_bound
from optsched.bounds.stretch import dual_bound, envelope
from optsched.cost import LinearCost
from optsched.evaluation import evaluate
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate
from optsched.testing import instances

OBJ = "total-latency"
#: the preset's coefficients scaled up so that small instances have long entries (the rung's
#: usage curve bends only when entries are comparable to the batch term)
HEAVY = LinearCost(k0=0.002, k1=0.003, kpq=5e-6, kpm=1e-5, kdm=4e-3, kpr=5e-4, kdr=0.001,
                   kpl=3e-4, kpb=0.003, kdb=0.0006)


def _below(bound: float, value: float, what: str, inst) -> None:
    assert bound <= value * (1 + 1e-9) + 1e-12, f"stretch {bound} above {what} {value}: {inst}"


def _check_against_search(inst, max_states):
    res = search(inst, OBJ, SearchOptions(max_states=max_states, time_limit=5))
    if res.status != "optimal":
        return  # too large for the oracle within the limit: nothing is claimed
    opt = evaluate(inst, res.schedule).objective(OBJ)
    _below(lower_bound(inst, OBJ, "stretch").value, opt, "the exhaustive optimum", inst)


@st.composite
def heavy(draw):
    inst = draw(instances(max_requests=3, max_prompt=6, max_output=3))
    return inst.replace(cost_model=HEAVY) if draw(st.booleans()) else inst


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=heavy())
def test_stretch_below_exhaustive_optimum(inst):
    _check_against_search(inst, 3_000)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=heavy())
def test_stretch_below_exhaustive_optimum_more(inst):
    _check_against_search(inst, 20_000)


def _stretch(inst, iterations):
    return dual_bound(Floors.of(inst), Budget.seconds(None), max_iterations=iterations).value


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=larger_windows())
def test_stretch_below_every_policy(inst):
    b = _stretch(inst, 200)
    for spec in list_policies():
        ev = evaluate(inst, simulate(inst, spec.name))
        assert ev.feasible
        _below(b, ev.objective(OBJ), spec.name, inst)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=larger_windows(max_requests=60))
def test_stretch_below_two_policies_and_above_the_chains(inst):
    b = _stretch(inst, 25)
    for name in ("vllm", "svf"):
        _below(b, evaluate(inst, simulate(inst, name)).objective(OBJ), name, inst)
    # the first iteration prices nothing: every request at its own chain (B3)
    assert b >= float(Floors.of(inst).chain.sum()) * (1 - 1e-9)


def test_envelope_is_below_the_usage_curve_and_touches_it():
    for e, h in ((4e-4, 2.7e-3), (1e-3, 1e-3), (0.05, 2.7e-3), (1e-6, 1.0)):
        slopes, lengths = envelope(e, h, 12)
        x = np.concatenate([[0.0], np.cumsum(lengths)])
        assert x[-1] == pytest.approx(1.0 / (h + e))
        pl = np.concatenate([[0.0], np.cumsum(slopes * lengths)])
        r = np.linspace(0.0, x[-1], 20001)
        c = r * e / (1.0 - h * r)
        env = np.interp(r, x, pl)
        assert (env <= c * (1 + 1e-9) + 1e-15).all()
        # touches at the last point (the alone rate uses the whole machine: c = 1)
        assert pl[-1] == pytest.approx(1.0, rel=1e-9)
    s, l = envelope(0.0, 2.0, 4)  # free entries: a step no faster than its batch term
    assert s.sum() == 0 and l.sum() == pytest.approx(0.5)


def test_two_identical_requests_by_hand():
    # two one-token prompts decoding 40 steps each, both at 0, decode entries ~ the batch term:
    # together every step costs h + 2e, alone h + e; the bound must lie between the chains
    # and the best of the two schedules (both together, or one after the other)
    k = HEAVY.coefficients
    inst = Instance("two", Limits(kv_capacity=200, max_batch_tokens=8), HEAVY,
                    (Request("a", 0.0, 1, 41), Request("b", 0.0, 1, 41)))
    chains = float(Floors.of(inst).chain.sum())
    b = lower_bound(inst, OBJ, "stretch").value
    best = min(evaluate(inst, simulate(inst, p)).objective(OBJ) for p in ("vllm", "fcfs"))
    assert chains < b <= best
    assert k["kdm"] > 0


def test_chains_of_rounding_noise_beside_a_long_arrival_span_get_a_bounded_grid():
    """Found by the slow step: with these costs every chain is 0 or rounding noise (~1e-18 s),
    and a grid step of a fiftieth of the median chain asked for ~10^18 intervals over the
    1 s arrival span (ValueError from numpy). The grid is capped at MAX_INTERVALS (any grid
    is valid) and the bound stays below the exhaustive optimum."""
    from optsched.bounds.stretch import MAX_INTERVALS, Grid, requests

    cost = LinearCost(k0=0.0, k1=0.0, kpq=0.0, kpm=1e-4, kdm=1e-4, kpr=0.0, kdr=0.0, kpl=0.0,
                      kpb=0.0, kdb=0.0)
    inst = Instance(name="noise", limits=Limits(kv_capacity=9, max_batch_tokens=9),
                    cost_model=cost,
                    requests=(Request(id="q0", arrival=0.0, prompt=1, output=1),
                              Request(id="q1", arrival=0.0, prompt=6, output=4),
                              Request(id="q2", arrival=1.0, prompt=1, output=1)))
    grid = Grid.of(requests(Floors.of(inst)).req)
    assert 2 <= grid.tau.size <= MAX_INTERVALS + 2
    _check_against_search(inst, 20_000)
