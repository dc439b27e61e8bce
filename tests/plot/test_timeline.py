"""The trace-scale picture (optsched/plot/timeline.py): its raster and series are the
evaluator's, read back from the drawn figure."""

from __future__ import annotations

import numpy as np
import pytest

from optsched import plot
from optsched.instance import Instance, Limits, Request
from optsched.plot.timeline import STATES
from optsched.schedule import Schedule

N, W, D, P, E = (STATES.index(s) for s in ("none", "waiting", "decode", "prefill", "evicted"))


def _artist(ax, gid):
    return next(a for a in ax.get_children() if a.get_gid() == gid)


def test_timeline_draws_the_evaluation(evict_demo):
    """evict_demo (unit time, batches [j, j + 1)): a prefills in 0, decodes in 1-2 and
    finishes at 3; b prefills in 0, is evicted at 1 until its refill at 3, decodes in 4.
    With 5 columns of width 1 each column is one batch."""
    inst, s, ev = evict_demo
    fig = plot.timeline(inst, s, ev, bins=5)  # rendered to a file by tests/cli/test_plot.py
    d = plot.timeline_data(inst, s, ev, bins=5)
    # rows by arrival (a, b: both at 0, instance order)
    assert d.rows.tolist() == [0, 1] and d.group == 1
    assert d.raster.tolist() == [[P, D, D, N, N], [P, E, E, P, D]]
    raster_ax, run_ax, kv_ax, dur_ax = fig.axes[:4]
    np.testing.assert_array_equal(_artist(raster_ax, "raster").get_array(), d.raster)
    # the KV drawn is the evaluator's per-batch memory, over the batches' times
    vals, edges = _artist(kv_ax, "kv").get_data()[:2]
    np.testing.assert_array_equal(vals, ev.batch_kv)
    assert ev.batch_kv.tolist() == [7, 5, 6, 4, 5]
    np.testing.assert_array_equal(edges, np.append(ev.batch_start, ev.batch_end[-1]))
    # entries per batch 2, 1, 1, 1, 1; a finishes at 3, so 2 in the system until then
    np.testing.assert_array_equal(_artist(run_ax, "running").get_data()[0], [2, 1, 1, 1, 1])
    np.testing.assert_array_equal(_artist(run_ax, "in_system").get_data()[0], [2, 2, 2, 1, 1])
    np.testing.assert_array_equal(_artist(dur_ax, "batch_time").get_data()[0], ev.batch_duration)
    # arrivals drawn, one point a row
    np.testing.assert_array_equal(_artist(raster_ax, "arrival").get_xdata(), [0, 0])


def test_timeline_window_groups_and_refusals(evict_demo):
    inst, s, ev = evict_demo
    d = plot.timeline_data(inst, s, ev, window=(1, 3), bins=2)
    assert d.raster.tolist() == [[D, D], [E, E]]
    # one raster row for both requests: the most telling state of the two
    g = plot.timeline_data(inst, s, ev, bins=5, max_rows=1)
    assert g.group == 2 and g.raster.tolist() == [[P, E, E, P, D]]
    with pytest.raises(ValueError, match="start < end"):
        plot.timeline_data(inst, s, ev, window=(3, 1))
    other = Schedule.from_batches([([("a", 4), ("b", 3)], [])])
    with pytest.raises(ValueError, match="does not belong"):
        plot.timeline(inst, other, ev)


def test_timeline_waiting_and_running_mean():
    """Two one-token requests, k0 = 1 s (unit time): a at 0 alone; b arrives at 0 but runs
    only in the second batch, [1, 2): it waits in column 0. Four columns of 0.5 s: running
    mean 1 everywhere (one entry per batch), b waiting in the first two."""
    inst = Instance("w", Limits(kv_capacity=4, max_batch_tokens=2),
                    requests=(Request("a", 0.0, 2, 1), Request("b", 0.0, 2, 1)))
    s = Schedule.from_batches([([("a", 2)], []), ([("b", 2)], [])])
    d = plot.timeline_data(inst, s, plot_eval(inst, s), bins=4)
    assert d.raster.tolist() == [[P, P, N, N], [W, W, P, P]]
    assert d.running.tolist() == [1, 1, 1, 1]
    assert d.in_system.tolist() == [2, 2, 1, 1]


def plot_eval(inst, s):
    from optsched.evaluation import evaluate

    ev = evaluate(inst, s)
    assert ev.feasible
    return ev


def test_gantt_keeps_evicted_rows_and_windows(evict_demo):
    inst, s, ev = evict_demo
    # one row only: b (evicted) is the one kept
    assert plot.sample_rows(2, 1, np.array([1])).tolist() == [1]
    assert plot.sample_rows(10, 3).tolist() == [0, 4, 9]
    assert plot.sample_rows(10, 3, np.array([5])).tolist() == [0, 5, 9]
    fig = plot.gantt(inst, s, ev, max_rows=1, window=(1, 3))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["b"]
    assert fig.axes[0].get_xlim() == (1.0, 3.0)
