"""CP-SAT (OR-Tools) for all-integer models, with exact power-of-ten scaling to integers."""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import math
import os
import pickle
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ...solve_types import Status
from ..errors import MilpError
from .base import Backend, BackendOutput, ColumnStart, Features, register

if TYPE_CHECKING:
    from ...solve_types import SolveOptions
    from ..model import Model, ModelArrays
    from ..progress import Progress

ARTIFICIAL_BOUND = 2**31 - 1  # replaces infinite bounds of integer columns
MAX_ROW_POWER = 6  # row coefficients may have up to 6 decimals
MAX_OBJ_POWER = 9  # objective coefficients up to 9 decimals
_TOL = 1e-9


class NotScalableError(MilpError):
    """The model cannot be turned into an exact all-integer CP-SAT model."""


@dataclass(frozen=True, eq=False)
class IntegerModel:
    """The model in integers: bounds, row data scaled per row, objective scaled by ``obj_factor``."""

    lb: np.ndarray  # int64
    ub: np.ndarray
    clamped_lo: np.ndarray  # bool: lb was -inf
    clamped_hi: np.ndarray
    data: np.ndarray  # int64, CSR order
    row_lo: np.ndarray  # float (may be +-inf), already integral
    row_hi: np.ndarray
    row_power: np.ndarray  # per-row power of ten used
    obj: np.ndarray  # int64
    obj_factor: int


def _integral(x: np.ndarray) -> np.ndarray:
    return np.abs(x - np.rint(x)) <= _TOL * np.maximum(1.0, np.abs(x))


def to_integer_model(model: Model, bound: int = ARTIFICIAL_BOUND) -> IntegerModel:
    """Scale ``model`` to integers or raise :class:`NotScalableError` naming what fails."""
    a = model.arrays()
    if not a.is_int.all():
        k = int(np.flatnonzero(~a.is_int)[0])
        raise NotScalableError(
            f"cpsat: needs an all-integer model; {model.col_label(k)} is continuous "
            f"({int((~a.is_int).sum())} continuous columns)"
        )
    with np.errstate(invalid="ignore"):
        lb = np.where(np.isfinite(a.lb), np.ceil(a.lb - _TOL), -bound)
        ub = np.where(np.isfinite(a.ub), np.floor(a.ub + _TOL), bound)
    if (np.abs(lb) > bound).any() or (np.abs(ub) > bound).any():
        k = int(np.flatnonzero((np.abs(lb) > bound) | (np.abs(ub) > bound))[0])
        raise NotScalableError(
            f"cpsat: bound of {model.col_label(k)} exceeds {bound} (|lb|={abs(a.lb[k])}, "
            f"|ub|={abs(a.ub[k])})"
        )
    # rows: smallest power of ten making every coefficient of the row integral
    rows = a.row_of_entry
    power = np.full(a.num_rows, -1, dtype=np.int64)
    for p in range(MAX_ROW_POWER + 1):
        todo = power < 0
        if not todo.any():
            break
        bad = np.bincount(rows, weights=(~_integral(a.data * 10.0**p)).astype(float),
                          minlength=a.num_rows) > 0
        power[todo & ~bad] = p
    if (power < 0).any():
        i = int(np.flatnonzero(power < 0)[0])
        raise NotScalableError(
            f"cpsat: coefficients of row {model.row_label(i)} cannot be made integral by a "
            f"factor up to 10^{MAX_ROW_POWER}"
        )
    factor = 10.0 ** power
    data = np.rint(a.data * factor[rows]).astype(np.int64)
    with np.errstate(invalid="ignore"):
        row_lo = np.where(np.isfinite(a.row_lo), np.ceil(a.row_lo * factor - _TOL), -np.inf)
        row_hi = np.where(np.isfinite(a.row_hi), np.floor(a.row_hi * factor + _TOL), np.inf)
    obj_power = None
    for p in range(MAX_OBJ_POWER + 1):
        if _integral(a.obj * 10.0**p).all():
            obj_power = p
            break
    if obj_power is None:
        k = int(np.flatnonzero(~_integral(a.obj * 10.0**MAX_OBJ_POWER))[0])
        raise NotScalableError(
            f"cpsat: objective coefficient {a.obj[k]!r} of {model.col_label(k)} cannot be made "
            f"integral by a factor up to 10^{MAX_OBJ_POWER}"
        )
    obj_factor = 10**obj_power
    obj = np.rint(a.obj * obj_factor).astype(np.int64)
    return IntegerModel(
        lb=lb.astype(np.int64), ub=ub.astype(np.int64),
        clamped_lo=~np.isfinite(a.lb), clamped_hi=~np.isfinite(a.ub), data=data,
        row_lo=row_lo, row_hi=row_hi, row_power=power, obj=obj, obj_factor=obj_factor,
    )


