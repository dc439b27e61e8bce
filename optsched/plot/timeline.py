"""A schedule at trace scale: a request raster sorted by arrival, requests running and
waiting, KV use against ``M`` and batch times, on one time axis.

The Gantt chart (:mod:`optsched.plot.gantt`) draws a rectangle per entry and samples rows;
past a few hundred requests its boxes are thinner than a pixel and a sample can drop the
rows that matter. Here every request keeps a row (rows sorted by arrival; above
``max_rows`` requests, neighbouring rows share a raster row) and time is cut into ``bins``
columns; a cell shows the most telling state the request was in during that column:
evicted (until refill, red) over (p)refill (black) over decode (gray) over *waiting*
(arrived, unfinished, in no batch: shaded) over nothing. The arrival of each row is drawn as
a line, so waiting time is the shading right of it. Below, per batch from the evaluator:
entries in the batch and requests waiting, ``Evaluation.batch_kv`` against ``M`` and the
batch's duration.

Nothing here recomputes a metric: states, times and KV come from :func:`optsched.evaluate`
(the spans are :func:`~optsched.plot.gantt.gantt_spans`'). A ``window`` ``(t0, t1)``
restricts the picture to those times and to the requests present in them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
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
    finish,
    new_figure,
    time_label,
)
from .gantt import gantt_spans, kv_steps

#: raster cell states, lowest first; a cell shows the highest state it saw
STATES = ("none", "waiting", "decode", "prefill", "evicted")
WAITING_COLOR = "#f3c98b"
ARRIVAL_COLOR = "#1f77b4"
STATE_COLORS = ("white", WAITING_COLOR, DECODE_COLOR, PREFILL_COLOR, EVICTED_COLOR)
DEFAULT_BINS = 1200
DEFAULT_MAX_ROWS = 1000


@dataclass(frozen=True)
class TimelineData:
    """What :func:`timeline` draws (exposed for tests and notebooks).

    ``rows``: the instance positions drawn, sorted by arrival; request ``rows[k]`` is in
    raster row ``k // group``. ``raster[r, b]``: the state code (index of :data:`STATES`) of
    raster row ``r`` in time column ``b`` (between ``edges[b]`` and ``edges[b + 1]``). Per
    column: ``running``, the time-weighted mean number of entries of the batches running in
    it (idle time counts 0); ``in_system``, the requests arrived and unfinished at its middle;
    ``batch_time``, the mean duration of the batches starting in it, else of the batch running
    at its middle (NaN: idle)."""

    t0: float
    t1: float
    edges: np.ndarray
    rows: np.ndarray
    group: int
    raster: np.ndarray
    running: np.ndarray
    in_system: np.ndarray
    batch_time: np.ndarray

    def __post_init__(self) -> None:
        if not self.t1 > self.t0:
            raise ValueError(f"window: the end {self.t1} must be after the start {self.t0}")
        bins = self.edges.size - 1
        if self.group < 1 or any(a.shape[-1] != bins for a in (
                self.raster, self.running, self.in_system, self.batch_time)):
            raise ValueError("timeline: raster, series and time columns disagree")


def _window(ev: Evaluation, window: tuple[float, float] | None) -> tuple[float, float]:
    if window is not None:
        t0, t1 = (float(x) for x in window)
        if not (np.isfinite(t0) and np.isfinite(t1)) or t1 <= t0:
            raise ValueError(f"window: expected start < end, got {window!r}")
        return t0, t1
    if ev.batch_end.size == 0:
        return 0.0, 1.0
    t0 = min(0.0, float(ev.batch_start[0]))
    t1 = float(ev.batch_end[-1])
    return t0, (t1 if t1 > t0 else t0 + 1.0)


def _paint(cover: np.ndarray, row: np.ndarray, x0: np.ndarray, x1: np.ndarray,
           t0: float, dt: float) -> None:
    """Add 1 to ``cover[row, b]`` for every column ``b`` that ``[x0, x1]`` overlaps, by a
    difference array (O(spans + cells of the raster), whatever the spans' lengths)."""
    bins = cover.shape[1] - 1
    t1 = t0 + bins * dt
    # a span of positive length touches the columns it overlaps for a positive time, one of
    # no length (a batch of no time) the column it is in
    keep = ((x1 > t0) & (x0 < t1)) | ((x1 == x0) & (x0 >= t0) & (x0 <= t1))
    row, x0, x1 = row[keep], x0[keep], x1[keep]
    b0 = np.clip(np.floor((x0 - t0) / dt), 0, bins - 1).astype(np.int64)
    # a span ending exactly on a column edge does not touch the next column
    b1 = np.clip(np.ceil((x1 - t0) / dt) - 1, 0, bins - 1).astype(np.int64)
    b1 = np.maximum(b0, b1)
    np.add.at(cover, (row, b0), 1)
    np.add.at(cover, (row, b1 + 1), -1)


def timeline_data(instance: Instance, schedule: Schedule, evaluation: Evaluation, *,
                  window: tuple[float, float] | None = None, bins: int = DEFAULT_BINS,
                  max_rows: int = DEFAULT_MAX_ROWS) -> TimelineData:
    """The raster and per-batch series of :func:`timeline` (module docstring)."""
    ev = evaluation
    if bins < 1 or max_rows < 1:
        raise ValueError(f"timeline: bins and max_rows must be >= 1, got {bins}, {max_rows}")
    t0, t1 = _window(ev, window)
    arrival = instance.arrival.astype(float)
    done = np.where(np.isfinite(ev.completion), ev.completion, max(t1, float(
        ev.batch_end[-1]) if ev.batch_end.size else t1))
    present = (arrival <= t1) & (done >= t0)
    rows = np.flatnonzero(present)
    rows = rows[np.argsort(arrival[rows], kind="stable")]
    group = max(1, -(-rows.size // max_rows))
    nr = max(1, -(-rows.size // group))
    where = np.full(max(instance.n, 1), -1, np.int64)
    where[rows] = np.arange(rows.size) // group
    edges = np.linspace(t0, t1, bins + 1)
    dt = (t1 - t0) / bins
    spans = gantt_spans(instance, schedule, ev)
    spans["waiting"] = (arrival, done, np.arange(instance.n))
    raster = np.zeros((nr, bins), np.uint8)
    for code, state in enumerate(STATES[1:], start=1):
        x0, x1, r = spans[state]
        sel = where[r] >= 0 if r.size else np.zeros(0, bool)
        cover = np.zeros((nr, bins + 1), np.int64)
        _paint(cover, where[r[sel]], np.asarray(x0, float)[sel], np.asarray(x1, float)[sel],
               t0, dt)
        raster[np.cumsum(cover, axis=1)[:, :bins] > 0] = code
    return TimelineData(t0, t1, edges, rows, group, raster,
                        *_column_series(instance, ev, done, edges))


def _column_series(instance: Instance, ev: Evaluation, done: np.ndarray,
                   edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``running``, ``in_system`` and ``batch_time`` per column (:class:`TimelineData`).
    The running mean integrates the entries-per-batch step function exactly: its running
    integral is piecewise linear in time, read at the column edges."""
    entries = (ev.batch_prefill_entries + ev.batch_decode_entries).astype(float)
    start, end = ev.batch_start.astype(float), ev.batch_end.astype(float)
    width = np.diff(edges)
    if start.size:
        # integral of the step function up to each batch's start and end (idle gaps add 0)
        at_end = np.cumsum(entries * (end - start))
        t = np.empty(2 * start.size)
        t[0::2], t[1::2] = start, end
        F = np.empty(2 * start.size)
        F[0::2], F[1::2] = at_end - entries * (end - start), at_end
        running = np.diff(np.interp(edges, t, F, left=0.0, right=float(at_end[-1]))) / width
        col = np.searchsorted(edges, start, side="right") - 1
        ok = (col >= 0) & (col < width.size)
        n_b = np.bincount(col[ok], minlength=width.size).astype(float)
        tot = np.bincount(col[ok], weights=(end - start)[ok], minlength=width.size)
        # a column no batch starts in shows the batch running at its middle (NaN: idle)
        mid = (edges[:-1] + edges[1:]) / 2
        at = np.searchsorted(start, mid, side="right") - 1
        on = (at >= 0) & (end[np.maximum(at, 0)] > mid)
        inner = np.where(on, (end - start)[np.maximum(at, 0)], np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            batch_time = np.where(n_b > 0, tot / n_b, inner)
    else:
        running = np.zeros(width.size)
        batch_time = np.full(width.size, np.nan)
    mid = (edges[:-1] + edges[1:]) / 2
    arrived = np.searchsorted(np.sort(instance.arrival.astype(float)), mid, side="right")
    finished = np.searchsorted(np.sort(done), mid, side="right")
    return running, (arrived - finished).astype(float), batch_time


def timeline(instance: Instance, schedule: Schedule, evaluation: Evaluation | None = None,
             title: str | None = None, *, window: tuple[float, float] | None = None,
             bins: int = DEFAULT_BINS, max_rows: int = DEFAULT_MAX_ROWS,
             save: str | Path | None = None) -> Figure:
    """The trace-scale picture of a schedule (module docstring): four panels sharing time.
    ``evaluation`` must be ``evaluate(instance, schedule)`` (computed if omitted); ``save``:
    also write the figure there."""
    ev = evaluation if evaluation is not None else evaluate(instance, schedule)
    if ev.batch_start.size != schedule.n_batches:
        raise ValueError("evaluation does not belong to this schedule (batch counts differ)")
    d = timeline_data(instance, schedule, ev, window=window, bins=bins, max_rows=max_rows)
    fig = new_figure((11, 10.5), layout="constrained")
    ax, run_ax, kv_ax, dur_ax = fig.subplots(4, 1, sharex=True,
                                             height_ratios=[5.0, 1.6, 1.6, 1.2])
    _raster_panel(ax, instance, ev, d)
    _series_panels(run_ax, kv_ax, dur_ax, instance, ev, d)
    dur_ax.set_xlabel(time_label(instance))
    ax.set_xlim(d.t0, d.t1)
    if title is None:
        m = ev.metrics
        title = (f"{instance.name or 'instance'}: {instance.n} requests, {m['batches']} "
                 f"batches, makespan {m['makespan']:.6g}, {m['evictions']} evictions")
        if window is not None:
            title += f"; window [{d.t0:.6g}, {d.t1:.6g}]: {d.rows.size} requests"
        if not ev.feasible:
            title += f" -- INFEASIBLE ({sum(ev.violation_counts.values())} violations)"
    ax.set_title(title, fontsize=10)
    return finish(fig, save)


def _raster_panel(ax: Axes, instance: Instance, ev: Evaluation, d: TimelineData) -> None:
    nr = d.raster.shape[0]
    img = ax.imshow(d.raster, cmap=ListedColormap(STATE_COLORS), vmin=0,
                    vmax=len(STATES) - 1, aspect="auto", interpolation="nearest",
                    extent=(d.t0, d.t1, nr, 0), origin="upper")
    img.set_gid("raster")
    y = np.arange(d.rows.size) // d.group + 0.5
    (line,) = ax.plot(instance.arrival[d.rows], y, color=ARRIVAL_COLOR, linewidth=0.8,
                      label="arrival")
    line.set_gid("arrival")
    ax.set_ylim(nr, 0)
    per = f", {d.group} per row" if d.group > 1 else ""
    ax.set_ylabel(f"requests by arrival ({d.rows.size}{per})")
    handles: list[Artist] = [
        Patch(facecolor=c, edgecolor="0.6", label=s)
        for s, c in zip(("waiting", "decode", "(p)refill", "evicted (until refill)"),
                        STATE_COLORS[1:])]
    handles.append(line)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)


#: above this many batches the KV panel draws each column's peak instead of every batch
KV_STEPS_MAX = 20_000


def _series_panels(run_ax: Axes, kv_ax: Axes, dur_ax: Axes, instance: Instance,
                   ev: Evaluation, d: TimelineData) -> None:
    run_ax.stairs(d.in_system, d.edges, color=WAITING_COLOR, linewidth=1.2,
                  label="arrived, unfinished", baseline=None).set_gid("in_system")
    run_ax.stairs(d.running, d.edges, color="black", linewidth=1,
                  label="in the batch (mean)", baseline=None).set_gid("running")
    run_ax.set_ylabel("requests")
    run_ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    edges, vals = kv_steps(ev)
    label = "KV in use"
    if vals.size > KV_STEPS_MAX:  # a path of 100K steps: the peak per column instead
        col = np.clip(np.searchsorted(d.edges, edges[:-1], side="right") - 1, 0,
                      d.edges.size - 2)
        peak = np.full(d.edges.size - 1, -np.inf)
        np.maximum.at(peak, col, np.nan_to_num(vals, nan=-np.inf))
        edges, vals, label = d.edges, np.where(np.isfinite(peak), peak, np.nan), \
            "KV in use (peak per column)"
    kv_ax.stairs(vals, edges, color=KV_COLOR, linewidth=1, label=label,
                 baseline=None).set_gid("kv")
    M = instance.limits.kv_capacity
    kv_ax.axhline(M, color=CAPACITY_COLOR, linestyle="--", linewidth=1, label=f"M = {M}")
    top = max(M, float(np.nanmax(vals)) if np.isfinite(vals).any() else 0.0)
    kv_ax.set_ylim(0, top * 1.12)
    kv_ax.set_ylabel("KV tokens")
    kv_ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    dur_ax.stairs(d.batch_time, d.edges, color="0.3", linewidth=1,
                  baseline=None).set_gid("batch_time")
    dur_ax.set_ylabel("batch time\n(mean)")
    for a in (run_ax, kv_ax, dur_ax):
        a.grid(color="0.9")
