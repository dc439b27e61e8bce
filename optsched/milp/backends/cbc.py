"""CBC through PuLP's command-line interface (the CBC binary bundled with PuLP, or ``cbc`` on
PATH)."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...solve_types import Status
from .base import Backend, BackendOutput, ColumnStart, Features, register

if TYPE_CHECKING:
    from ...solve_types import SolveOptions
    from ..model import Model
    from ..progress import Progress

_FLOAT = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf)"
_RE_NODES = re.compile(r"Cbc0010I After (\d+) nodes, \d+ on tree, " + _FLOAT +
                       r" best solution, best possible " + _FLOAT + r" \(([\d.]+) seconds\)")
_RE_SOL = re.compile(r"Cbc00(?:04|12)I Integer solution of " + _FLOAT +
                     r" found .*?\(([\d.]+) seconds\)")
_RE_PARTIAL = re.compile(r"best objective " + _FLOAT + r" \(best possible " + _FLOAT + r"\)")
_RE_EXIT_GAP = re.compile(r"Cbc0011I Exiting as integer gap of " + _FLOAT)


@dataclass
class CbcLog:
    """Figures parsed from a CBC log (all in CBC's minimisation sense)."""

    version: str | None = None
    result: str | None = None
    objective: float | None = None
    lower_bound: float | None = None
    exit_gap: float | None = None
    nodes: int | None = None
    wallclock: float | None = None
    ambiguous: bool = False


def parse_log(text: str) -> CbcLog:
    """Read version, result line, objective, lower bound, nodes and time from a CBC log."""
    log = CbcLog()
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Version:"):
            log.version = s.split(":", 1)[1].strip()
        elif s.startswith("Result - "):
            log.result = s[len("Result - "):]
        elif s.startswith("Objective value:"):
            log.objective = _to_float(s.split(":", 1)[1])
        elif s.startswith("Lower bound:"):
            log.lower_bound = _to_float(s.split(":", 1)[1])
        elif s.startswith("Enumerated nodes:"):
            log.nodes = int(float(s.split(":", 1)[1]))
        elif s.startswith("Time (Wallclock seconds):"):
            log.wallclock = _to_float(s.split(":", 1)[1])
        elif "infeasible or unbounded" in s:
            log.ambiguous = True
        else:
            mg = _RE_EXIT_GAP.search(s)
            if mg:
                log.exit_gap = _to_float(mg.group(1))
            mp = _RE_PARTIAL.search(s)
            if mp and log.lower_bound is None:
                log.lower_bound = _to_float(mp.group(2))
    return log


def _to_float(s: str) -> float | None:
    try:
        return float(s.strip().split()[0])
    except (ValueError, IndexError):
        return None


def _cbc_path() -> str | None:
    on_path = shutil.which("cbc")
    if on_path:
        return on_path
    if importlib.util.find_spec("pulp") is None:
        return None
    # lazy: optional dependency (the cbc extra)
    from pulp.apis.coin_api import PULP_CBC_CMD

    path = os.path.normpath(PULP_CBC_CMD.pulp_cbc_path)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


class _LogTail(threading.Thread):
    """Follow a growing CBC log and feed the progress line."""

    def __init__(self, path: str, progress: Progress, sign: float):
        super().__init__(daemon=True)
        self.path, self.progress, self.sign = path, progress, sign
        self.stop = threading.Event()

    def run(self) -> None:
        pos = 0
        buf = ""
        while not self.stop.wait(0.1):
            try:
                with open(self.path) as fh:
                    fh.seek(pos)
                    chunk = fh.read()
                    pos = fh.tell()
            except OSError:
                continue
            buf += chunk
            *lines, buf = buf.split("\n")
            for line in lines:
                self._feed(line)

    def _feed(self, line: str) -> None:
        m = _RE_NODES.search(line)
        if m:
            inc, bnd = _to_float(m.group(2)), _to_float(m.group(3))
            self.progress.update(incumbent=None if inc is None else self.sign * inc,
                                 bound=None if bnd is None else self.sign * bnd,
                                 nodes=int(m.group(1)), elapsed=float(m.group(4)))
            return
        m = _RE_SOL.search(line)
        if m:
            inc = _to_float(m.group(1))
            self.progress.update(incumbent=None if inc is None else self.sign * inc,
                                 elapsed=float(m.group(2)))


@register
class CbcBackend(Backend):
    """CBC via PuLP.

    The model is handed to PuLP as a minimisation (a maximisation is negated and turned back).
    Bound: CBC's "Lower bound" line after a stopped search, the "best possible" of a partial
    search, ``objective - gap`` when CBC exits on the gap tolerance, the objective when the
    search completed; otherwise ``None`` with a note. Warm start: complete starts only, written
    as a CBC MIP start (``warmStart=True``). Progress: the CBC log is followed while it runs.
    ``seed`` sets ``randomCbcSeed`` (seed 0 keeps CBC's default).
    """

    name = "cbc"
    order = 20
    features = Features(partial_start=False)
    _version: str | None = None

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("pulp") is None:
            return "cbc: pulp not installed (pip install 'optsched[cbc]')"
        if _cbc_path() is None:
            return "cbc: no CBC executable (neither PuLP's bundled one nor cbc on PATH)"
        return None

    def version(self) -> str:
        if CbcBackend._version is None:
            # lazy: optional dependency (the cbc extra)
            import pulp

            v = "unknown"
            path = _cbc_path()
            try:
                if path is not None:  # no executable: the version stays unknown
                    proc = subprocess.run([path, "-stop"], capture_output=True, text=True,
                                          timeout=30, stdin=subprocess.DEVNULL)
                    v = parse_log(proc.stdout).version or v
            except (OSError, subprocess.SubprocessError):
                pass
            CbcBackend._version = f"{v} (pulp {pulp.__version__})"
        return CbcBackend._version

    def model_size(self, model: Model) -> tuple[int, int]:
        return model.num_vars, model.num_constraints

    def solve(self, model: Model, options: SolveOptions, start: ColumnStart | None,
              progress: Progress) -> BackendOutput:
        # lazy: optional dependency (the cbc extra)
        import pulp

        a = model.arrays()
        out = BackendOutput(status=Status.ERROR, version=self.version())
        sign = -1.0 if a.sense == "max" else 1.0
        prob = pulp.LpProblem(re.sub(r"\W", "_", model.name), pulp.LpMinimize)
        new_var = getattr(prob, "add_variable", None) or pulp.LpVariable  # PuLP >= 3.3 / older
        xs = [
            new_var(
                f"x{j}",
                lowBound=float(a.lb[j]) if math.isfinite(a.lb[j]) else None,
                upBound=float(a.ub[j]) if math.isfinite(a.ub[j]) else None,
                cat=pulp.LpInteger if a.is_int[j] else pulp.LpContinuous,
            )
            for j in range(a.num_vars)
        ]
        c = (sign * a.obj).tolist()
        prob.setObjective(pulp.LpAffineExpression(list(zip(xs, c)),
                                                  constant=sign * float(a.obj_constant)))
        indptr, indices, data = a.indptr, a.indices.tolist(), a.data.tolist()
        for i in range(a.num_rows):
            s, e = int(indptr[i]), int(indptr[i + 1])
            lo, hi = float(a.row_lo[i]), float(a.row_hi[i])
            if s == e and lo <= 0.0 <= hi:
                continue
            terms = [(xs[k], v) for k, v in zip(indices[s:e], data[s:e])]
            if lo == hi:
                prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms),
                                                     pulp.LpConstraintEQ, rhs=lo), f"r{i}")
                continue
            if math.isfinite(lo):
                prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms),
                                                     pulp.LpConstraintGE, rhs=lo), f"r{i}_lo")
            if math.isfinite(hi):
                prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms),
                                                     pulp.LpConstraintLE, rhs=hi), f"r{i}_hi")
        if start is not None:
            for xj, v in zip(xs, start.values.tolist()):
                xj.setInitialValue(v, check=False)
        with tempfile.TemporaryDirectory(prefix="optsched-cbc-") as tmp:
            log_path = options.log_file or os.path.join(tmp, "cbc.log")
            open(log_path, "w").close()
            extra = []
            if options.seed:
                extra.append(f"randomCbcSeed {int(options.seed)}")
            solver = pulp.COIN_CMD(
                path=_cbc_path(), msg=False, timeLimit=options.time_limit,
                gapRel=options.rel_gap, gapAbs=options.abs_gap, threads=options.threads,
                warmStart=start is not None, keepFiles=False, logPath=log_path, options=extra,
            )
            tail = _LogTail(log_path, progress, sign) if progress.enabled else None
            if tail:
                tail.start()
            solver.tmpDir = tmp  # PuLP's model, start and solution files
            t0 = time.perf_counter()
            failure = None
            try:
                prob.solve(solver)
            except pulp.PulpSolverError as exc:  # CBC exited abnormally or wrote no solution
                failure = str(exc)
            finally:
                if tail:
                    tail.stop.set()
                    tail.join()
            wall = time.perf_counter() - t0
            with open(log_path) as fh:
                text = fh.read()
            log = parse_log(text)
        if failure is not None:
            return self._failed(out, failure, text, log, sign, wall)
        if log.version:
            CbcBackend._version = f"{log.version} (pulp {pulp.__version__})"
            out.version = CbcBackend._version
        out.runtime = log.wallclock if log.wallclock is not None else wall
        out.nodes = log.nodes
        self._read(prob, xs, a, log, sign, out)
        progress.update(incumbent=out.objective, bound=out.bound, nodes=out.nodes,
                        elapsed=out.runtime, force=True)
        return out

    @staticmethod
    def _failed(out: BackendOutput, failure: str, text: str, log: CbcLog, sign: float,
                wall: float) -> BackendOutput:
        """CBC ended without a solution file (a crash, or a kill at the time limit; PuLP
        raises ``PulpSolverError``): status ``error`` with CBC's own last words and the best
        objective its log reported (its values are lost with the file)."""
        last = [ln.strip() for ln in text.splitlines() if ln.strip()][-3:]
        said = "; ".join(last) if last else "nothing (an empty log)"
        found = [_to_float(m.group(1)) for m in _RE_SOL.finditer(text)]
        best = [b for b in found if b is not None]
        out.status, out.runtime = Status.ERROR, log.wallclock if log.wallclock is not None else wall
        out.message = (f"CBC stopped without writing a solution after {out.runtime:.1f} s "
                       f"(PuLP: {failure.split(',')[0]}); CBC's last output: {said}")
        if best:
            out.notes.append(f"cbc: best objective CBC reported before it stopped: "
                             f"{sign * min(best):.10g} (model units; its values were not "
                             "written, so there is no schedule from CBC)")
        return out

    @staticmethod
    def _read(prob, xs, a, log: CbcLog, sign: float, out: BackendOutput) -> None:
        # lazy: optional dependency (the cbc extra)
        import pulp

        st, sol = prob.status, prob.sol_status
        has_sol = sol in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
        if has_sol:
            vals = np.array([np.nan if v.varValue is None else v.varValue for v in xs])
            missing = np.isnan(vals)
            if missing.any():  # columns PuLP did not pass (they appear nowhere)
                fill = np.clip(0.0, a.lb, a.ub)
                vals[missing] = fill[missing]
            out.values = vals
            out.objective = float(a.obj @ vals + a.obj_constant)
        is_mip = bool(a.is_int.any())
        if sol == pulp.LpSolutionOptimal:
            out.status = Status.OPTIMAL
        elif sol == pulp.LpSolutionIntegerFeasible:
            out.status = Status.FEASIBLE
        elif st == pulp.LpStatusInfeasible:
            out.status = Status.INFEASIBLE
            if log.ambiguous:
                out.notes.append("cbc: CBC's preprocessing said 'infeasible or unbounded'; "
                                 "reported as infeasible")
        elif st == pulp.LpStatusUnbounded:
            out.status = Status.UNBOUNDED
        elif st == pulp.LpStatusNotSolved:
            out.status = Status.NO_SOLUTION
        else:
            out.status = Status.ERROR
            out.message = f"CBC ended with PuLP status {pulp.LpStatus.get(st, st)!r}"
        if out.status not in (Status.OPTIMAL, Status.FEASIBLE, Status.NO_SOLUTION):
            out.values = None
            out.objective = None
            return
        # bound, in CBC's minimisation sense first
        cbc_obj = None if out.objective is None else sign * out.objective
        lb = log.lower_bound
        if lb is None and out.status == Status.OPTIMAL and cbc_obj is not None:
            if not is_mip or log.exit_gap is None:
                lb = cbc_obj
            else:
                lb = cbc_obj - log.exit_gap
        if lb is not None and math.isfinite(lb):
            out.bound = sign * lb
        elif is_mip:
            out.notes.append("cbc: CBC reported no dual bound")
        if out.status == Status.NO_SOLUTION:
            out.values = None
            out.objective = None