def _build(p: dict):
    """CpModel from a payload (runs in the worker process)."""
    # lazy: optional dependency (the cpsat extra)
    from ortools.sat.python import cp_model

    cm = cp_model.CpModel()
    proto = cm.proto
    for lo, hi in zip(p["lb"].tolist(), p["ub"].tolist()):
        proto.variables.add().domain.extend([lo, hi])
    indptr, indices, data = p["indptr"].tolist(), p["indices"].tolist(), p["data"].tolist()
    row_lo, row_hi = p["row_lo"].tolist(), p["row_hi"].tolist()
    for i in range(len(indptr) - 1):
        s, e = indptr[i], indptr[i + 1]
        lo, hi = row_lo[i], row_hi[i]
        if not (math.isfinite(lo) or math.isfinite(hi)):
            continue
        if s == e and lo <= 0 <= hi:
            continue
        lin = proto.constraints.add().linear
        lin.vars.extend(indices[s:e])
        lin.coeffs.extend(data[s:e])
        lin.domain.extend([int(lo) if math.isfinite(lo) else cp_model.INT_MIN,
                           int(hi) if math.isfinite(hi) else cp_model.INT_MAX])
    proto.objective.vars.extend(p["obj_vars"].tolist())
    proto.objective.coeffs.extend(p["obj_coefs"].tolist())
    if p["hint_vars"] is not None:
        proto.solution_hint.vars.extend(p["hint_vars"].tolist())
        proto.solution_hint.values.extend(p["hint_values"].tolist())
    return cm


def _solve_payload(p: dict, emit) -> dict:
    """Solve a payload with CP-SAT (worker side); ``emit`` sends progress frames."""
    # lazy: optional dependency (the cpsat extra)
    from ortools.sat.python import cp_model

    cm = _build(p)
    invalid = cm.validate()
    if invalid:
        return {"status": "MODEL_INVALID", "message": invalid}
    solver = cp_model.CpSolver()
    prm = solver.parameters
    for key, value in p["params"].items():
        setattr(prm, key, value)
    log_fh = open(p["log_file"], "a") if p["log_file"] else None
    if log_fh is not None or p["verbose"]:
        def log_line(line: str) -> None:
            if log_fh is not None:
                log_fh.write(line + "\n")
            if p["verbose"]:
                sys.stderr.write(line + "\n")

        solver.log_callback = log_line
        prm.log_to_stdout = False  # the log goes through log_line only
    callback = None
    if p["progress"]:
        class _Cb(cp_model.CpSolverSolutionCallback):
            def on_solution_callback(self) -> None:
                emit(("progress", self.objective_value, self.best_objective_bound,
                      int(self.num_branches), self.wall_time))

        callback = _Cb()
        solver.best_bound_callback = lambda b: emit(("bound", b))
    try:
        status = solver.solve(cm, callback)
    finally:
        if log_fh is not None:
            log_fh.close()
    name = solver.status_name(status)
    out = {"status": name, "objective": solver.objective_value,
           "bound": solver.best_objective_bound, "wall_time": solver.wall_time,
           "branches": int(solver.num_branches), "solution": None}
    if name in ("OPTIMAL", "FEASIBLE"):
        out["solution"] = np.array(solver.response_proto.solution, dtype=np.int64)
    return out


def _worker_main() -> None:
    """Serve payloads read from stdin (pickles), answer on the original stdout."""
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray output of the solver goes to stderr, not into the channel
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer

    def emit(msg) -> None:
        pickle.dump(msg, channel, protocol=pickle.HIGHEST_PROTOCOL)
        channel.flush()

    while True:
        try:
            payload = pickle.load(inp)
        except EOFError:
            return
        try:
            emit(("result", _solve_payload(payload, emit)))
        except Exception as exc:  # report to the parent, keep serving
            emit(("error", f"{type(exc).__name__}: {exc}"))


