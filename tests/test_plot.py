"""Figures: the Gantt's spans are the evaluator's, the files are real PNGs, big schedules draw fast."""

from __future__ import annotations

import numpy as np
import pytest

from optsched import plot
from optsched.cli import main
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule

PNG = b"\x89PNG\r\n\x1a\n"


def _png_ok(path, min_bytes=5_000):
    data = path.read_bytes()
    assert data[:8] == PNG
    assert len(data) >= min_bytes


@pytest.fixture
def evict_demo():
    """a (I=4, O=3) and b (I=3, O=3), M = 8: b is evicted at batch 1 and refilled at batch 3.

    batch 0: a 4 + b 3 (two prefills, KV 7); 1: a decode, b evicted (KV 5); 2: a decode,
    a finishes (KV 6); 3: b refills its 4 known tokens (KV 4); 4: b decode, finishes (KV 5).
    """
    inst = Instance("evict-demo", Limits(kv_capacity=8, max_batch_tokens=64),
                    requests=(Request("a", 0, 4, 3), Request("b", 0, 3, 3)))
    s = Schedule.from_batches([
        ([("a", 4), ("b", 3)], []),
        ([("a", 1)], ["b"]),
        ([("a", 1)], []),
        ([("b", 4)], []),
        ([("b", 1)], []),
    ])
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations
    return inst, s, ev


def _collections(ax):
    return {c.get_gid(): c for c in ax.collections if c.get_gid()}


def _boxes(coll):
    """(x0, x1, y_center) of each rectangle of a PolyCollection, sorted."""
    out = []
    for p in coll.get_paths():
        v = p.vertices[:4]
        out.append((v[:, 0].min(), v[:, 0].max(), v[:, 1].mean()))
    return sorted(out)


def test_gantt_spans_match_the_evaluation(evict_demo, tmp_path):
    inst, s, ev = evict_demo
    fig = plot.gantt(inst, s, ev, save=tmp_path / "g.png")
    gantt_ax, kv_ax = fig.axes[:2]
    cols = _collections(gantt_ax)
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
    assert _boxes(cols["prefill"]) == sorted([(st[0], en[0], 0), (st[0], en[0], 1), (st[3], en[3], 1)])
    assert _boxes(cols["decode"]) == sorted([(st[1], en[1], 0), (st[2], en[2], 0), (st[4], en[4], 1)])
    # red: from the evicting batch's start (KV dropped) to the refill's start
    assert _boxes(cols["evicted"]) == [(st[1], st[3], 1)]
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
    _png_ok(tmp_path / "g.png")


def test_gantt_evaluates_when_not_given_and_rejects_a_foreign_evaluation(evict_demo):
    inst, s, ev = evict_demo
    fig = plot.gantt(inst, s)
    assert len(_collections(fig.axes[0])["decode"].get_paths()) == 3
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


def _load_bench_plot():
    """``bench/bench_plot.py`` builds the wave schedules the large-plot tests draw (one copy)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "bench_plot.py"
    spec = importlib.util.spec_from_file_location("bench_plot", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_big = _load_bench_plot().waves


def test_gantt_samples_rows_above_max_rows():
    inst, s = _big(400, W=100, O=5)
    ev = evaluate(inst, s)
    fig = plot.gantt(inst, s, ev, max_rows=50)
    ax, kv_ax = fig.axes[:2]
    rows = {b[2] for c in _collections(ax).values() for b in _boxes(c)}
    assert len(rows) == 50 and max(rows) == 49
    assert "50 of 400" in ax.get_ylabel()
    # the KV panel covers every request
    vals = [p for p in kv_ax.patches if hasattr(p, "get_data")][0].get_data()[0]
    np.testing.assert_array_equal(vals, ev.batch_kv)


def test_gantt_merges_touching_spans_without_changing_the_picture():
    inst, s = _big(40, W=20, O=8)
    ev = evaluate(inst, s)
    full = _collections(plot.gantt(inst, s, ev, kv=False).axes[0])
    merged = _collections(plot.gantt(inst, s, ev, kv=False, merge_above=10).axes[0])
    for phase in ("prefill", "decode"):
        a, b = _boxes(full[phase]), _boxes(merged[phase])
        assert len(b) <= len(a)
        assert sum(x1 - x0 for x0, x1, _ in a) == pytest.approx(sum(x1 - x0 for x0, x1, _ in b))
    assert len(_boxes(merged["decode"])) == 40  # one gray bar per request


def test_gantt_draws_100k_entries(tmp_path):
    """Completes and writes a PNG; ``bench/bench_plot.py`` measures the time."""
    inst, s = _big(2000)
    assert s.n_entries == 100_000
    ev = evaluate(inst, s)
    plot.gantt(inst, s, ev, max_rows=None, merge_above=10**9, save=tmp_path / "big.png")
    _png_ok(tmp_path / "big.png")


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
    _png_ok(tmp_path / "kv.png")
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
    _png_ok(tmp_path / "c.png")


def test_solver_progress(tmp_path):
    hist = [(1.0, 5.0, 3.5), (0.1, None, 2.0), (0.5, 6.0, 3.0), (2.0, 5.0, 4.2), (3.0, 4.5, None)]
    fig = plot.solver_progress(hist, save=tmp_path / "p.png")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "incumbent (last 4.5)" and labels[1] == "bound (last 4.2)"
    inc = ax.get_lines()[0]
    assert list(inc.get_xdata()) == [0.5, 1.0, 2.0, 3.0, 3.0]
    _png_ok(tmp_path / "p.png")
    assert plot.solver_progress([]).axes[0].texts  # "no incumbent or bound recorded"


def test_cli_plot(evict_demo, tmp_path, capsys):
    inst, s, _ = evict_demo
    inst.save(tmp_path / "i.json")
    s.save(tmp_path / "s.json")
    out = tmp_path / "out" / "g.png"
    assert main(["plot", str(tmp_path / "i.json"), str(tmp_path / "s.json"), "-o", str(out),
                 "--title", "T", "--max-rows", "10"]) == 0
    _png_ok(out)
    assert "written" in capsys.readouterr().out
    bad = Schedule.from_batches([([("a", 4), ("b", 3)], []), ([("a", 1), ("b", 1)], [])])
    bad.save(tmp_path / "bad.json")
    assert main(["plot", str(tmp_path / "i.json"), str(tmp_path / "bad.json"), "-o", str(out)]) == 0
    assert "infeasible" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "nope.json"), str(tmp_path / "s.json"), "-o", str(out)]) == 2


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
    assert _boxes(_collections(fig.axes[0])["prefill"])[-1] == (5, 6, 1)
