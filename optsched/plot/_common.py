"""Shared plumbing: pyplot-free figures (work headless, no global state), saving, colours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: InferMax Figure 15 colours: black = (p)refill, gray = decode, red = evicted; blue = KV.
PREFILL_COLOR = "black"
DECODE_COLOR = "#9a9a9a"
EVICTED_COLOR = "#d62728"
KV_COLOR = "#1f5fbf"
CAPACITY_COLOR = "black"
OPTIMUM_COLOR = "#2ca02c"
POLICY_COLOR = "#4c72b0"


def new_figure(figsize: tuple[float, float], **kw: Any) -> Figure:
    """A Figure with an Agg canvas, created without pyplot (no display needed, nothing leaks).

    For interactive use pass your own ``ax`` (e.g. from ``plt.subplots()``) instead.
    """
    fig = Figure(figsize=figsize, **kw)
    FigureCanvasAgg(fig)
    return fig


def figure_of(ax: Axes) -> Figure:
    """The root Figure holding ``ax`` (also when ``ax`` is in a SubFigure)."""
    fig: Any = ax.figure
    while getattr(fig, "figure", fig) is not fig:  # SubFigure -> parent
        fig = fig.figure
    return fig


def finish(fig: Figure, save: str | Path | None, dpi: int = 120) -> Figure:
    """Save ``fig`` to ``save`` (format from the suffix) if given; return it."""
    if save is not None:
        p = Path(save)
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(p, dpi=dpi, bbox_inches="tight")
    return fig


def time_label(instance) -> str:
    """x-axis label: steps under the unit-time model, seconds otherwise (semantics section 5)."""
    kind = getattr(instance.cost_model, "kind", None) if instance is not None else None
    return "time (steps)" if kind == "unit" else "time (s)" if kind is not None else "time"