class _Worker:
    """A long-lived child process running CP-SAT.

    OR-Tools wheels bundle their own ``libhighs.so.1``, which clashes with highspy's library
    of the same name: whichever is loaded second fails with "undefined symbol". CP-SAT
    therefore never runs in the calling process.
    """

    _lock = threading.Lock()
    _proc: subprocess.Popen | None = None
    _atexit = False

    @classmethod
    def _start(cls) -> subprocess.Popen:
        # the directory holding the optsched package (this file is optsched/milp/backends/)
        root = str(Path(os.path.abspath(__file__)).parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"]
                                    if env.get("PYTHONPATH") else "")
        return subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env,
        )

    @classmethod
    def close(cls) -> None:
        """Stop the worker (it also exits by itself when this process ends)."""
        with cls._lock:
            proc, cls._proc = cls._proc, None
        if proc is not None and proc.poll() is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()

    @classmethod
    def solve(cls, payload: dict, on_message) -> dict:
        with cls._lock:
            if cls._proc is None or cls._proc.poll() is not None:
                if not cls._atexit:
                    atexit.register(cls.close)
                    cls._atexit = True
                cls._proc = cls._start()
            proc = cls._proc
            send, receive = proc.stdin, proc.stdout
            if send is None or receive is None:
                raise RuntimeError("the CP-SAT worker was started without pipes")
            ok = False
            try:
                pickle.dump(payload, send, protocol=pickle.HIGHEST_PROTOCOL)
                send.flush()
                while True:
                    try:
                        msg = pickle.load(receive)
                    except EOFError:
                        raise RuntimeError(
                            f"the CP-SAT worker process died (exit code {proc.wait()})"
                        ) from None
                    if msg[0] == "result":
                        ok = True
                        return msg[1]
                    if msg[0] == "error":
                        ok = True
                        raise RuntimeError(f"CP-SAT worker: {msg[1]}")
                    on_message(msg)
            finally:
                if not ok:  # interrupted or broken: do not reuse this worker
                    proc.kill()
                    proc.wait()
                    cls._proc = None


