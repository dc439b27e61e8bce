"""Every bound is at most the optimum (bounds.md): on the shipped instances with proven
optima, on random small instances against the exhaustive search, and at most every
registered policy's objective on random instances up to 200 requests. A bound above an
optimum is a defect, not a weak bound."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optsched
from optsched.bounds import BoundError, BoundResult, Floors, bound_methods, lower_bound
from optsched.bounds.floors import block_area
from optsched.bounds.srpt import srpt_total_completion
from optsched.cost import LinearCost, UnitCost
from optsched.evaluate import OBJECTIVES, evaluate
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.instance import Instance, Limits, Request
from optsched.objectives import MODELLED
from optsched.policies import list_policies, simulate

REPO = Path(__file__).resolve().parent.parent
CHEAP = ("request", "work", "srpt", "mbt", "combinatorial", "spread", "events")


def cheap_bounds(inst, objective):
    out = {}
    for name in CHEAP:
        if objective in bound_methods()[name].objectives:
            out[name] = lower_bound(inst, objective, name).value
    return out


@st.composite
def cost_models(draw):
    if draw(st.booleans()):
        return UnitCost()
    coef = st.sampled_from([0.0, 0.0, 1e-4, 1e-3, 0.01, 0.1, 1.0])
    k = {name: draw(coef) for name in ("k0", "k1", "kpq", "kpm", "kdm", "kpr", "kpl", "kpb", "kdb")}
    # kdr may be negative as long as a decode token costs k1 + kdr >= 0
    k["kdr"] = draw(st.sampled_from([0.0, 0.02, -k["k1"]]))
    return LinearCost(**k)


@st.composite
def instances(draw, max_requests=4, max_prompt=8, max_output=4):
    n = draw(st.integers(1, max_requests))
    online = draw(st.booleans())
    reqs = [Request(f"q{i}", float(draw(st.integers(0, 4))) if online else 0.0,
                    draw(st.integers(1, max_prompt)), draw(st.integers(1, max_output)))
            for i in range(n)]
    block = draw(st.sampled_from([1, 1, 2, 3]))
    peak = max(-(-(r.prompt + r.output - 1) // block) * block for r in reqs)
    M = draw(st.integers(peak, peak * 3))
    C = draw(st.integers(max(1, peak // 2), peak * 2))
    P = draw(st.one_of(st.none(), st.integers(1, C)))
    B = draw(st.one_of(st.none(), st.integers(1, n + 1)))
    lim = Limits(kv_capacity=M, max_batch_tokens=C, max_prefill_tokens=P, max_batch_size=B,
                 block_size=block)
    return Instance("hyp", lim, draw(cost_models()), tuple(reqs))


def _assert_below(bounds: dict, value: float, what: str, inst: Instance):
    for name, b in bounds.items():
        assert b <= value * (1 + 1e-9) + 1e-12, (
            f"bound {name} = {b!r} exceeds {what} {value!r} on {inst.to_json(indent=None)}")


# --- shipped instances with proven optima ---------------------------------------------------
def _manifest_cases():
    m = json.loads((REPO / "instances" / "manifest.json").read_text())["instances"]
    for key, ent in m.items():
        for obj, o in ent["objectives"].items():
            if o.get("optimum") is not None:
                yield pytest.param(ent["file"], obj, o["optimum"], id=f"{Path(key).stem}-{obj}")


@pytest.mark.parametrize("file,objective,optimum", list(_manifest_cases()))
def test_bounds_below_manifest_optima(file, objective, optimum):
    path = REPO / file
    inst = Instance.load(path if path.exists() else REPO / "optsched" / "data" / Path(file).name)
    bounds = cheap_bounds(inst, objective)
    _assert_below(bounds, optimum, "the proven optimum", inst)
    best = optsched.lower_bound(inst, objective, "best", time_limit=2)
    _assert_below({"best": best.value}, optimum, "the proven optimum", inst)


# --- random small instances against the exhaustive search -----------------------------------
def _check_against_search(inst, objective, max_states):
    res = search(inst, objective, SearchOptions(max_states=max_states, time_limit=5))
    if res.status != "optimal":
        return  # too large for the oracle within the limit: nothing is claimed
    opt = evaluate(inst, res.schedule).objective(objective)
    _assert_below(cheap_bounds(inst, objective), opt, "the exhaustive optimum", inst)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(max_requests=3, max_prompt=6, max_output=3),
       objective=st.sampled_from(MODELLED))
def test_bounds_below_exhaustive_optimum(inst, objective):
    _check_against_search(inst, objective, 3_000)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(), objective=st.sampled_from(MODELLED))
def test_bounds_below_exhaustive_optimum_more(inst, objective):
    _check_against_search(inst, objective, 20_000)


# --- random instances up to 200 requests against every registered policy ------------------
@st.composite
def larger_instances(draw):
    n = draw(st.integers(1, 200))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    online = draw(st.booleans())
    block = draw(st.sampled_from([1, 16]))
    I = rng.integers(1, 300, n)
    O = rng.integers(1, 60, n)
    arr = np.sort(rng.exponential(0.05, n).cumsum()) if online else np.zeros(n)
    reqs = tuple(Request(f"r{i}", float(arr[i]), int(I[i]), int(O[i])) for i in range(n))
    peak = int((I + O - 1).max())
    M = -(-peak * draw(st.integers(1, 8)) // block) * block + block
    lim = Limits(kv_capacity=M, max_batch_tokens=draw(st.sampled_from([512, 2048])),
                 block_size=block)
    cm = draw(st.sampled_from([UnitCost(), LinearCost(k0=0.01, k1=6e-5, kpq=5e-9, kpm=1e-8,
                                                      kdm=3e-7, kpr=1e-4, kdr=2e-5, kpb=3e-3,
                                                      kdb=6e-4)]))
    return Instance("big", lim, cm, reqs)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=larger_instances(), objective=st.sampled_from(OBJECTIVES))
def test_bounds_below_every_policy(inst, objective):
    bounds = cheap_bounds(inst, objective)
    for spec in list_policies():
        ev = evaluate(inst, simulate(inst, spec.name))
        assert ev.feasible, f"policy {spec.name} gave an infeasible schedule"
        _assert_below(bounds, ev.objective(objective), f"policy {spec.name}'s objective", inst)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=larger_instances(), objective=st.sampled_from(OBJECTIVES))
def test_bounds_below_two_policies(inst, objective):
    bounds = cheap_bounds(inst, objective)
    for name in ("vllm", "sarathi"):
        ev = evaluate(inst, simulate(inst, name))
        _assert_below(bounds, ev.objective(objective), f"policy {name}'s objective", inst)


# --- the pieces, by hand ---------------------------------------------------------------------
def test_block_area_matches_the_sum():
    rng = np.random.default_rng(0)
    for b in (1, 2, 3, 16):
        lo = rng.integers(1, 50, 30)
        hi = lo + rng.integers(-1, 40, 30)
        want = [sum(-(-x // b) * b for x in range(a, c + 1)) for a, c in zip(lo, hi)]
        assert block_area(lo, hi, b).tolist() == want


def test_srpt_hand_worked():
    # jobs (release, work): (0, 3), (1, 1): at t=1 job 2 (1 left) preempts job 1 (2 left):
    # job 2 completes at 2, job 1 at 4 -> 6 (non-preemptive order 1,2 would give 3 + 4 = 7)
    assert srpt_total_completion(np.array([0.0, 1.0]), np.array([3.0, 1.0])) == 6.0
    # idle gap: (5, 2) alone completes at 7
    assert srpt_total_completion(np.array([5.0]), np.array([2.0])) == 7.0


def test_unit_floors_by_hand():
    # I=5, O=3, C=2 (P=C): prefill needs ceil(5/2)=3 batches, then 2 more tokens -> 5 batches
    inst = Instance("h", Limits(kv_capacity=20, max_batch_tokens=2), UnitCost(),
                    (Request("a", 1.0, 5, 3),))
    f = Floors(inst)
    assert f.own_batches.tolist() == [5] and f.tokens.tolist() == [7]
    assert f.area.tolist() == [5 + 6 + 7]
    assert f.chain.tolist() == [5.0] and f.prefill_chain.tolist() == [3.0]
    assert lower_bound(inst, "makespan", "request").value == pytest.approx(6.0)


def test_linear_decode_or_refill_is_the_cheaper_step():
    # a cost model where a refill is cheaper than a decode (kdm large, prefill terms cheap):
    # step g (S = I + g) costs min(kdm (S - 1), kpr + k1 S) = min(S - 1, 2 + 0.1 S)
    cm = LinearCost(kdm=1.0, kpr=2.0, k1=0.1)
    inst = Instance("h", Limits(kv_capacity=50, max_batch_tokens=50), cm, (Request("a", 0.0, 1, 4),))
    # prefill: one chunk, kpr + k1 I = 2.1; steps S = 2, 3, 4 (decode entries also pay k1):
    # min(0.1 + 1, 2.2) + min(0.1 + 2, 2.3) + min(0.1 + 3, 2.4) = 1.1 + 2.1 + 2.4 = 5.6
    assert Floors(inst).entry_cost.tolist() == [pytest.approx(7.7)]


def test_kv_area_forces_batches():
    # 4 requests I=3, O=2 (area 3+4 = 7 each) in M = 8: one batch holds one generating request
    # at its second token (4 <= 8, two would be 8 <= 8: fine) -- area 28 / 8 -> >= 4 batches;
    # tokens 4*4 = 16 over C = 100 -> 1; own batches 2. Unit time: makespan >= 4.
    reqs = tuple(Request(f"r{i}", 0.0, 3, 2) for i in range(4))
    inst = Instance("h", Limits(kv_capacity=8, max_batch_tokens=100), UnitCost(), reqs)
    assert lower_bound(inst, "makespan", "work").value == pytest.approx(4.0)


def test_best_names_its_method_and_ladder():
    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    r = optsched.lower_bound(inst, "makespan", "best", time_limit=10)
    assert r.method in r.ladder and r.value == pytest.approx(max(r.ladder.values()))
    assert BoundResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_exact_reports_why_it_cannot_run():
    reqs = tuple(Request(f"r{i}", float(i), 50, 20) for i in range(30))
    inst = Instance("h", Limits(kv_capacity=200, max_batch_tokens=100), UnitCost(), reqs)
    with pytest.raises(BoundError, match="exact"):
        optsched.lower_bound(inst, "total-latency", "exact", time_limit=5)
    r = optsched.lower_bound(inst, "total-latency", "best", time_limit=5)
    assert r.method in CHEAP and any("exact" in n for n in r.notes)


def test_the_exact_rung_solves_with_the_solve_it_is_handed():
    """The bounds sit below the pipeline and import no solve (issue 27): without one the exact
    rung says so and ``best`` notes it; handed one (as ``optsched.lower_bound`` hands the
    pipeline's) it calls that solve, and its bound is the exhaustive search's optimum."""
    from optsched.pipeline import solve

    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    with pytest.raises(BoundError, match="no solve was handed down"):
        lower_bound(inst, "makespan", "exact", time_limit=10)
    best = lower_bound(inst, "makespan", "best", time_limit=10)
    assert "exact" not in best.ladder and any("no solve was handed down" in n for n in best.notes)
    called = []

    def counting(instance, formulation, objective, **kwargs):
        called.append(formulation)
        return solve(instance, formulation, objective, **kwargs)

    r = lower_bound(inst, "makespan", "exact", time_limit=10, exact_solve=counting)
    optimum = search(inst, "makespan").objective
    assert called == ["exhaustive"] and r.value <= optimum
    assert r.value == pytest.approx(optimum, rel=1e-8)
    assert optsched.lower_bound(inst, "makespan", "exact", time_limit=10).value == r.value


def test_unknown_method_and_objective_are_errors():
    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    with pytest.raises(BoundError, match="unknown bound method"):
        lower_bound(inst, "makespan", "nope")
    with pytest.raises(BoundError, match="does not support"):
        lower_bound(inst, "makespan", "srpt")
    assert math.isfinite(lower_bound(inst, "mean-ttft", "combinatorial").value)


def test_own_bound_method_from_a_file(tmp_path):
    f = tmp_path / "mybound.py"
    f.write_text("from optsched.bounds import BoundResult\n"
                 "def half(instance, objective, budget):\n"
                 "    '''half the number of requests'''\n"
                 "    return BoundResult(instance.n / 2, 'half', objective)\n")
    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    assert lower_bound(inst, "makespan", f"{f}:half").value == pytest.approx(1.5)


def test_mbt_hand_worked():
    # one request at 0, unit time, I = 1, O = 3, M = C = 10 (10 entries per batch): the
    # optimum is 3 batches. Mix "count" (0, 0, 1): prefill work Wp = 1/10, each of the two
    # decode steps 1/10, w = 0.3; alone, MB = w / 2 = 0.15. Chain floors c_1 = c_2 = 1:
    # D = 2, tail_1 = 1, tail_2 = 0. T = [Wp (D + Wp/2) + 0.1 (1 + 0.05) + 0.1 (0 + 0.05)] / w
    # = (0.205 + 0.105 + 0.005) / 0.3 = 1.05; bound 0.15 + 1.05 = 1.2 (the "tokens" mix gives
    # the same, "kv" (KV 1, 2, 3 over 10) gives 0.3 + 0.47 / 0.6 = 1.0833).
    inst = Instance("h", Limits(kv_capacity=10, max_batch_tokens=10), UnitCost(),
                    (Request("a", 0.0, 1, 3),))
    assert lower_bound(inst, "total-latency", "mbt").value == pytest.approx(1.2)


def test_pswf_mean_busy_by_hand():
    from optsched.bounds.mbt import pswf_mean_busy_sum

    # (release, work) = (0, 3), (1, 1): smallest work first preempts at 1: job 1 runs [0, 1)
    # and [2, 4), job 2 runs [1, 2). MB_1 = (0.5 * 1 + 3 * 2) / 3 = 6.5 / 3, MB_2 = 1.5.
    got = pswf_mean_busy_sum(np.array([0.0, 1.0]), np.array([3.0, 1.0]))
    assert got == pytest.approx(6.5 / 3 + 1.5)


def test_promising_mixes_keeps_the_largest_proxies():
    from optsched.bounds.srpt import PROMISING, promising_mixes

    works = {(1.0, 0.0, 0.0): np.array([3.0, 1.0]), (0.0, 1.0, 0.0): np.array([1.0, 1.0]),
             (0.0, 0.0, 1.0): np.array([2.0, 2.0])}
    assert promising_mixes(works, 10) == list(works)  # small: every mix gets a pass
    # SPT totals with releases at 0: 1 + 4 = 5, 1 + 2 = 3, 2 + 4 = 6
    assert promising_mixes(works, 10_000) == [(0.0, 0.0, 1.0), (1.0, 0.0, 0.0)][:PROMISING]
