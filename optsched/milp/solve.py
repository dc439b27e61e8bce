"""The one entry point: :func:`solve` a :class:`~optsched.milp.model.Model` with any backend."""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from ..runtime.stdout_guard import c_stdout_to_stderr
from ..solve_types import MILP_DEFAULTS, SolveOptions, Status
from .backends import BackendOutput, ColumnStart, backend_names, get_backend
from .backends.base import Backend
from .backends.highs import _load_arrays, new_highs, run_highs
from .errors import MilpError, WarmStartError
from .model import Model
from .progress import make_progress
from .result import SolveResult

log = logging.getLogger(__name__)

MAX_LISTED_VIOLATIONS = 5


def unsupported_reason(solver: str, model: Model) -> str | None:
    """Why ``solver`` cannot solve ``model`` (not installed, not licensed for its size,
    unsupported variable types), or None when it can. Tests use it to skip with a reason."""
    return get_backend(solver).unsupported_reason(model)


def available_backends() -> list[str]:
    """Names of the backends whose library is installed."""
    return [n for n in backend_names() if get_backend(n).is_available()]


def backend_info() -> list[dict[str, Any]]:
    """Name, availability, version, licence and feature flags of every registered backend."""
    out = []
    for n in backend_names():
        b = get_backend(n)
        avail = b.is_available()
        out.append({
            "name": n,
            "available": avail,
            "version": b.version() if avail else None,
            "license": b.license_status(),
            "features": asdict(b.features),
        })
    return out


def choose_auto(model: Model) -> tuple[str, str]:
    """``(solver, why)`` for ``solver="auto"``: Gurobi when installed and licensed for the
    model's size, HiGHS otherwise."""
    g = get_backend("gurobi")
    reason = g.unsupported_reason(model)
    if reason is None:
        nv, nc = g.model_size(model)
        return "gurobi", (f"auto: chose gurobi ({g.license_status().removeprefix('gurobi: ')}; "
                          f"the model has {nv} variables and {nc} constraints)")
    return "highs", f"auto: chose highs because {reason}"


def _prepare_start(model: Model, warm_start: Any, backend: Backend
                   ) -> tuple[ColumnStart | None, float | None, int, list[str]]:
    """Check a warm start; returns (start to pass or None, its objective, violations, notes).

    A start that violates anything is not passed to the solver. A start with NaN entries (or
    a mapping that leaves out blocks) is partial: its given values are checked (bounds,
    integrality, rows whose columns are all given) and it is passed as a hint to backends
    with ``features.partial_start``.
    """
    try:
        x = model.start_vector(warm_start)
    except WarmStartError as exc:
        return None, None, 1, [f"warm start rejected, not passed to the solver: {exc}"]
    partial = x.shape == (model.num_vars,) and bool(np.isnan(x).any())
    violations = model.check(x, partial=partial)
    if violations:
        listed = "; ".join(str(v) for v in violations[:MAX_LISTED_VIOLATIONS])
        more = len(violations) - MAX_LISTED_VIOLATIONS
        more_s = f"; and {more} more" if more > 0 else ""
        return None, None, len(violations), [
            f"warm start rejected, not passed to the solver: {len(violations)} violation(s): "
            f"{listed}{more_s}"
        ]
    notes = []
    objective = None
    if partial:
        k = int((~np.isnan(x)).sum())
        notes.append(f"warm start is partial ({k} of {model.num_vars} values); its objective "
                     "is unknown")
    else:
        objective = model.objective_value(x)
        notes.append(f"warm start checked and accepted: objective {objective:.10g}")
    f = backend.features
    if not f.warm_start or (partial and not f.partial_start):
        what = "partial warm starts" if f.warm_start else "warm starts"
        notes.append(f"{backend.name} cannot use {what}; the start was not passed")
        return None, objective, 0, notes
    return ColumnStart(values=x, partial=partial), objective, 0, notes


def _option_notes(backend: Backend, options: SolveOptions) -> list[str]:
    f = backend.features
    notes = []
    if options.threads is not None and not f.threads:
        notes.append(f"{backend.name} ignores the threads option")
    if options.seed is not None and not f.seed:
        notes.append(f"{backend.name} ignores the seed option")
    if options.progress and not f.progress:
        notes.append(f"{backend.name} cannot show live progress")
    return notes


def _exceeds_size_limit(backend: Backend, model: Model) -> bool:
    """Whether ``model`` is larger than ``backend``'s licence allows (e.g. Gurobi's pip
    licence, 2000 variables / 2000 constraints)."""
    if backend.unavailable_reason() is not None:
        return False
    limit = backend.size_limit()
    if limit is None:
        return False
    nv, nc = backend.model_size(model)
    return nv > limit[0] or nc > limit[1]


