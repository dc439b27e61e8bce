"""The result of a MILP solve: a frozen dataclass, JSON-able through ``to_dict()``.

The options, statuses and the gap formula are the shared vocabulary of
:mod:`optsched.solve_types` (re-exported here for the MILP layer's users)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..solve_types import STATUSES, Status, relative_gap


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (np.floating, np.integer)):
        return _jsonable(v.item())
    return v


@dataclass(frozen=True, eq=False)
class SolveResult:
    """The outcome of :func:`optsched.milp.solve`.

    ``status`` is a :class:`~optsched.solve_types.Status`. ``objective`` is the incumbent's
    objective and ``bound`` the best proven dual bound, both in the model's sense (for ``min``
    the bound is <= objective). ``gap`` is derived from them by
    :func:`~optsched.solve_types.relative_gap` (never taken from the solver). ``values`` is the full
    column vector (None without a solution); read blocks with
    ``model.value(block, result.values)``. ``runtime`` is the solver's own time, ``wall_time``
    the whole call (model transfer included). ``warm_start_objective`` is the objective of an
    accepted complete warm start; ``warm_start_violations`` counts what ``check`` found in the
    start (None when no start was given). ``notes`` explain choices (auto solver, scaling,
    missing bound, rejected start); ``message`` says what went wrong for ``error``.
    """

    status: Status
    solver: str
    objective: float | None = None
    bound: float | None = None
    runtime: float | None = None
    nodes: int | None = None
    solver_version: str = ""
    values: np.ndarray | None = field(default=None, repr=False)
    warm_start_objective: float | None = None
    warm_start_violations: int | None = None
    notes: tuple[str, ...] = ()
    message: str | None = None
    wall_time: float | None = None
    #: ``(elapsed, incumbent, bound)`` whenever either changed during the solve
    history: tuple[tuple[float, float | None, float | None], ...] = ()
    gap: float | None = field(init=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "gap", relative_gap(self.objective, self.bound))
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def has_solution(self) -> bool:
        """True when ``values`` holds a feasible solution."""
        return Status(self.status).has_solution and self.values is not None

    def to_dict(self, include_values: bool = False) -> dict[str, Any]:
        """A JSON-able dict (``values`` as a list only when asked)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "values":
                if include_values:
                    out["values"] = None if v is None else [_jsonable(x) for x in v.tolist()]
                continue
            out[f.name] = list(v) if isinstance(v, tuple) else _jsonable(v)
        return out

    def summary(self) -> str:
        """One line: status, objective, bound, gap, time, solver."""

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:.6g}"

        gap = "-" if self.gap is None else f"{100 * self.gap:.3g}%"
        t = "-" if self.runtime is None else f"{self.runtime:.2f}s"
        line = (
            f"{self.solver} {self.solver_version}: {self.status} objective={fmt(self.objective)}"
            f" bound={fmt(self.bound)} gap={gap} time={t}"
        )
        return line + (f" ({self.message})" if self.message else "")
