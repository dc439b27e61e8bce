"""The certified goodput upper bound (``optsched/bounds/goodput.py``, bounds.md B12): never
below the attainment any policy or the exact optimum reaches; tight on hand-worked cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from handworked import shared_instance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.bounds.goodput import GoodputError, Slos, completion_windows, counting_misses, goodput_bound
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.metrics.serving import serving_metrics
from optsched.policies import list_policies, simulate


def _inst(reqs, M=12, C=6):
    return Instance("g", Limits(kv_capacity=M, max_batch_tokens=C), UnitCost(), tuple(reqs))


def test_three_simultaneous_one_token_requests_only_one_meets():
    # Unit time, C = 1: a batch holds one entry and takes 1. Three requests (I = O = 1)
    # arrive at 0 with TTFT SLO 1: each alone fits (chain 1 <= 1), but the interval
    # [0, 1] holds 3 units of work (w = 1 each under the count share 1/max_entries = 1)
    # in 1 unit of time, so at least 2 miss: bound 1, and the first batch meets it.
    reqs = [Request(f"r{k}", 0.0, 1, 1, ttft_slo=1.0) for k in range(3)]
    gb = goodput_bound(_inst(reqs, M=4, C=1))
    assert (gb.ttft_own, gb.ttft, gb.both) == (3, 1, 1)
    assert gb.attainment == pytest.approx(1 / 3)


def test_own_floor_rules_out_a_prompt_longer_than_its_slo():
    # C = 2: a 5-token prompt needs ceil(5/2) = 3 batches of >= 1 before its first token,
    # so TTFT >= 3 > 2 = its SLO; the 2-token prompt needs 1 batch <= 2.
    reqs = [Request("long", 0.0, 5, 2, ttft_slo=2.0), Request("short", 0.0, 2, 2, ttft_slo=2.0)]
    gb = goodput_bound(_inst(reqs, M=12, C=2))
    assert gb.ttft_own == 1 and gb.both == 1


def test_tpot_floor_counts_in_both_only():
    # O = 3: two more batches of >= 1 each after the first token, TPOT >= 1 > 0.5.
    reqs = [Request("a", 0.0, 1, 3, ttft_slo=5.0, tpot_slo=0.5)]
    gb = goodput_bound(_inst(reqs))
    assert (gb.ttft, gb.both) == (1, 0)


def test_cli_defaults_fill_only_missing_fields_and_bad_values_are_refused():
    reqs = [Request("a", 0.0, 1, 1, ttft_slo=1.0), Request("b", 0.0, 1, 1)]
    gb = goodput_bound(_inst(reqs, M=4, C=1), ttft=1.0)
    assert gb.with_slo == 2 and gb.ttft == 1  # both windows [0, 1], one unit of time
    assert goodput_bound(_inst(reqs, M=4, C=1)).with_slo == 1
    with pytest.raises(GoodputError, match="ttft"):
        goodput_bound(_inst(reqs), ttft=-1.0)


def test_disjoint_intervals_add_their_misses():
    # two bursts far apart, each 3 unit jobs in a window of length 1: 2 misses each
    r = np.array([0.0, 0, 0, 10, 10, 10])
    assert counting_misses(r, r + 1, np.ones(6)) == 4


def _random(rng, n):
    reqs = [Request(f"r{k}", float(rng.integers(0, 5)), int(rng.integers(1, 5)),
                    int(rng.integers(1, 4)), ttft_slo=float(rng.integers(1, 4)),
                    tpot_slo=float(rng.choice([1.0, 1.5, 3.0]))) for k in range(n)]
    return _inst(reqs, M=10, C=int(rng.integers(2, 7)))


@pytest.mark.parametrize("seed", range(6))
def test_bound_is_above_every_registered_policy(seed):
    rng = np.random.default_rng(seed)
    inst = _random(rng, int(rng.integers(4, 9)))
    gb = goodput_bound(inst)
    for name in REUSE_POLICIES + ("vllm", "sarathi", "fcfs"):
        att = evaluate(inst, simulate(inst, name)).metrics["slo_attainment"]
        assert att <= gb.attainment + 1e-12, (name, att, gb)


def _best_attainment_by_order(inst):
    """The best attainment over every arrival-respecting serial order of unit-time single-
    request batches (each request runs to completion alone): a feasible schedule family,
    so it must stay below the bound (a cheap exhaustive check)."""
    best = 0
    for order in itertools.permutations(range(inst.n)):
        t, met = 0.0, 0
        for i in order:
            r = inst.requests[i]
            t = max(t, r.arrival)
            first = t + 1 if r.prompt <= inst.limits.max_batch_tokens else None
            if first is None:
                break
            t += r.output
            ok = first - r.arrival <= r.ttft_slo and (
                r.output == 1 or (t - first) / (r.output - 1) <= r.tpot_slo)
            met += ok
        best = max(best, met)
    return best


@pytest.mark.parametrize("seed", range(4))
def test_bound_is_above_exhaustive_serial_orders(seed):
    rng = np.random.default_rng(100 + seed)
    inst = _random(rng, 5)
    assert _best_attainment_by_order(inst) <= goodput_bound(inst).both


def test_with_default_slos_keeps_a_requests_own_slo():
    inst = _inst([Request("a", 0.0, 1, 2, ttft_slo=3.0), Request("b", 0.0, 1, 2)])
    out = inst.with_default_slos(ttft_slo=1.0, tpot_slo=2.0)
    assert [(r.ttft_slo, r.tpot_slo) for r in out.requests] == [(3.0, 2.0), (1.0, 2.0)]
    assert inst.with_default_slos() is inst


def test_simulate_cli_default_slos_give_attainment_and_bad_value_exits_2(tmp_path):
    import json
    import subprocess
    import sys

    # tiny with every request given TTFT SLO 1e-9 s: no first token comes that fast
    cmd = [sys.executable, "-m", "optsched", "simulate", "tiny", "--policy", "vllm", "--json"]
    out = subprocess.run(cmd + ["--ttft-slo", "1e-9"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["evaluation"]["metrics"]["slo_attainment"] == 0.0
    bad = subprocess.run(cmd + ["--ttft-slo", "-1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--ttft-slo" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


# -- a TBT SLO on the longest gap (B12c) -----------------------------------------------------------
def test_three_long_requests_one_memory_by_hand():
    # a, b, c: I = 1, O = 101 at 0; M = 101 (one request's peak), C = 4, unit time; TTFT 1,
    # TBT 1. Every request can have its first token at t = 1 (B0 holds all three prompts),
    # so TTFT alone allows 3. A request meeting TBT 1 has all its 100 gaps one batch, so it
    # finishes by 1 + 100 = 101 and brings its whole KV-share work into [0, 101]:
    # sum_{g=1..101} g / M = 5151 / 101 = 51 per request; two need 102 > 101: at most 1.
    # (Under the per-request P99 reading, 100 gaps allowed one long gap: no window, 3.)
    reqs = tuple(Request(x, 0.0, 1, 101) for x in "abc")
    inst = Instance("h", Limits(kv_capacity=101, max_batch_tokens=4), UnitCost(), reqs)
    slos = Slos.of(inst, ttft=1.0, tbt=1.0)
    assert completion_windows(inst, slos).tolist() == [101.0] * 3
    gb = goodput_bound(inst, ttft=1.0, tbt=1.0)
    assert gb.ttft == 3 and gb.both == 1
    # slo-park under the longest-gap rule reaches it: a decodes every batch, b and c wait
    s = simulate(inst, "slo-park", ttft_slo=1.0, tbt_slo=1.0)
    m = serving_metrics(inst, evaluate(inst, s), schedule=s, ttft_slo=1.0, tbt_slo=1.0)
    assert m["ttft_tbt_attainment"] == 1 / 3
    # ... while parking "serves" all three under the P99 reading: one long gap each
    p = simulate(inst, "slo-park", ttft_slo=1.0, tbt_slo=1.0, tbt_rule="p99", headroom=0.0)
    mp = serving_metrics(inst, evaluate(inst, p), schedule=p, ttft_slo=1.0, tbt_slo=1.0)
    assert mp["ttft_p99tbt_attainment"] == 1.0 and mp["ttft_tbt_attainment"] <= 1 / 3


@st.composite
def long_output_instances(draw):
    """Unit time, outputs short or over 100 tokens (where the two readings differ), M from
    the largest peak to 3x, arrivals spread over a few steps."""
    n = draw(st.integers(2, 6))
    reqs = tuple(Request(f"q{k}", float(draw(st.integers(0, 12))), draw(st.integers(1, 12)),
                         draw(st.sampled_from([1, 2, 5, 100, 101, 130, 160])))
                 for k in range(n))
    peak = max(r.prompt + r.output - 1 for r in reqs)
    M = draw(st.integers(peak, 3 * peak))
    return Instance("hyp", Limits(kv_capacity=M, max_batch_tokens=draw(st.integers(13, 40))),
                    UnitCost(), reqs)


POLICIES = ("vllm", "sarathi", "ttft-first", "ttft-first-sr", "mcsf", "svf", "slo-park",
            "aptserve-kv-only")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=long_output_instances(), ttft=st.sampled_from([1.0, 2.0, 5.0]),
       tbt=st.sampled_from([1.0, 2.0, 3.0]))
def test_never_below_a_policy(inst, ttft, tbt):
    gb = goodput_bound(inst, ttft=ttft, tbt=tbt)
    for name in POLICIES:
        s = simulate(inst, name)
        m = serving_metrics(inst, evaluate(inst, s), ttft_slo=ttft, tbt_slo=tbt)
        assert m["ttft_tbt_attainment"] * inst.n <= gb.both + 1e-9, (name, m, gb)
    for rule in ("max", "p99"):
        s = simulate(inst, "slo-park", ttft_slo=ttft, tbt_slo=tbt, tbt_rule=rule)
        m = serving_metrics(inst, evaluate(inst, s), ttft_slo=ttft, tbt_slo=tbt)
        assert m["ttft_tbt_attainment"] * inst.n <= gb.both + 1e-9, (rule, m, gb)


def test_goodput_bound_accepts_prefix_ids_and_counts_hits_b12r():
    """B12r (formulations/bounds.md B12 "With prefix reuse"): three requests of 9 prompt
    tokens, 1 output, listing blocks 1, 2 (b = 4), C = 10, M = 64, unit time, TTFT SLO 2.
    vllm-apc: batch 1 computes `a` (first token at 1), batch 2 `b` and `c` hit 8 tokens each
    and compute 1 (first tokens at 2): all three meet it. B12r: each computes >= u = 1 token
    (chain 1 <= 2), works <= 0.11 each in [0, 2]: no miss, ceiling 3 = vllm-apc's 3. The
    reuse-blind B12 charges u = 9 tokens, 0.9 each under the token share: 2.7 > 2, one miss,
    ceiling 2 -- below what vllm-apc attains, which is why B12 alone refused block ids."""
    reqs = tuple(Request(x, 0, 9, 1, prefix=(1, 2)) for x in "abc")
    lim = Limits(kv_capacity=64, max_batch_tokens=10, block_size=4)
    inst = Instance("three", lim, UnitCost(), reqs).with_default_slos(2.0)
    gb = goodput_bound(inst)
    att = evaluate(inst, simulate(inst, "vllm-apc")).metrics["slo_attainment"]
    assert (gb.ttft_own, gb.ttft, gb.both) == (3, 3, 3) and att == 1.0
    blind = Instance("blind", lim, UnitCost(),
                     tuple(Request(x, 0, 9, 1, prefix=()) for x in "abc")).with_default_slos(2.0)
    assert goodput_bound(blind).both == 2


def test_goodput_bound_with_prefix_ids_is_above_every_policy_by_hand():
    inst = shared_instance().with_default_slos(3.0, 1.0)
    gb = goodput_bound(inst)
    for name in REUSE_POLICIES + ("vllm", "sarathi", "fcfs"):
        att = evaluate(inst, simulate(inst, name)).metrics["slo_attainment"]
        assert att <= gb.attainment + 1e-12, (name, att, gb)


# -- B12r: with prefix reuse ------------------------------------------------------------------------
REUSE_POLICIES = tuple(s.name for s in list_policies() if s.reuse_aware)


@st.composite
def prefix_slo_instances(draw):
    """``prefix_instances`` (up to 4 requests sharing stems) with a TTFT SLO and maybe a TPOT
    SLO on every request, from tight to loose for both the unit and the linear cost."""
    from optsched.testing import prefix_instances

    inst = draw(prefix_instances(max_requests=4))
    ttft = draw(st.sampled_from([0.3, 0.6, 1.0, 1.5, 2.0, 3.0, 5.0]))
    tpot = draw(st.sampled_from([None, 0.6, 1.0, 1.5]))
    return inst.with_default_slos(ttft, tpot)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=prefix_slo_instances())
def test_b12r_is_above_every_reuse_aware_policy(inst):
    gb = goodput_bound(inst)
    for name in REUSE_POLICIES:
        att = evaluate(inst, simulate(inst, name)).metrics["slo_attainment"]
        assert att <= gb.attainment + 1e-12, (name, att, gb, inst.to_json(indent=None))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=prefix_slo_instances(), objective=st.sampled_from(["mean-ttft", "total-latency"]))
def test_b12r_is_above_the_exhaustive_reuse_optimum_schedule(inst, objective):
    """The schedule the exact search with reuse proves optimal (for mean TTFT or total
    latency; a feasible schedule with hits and drops) meets no more SLOs than B12r allows;
    an instance the search cannot prove within its small budget claims nothing."""
    from optsched.formulations.base import FormulationError
    from optsched.formulations.exhaustive import SearchOptions, search

    try:
        res = search(inst, objective, SearchOptions(max_states=1_500, time_limit=0.15))
    except FormulationError:  # the search's size guard (too many block ids)
        return
    if res.status != "optimal" or res.schedule is None:
        return
    ev = evaluate(inst, res.schedule)
    assert ev.feasible
    assert ev.metrics["slo_attainment"] <= goodput_bound(inst).attainment + 1e-12, (
        objective, inst.to_json(indent=None))
