"""Gantt chart of a schedule in the style of InferMax Figure 15, with KV use below.

One row per request; one rectangle per entry spanning its batch's
``[batch_start, batch_end]`` -- black for (p)refill entries, gray for decode
entries (the phase is ``Evaluation.entry_decode``) -- and a red span from each
eviction (the start of the evicting batch, when the KV is dropped) to the start
of the request's next entry (its refill). Below, the KV in use during each batch
(``Evaluation.batch_kv``) against the capacity ``M``.

Nothing here recomputes a metric: phases, times and KV come from
:func:`optsched.evaluate`. Rectangles go into one
:class:`~matplotlib.collections.PolyCollection` per phase (gid ``"prefill"``,
``"decode"``, ``"evicted"``), so 100K entries draw in a couple of seconds; above
``merge_above`` rectangles, touching rectangles of the same row and phase are
merged into one (same picture, fewer paths).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..evaluation import Evaluation, evaluate
from ..instance import Instance
from ..schedule import Schedule
from ._common import (
    CAPACITY_COLOR,
    DECODE_COLOR,
    EVICTED_COLOR,
    KV_COLOR,
    PREFILL_COLOR,
    figure_of,
    finish,
    new_figure,
    time_label,
)

DEFAULT_MAX_ROWS = 300
#: above this many rectangles in one phase, touching ones are merged
MERGE_ABOVE = 20_000
#: rows up to this many get a tick label each
LABEL_ROWS = 60


def _rects(x0: np.ndarray, x1: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    """(N, 4, 2) rectangle vertices."""
    v = np.empty((x0.size, 4, 2))
    v[:, 0, 0] = v[:, 1, 0] = x0
    v[:, 2, 0] = v[:, 3, 0] = x1
    v[:, 0, 1] = v[:, 3, 1] = y - h
    v[:, 1, 1] = v[:, 2, 1] = y + h
    return v


def _merge(x0: np.ndarray, x1: np.ndarray, y: np.ndarray, tol: float):
    """Merge rectangles of one row that touch or overlap (sorted by row, then x0)."""
    if x0.size == 0:
        return x0, x1, y
    o = np.lexsort((x0, y))
    x0, x1, y = x0[o], x1[o], y[o]
    # one request's spans never overlap (one entry per batch, batches in time order),
    # so within a row x1 grows with x0 and the previous x1 is the reach
    new = np.ones(x0.size, bool)
    new[1:] = (y[1:] != y[:-1]) | (x0[1:] > x1[:-1] + tol)
    starts = np.flatnonzero(new)
    return x0[starts], np.maximum.reduceat(x1, starts), y[starts]


def gantt_spans(instance: Instance, schedule: Schedule, evaluation: Evaluation,
                rows: np.ndarray | None = None) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The spans the Gantt chart draws: ``{phase: (x0, x1, instance position)}``.

    ``phase`` is ``"prefill"``, ``"decode"`` or ``"evicted"``; ``rows`` (instance
    positions) restricts the spans to those requests. Exposed for tests and notebooks.
    """
    ev = evaluation
    nb = schedule.n_batches
    idmap = np.array([instance.index.get(x, -1) for x in schedule.ids], dtype=np.int64)
    e_b = schedule.batch_of_entry
    e_r = idmap[schedule.entry_req] if schedule.n_entries else np.zeros(0, np.int64)
    v_b = schedule.batch_of_evict
    v_r = idmap[schedule.evict_req] if schedule.evict_req.size else np.zeros(0, np.int64)
    start, end = ev.batch_start, ev.batch_end
    t_end = float(end[-1]) if nb else 0.0

    # red: from the evicting batch's start to the start of the request's next entry
    ok_e = e_r >= 0
    key_e = np.sort(e_r[ok_e] * (nb + 1) + e_b[ok_e])
    ok_v = v_r >= 0
    vb, vr = v_b[ok_v], v_r[ok_v]
    red_x1 = np.full(vb.size, t_end)
    if key_e.size and vb.size:
        idx = np.searchsorted(key_e, vr * (nb + 1) + vb, side="right")
        nxt = key_e[np.minimum(idx, key_e.size - 1)]
        has_next = (idx < key_e.size) & (nxt // (nb + 1) == vr)
        red_x1[has_next] = start[nxt[has_next] % (nb + 1)]

    dec = ev.entry_decode
    out = {
        "prefill": (start[e_b[ok_e & ~dec]], end[e_b[ok_e & ~dec]], e_r[ok_e & ~dec]),
        "decode": (start[e_b[ok_e & dec]], end[e_b[ok_e & dec]], e_r[ok_e & dec]),
        "evicted": (start[vb] if nb else np.zeros(0), np.asarray(red_x1, float), vr),
    }
    if rows is not None:
        keep = np.zeros(instance.n, bool)
        keep[rows] = True
        out = {k: (a[keep[r]], b[keep[r]], r[keep[r]]) for k, (a, b, r) in out.items()}
    return out


def sample_rows(n: int, max_rows: int | None, keep: np.ndarray | None = None) -> np.ndarray:
    """Positions (of ``0..n-1``) of the rows drawn: all, or ``max_rows`` evenly spaced ones.
    ``keep`` (positions, e.g. the evicted requests) are drawn first: all of them when they
    fit, an even sample of them otherwise, and the rest of the rows evenly spaced."""
    if max_rows is None or n <= max_rows:
        return np.arange(n)
    max_rows = max(int(max_rows), 1)

    def even(pos: np.ndarray, k: int) -> np.ndarray:
        if k <= 0 or pos.size == 0:
            return pos[:0]
        return pos[np.unique(np.linspace(0, pos.size - 1, min(k, pos.size)).round()
                             .astype(np.int64))]

    kept = np.unique(np.asarray(keep, np.int64)) if keep is not None else np.zeros(0, np.int64)
    kept = even(kept, max_rows)
    rest = np.setdiff1d(np.arange(n), kept, assume_unique=True)
    return np.union1d(kept, even(rest, max_rows - kept.size))


def window_rows(instance: Instance, evaluation: Evaluation,
                window: tuple[float, float]) -> np.ndarray:
    """Instance positions of the requests present in ``window = (t0, t1)``: arrived by ``t1``
    and not finished before ``t0`` (an unfinished request is present to the end)."""
    t0, t1 = (float(x) for x in window)
    if not (np.isfinite(t0) and np.isfinite(t1)) or t1 <= t0:
        raise ValueError(f"window: expected start < end, got {window!r}")
    done = np.where(np.isfinite(evaluation.completion), evaluation.completion, np.inf)
    return np.flatnonzero((instance.arrival <= t1) & (done >= t0))


def gantt(
    instance: Instance,
    schedule: Schedule,
    evaluation: Evaluation | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    *,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    kv: bool = True,
    kv_ax: Axes | None = None,
    merge_above: int = MERGE_ABOVE,
    window: tuple[float, float] | None = None,
    save: str | Path | None = None,
) -> Figure:
    """Gantt chart (one row per request) plus KV use over time against ``M``.

    ``evaluation`` must be ``evaluate(instance, schedule)`` (computed if omitted).
    With more than ``max_rows`` requests an evenly spaced sample of rows is drawn
    (the axis label says so; evicted requests are always in it when they fit); the KV panel
    always covers every request. ``window = (t0, t1)``: only those times, and the requests
    present in them (:func:`window_rows`). At trace scale :func:`optsched.plot.timeline`
    draws every request. With ``ax``
    given the chart goes there and the KV panel into ``kv_ax`` (skipped if None).
    ``save``: also write the figure to this path.
    """
    ev = evaluation if evaluation is not None else evaluate(instance, schedule)
    if ev.batch_start.size != schedule.n_batches:
        raise ValueError("evaluation does not belong to this schedule (batch counts differ)")
    n = instance.n
    present = np.arange(n) if window is None else window_rows(instance, ev, window)
    # evicted requests are kept in any sample: their red spans are what a reader looks for
    rows = present[sample_rows(present.size, max_rows,
                               np.flatnonzero(ev.evictions[present] > 0))]
    sampled = rows.size < n
    nrow = max(rows.size, 1)

    if ax is None:
        h_g = float(np.clip(0.22 * nrow + 1.0, 2.5, 11.0))
        h_k = 2.2 if kv else 0.0
        fig = new_figure((11, h_g + h_k + 0.6), layout="constrained")
        if kv:
            ax, kv_ax = fig.subplots(2, 1, sharex=True, height_ratios=[h_g, h_k])
        else:
            ax = fig.subplots()
            kv_ax = None
    else:
        fig = figure_of(ax)
        if not kv:
            kv_ax = None

    # row position (0 = top) for every instance position that is drawn
    ypos = np.full(max(n, 1), -1.0)
    ypos[rows] = np.arange(rows.size)
    spans = gantt_spans(instance, schedule, ev, rows if sampled else None)
    tol = 1e-12 * max(1.0, float(ev.batch_end[-1]) if ev.batch_end.size else 1.0)
    half = 0.5 if nrow > 150 else 0.4  # dense rows touch: no moire stripes
    widths = np.concatenate([x1 - x0 for x0, x1, _ in spans.values()])
    t_span = float(ev.batch_end[-1] - min(0.0, ev.batch_start[0])) if ev.batch_end.size else 1.0
    # white separators between batches only where boxes are a few pixels wide
    dense = (widths.size > 2000 or nrow > 100
             or (widths.size > 0 and float(np.median(widths)) < t_span / 250))
    styles = {
        "prefill": (PREFILL_COLOR, "(p)refill"),
        "decode": (DECODE_COLOR, "decode"),
        "evicted": (EVICTED_COLOR, "evicted (until refill)"),
    }
    for phase, (x0, x1, r) in spans.items():
        if x0.size > merge_above:
            x0, x1, r = _merge(x0, x1, r, tol)
        color, label = styles[phase]
        y = ypos[r]
        verts = _rects(x0, x1, y, half if phase != "evicted" else half * 0.7)
        # matplotlib's stubs say Sequence; PolyCollection documents (N, M, 2) arrays as accepted
        coll = PolyCollection(
            verts,  # type: ignore[arg-type]
            facecolors=color,
            edgecolors="none" if dense else "white",
            linewidths=0 if dense else 0.6,
            zorder=2 if phase != "evicted" else 1,
        )
        coll.set_gid(phase)
        coll.set_label(label)
        ax.add_collection(coll, autolim=False)

    t_end = float(ev.batch_end[-1]) if ev.batch_end.size else 1.0
    t_end = t_end if t_end > 0 else 1.0
    t0 = min(0.0, float(ev.batch_start[0])) if ev.batch_start.size else 0.0
    xlim = (t0, t_end * 1.01) if window is None else (float(window[0]), float(window[1]))
    ax.set_xlim(*xlim)
    ax.set_ylim(nrow - 0.5, -0.5)
    if rows.size <= LABEL_ROWS:
        ax.set_yticks(np.arange(rows.size))
        ax.set_yticklabels([instance.ids[i] for i in rows], fontsize=8 if rows.size > 25 else 9)
    else:
        tick = np.unique(np.linspace(0, rows.size - 1, 12).round().astype(int))
        ax.set_yticks(tick)
        ax.set_yticklabels([instance.ids[rows[i]] for i in tick], fontsize=8)
    where = "" if window is None else f" in [{float(window[0]):.6g}, {float(window[1]):.6g}]"
    ax.set_ylabel("request" + (f" ({rows.size} of {present.size}{where}"
                               f"{' sampled' if rows.size < present.size else ''})"
                               if sampled else ""))
    ax.grid(axis="x", color="0.9", zorder=0)
    ax.set_axisbelow(True)
    handles = [Patch(facecolor=c, label=lbl) for c, lbl in styles.values()]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    if title is None:
        m = ev.metrics
        title = (f"{instance.name or 'instance'}: {n} requests, {m['batches']} batches, "
                 f"makespan {m['makespan']:.6g}, {m['evictions']} evictions")
        if not ev.feasible:
            title += f" -- INFEASIBLE ({sum(ev.violation_counts.values())} violations)"
    ax.set_title(title, fontsize=10)

    if kv_ax is not None:
        _kv_panel(kv_ax, ev, instance.limits.kv_capacity)
        kv_ax.set_xlabel(time_label(instance))
        kv_ax.set_xlim(*xlim)
    else:
        ax.set_xlabel(time_label(instance))
    return finish(fig, save)


def kv_steps(ev: Evaluation) -> tuple[np.ndarray, np.ndarray]:
    """Stair edges and values: ``batch_kv[j]`` over ``[batch_start[j], batch_end[j]]``.

    Consecutive batches share an edge; an idle gap (the next batch waits for an
    arrival or a stated start) gets the value NaN, so nothing is drawn there: the
    evaluator reports KV per batch only.
    """
    if ev.batch_start.size == 0:
        return np.array([0.0, 1.0]), np.full(1, np.nan)
    start, end = ev.batch_start, ev.batch_end
    edges = np.append(start, end[-1])
    vals = ev.batch_kv.astype(float)
    tol = 1e-12 * max(1.0, abs(float(end[-1])))
    idle = np.flatnonzero(start[1:] > end[:-1] + tol)
    if idle.size:
        edges = np.insert(edges, idle + 1, end[idle])
        vals = np.insert(vals, idle + 1, np.nan)
    # a batch that takes no time (empty, or evictions only) is a step of width 0: nothing to
    # see, but a million of them cost matplotlib a minute of path extents
    keep = np.diff(edges) > 0
    if not keep.all():
        keep[0] |= not keep.any()  # all of width 0: one step still carries the value
        edges, vals = np.append(edges[:-1][keep], edges[-1]), vals[keep]
    return edges, vals


def _kv_panel(ax: Axes, ev: Evaluation, M: int) -> None:
    edges, vals = kv_steps(ev)
    ax.stairs(vals, edges, color=KV_COLOR, linewidth=1.2, label="KV in use", baseline=None)
    ax.axhline(M, color=CAPACITY_COLOR, linestyle="--", linewidth=1, label=f"M = {M}")
    top = max(M, int(np.nanmax(vals)) if np.isfinite(vals).any() else 0)
    ax.set_ylim(0, top * 1.12 if top else 1)
    ax.set_ylabel("KV tokens")
    ax.grid(color="0.9")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
