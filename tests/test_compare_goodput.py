"""``optsched compare`` with SLOs: each schedule's SLO attainment beside the certified upper
bound (formulations/bounds.md B12) and the gap ``(bound - attainment) / bound``
(``optsched/comparison/``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.cli import main
from optsched.comparison import GoodputGap, GoodputGapError, GoodputRow, compare, goodput_gap_value
from optsched.instance import Instance

SHIPPED = Path(__file__).resolve().parents[1] / "instances" / "arrivals-unit-3.json"


def test_compare_cli_prints_goodput_bound_attainment_and_gap(tmp_path, capsys):
    # arrivals-unit-3 (unit time, M = C = 8): a (arrival 0), b (1), c (3), each I = 2, O = 3;
    # every request gets TTFT SLO 1 and TPOT SLO 1.
    # sarathi's schedule (evaluated): first tokens at 1, 2, 4 and completions at 3, 4, 6:
    #   every TTFT = 1 and every TPOT = (C - F) / 2 = 1, so attainment 3/3 = 1.
    # The upper bound is a share <= 1 and never below a schedule's attainment, so it is 1.
    # vllm's schedule: a prefilled alone at [0, 1], b alone at [1, 2] (a waits), a and b
    # decode at [2, 3], c prefilled at [3, 4], then a and b decode again (c evicted) at
    # [4, 5], c refilled [5, 6] and decoded [6, 7]: TPOTs (5-1)/2 = 2, (5-2)/2 = 1.5 and
    # (7-4)/2 = 1.5, all > 1: attainment 0.
    # gaps: vllm (1 - 0) / 1 = 100%, sarathi (1 - 1) / 1 = 0%; best sarathi.
    out = tmp_path / "rep"
    rc = main(["compare", str(SHIPPED), "--policies", "vllm,sarathi", "--ttft-slo", "1",
               "--tpot-slo", "1", "--objective", "total-latency", "--no-gantt", "-o", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "SLO attainment" in text and "upper bound (B12)" in text
    assert "goodput best: sarathi, attainment 1, gap 0.00%" in text
    g = json.loads((out / "report.json").read_text())["goodput"]
    assert g["upper_bound"] == 1.0 and g["bound"]["both"] == 3 and g["bound"]["with_slo"] == 3
    rows = {r["label"]: r for r in g["rows"]}
    assert rows["vllm"] == {"label": "vllm", "attainment": 0.0, "gap": 1.0}
    assert rows["sarathi"] == {"label": "sarathi", "attainment": 1.0, "gap": 0.0}
    assert g["best"]["label"] == "sarathi"
    assert "## SLO goodput" in (out / "report.md").read_text()


def test_bound_below_the_optimum_gives_a_gap_on_the_policies():
    # seq-unit-3 (unit time, M = 6, C = 8, all arrive at 0): a (I 2, O 3), b (3, 2),
    # c (1, 4); TTFT and TPOT SLO 1. TTFT 1 needs the prompt in batch 1, TPOT 1 a token in
    # every later batch until done. All three: batch 2 would hold a 3 + b 4 + c 2 = 9 > 6
    # KV. b and c: batch 1 prefills b, c (4 tokens); batch 2 decodes both (b 4 done, c 2:
    # KV 6); c decodes alone in batches 3, 4: 2 meet, so the optimum is 2/3 and any valid
    # bound is in [2/3, 1]. vllm prefills all three in batch 1 (every TTFT 1), then a's
    # decodes run every batch (TPOT 1) while b's TPOT is 3 and c's 5/3: attainment 1/3.
    inst = Instance.from_json((SHIPPED.parent / "seq-unit-3.json").read_text())
    cmp = compare(inst.with_default_slos(1.0, 1.0), ["vllm"], objective="total-latency",
                  time_limit=30)
    g = cmp.goodput
    assert g is not None and 2 / 3 - 1e-12 <= g.upper <= 1.0
    (row,) = g.rows
    assert row.attainment == pytest.approx(1 / 3)
    assert row.gap == pytest.approx((g.upper - 1 / 3) / g.upper)


def test_no_slo_means_no_goodput_table():
    inst = Instance.from_json(SHIPPED.read_text())
    assert compare(inst, ["vllm"], objective="total-latency", time_limit=30).goodput is None


def test_gap_value_and_a_bound_below_a_schedule_is_refused():
    assert goodput_gap_value(0.6, 0.8) == pytest.approx(0.25)
    assert goodput_gap_value(0.0, 0.0) == 0.0
    from optsched.bounds.goodput import GoodputBound

    gb = GoodputBound(n=4, with_slo=4, ttft_own=4, ttft=2, both=2)
    with pytest.raises(GoodputGapError, match="below"):
        GoodputGap(gb, (GoodputRow("p", 0.75, 0.0),), 0.0)


def test_bad_slo_default_exits_2_with_one_line(tmp_path, capsys):
    rc = main(["compare", str(SHIPPED), "--policies", "vllm", "--ttft-slo", "-1",
               "-o", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and "--ttft-slo" in err and len(err.strip().splitlines()) == 1
