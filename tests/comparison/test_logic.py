"""compare (optsched/comparison/logic.py): policies and schedules against the optimum and the
bounds, the gaps, the goodput table."""

from __future__ import annotations

import pytest
from paths import GOOD

from optsched.comparison import GoodputGap, GoodputGapError, GoodputRow, compare, goodput_gap_value
from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request


def test_bound_below_the_optimum_gives_a_gap_on_the_policies():
    # seq-unit-3 (unit time, M = 6, C = 8, all arrive at 0): a (I 2, O 3), b (3, 2),
    # c (1, 4); TTFT and TPOT SLO 1. TTFT 1 needs the prompt in batch 1, TPOT 1 a token in
    # every later batch until done. All three: batch 2 would hold a 3 + b 4 + c 2 = 9 > 6
    # KV. b and c: batch 1 prefills b, c (4 tokens); batch 2 decodes both (b 4 done, c 2:
    # KV 6); c decodes alone in batches 3, 4: 2 meet, so the optimum is 2/3 and any valid
    # bound is in [2/3, 1]. vllm prefills all three in batch 1 (every TTFT 1), then a's
    # decodes run every batch (TPOT 1) while b's TPOT is 3 and c's 5/3: attainment 1/3.
    inst = Instance.from_json((GOOD.parent / "seq-unit-3.json").read_text())
    cmp = compare(inst.with_default_slos(1.0, 1.0), ["vllm"], objective="total-latency",
                  time_limit=30)
    g = cmp.goodput
    assert g is not None and 2 / 3 - 1e-12 <= g.upper <= 1.0
    (row,) = g.rows
    assert row.attainment == pytest.approx(1 / 3)
    assert row.gap == pytest.approx((g.upper - 1 / 3) / g.upper)


def test_no_slo_means_no_goodput_table():
    inst = Instance.from_json(GOOD.read_text())
    assert compare(inst, ["vllm"], objective="total-latency", time_limit=30).goodput is None


def test_gap_value_and_a_bound_below_a_schedule_is_refused():
    assert goodput_gap_value(0.6, 0.8) == pytest.approx(0.25)
    assert goodput_gap_value(0.0, 0.0) == 0.0
    from optsched.bounds.goodput import GoodputBound

    gb = GoodputBound(n=4, with_slo=4, ttft_own=4, ttft=2, both=2)
    with pytest.raises(GoodputGapError, match="below"):
        GoodputGap(gb, (GoodputRow("p", 0.75, 0.0),), 0.0)


def test_compare_runs_policies_on_a_hidden_cache_instance_without_a_bound(tmp_path):
    from optsched.comparison import CompareInputError, compare

    inst = Instance("pair", Limits(kv_capacity=10, max_batch_tokens=64, hidden_cache=True),
                    UnitCost(rho=0.01), (Request("a", 0.0, 6, 2), Request("b", 0.0, 6, 3)))
    cmp = compare(inst, ["aptserve", "vllm"], time_limit=10)
    assert [r.label for r in cmp.rows] == ["aptserve", "vllm"]
    assert all(r.evaluation.feasible for r in cmp.rows)
    assert cmp.lower_bound is None and any("hidden cache" in n for n in cmp.notes)
    with pytest.raises(CompareInputError, match="hidden cache"):
        compare(inst, ["vllm"], optimal=True, time_limit=10)


def test_compare_on_a_shared_prefix_instance_bounds_with_the_reuse_aware_rungs():
    """With block ids compare's certified bound comes from the rungs valid with prefix reuse
    (formulations/bounds.md B19), below every policy; its goodput ceiling is B12r, above
    every row's attainment; it refuses --optimal in one line."""
    from handworked import shared_instance

    from optsched.comparison import CompareInputError, compare

    inst = shared_instance().with_default_slos(3.0, 1.0)
    cmp = compare(inst, ["vllm-apc", "vllm"], time_limit=10, improve_seconds=1.0)
    assert [r.label for r in cmp.rows] == ["vllm-apc", "vllm"]
    assert all(r.evaluation.feasible for r in cmp.rows)
    assert cmp.lower_bound is not None
    assert cmp.lower_bound.method in ("reuse-request", "reuse-work")
    assert all(cmp.lower_bound.value <= r.objective for r in cmp.rows)
    assert cmp.goodput is not None
    ceiling = cmp.goodput.bound.attainment
    assert all(g.attainment is not None and g.attainment <= ceiling + 1e-12
               for g in cmp.goodput.rows)
    with pytest.raises(CompareInputError, match="prefix block ids") as e:
        compare(inst, ["vllm"], optimal=True, time_limit=10)
    assert "\n" not in str(e.value)


def test_a_policy_stopped_at_the_time_limit_is_no_failure(monkeypatch):
    """Before: ``compare --policies all`` exited 2 ("bad input") when some policies did not
    finish within the limit: their rows were errors. A deadline already past stops every
    policy; each row says so, and the exit code stays 0 unless a row failed or broke a rule."""
    import time

    from optsched.cli.compare import exit_code
    from optsched.comparison.logic import run_policies
    from optsched.data import load_instance
    from optsched.policies import simulator
    from optsched.solve_types import Status

    monkeypatch.setattr(simulator, "DEADLINE_EVERY", 1)  # look at the clock every batch
    rows = run_policies(load_instance(GOOD), ["fcfs", "vllm"], deadline=time.perf_counter() - 1)
    assert [r.status for r in rows] == [Status.NO_SOLUTION] * 2
    assert all(r.status_text == "stopped at the time limit" for r in rows)

    class Cmp:
        optimum = None

    Cmp.rows = rows
    assert exit_code(Cmp) == 0
    Cmp.rows = rows + run_policies(load_instance(GOOD), ["no-such-policy"])
    assert Cmp.rows[-1].status == Status.ERROR and exit_code(Cmp) == 2
