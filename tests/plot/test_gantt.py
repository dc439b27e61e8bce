"""The Gantt chart (optsched/plot/gantt.py): its spans are the evaluator's, big schedules draw."""

from __future__ import annotations

import numpy as np
import pytest
from plot_checks import boxes, collections_of, png_ok

from optsched import plot
from optsched.evaluation import evaluate
from optsched.schedule import Schedule
from optsched.testing import wave_schedule


def test_gantt_spans_match_the_evaluation(evict_demo, tmp_path):
    inst, s, ev = evict_demo
    fig = plot.gantt(inst, s, ev, save=tmp_path / "g.png")
    gantt_ax, kv_ax = fig.axes[:2]
    cols = collections_of(gantt_ax)
    assert set(cols) == {"prefill", "decode", "evicted"}
    # one black rectangle per prefill entry, one gray per decode entry, one red per eviction
    assert len(cols["prefill"].get_paths()) == int((~ev.entry_decode).sum()) == 3
    assert len(cols["decode"].get_paths()) == int(ev.entry_decode.sum()) == 3
    assert len(cols["evicted"].get_paths()) == s.evict_req.size == 1
    # colours as in InferMax Figure 15
    np.testing.assert_allclose(cols["prefill"].get_facecolor()[0][:3], [0, 0, 0])
    gray = cols["decode"].get_facecolor()[0][:3]
    assert np.ptp(gray) < 1e-9 and 0.3 < gray[0] < 0.9
    red = cols["evicted"].get_facecolor()[0][:3]
    assert red[0] > 0.7 and red[1] < 0.3 and red[2] < 0.3
    # the spans are the evaluator's batch times; row 0 = a, row 1 = b
    st, en = ev.batch_start, ev.batch_end
    assert boxes(cols["prefill"]) == sorted([(st[0], en[0], 0), (st[0], en[0], 1), (st[3], en[3], 1)])
    assert boxes(cols["decode"]) == sorted([(st[1], en[1], 0), (st[2], en[2], 0), (st[4], en[4], 1)])
    # red: from the evicting batch's start (KV dropped) to the refill's start
    assert boxes(cols["evicted"]) == [(st[1], st[3], 1)]
    assert [t.get_text() for t in gantt_ax.get_yticklabels()] == ["a", "b"]
    assert {t.get_text() for t in gantt_ax.get_legend().get_texts()} >= {"(p)refill", "decode"}
    # KV panel: the evaluator's batch_kv as stairs over batch starts, and M
    stairs = [p for p in kv_ax.patches if hasattr(p, "get_data")]
    vals, edges = stairs[0].get_data()[:2]
    np.testing.assert_array_equal(vals, ev.batch_kv)
    np.testing.assert_array_equal(edges, np.append(ev.batch_start, ev.batch_end[-1]))
    assert any(np.allclose(line.get_ydata(), 8) for line in kv_ax.get_lines())
    assert "M = 8" in {t.get_text() for t in kv_ax.get_legend().get_texts()}
    assert kv_ax.get_xlabel() == "time (steps)"
    png_ok(tmp_path / "g.png")


def test_gantt_evaluates_when_not_given_and_rejects_a_foreign_evaluation(evict_demo):
    inst, s, ev = evict_demo
    fig = plot.gantt(inst, s)
    assert len(collections_of(fig.axes[0])["decode"].get_paths()) == 3
    other = Schedule.from_batches([([("a", 4), ("b", 3)], [])])
    with pytest.raises(ValueError, match="does not belong"):
        plot.gantt(inst, other, ev)


def test_gantt_into_given_axes_without_kv(evict_demo):
    from optsched.plot._common import new_figure

    inst, s, ev = evict_demo
    fig = new_figure((6, 3))
    ax = fig.subplots()
    assert plot.gantt(inst, s, ev, ax=ax, title="mine") is fig
    assert ax.get_title() == "mine"
    assert len(fig.axes) == 1


def test_gantt_of_an_infeasible_schedule_says_so(evict_demo):
    inst, _, _ = evict_demo
    bad = Schedule.from_batches([([("a", 4), ("b", 3)], []), ([("a", 1), ("b", 1)], [])])
    fig = plot.gantt(inst, bad)
    assert "INFEASIBLE" in fig.axes[0].get_title()


def test_gantt_samples_rows_above_max_rows():
    inst, s = wave_schedule(400, wave=100, output=5)
    ev = evaluate(inst, s)
    fig = plot.gantt(inst, s, ev, max_rows=50)
    ax, kv_ax = fig.axes[:2]
    rows = {b[2] for c in collections_of(ax).values() for b in boxes(c)}
    assert len(rows) == 50 and max(rows) == 49
    assert "50 of 400" in ax.get_ylabel()
    # the KV panel covers every request
    vals = [p for p in kv_ax.patches if hasattr(p, "get_data")][0].get_data()[0]
    np.testing.assert_array_equal(vals, ev.batch_kv)


def test_gantt_merges_touching_spans_without_changing_the_picture():
    inst, s = wave_schedule(40, wave=20, output=8)
    ev = evaluate(inst, s)
    full = collections_of(plot.gantt(inst, s, ev, kv=False).axes[0])
    merged = collections_of(plot.gantt(inst, s, ev, kv=False, merge_above=10).axes[0])
    for phase in ("prefill", "decode"):
        a, b = boxes(full[phase]), boxes(merged[phase])
        assert len(b) <= len(a)
        assert sum(x1 - x0 for x0, x1, _ in a) == pytest.approx(sum(x1 - x0 for x0, x1, _ in b))
    assert len(boxes(merged["decode"])) == 40  # one gray bar per request


def test_gantt_draws_100k_entries(tmp_path):
    """Completes and writes a PNG; ``benchmarks/plot.py`` measures the time."""
    inst, s = wave_schedule(2000)
    assert s.n_entries == 100_000
    ev = evaluate(inst, s)
    plot.gantt(inst, s, ev, max_rows=None, merge_above=10**9, save=tmp_path / "big.png")
    png_ok(tmp_path / "big.png")
