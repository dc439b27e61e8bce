"""Sustainable-rate search (``optsched/serving/rate_search.py``), the serving metrics it targets
(``optsched/metrics/serving.py``) and ``optsched capacity`` on a small synthetic trace."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.cost import LinearCost, UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.metrics.serving import JctSlo, p99_tbt, serving_metrics
from optsched.policies import simulate
from optsched.schedule import Schedule
from optsched.serving.load import queued
from optsched.serving.rate_search import (
    METRICS,
    RateSearchError,
    _plain,
    at_rate,
    confirm,
    probe,
    repeat_trace,
    search,
    trace_rate,
    work_limit_rate,
)
from optsched.workloads.generators import infermax_mix


def synthetic(n=40, M=64, C=16):
    """n requests with prompts 2..5 and outputs 3..6 (deterministic), unit time."""
    reqs = tuple(Request(f"r{k}", float(k), 2 + k % 4, 3 + (k * 7) % 4) for k in range(n))
    return Instance("syn", Limits(kv_capacity=M, max_batch_tokens=C), UnitCost(), reqs)


def test_at_rate_scales_one_seeded_arrival_pattern():
    inst = synthetic()
    a1 = at_rate(inst, 0.5, seed=3).arrival
    a2 = at_rate(inst, 1.0, seed=3).arrival
    assert a1[0] == 0.0 and np.all(np.diff(a1) >= 0)
    assert np.allclose(a1, 2 * a2)  # rate doubled -> every arrival halved
    assert not np.allclose(a2, at_rate(inst, 1.0, seed=4).arrival)
    # lengths are kept in trace order
    assert np.array_equal(at_rate(inst, 1.0).output, inst.output)
    # the trace's own rate: n - 1 gaps over the span
    assert trace_rate(inst) == pytest.approx((inst.n - 1) / (inst.n - 1))
    with pytest.raises(RateSearchError, match="rate"):
        at_rate(inst, 0.0)


def test_search_brackets_the_sustainable_rate():
    inst = synthetic()
    m = METRICS["normalized-latency"]
    # alone, a request takes 1 step of prefill and O - 1 decodes: normalised latency 1.0;
    # at 40 requests per step everything queues: far above 1.5
    res = search(inst, "vllm", "normalized-latency", 1.5, 0.05, 40.0, probes=7, progress=False)
    assert len(res.probes) == 7
    assert res.sustainable_rate is not None and res.lowest_failing_rate is not None
    assert res.sustainable_rate < res.lowest_failing_rate
    by_rate = {p.rate: p for p in res.probes}
    assert by_rate[res.sustainable_rate].meets and by_rate[res.sustainable_rate].value <= 1.5
    assert not by_rate[res.lowest_failing_rate].meets
    assert by_rate[res.lowest_failing_rate].value > 1.5
    # every probe strictly inside the bracket it was given, and each is reproducible
    again = probe(inst, "vllm", res.sustainable_rate, m, 1.5)
    assert again.value == by_rate[res.sustainable_rate].value
    # a request needs O unit batches (prefill + O - 1 decodes), so normalised latency >= 1
    assert all(p.value >= 1.0 for p in res.probes)


def test_search_ends_of_the_range():
    inst = synthetic(n=10)
    res = search(inst, "sarathi", "normalized-latency", 100.0, 0.1, 1.0, progress=False)
    assert res.sustainable_rate == 1.0 and res.lowest_failing_rate is None
    assert len(res.probes) == 2
    res = search(inst, "sarathi", "normalized-latency", 0.5, 0.1, 1.0, progress=False)
    assert res.sustainable_rate is None and res.lowest_failing_rate == 0.1
    with pytest.raises(RateSearchError, match="needs ttft_slo, tbt_slo"):
        search(inst, "vllm", "ttft-tbt-attainment", 0.9, 0.1, 1.0, progress=False)
    with pytest.raises(RateSearchError, match="LO < HI"):
        search(inst, "vllm", "normalized-latency", 1.0, 2.0, 1.0, progress=False)


def test_higher_is_better_metrics_search_the_other_way():
    inst = synthetic()
    slo = JctSlo(t_p=1.0, t_g=1.0, scale=2.0)  # JCT limit 2 (1 + O) steps
    res = search(inst, "ecoserve-sdo", "slo-attainment", 0.9, 0.05, 40.0, probes=6,
                 settings={"slo": slo}, progress=False)
    by_rate = {p.rate: p for p in res.probes}
    assert by_rate[0.05].value == 1.0  # unloaded: JCT = O <= 2 (1 + O)
    assert res.sustainable_rate is not None and by_rate[res.sustainable_rate].value >= 0.9
    assert res.lowest_failing_rate is not None and by_rate[res.lowest_failing_rate].value < 0.9


# -- metrics, worked by hand ---------------------------------------------------------------
def test_p99_tbt_slo_and_jct_slo_by_hand():
    inst = Instance("one", Limits(kv_capacity=8, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0.0, 2, 3),))
    # B0 [0, 1] prefill -> first token at 1; B1 stated start 4 -> [4, 5]; B2 [5, 6]
    s = Schedule.from_batches([([("a", 2)], []), ([("a", 1)], [], 4.0), ([("a", 1)], [])])
    ev = evaluate(inst, s)
    assert ev.feasible
    # gaps 4 and 1: nearest-rank p99 of two values is the larger
    assert p99_tbt(s, ev, 1).tolist() == [4.0]
    slo = JctSlo.measure(inst, ev)
    # t_p = duration of the first-token batch = 1; t_g = TPOT = (6 - 1) / (3 - 1) = 2.5
    assert (slo.t_p, slo.t_g) == (1.0, 2.5)
    m = serving_metrics(inst, ev, slo=slo, schedule=s, ttft_slo=1.0, tbt_slo=3.9)
    # JCT 6 <= 2 * (1 + 2.5 * 3) = 17; normalised 6 / 3 = 2; TBT 4 > 3.9 misses
    assert m["mean_jct"] == 6.0 and m["normalized_latency"] == 2.0
    assert m["slo_attainment"] == 1.0 and m["ttft_tbt_attainment"] == 0.0
    assert serving_metrics(inst, ev, schedule=s, tbt_slo=4.0)["ttft_tbt_attainment"] == 1.0


# -- CLI -----------------------------------------------------------------------------------
def cli(*args):
    return subprocess.run([sys.executable, "-m", "optsched", *args], capture_output=True,
                          text=True, timeout=300)


def test_cli_capacity_json_and_bad_input(tmp_path):
    path = tmp_path / "syn.json"
    path.write_text(synthetic(n=12).to_json())
    out = cli("capacity", str(path), "--policy", "vllm,ecoserve", "--metric",
              "normalized-latency", "--target", "1.5", "--rates", "0.05:20", "--probes", "4",
              "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert [r["policy"] for r in d["results"]] == ["vllm", "ecoserve"]
    assert all(len(r["probes"]) == 4 for r in d["results"])
    assert "vllm rate 0.05" in out.stderr  # every probe is reported on stderr
    for bad, msg in ((("--rates", "3:1"), "0 < LO < HI"),
                     (("--rates", "x"), "LO:HI"),
                     (("--policy", "nope"), "unknown policy")):
        args = ["capacity", str(path), "--policy", "vllm", "--metric", "normalized-latency",
                "--target", "1", *bad]
        out = cli(*args)
        assert out.returncode == 2 and msg in out.stderr and "Traceback" not in out.stderr
    out = cli("capacity", str(path), "--policy", "vllm", "--metric", "ttft-tbt-attainment",
              "--target", "0.9", "--rates", "0.1:1")
    assert out.returncode == 2 and "--ttft-slo" in out.stderr
    # the KV-capacity calculator is a different command and still answers
    out = cli("kv-capacity", "--help")
    assert out.returncode == 0


# -- rate claims: the work limit ------------------------------------------
def test_work_limit_rate_by_hand_and_above_every_queued_throughput():
    # a (I = 3, O = 2), b (I = 1, O = 4), C = 4, M = 16 (docs/semantics.md section 4, offered
    # load): tokens F2 = 4 + 4 = 8 -> 8 / 4 = 2 batches a copy; KV area F3 = (3 + 4) +
    # (1 + 2 + 3 + 4) = 17 -> 17 / 16; own batches F1 = 2 + 4 = 6 over min(C, M) = 4 entries
    # -> 1.5. So W = 2 batches a copy. Unit time: work limit 2 / 2 = 1.0 request a step.
    # Linear k0 = 0.01, k1 = 0.001 (no other term): 0.01 * 2 + F4 = 0.001 * (3 + 1 prompt
    # tokens + 1 + 3 decode steps) = 0.028 -> 2 / 0.028.
    reqs = (Request("a", 0, 3, 2), Request("b", 0, 1, 4))
    unit = Instance("h", Limits(kv_capacity=16, max_batch_tokens=4), UnitCost(), reqs)
    lin = unit.replace(cost_model=LinearCost(k0=0.01, k1=0.001))
    assert abs(work_limit_rate(unit) - 1.0) < 1e-8
    assert abs(work_limit_rate(lin) - 2 / 0.028) < 1e-6
    for inst in (unit, lin):  # no schedule of k queued copies serves faster
        q = queued(inst, 50)
        for name in ("vllm", "sarathi", "fcfs"):
            ev = evaluate(q, simulate(q, name))
            assert q.n / ev.metrics["makespan"] <= work_limit_rate(inst) * (1 + 1e-12)


def test_repeat_trace_keeps_the_mix_and_confirm_counts_only_rates_that_hold():
    reqs = tuple(Request(f"r{k}", 0, 2, 3) for k in range(4))
    inst = Instance("h", Limits(kv_capacity=64, max_batch_tokens=8), UnitCost(), reqs)
    longer = repeat_trace(inst, 3)
    assert longer.n == 12 and longer.ids[4] == "r0#1"
    assert (longer.output == 3).all() and (longer.prompt == 2).all()
    res = search(inst, "vllm", "mean-jct", 1e9, 0.1, 1.0, probes=2, progress=False)
    # every rate meets an unbounded target: sustainable 1.0 and, on the 3x trace, it holds
    res = confirm(res, inst, 3)
    assert res.sustainable_rate == 1.0 and res.confirmation is not None
    assert res.confirmation.meets and res.confirm_factor == 3
    # 4 requests (I = 2, O = 3), C = 8, M = 64: tokens 16 / 8 = 2 batches, area 4 * 9 / 64,
    # own batches 4 * 3 / 8 = 1.5: W = 2 steps, limit 4 / 2 = 2 > 1.0, so the rate is below
    # the work limit and, holding on the 3x trace, counted
    assert abs(res.work_limit - 2.0) < 1e-8 and res.counted_rate == 1.0
    d = res.to_dict()
    assert d["holds_on_longer_trace"] is True and abs(d["work_limit"] - 2.0) < 1e-8


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


def test_at_rate_keeps_prefix_block_ids():
    """A probe instance is rebuilt with new arrivals; requests that list prefix block ids are
    not plain (docs/semantics.md section 6), so their ids survive the rebuild."""
    from optsched.serving.rate_search import at_rate, repeat_trace

    inst = Instance("p", Limits(kv_capacity=64, max_batch_tokens=32, block_size=2), UnitCost(),
                    (Request("a", 0, 5, 2, prefix=(1, 2)), Request("b", 1, 5, 2, prefix=(1, 3))))
    out = at_rate(inst, 2.0, seed=1)
    assert [r.prefix for r in out.requests] == [(1, 2), (1, 3)]
    assert [r.prefix for r in repeat_trace(inst, 2).requests] == [(1, 2), (1, 3)] * 2


def test_search_stops_at_its_deadline_with_the_probes_done():
    """Before: ``capacity`` had no ``--time-limit``; a search ran every probe and check
    whatever it cost. With a deadline already past, no probe starts: the result is empty and
    says it stopped; with time enough it is the undisturbed search."""
    import time

    inst = synthetic()
    res = search(inst, "vllm", "normalized-latency", 1.5, 0.05, 40.0, probes=7,
                 progress=False, deadline=time.perf_counter() - 1)
    assert res.stopped and res.probes == () and res.sustainable_rate is None
    assert res.to_dict()["stopped_at_time_limit"] is True
    free = search(inst, "vllm", "normalized-latency", 1.5, 0.05, 40.0, probes=7, progress=False,
                  confirm_factor=0)
    timed = search(inst, "vllm", "normalized-latency", 1.5, 0.05, 40.0, probes=7,
                   progress=False, confirm_factor=0, deadline=time.perf_counter() + 600)
    assert not timed.stopped and timed.sustainable_rate == free.sustainable_rate


def test_capacity_takes_a_time_limit(tmp_path, capsys):
    from cli_helpers import run_cli

    f = tmp_path / "syn.json"
    synthetic().save(f)
    rc, out, err = run_cli(capsys, "capacity", f, "--policy", "vllm", "--metric",
                           "normalized-latency", "--target", 1.5, "--rates", "0.05:40",
                           "--time-limit", 0.001, "--json")
    assert rc == 0, err
    r = json.loads(out)["results"][0]
    assert r["stopped_at_time_limit"] is True and r["probes"] == []
    rc, _, err = run_cli(capsys, "capacity", f, "--policy", "vllm", "--metric",
                         "normalized-latency", "--target", 1.5, "--time-limit", -1)
    assert rc == 2 and "--time-limit" in err
