"""SLO goodput in ``optsched compare``: each schedule's SLO attainment beside the certified
*upper* bound on it (``formulations/bounds.md`` B12, :func:`optsched.bounds.goodput.goodput_bound`)
and the gap between them (issue 25, item 3).

Attainment is the evaluator's ``slo_attainment`` (docs/semantics.md section 4): the share of
the requests with at least one of ``ttft_slo``, ``tpot_slo``, ``deadline`` that meet all of
theirs. The bound is ``GoodputBound.attainment`` on the same instance, so both count the
same requests.

**The gap of a maximisation objective.** ``compare``'s gap is ``(value - reference) /
|reference|`` (:func:`optsched.compare.gap`) with the reference on the better side. For
goodput the better side is the upper bound ``U``, so the gap is the share of the bound the
schedule misses: ``(U - a) / U = -gap(a, U)``. Because ``U >= a* >= a`` (``a*`` the optimum
attainment), ``(U - a) / U >= (a* - a) / a*``: the gap bounds the schedule's shortfall
relative to the optimum from above, as a minimisation gap to a lower bound does. ``U = 0``
forces ``a = 0`` and the gap 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..bounds.goodput import GoodputBound, goodput_bound
from ..errors import OptschedError
from ..instance import Instance
from ..solve_types import relative_gap

if TYPE_CHECKING:
    from ..compare import Row


class GoodputGapError(OptschedError, ValueError):
    """An inconsistent goodput row or summary."""


@dataclass(frozen=True)
class GoodputRow:
    """One schedule's attainment and its gap to the bound (None: no feasible schedule)."""

    label: str
    attainment: float | None
    gap: float | None

    def __post_init__(self) -> None:
        for name in ("attainment", "gap"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and -1e-9 <= v <= 1 + 1e-9):
                raise GoodputGapError(f"goodput row {self.label!r}: {name} {v!r} not in [0, 1]")

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "attainment": self.attainment, "gap": self.gap}


@dataclass(frozen=True)
class GoodputGap:
    """The bound, every compared row, and the best row (largest attainment, first of equals)."""

    bound: GoodputBound
    rows: tuple[GoodputRow, ...]
    seconds: float

    def __post_init__(self) -> None:
        ub = self.bound.attainment
        if ub is None:
            raise GoodputGapError("goodput gap: no request has an SLO")
        for r in self.rows:
            if r.attainment is not None and r.attainment > ub + 1e-9:
                raise GoodputGapError(  # a bound below a schedule is a bug, never a result
                    f"goodput bound {ub:.6g} is below {r.label!r}'s attainment {r.attainment:.6g}")

    @property
    def upper(self) -> float:
        """The certified upper bound on SLO attainment (B12)."""
        ub = self.bound.attainment
        if ub is None:  # __post_init__ refuses it
            raise GoodputGapError("goodput gap: no request has an SLO")
        return ub

    @property
    def best(self) -> GoodputRow | None:
        done = [r for r in self.rows if r.attainment is not None]
        return max(done, key=lambda r: r.attainment or 0.0) if done else None

    def to_dict(self) -> dict[str, Any]:
        b = self.best
        return {"metric": "slo_attainment", "upper_bound": self.upper,
                "gap_formula": "(upper_bound - attainment) / upper_bound",
                "bound": self.bound.to_dict(), "seconds": self.seconds,
                "best": None if b is None else b.to_dict(),
                "rows": [r.to_dict() for r in self.rows]}


def goodput_gap_value(attainment: float, upper: float) -> float:
    """``(U - a) / U`` (module docstring), 0 when ``U = 0``."""
    g = relative_gap(attainment, upper, per="bound")  # compare's gap formula
    return 0.0 if g is None else max(0.0, -g)


def goodput_gap(instance: Instance, rows: Sequence[Row]) -> GoodputGap | None:
    """The goodput table of a comparison; None when no request of ``instance`` has an SLO."""
    import time

    if not any(r.ttft_slo is not None or r.tpot_slo is not None or r.deadline is not None
               for r in instance.requests) or instance.has_prefix:
        return None  # with prefix reuse there is no certified ceiling (bounds: B12 refuses)
    t0 = time.perf_counter()
    gb = goodput_bound(instance)
    seconds = time.perf_counter() - t0
    ub = gb.attainment
    if ub is None:  # some request has an SLO, so with_slo >= 1
        raise GoodputGapError("goodput gap: the bound counted no request with an SLO")
    out = []
    for r in rows:
        ev = r.evaluation
        a = None if ev is None or not ev.feasible else ev.metrics.get("slo_attainment")
        out.append(GoodputRow(r.label, a, None if a is None else goodput_gap_value(a, ub)))
    return GoodputGap(gb, tuple(out), seconds)


HEADERS = ("policy", "SLO attainment", "upper bound (B12)", "gap")


def goodput_table_rows(g: GoodputGap) -> list[list[Any]]:
    """Cells of the goodput table, one list per row (in :data:`HEADERS` order)."""
    return [[r.label, r.attainment, g.upper,
             None if r.gap is None else f"{100 * r.gap:.2f}%"] for r in g.rows]


def goodput_lines(g: GoodputGap) -> list[str]:
    """The sentences under the table (report and terminal)."""
    b, gb = g.best, g.bound
    lines = [f"goodput: at most {gb.both} of the {gb.with_slo} requests with an SLO can meet "
             f"all of theirs (attainment <= {g.upper:.4g}; TTFT alone <= {gb.ttft}; "
             f"formulations/bounds.md B12, {g.seconds:.2g} s); gap = (bound - attainment) / "
             "bound, an upper bound on the shortfall from the optimum relative to it"]
    if b is not None and b.attainment is not None:
        lines.append(f"goodput best: {b.label}, attainment {b.attainment:.4g}, gap "
                     f"{100 * (b.gap or 0.0):.2f}%")
    return lines


__all__ = ["GoodputGap", "GoodputGapError", "GoodputRow", "HEADERS", "goodput_gap",
           "goodput_gap_value", "goodput_lines", "goodput_table_rows"]
