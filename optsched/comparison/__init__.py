"""Policies and schedules against the optimum: ``optsched compare`` and its report.

* :mod:`~optsched.comparison.rows` -- what a comparison holds: :class:`Row`,
  :class:`Comparison`, the SLO goodput table (:class:`GoodputGap`), the verdict;
* :mod:`~optsched.comparison.logic` -- :func:`compare` and its steps (policies, the optimum
  through the one solve, the gap reference, the goodput bound);
* :mod:`~optsched.comparison.report` -- ``report.md`` / ``report.json`` / the charts, the
  table cells, and the verdicts of ``solve`` and ``bound``.

``optsched.compare(instance, ...)`` is :func:`compare` (the top-level API).
"""

from __future__ import annotations

from .logic import (
    CompareInputError,
    compare,
    evaluated_row,
    gap,
    goodput_gap,
    goodput_gap_value,
    optimum_row,
    policy_names,
    reference,
    run_optimum,
    run_policies,
)
from .report import (
    GOODPUT_HEADERS,
    HEADERS,
    bound_verdict,
    goodput_lines,
    goodput_table_rows,
    headers_in,
    markdown_table,
    say,
    solve_verdict,
    table_rows,
    write_report,
)
from .rows import Comparison, GoodputGap, GoodputGapError, GoodputRow, Row, compare_verdict

__all__ = [
    "GOODPUT_HEADERS", "HEADERS", "CompareInputError", "Comparison", "GoodputGap",
    "GoodputGapError", "GoodputRow", "Row", "bound_verdict", "compare", "compare_verdict",
    "evaluated_row", "gap", "goodput_gap", "goodput_gap_value", "goodput_lines",
    "goodput_table_rows", "headers_in", "markdown_table", "optimum_row", "policy_names",
    "reference", "run_optimum", "run_policies", "say", "solve_verdict", "table_rows",
    "write_report",
]