def size_fallback(solver: str, model: Model, fallback: str | None) -> tuple[str, str | None]:
    """``(backend to use, note)``: ``fallback`` with a one-line note (also written to stderr)
    when ``solver`` is usable but its licence is too small for ``model`` and ``fallback`` can
    take the model; otherwise ``(solver, None)`` (the solve then refuses with the reason)."""
    if fallback is None or fallback == solver or solver == "auto":
        return solver, None
    backend = get_backend(solver)
    if not _exceeds_size_limit(backend, model):
        return solver, None
    if get_backend(fallback).unsupported_reason(model) is not None:
        return solver, None
    note = f"{backend.unsupported_reason(model)}; solved with {fallback} instead"
    print(f"optsched: note: {note}", file=sys.stderr, flush=True)
    return fallback, note


def solve(model: Model, solver: str = "highs", options: SolveOptions | None = None,
          warm_start: Any = None, fallback: str | None = None) -> SolveResult:
    """Solve ``model`` with backend ``solver`` (``highs``, ``gurobi``, ``cbc``, ``cpsat`` or
    ``auto``) and return a :class:`SolveResult`.

    Never raises for solver trouble: a missing or unlicensed solver, an unsupported model or
    a solver failure gives ``status="error"`` with ``message``. An unknown solver name raises
    :class:`~optsched.milp.errors.UnknownSolverError`. ``warm_start`` is a full column vector
    (NaN = not given) or a mapping ``{block or block name: block-shaped array}``; it is
    ``check``-ed first (see ``result.notes``, ``warm_start_objective`` and
    ``warm_start_violations``). ``fallback`` (e.g. ``"highs"``) is used instead of
    ``solver`` when the model exceeds ``solver``'s size-limited licence, with a note in
    ``notes`` and on stderr (:func:`size_fallback`); without it such a model is refused.
    """
    t0 = time.perf_counter()
    options = options if options is not None else MILP_DEFAULTS
    notes: list[str] = []
    solver, fell_back = size_fallback(solver, model, fallback)
    if fell_back is not None:
        notes.append(fell_back)
    if solver == "auto":
        solver, why = choose_auto(model)
        notes.append(why)
    backend = get_backend(solver)
    reason = backend.unsupported_reason(model)
    if reason is not None:
        version = backend.version() if backend.is_available() else ""
        return SolveResult(status=Status.ERROR, solver=solver, message=reason, notes=tuple(notes),
                           solver_version=version, wall_time=time.perf_counter() - t0)
    start, ws_obj, ws_viol = None, None, None
    if warm_start is not None:
        start, ws_obj, ws_viol, ws_notes = _prepare_start(model, warm_start, backend)
        notes += ws_notes
    notes += _option_notes(backend, options)
    progress = make_progress(solver, options.progress, scale=model.user_scale,
                             unit=model.user_unit)
    try:
        with c_stdout_to_stderr():  # a solver's console log is never part of our stdout
            out = backend.solve(model, options, start, progress)
    except MilpError as exc:
        out = BackendOutput(status=Status.ERROR, message=str(exc))
    except Exception as exc:  # a solver library failed: report, do not raise
        log.debug("%s failed", solver, exc_info=True)
        out = BackendOutput(status=Status.ERROR, message=f"{solver} failed: {type(exc).__name__}: {exc}")
    finally:
        progress.close()
    if out.values is not None and out.values.shape != (model.num_vars,):
        out.notes.append(f"{solver} returned {out.values.shape} values for {model.num_vars} "
                         "columns; discarded")
        out.values = None
    version = out.version
    if not version:
        try:
            version = backend.version()
        except Exception:  # pragma: no cover - version lookup must never fail a solve
            version = ""
    return SolveResult(
        status=out.status, solver=solver, objective=out.objective, bound=out.bound,
        runtime=out.runtime, nodes=out.nodes, solver_version=version, values=out.values,
        warm_start_objective=ws_obj, warm_start_violations=ws_viol,
        notes=tuple(notes + out.notes), message=out.message,
        wall_time=time.perf_counter() - t0, history=tuple(progress.history),
    )


def lp_relaxation_value(model: Model) -> float:
    """Optimum of ``model``'s LP relaxation (integrality dropped), by HiGHS: the root bound a
    branch-and-bound starts from, for comparing formulations (``studies/hindsight/root_lp.py``).
    Raises :class:`MilpError` when the relaxation has no optimum (infeasible or unbounded)."""

    # lazy: the solver library loads only when a solve runs (start-up time)
    import highspy


    a = model.arrays()
    h = new_highs()
    _load_arrays(h, dataclasses.replace(a, is_int=np.zeros_like(a.is_int)))
    run_highs(h)
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise MilpError(f"{model.name}: LP relaxation not solved ({h.modelStatusToString(status)})")
    return float(h.getInfo().objective_function_value)
