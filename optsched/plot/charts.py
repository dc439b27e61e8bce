"""Comparison charts: KV over time for several schedules, policy bars, solver progress."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, SupportsFloat, TypeGuard

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..evaluation import Evaluation, evaluate
from ..instance import Instance
from ..schedule import Schedule
from ..solve_types import relative_gap
from ._common import (
    CAPACITY_COLOR,
    OPTIMUM_COLOR,
    POLICY_COLOR,
    figure_of,
    finish,
    new_figure,
    time_label,
)
from .gantt import kv_steps

KvItem = Evaluation | tuple[Instance, Schedule] | tuple[Instance, Evaluation]


def _resolve(item: KvItem) -> tuple[Instance | None, Evaluation]:
    if isinstance(item, Evaluation):
        return None, item
    inst, x = item
    if isinstance(x, Evaluation):
        return inst, x
    return inst, evaluate(inst, x)


def kv_over_time(
    runs: Mapping[str, KvItem],
    ax: Axes | None = None,
    title: str | None = None,
    *,
    capacity: int | None = None,
    save: str | Path | None = None,
) -> Figure:
    """KV in use over time (step plot of ``Evaluation.batch_kv``) for several schedules, against M.

    ``runs`` maps a label to ``(instance, schedule)`` (evaluated here),
    ``(instance, evaluation)`` or an ``Evaluation``; ``M`` is read from the
    instances, or given as ``capacity`` when only evaluations are passed.
    """
    if ax is None:
        fig = new_figure((10, 4), layout="constrained")
        ax = fig.subplots()
    else:
        fig = figure_of(ax)
    caps: set[int] = set() if capacity is None else {int(capacity)}
    inst0 = None
    n_runs = len(runs)
    for k, (label, item) in enumerate(runs.items()):
        inst, ev = _resolve(item)
        if inst is not None:
            inst0 = inst0 or inst
            if capacity is None:
                caps.add(inst.limits.kv_capacity)
        edges, vals = kv_steps(ev)
        peak = int(np.nanmax(vals)) if np.isfinite(vals).any() else 0
        # earlier runs drawn thicker and below, so identical curves stay visible
        ax.stairs(vals, edges, baseline=None, color=f"C{k % 10}", zorder=2 + k,
                  linewidth=1.2 + 1.4 * (n_runs - 1 - k) / max(n_runs - 1, 1),
                  linestyle=("-", (0, (5, 2)), "-.", ":")[k // 10 % 4],
                  label=f"{label} (peak {peak}, makespan {ev.metrics['makespan']:.6g})")
    for M in sorted(caps):
        ax.axhline(M, color=CAPACITY_COLOR, linestyle="--", linewidth=1, label=f"M = {M}")
    ax.set_ylim(bottom=0, top=max([*caps, 1]) * 1.15 if caps else None)
    ax.set_xlim(left=0)
    ax.set_xlabel(time_label(inst0))
    ax.set_ylabel("KV tokens in use")
    ax.grid(color="0.9")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_title(title or "KV cache use over time", fontsize=10)
    return finish(fig, save)


#: (row key, panel title, scale) of the default comparison panels
COMPARE_METRICS: tuple[tuple[str, str, float], ...] = (
    ("objective", "objective", 1.0),
    ("gap", "above optimal (%)", 100.0),
    ("evictions", "evictions", 1.0),
    ("mean_ttft", "mean TTFT", 1.0),
    ("mean_tpot", "mean TPOT", 1.0),
)


def _finite(v: Any) -> TypeGuard[SupportsFloat]:
    return v is not None and isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(v)


def compare_bars(
    rows: Sequence[Mapping[str, Any]],
    ax: Sequence[Axes] | None = None,
    title: str | None = None,
    *,
    metrics: Sequence[tuple[str, str, float]] = COMPARE_METRICS,
    gap_label: str | None = None,
    save: str | Path | None = None,
) -> Figure:
    """One horizontal bar panel per metric, one bar per row (policy).

    Each row is a dict with ``"policy"`` (the label) and the metric keys
    (default ``objective``, ``gap`` (a fraction, drawn in %), ``evictions``,
    ``mean_ttft``, ``mean_tpot``); missing/None/NaN values are drawn as "n/a".
    A row with ``"optimal": True`` (the solver's schedule) is drawn in green,
    one with ``"feasible": False`` hatched. ``gap_label`` renames the gap panel
    (e.g. "gap to bound (%)" when the optimum is not proven).
    """
    metrics = [(k, gap_label if (k == "gap" and gap_label) else t, s) for k, t, s in metrics]
    labels = [str(r.get("policy", f"#{i}")) for i, r in enumerate(rows)]
    n = len(rows)
    if ax is None:
        fig = new_figure((2.7 * len(metrics) + 1.5, 0.45 * n + 1.6), layout="constrained")
        axes = list(np.atleast_1d(fig.subplots(1, len(metrics), sharey=True)))
    else:
        axes = list(ax)
        if len(axes) != len(metrics):
            raise ValueError(f"compare_bars needs {len(metrics)} axes, got {len(axes)}")
        fig = figure_of(axes[0])
    y = np.arange(n)
    colors = [OPTIMUM_COLOR if r.get("optimal") else POLICY_COLOR for r in rows]
    hatches = ["//" if r.get("feasible") is False else "" for r in rows]
    for a, (key, name, scale) in zip(axes, metrics):
        vals = [r.get(key) for r in rows]
        fin = [float(v) * scale if _finite(v) else 0.0 for v in vals]
        bars = a.barh(y, fin, color=colors, height=0.6, zorder=2)
        for b, h in zip(bars, hatches):
            if h:
                b.set_hatch(h)
                b.set_edgecolor("white")
        top = max([abs(v) for v in fin] + [0.0])
        for yi, v, f in zip(y, vals, fin):
            txt = f"{f:.4g}" if _finite(v) else "n/a"
            a.annotate(txt, (f, yi), xytext=(3 if f >= 0 else -3, 0), textcoords="offset points",
                       va="center", ha="left" if f >= 0 else "right", fontsize=8, zorder=3)
        a.set_xlim(min(0.0, min(fin, default=0.0) * 1.3), top * 1.35 if top > 0 else 1.0)
        a.set_title(name, fontsize=9)
        a.grid(axis="x", color="0.9", zorder=0)
        a.tick_params(axis="x", labelsize=8)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(labels, fontsize=9)
    axes[0].set_ylim(n - 0.5, -0.5)
    if title:
        fig.suptitle(title, fontsize=10)
    return finish(fig, save)


def solver_progress(
    history: Sequence[tuple[float, float | None, float | None]],
    ax: Axes | None = None,
    title: str | None = None,
    *,
    save: str | Path | None = None,
) -> Figure:
    """Incumbent and bound against elapsed time (step plots), the gap shaded between them.

    ``history`` is a sequence of ``(elapsed_seconds, incumbent_or_None, bound_or_None)``
    in any order; None (or infinite) means "none known at that time".
    """
    if ax is None:
        fig = new_figure((8, 4), layout="constrained")
        ax = fig.subplots()
    else:
        fig = figure_of(ax)
    h = sorted(history, key=lambda r: r[0])
    t = np.array([r[0] for r in h], float)

    def series(k):
        v = np.array([r[k] if _finite(r[k]) else np.nan for r in h], float)
        ok = np.isfinite(v)
        return t[ok], v[ok]

    ti, vi = series(1)
    tb, vb = series(2)
    t_end = float(t.max()) if t.size else 1.0
    if ti.size:
        ax.step(np.append(ti, t_end), np.append(vi, vi[-1]), where="post", color="#1f77b4",
                linewidth=1.5, label=f"incumbent (last {vi[-1]:.6g})")
        ax.plot(ti, vi, "o", color="#1f77b4", markersize=3)
    if tb.size:
        ax.step(np.append(tb, t_end), np.append(vb, vb[-1]), where="post", color="#ff7f0e",
                linewidth=1.5, label=f"bound (last {vb[-1]:.6g})")
    if ti.size and tb.size:
        grid = np.union1d(ti, tb)
        inc = vi[np.clip(np.searchsorted(ti, grid, side="right") - 1, 0, None)]
        bnd = vb[np.clip(np.searchsorted(tb, grid, side="right") - 1, 0, None)]
        valid = (grid >= ti[0]) & (grid >= tb[0])
        ax.fill_between(grid, bnd, inc, where=valid, step="post", color="0.85", label="gap", zorder=0)
        gap = relative_gap(float(vi[-1]), float(vb[-1]))
        text = "final gap n/a" if gap is None else f"final gap {100 * gap:.3g}%"
        ax.text(0.99, 0.02, text, transform=ax.transAxes, ha="right", va="bottom", fontsize=9)
    ax.set_xlabel("elapsed (s)")
    ax.set_ylabel("objective")
    ax.grid(color="0.9")
    if ti.size or tb.size:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no incumbent or bound recorded", transform=ax.transAxes, ha="center")
    ax.set_title(title or "solver progress", fontsize=10)
    return finish(fig, save)
