"""Solve options and results: frozen dataclasses, JSON-able through ``to_dict()``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .errors import OptionsError

STATUSES = ("optimal", "feasible", "infeasible", "unbounded", "no_solution", "error")


def compute_gap(objective: float | None, bound: float | None) -> float | None:
    """The one gap formula used for every backend: ``|obj - bound| / max(|obj|, 1e-10)``."""
    if objective is None or bound is None:
        return None
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return None
    return abs(objective - bound) / max(abs(objective), 1e-10)


@dataclass(frozen=True)
class SolveOptions:
    """What every backend honours (or says in ``result.notes`` that it could not).

    ``time_limit`` seconds (None = none); ``threads`` (None = solver default); ``seed``
    (None = solver default); ``rel_gap``/``abs_gap`` stop when the gap is below either;
    ``log_file`` receives the solver's log; ``progress`` shows a live line on stderr
    (None = only when stderr is a terminal); ``verbose`` echoes the solver's own log.
    """

    time_limit: float | None = None
    threads: int | None = None
    seed: int | None = None
    rel_gap: float = 1e-4
    abs_gap: float = 1e-6
    log_file: str | None = None
    progress: bool | None = None
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.time_limit is not None and not (self.time_limit > 0):
            raise OptionsError(f"time_limit must be > 0 seconds, got {self.time_limit!r}")
        if self.threads is not None and (int(self.threads) != self.threads or self.threads < 1):
            raise OptionsError(f"threads must be a positive integer, got {self.threads!r}")
        if self.seed is not None and (int(self.seed) != self.seed or self.seed < 0):
            raise OptionsError(f"seed must be a non-negative integer, got {self.seed!r}")
        for name in ("rel_gap", "abs_gap"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise OptionsError(f"{name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (np.floating, np.integer)):
        return _jsonable(v.item())
    return v


@dataclass(frozen=True, eq=False)
class SolveResult:
    """The outcome of :func:`optsched.milp.solve`.

    ``status`` is one of :data:`STATUSES`. ``objective`` is the incumbent's objective and
    ``bound`` the best proven dual bound, both in the model's sense (for ``min`` the bound is
    <= objective). ``gap`` is derived from them by :func:`compute_gap` (never taken from the
    solver). ``values`` is the full column vector (None without a solution); read blocks with
    ``model.value(block, result.values)``. ``runtime`` is the solver's own time, ``wall_time``
    the whole call (model transfer included). ``warm_start_objective`` is the objective of an
    accepted complete warm start; ``warm_start_violations`` counts what ``check`` found in the
    start (None when no start was given). ``notes`` explain choices (auto solver, scaling,
    missing bound, rejected start); ``message`` says what went wrong for ``error``.
    """

    status: str
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
        object.__setattr__(self, "gap", compute_gap(self.objective, self.bound))
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def has_solution(self) -> bool:
        """True when ``values`` holds a feasible solution."""
        return self.status in ("optimal", "feasible") and self.values is not None

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