@register
class CpSatBackend(Backend):
    """OR-Tools CP-SAT for all-integer models.

    Row coefficients are scaled per row by the smallest power of ten (<= 10^6) making them
    integral, bounds rounded inwards; objective coefficients by one power of ten (<= 10^9),
    named in ``result.notes``; objective and bound are reported unscaled. Infinite variable
    bounds become +-(2^31-1); if an optimal solution touches such an artificial bound and the
    optimum moves when it is halved, the status is ``unbounded``. Bound:
    ``best_objective_bound``. Warm start: solution hints (complete or partial). Progress:
    a solution callback plus the best-bound callback. ``nodes`` is CP-SAT's branch count.
    """

    name = "cpsat"
    order = 30
    features = Features(continuous=False)

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("ortools") is None:
            return "cpsat: ortools not installed (pip install 'optsched[cpsat]')"
        return None

    def version(self) -> str:
        return importlib.metadata.version("ortools")

    def unsupported_reason(self, model: Model) -> str | None:
        reason = super().unsupported_reason(model)
        if reason:
            return reason
        try:
            to_integer_model(model)
        except NotScalableError as exc:
            return str(exc)
        return None

    def solve(self, model: Model, options: SolveOptions, start: ColumnStart | None,
              progress: Progress) -> BackendOutput:
        a = model.arrays()
        im = to_integer_model(model)
        out = BackendOutput(status=Status.ERROR, version=self.version())
        sign = -1 if a.sense == "max" else 1
        if im.obj_factor != 1:
            out.notes.append(f"cpsat: objective coefficients scaled by {im.obj_factor} to "
                             "integers; objective and bound reported unscaled")
        scaled_rows = int((im.row_power > 0).sum())
        if scaled_rows:
            out.notes.append(f"cpsat: {scaled_rows} row(s) scaled by powers of ten (up to "
                             f"10^{int(im.row_power.max())}) to integer coefficients")
        if im.clamped_lo.any() or im.clamped_hi.any():
            out.notes.append(f"cpsat: infinite variable bounds replaced by +-{ARTIFICIAL_BOUND}")
        raw = self._run(a, im, sign, options, start, progress, out)
        if raw is None:
            return out
        self._read(a, im, sign, raw, out)
        if out.status == Status.OPTIMAL and self._at_artificial(im, raw["solution"]):
            half = to_integer_model(model, ARTIFICIAL_BOUND // 2)
            raw2 = self._run(a, half, sign, options, None, progress, BackendOutput(Status.ERROR))
            if raw2 is not None and raw2["status"] == "OPTIMAL":
                obj2 = self._unscale(raw2["objective"], a, im, sign)
                if abs(obj2 - (out.objective or 0.0)) > 1e-6 * max(1.0, abs(obj2)):
                    out.notes.append("cpsat: the optimum moves with the artificial bounds that "
                                     "replaced infinite ones; reported as unbounded")
                    out.status, out.objective, out.bound, out.values = Status.UNBOUNDED, None, None, None
        progress.update(incumbent=out.objective, bound=out.bound, nodes=out.nodes,
                        elapsed=out.runtime, force=True)
        return out

    @staticmethod
    def _at_artificial(im: IntegerModel, values: np.ndarray) -> bool:
        return bool(((im.clamped_lo & (values <= im.lb)) |
                     (im.clamped_hi & (values >= im.ub))).any())

    @staticmethod
    def _unscale(v: float, a: ModelArrays, im: IntegerModel, sign: int) -> float:
        return sign * float(v) / im.obj_factor + float(a.obj_constant)

    def _run(self, a, im, sign, options: SolveOptions, start: ColumnStart | None,
             progress: Progress, out: BackendOutput):
        """Solve in the worker; returns the raw result dict, or None after an error."""
        params: dict = {"relative_gap_limit": float(options.rel_gap),
                        "absolute_gap_limit": float(options.abs_gap) * im.obj_factor,
                        "log_search_progress": bool(options.verbose or options.log_file),
                        "log_to_stdout": False}
        if options.time_limit is not None:
            params["max_time_in_seconds"] = float(options.time_limit)
        if options.threads is not None:
            params["num_workers"] = int(options.threads)
        if options.seed is not None:
            params["random_seed"] = int(options.seed)
        hint_vars = hint_values = None
        if start is not None:
            hint_vars = start.given
            hint_values = np.clip(np.rint(start.values[hint_vars]), im.lb[hint_vars],
                                  im.ub[hint_vars]).astype(np.int64)
            if start.partial:
                out.notes.append(f"cpsat: partial start ({hint_vars.size} values) given as "
                                 "hints")
        nz = np.flatnonzero(im.obj)
        payload = {
            "lb": im.lb, "ub": im.ub, "indptr": a.indptr, "indices": a.indices,
            "data": im.data, "row_lo": im.row_lo, "row_hi": im.row_hi,
            "obj_vars": nz, "obj_coefs": sign * im.obj[nz],
            "hint_vars": hint_vars, "hint_values": hint_values, "params": params,
            "log_file": options.log_file, "verbose": bool(options.verbose),
            "progress": progress.enabled,
        }

        def on_message(msg) -> None:
            if msg[0] == "progress":
                _, inc, bnd, branches, wall = msg
                progress.update(incumbent=self._unscale(inc, a, im, sign),
                                bound=self._unscale(bnd, a, im, sign), nodes=branches,
                                elapsed=wall)
            elif msg[0] == "bound":
                progress.update(bound=self._unscale(msg[1], a, im, sign))

        raw = _Worker.solve(payload, on_message)
        if raw["status"] == "MODEL_INVALID":
            detail = " ".join(str(raw.get("message")).split())
            out.status, out.message = Status.ERROR, f"cpsat: invalid model: {detail}"
            return None
        return raw

    def _read(self, a, im, sign, raw: dict, out: BackendOutput) -> None:
        name = raw["status"]
        out.runtime = float(raw["wall_time"])
        out.nodes = int(raw["branches"])
        if name in ("OPTIMAL", "FEASIBLE"):
            out.status = Status.OPTIMAL if name == "OPTIMAL" else Status.FEASIBLE
            out.values = raw["solution"].astype(np.float64)
            out.objective = self._unscale(raw["objective"], a, im, sign)
        elif name == "INFEASIBLE":
            out.status = Status.INFEASIBLE
        elif name == "UNKNOWN":
            out.status = Status.NO_SOLUTION
        else:
            out.status = Status.ERROR
            out.message = f"cpsat ended with status {name}"
        if out.status in (Status.OPTIMAL, Status.FEASIBLE, Status.NO_SOLUTION):
            b = float(raw["bound"])
            if math.isfinite(b):
                out.bound = self._unscale(b, a, im, sign)


if __name__ == "__main__":
    _worker_main()
