"""Figures for schedules and comparisons (matplotlib, no display needed).

* :func:`gantt` -- one row per request: (p)refill black, decode gray, evicted red
  (InferMax Figure 15), plus KV use over time against ``M``;
* :func:`timeline` -- the same at trace scale: every request a raster row sorted by arrival
  (waiting shaded, arrivals drawn), requests running and waiting, KV use and batch times;
* :func:`kv_over_time` -- KV use of several schedules against ``M``;
* :func:`compare_bars` -- policy comparison bars (objective, gap, evictions, TTFT, TPOT);
* :func:`solver_progress` -- incumbent and bound against time.

Every function returns the :class:`matplotlib.figure.Figure` (created without
pyplot, with an Agg canvas, so it works headless and leaks nothing) and writes
it to ``save=`` when given; pass ``ax=`` to draw into your own axes. Metrics
and phases come from :func:`optsched.evaluate`, never from here.
"""

from .charts import COMPARE_METRICS, compare_bars, kv_over_time, solver_progress
from .gantt import gantt, gantt_spans, kv_steps, sample_rows
from .timeline import TimelineData, timeline, timeline_data

__all__ = [
    "COMPARE_METRICS", "compare_bars", "gantt", "gantt_spans", "kv_over_time", "kv_steps",
    "sample_rows", "solver_progress", "TimelineData", "timeline", "timeline_data",
]
