"""The charts (optsched/plot/charts.py): KV over time, comparison bars, solver progress."""

from __future__ import annotations

import numpy as np
import pytest
from plot_checks import boxes, collections_of, png_ok

from optsched import plot
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule


def test_kv_over_time_several_schedules(evict_demo, tmp_path):
    inst, s, ev = evict_demo
    serial = Schedule.from_batches([([("a", 4)], []), ([("a", 1)], []), ([("a", 1)], []),
                                    ([("b", 3)], []), ([("b", 1)], []), ([("b", 1)], [])])
    fig = plot.kv_over_time({"evict": (inst, s), "serial": (inst, serial)}, save=tmp_path / "kv.png")
    ax = fig.axes[0]
    stairs = [p for p in ax.patches if hasattr(p, "get_data")]
    assert len(stairs) == 2
    np.testing.assert_array_equal(stairs[1].get_data()[0], evaluate(inst, serial).batch_kv)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("evict") and labels[1].startswith("serial") and "M = 8" in labels
    png_ok(tmp_path / "kv.png")
    # plain evaluations need the capacity
    fig = plot.kv_over_time({"e": ev}, capacity=8)
    assert "M = 8" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_compare_bars(tmp_path):
    rows = [
        {"policy": "vllm", "objective": 5.0, "gap": 0.25, "evictions": 1, "mean_ttft": 1.0, "mean_tpot": 1.5},
        {"policy": "optimal (x)", "objective": 4.0, "gap": 0.0, "evictions": 0, "mean_ttft": 1.0,
         "mean_tpot": None, "optimal": True},
        {"policy": "broken", "objective": None, "gap": None, "evictions": 3, "mean_ttft": 2.0,
         "mean_tpot": float("nan"), "feasible": False},
    ]
    fig = plot.compare_bars(rows, title="t", gap_label="gap to bound (%)", save=tmp_path / "c.png")
    assert len(fig.axes) == 5
    assert [a.get_title() for a in fig.axes][:2] == ["objective", "gap to bound (%)"]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["vllm", "optimal (x)", "broken"]
    bars = fig.axes[1].patches
    assert [b.get_width() for b in bars] == pytest.approx([25.0, 0.0, 0.0])
    assert "n/a" in [t.get_text() for t in fig.axes[4].texts]
    png_ok(tmp_path / "c.png")


def test_solver_progress(tmp_path):
    hist = [(1.0, 5.0, 3.5), (0.1, None, 2.0), (0.5, 6.0, 3.0), (2.0, 5.0, 4.2), (3.0, 4.5, None)]
    fig = plot.solver_progress(hist, save=tmp_path / "p.png")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "incumbent (last 4.5)" and labels[1] == "bound (last 4.2)"
    inc = ax.get_lines()[0]
    assert list(inc.get_xdata()) == [0.5, 1.0, 2.0, 3.0, 3.0]
    png_ok(tmp_path / "p.png")
    assert plot.solver_progress([]).axes[0].texts  # "no incumbent or bound recorded"


def test_kv_is_not_drawn_while_idle():
    """b arrives at 5 after a finished at 3: no KV value is claimed for the idle gap [3, 5]."""
    inst = Instance("idle", Limits(kv_capacity=8, max_batch_tokens=64),
                    requests=(Request("a", 0, 4, 3), Request("b", 5, 3, 2)))
    s = Schedule.from_batches([([("a", 4)], []), ([("a", 1)], []), ([("a", 1)], []),
                               ([("b", 3)], []), ([("b", 1)], [])])
    ev = evaluate(inst, s)
    assert ev.feasible and list(ev.batch_start) == [0, 1, 2, 5, 6]
    edges, vals = plot.kv_steps(ev)
    np.testing.assert_array_equal(edges, [0, 1, 2, 3, 5, 6, 7])
    np.testing.assert_array_equal(vals, [4, 5, 6, np.nan, 3, 4])
    fig = plot.gantt(inst, s, ev)
    assert boxes(collections_of(fig.axes[0])["prefill"])[-1] == (5, 6, 1)
