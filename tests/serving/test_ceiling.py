"""``optsched capacity --ceiling`` (``optsched/serving/ceiling.py``): the goodput upper bound (B12)
searched over arrival rates, never below what a policy reaches on the same arrival draw."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.metrics.serving import serving_metrics
from optsched.policies import simulate
from optsched.serving.ceiling import bound_share, ceiling
from optsched.serving.rate_search import RateSearchError, at_rate


def synthetic(n=30, M=64, C=8):
    """n requests with prompts 2..5 and outputs 3..6 (deterministic), unit time."""
    reqs = tuple(Request(f"r{k}", float(k), 2 + k % 4, 3 + (k * 7) % 4) for k in range(n))
    return Instance("syn", Limits(kv_capacity=M, max_batch_tokens=C), UnitCost(), reqs)


TTFT, TBT = 2.0, 2.0


def test_ceiling_rules_out_every_policy_and_bounds_them_at_every_probe():
    inst = synthetic()
    c = ceiling(inst, 0.9, 0.05, 20.0, probes=8, ttft_slo=TTFT, tbt_slo=TBT)
    assert c.allowed_rate is not None and c.ruled_out_rate is not None
    assert c.allowed_rate < c.ruled_out_rate
    for p in c.probes:
        i = at_rate(inst, p.rate, 0)
        for policy in ("vllm", "sarathi", "ttft-first", "mcsf"):
            s = simulate(i, policy)
            got = serving_metrics(i, evaluate(i, s), schedule=s, ttft_slo=TTFT,
                                  tbt_slo=TBT)["ttft_tbt_attainment"]
            assert got <= p.value + 1e-12, (policy, p.rate, got, p.value)
    # At 20 per step the seeded draw has every arrival by a_max = 1.743, so every window
    # [a_i, a_i + 2] lies in [0, 3.743]. Token share (B7, unit time: h = 1, P = C = 8):
    # w_i = I_i / 8; prompts 2+k%4 over k < 30 are 8x2, 8x3, 7x4, 7x5 = 103 tokens,
    # 12.875 of work against 3.743: drop the 7 fives (4.375), the 7 fours (3.5), then
    # ceil((9.132 - 7.875) / 0.375) = 4 threes: 18 dropped, at most 12 of 30 meet TTFT.
    hi = at_rate(inst, 20.0, 0)
    assert hi.arrival.max() == pytest.approx(1.7427, abs=1e-4)
    assert bound_share(hi, TTFT, TBT)[0] == pytest.approx(12 / 30)

def test_ceiling_refuses_bad_settings():
    with pytest.raises(RateSearchError, match="share"):
        ceiling(synthetic(), 1.5, 1.0, 2.0, ttft_slo=TTFT, tbt_slo=TBT)
    with pytest.raises(RateSearchError, match="LO < HI"):
        ceiling(synthetic(), 0.9, 2.0, 1.0, ttft_slo=TTFT, tbt_slo=TBT)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "optsched", *args], capture_output=True,
                          text=True)


def test_cli_capacity_ceiling_column_json_and_bad_metric(tmp_path):
    path = tmp_path / "syn.json"
    synthetic().save(path)
    base = ["capacity", str(path), "--policy", "vllm", "--metric", "ttft-tbt-attainment",
            "--ttft-slo", "2", "--tbt-slo", "2", "--target", "0.9", "--rates", "0.05:20",
            "--probes", "4", "--ceiling", "--ceiling-probes", "6"]
    out = cli(*base)
    assert out.returncode == 0, out.stderr
    assert "certified ceiling req/s" in out.stdout and "no scheduler reaches" in out.stdout
    js = cli(*base, "--json")
    assert js.returncode == 0, js.stderr
    doc = json.loads(js.stdout)
    c = doc["ceiling"]
    assert len(c["probes"]) == 6 and c["ruled_out_rate"] is not None
    rate = doc["results"][0]["sustainable_rate"]
    assert rate is None or rate < c["ruled_out_rate"]
    bad = cli("capacity", str(path), "--policy", "vllm", "--metric", "normalized-latency",
              "--target", "5", "--ceiling")
    assert bad.returncode == 2 and "--ceiling" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_ceiling_takes_any_goodput_upper_bound():
    """The ceiling reads its bound through the ``GoodputUpperBound`` interface: the trivial
    bound "every request may meet its SLOs" allows every rate, and B12 (the default) is the
    bound the probes report otherwise."""
    from optsched.bounds.goodput import GoodputBound, goodput_bound

    calls = []

    def everyone(instance, ttft=None, tpot=None, tbt=None):
        calls.append((ttft, tpot, tbt))
        n = instance.n
        return GoodputBound(n=n, with_slo=n, ttft_own=n, ttft=n, both=n)

    inst = synthetic()
    c = ceiling(inst, 0.9, 0.05, 20.0, probes=4, ttft_slo=TTFT, tbt_slo=TBT, upper=everyone)
    assert c.allowed_rate == 20.0 and c.ruled_out_rate is None and len(c.probes) == 2
    assert calls == [(TTFT, None, TBT)] * 2
    share, gb = bound_share(at_rate(inst, 20.0, 0), TTFT, TBT, upper=everyone)
    assert share == 1.0 and gb.both == inst.n
    assert bound_share(at_rate(inst, 20.0, 0), TTFT, TBT)[1] == \
        goodput_bound(at_rate(inst, 20.0, 0), ttft=TTFT, tbt=TBT)


def test_goodput_ceiling_with_prefix_ids_bounds_the_reuse_aware_policies_at_every_probe():
    """With block ids the ceiling runs B12r (formulations/bounds.md B12): at every probed rate
    its share is at least what each reuse-aware policy attains on the same arrival draw."""
    from optsched.data import load_embedded

    inst = load_embedded("shared-prefix")
    c = ceiling(inst, 0.9, 0.1, 10.0, probes=3, ttft_slo=TTFT, tbt_slo=TBT)
    assert len(c.probes) >= 2
    for p in c.probes:
        i = at_rate(inst, p.rate, 0)
        assert i.has_prefix
        for policy in ("vllm-apc", "lpm", "dfs", "belady"):
            s = simulate(i, policy)
            got = serving_metrics(i, evaluate(i, s), schedule=s, ttft_slo=TTFT,
                                  tbt_slo=TBT)["ttft_tbt_attainment"]
            assert got <= p.value + 1e-12, (policy, p.rate, got, p.value)


def test_cli_capacity_ceiling_searches_an_instance_with_prefix_ids():
    js = cli("capacity", "shared-prefix", "--policy", "vllm-apc", "--metric",
             "ttft-tbt-attainment", "--ttft-slo", "2", "--tbt-slo", "2", "--target", "0.9",
             "--rates", "0.1:10", "--probes", "3", "--ceiling", "--ceiling-probes", "3",
             "--json")
    assert js.returncode == 0, js.stderr
    assert len(json.loads(js.stdout)["ceiling"]["probes"]) >= 2
