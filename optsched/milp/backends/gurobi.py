"""Gurobi through gurobipy, with detection of the pip wheel's size-limited licence."""

from __future__ import annotations

import importlib.util
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...solve_types import Status
from .base import Backend, BackendOutput, ColumnStart, Features, register

if TYPE_CHECKING:
    from ...solve_types import SolveOptions
    from ..model import Model
    from ..progress import Progress

SIZE_LIMIT = (2000, 2000)  # variables, linear constraints of the pip wheel's licence
_SIZE_LIMIT_ERRNO = 10010


@dataclass(frozen=True)
class LicenseInfo:
    """What the Gurobi licence allows: ``usable`` at all, and the size limit if any."""

    usable: bool
    limit: tuple[int, int] | None
    text: str


_STOPPED_NAMES = ("TIME_LIMIT", "NODE_LIMIT", "SOLUTION_LIMIT", "INTERRUPTED",
                  "ITERATION_LIMIT", "SUBOPTIMAL", "WORK_LIMIT", "USER_OBJ_LIMIT", "MEM_LIMIT")
_license: LicenseInfo | None = None
_license_lock = threading.Lock()


def _env():
    # lazy: optional dependency (the gurobi extra)
    import gurobipy as gp

    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    return env


def probe_license() -> LicenseInfo:
    """Find out (once per process) whether the licence is full or size-limited by
    optimising an empty model with ``SIZE_LIMIT[0] + 1`` variables."""
    global _license
    with _license_lock:
        if _license is not None:
            return _license
        if importlib.util.find_spec("gurobipy") is None:
            _license = LicenseInfo(False, None,
                                   "gurobi: gurobipy not installed (pip install 'optsched[gurobi]')")
            return _license
        # lazy: optional dependency (the gurobi extra)
        import gurobipy as gp

        try:
            env = _env()
        except gp.GurobiError as exc:
            _license = LicenseInfo(False, None, f"gurobi: no usable license ({exc})")
            return _license
        m = None
        try:
            m = gp.Model(env=env)
            m.addVars(SIZE_LIMIT[0] + 1)
            m.optimize()
            _license = LicenseInfo(True, None, "gurobi: full license")
        except gp.GurobiError as exc:
            if getattr(exc, "errno", None) == _SIZE_LIMIT_ERRNO:
                _license = LicenseInfo(
                    True, SIZE_LIMIT,
                    f"gurobi: size-limited license ({SIZE_LIMIT[0]} variables, "
                    f"{SIZE_LIMIT[1]} constraints)",
                )
            else:
                _license = LicenseInfo(False, None, f"gurobi: license check failed ({exc})")
        finally:
            if m is not None:
                m.dispose()
            env.dispose()
        return _license


def _row_count(model: Model) -> int:
    """Linear constraints Gurobi gets: ranged rows become two, free rows none."""
    a = model.arrays()
    fin_lo, fin_hi = np.isfinite(a.row_lo), np.isfinite(a.row_hi)
    ranged = fin_lo & fin_hi & (a.row_lo != a.row_hi)
    return int((fin_lo | fin_hi).sum() + ranged.sum())


@register
class GurobiBackend(Backend):
    """Gurobi.

    Licence: the pip wheel's licence is limited to 2000 variables and 2000 constraints;
    :meth:`license_status` detects it and :meth:`unsupported_reason` refuses a larger model
    before solving, naming the limit and the model's size. Bound: ``ObjBound`` for MIPs, the
    optimal objective for LPs. Warm start: the ``Start`` attribute (only the given columns
    for a partial start). Progress: a callback on ``MIP`` / ``MIPSOL``. INF_OR_UNBD is
    resolved by re-optimising with ``DualReductions=0``.
    """

    name = "gurobi"
    order = 10
    features = Features()

    def unavailable_reason(self) -> str | None:
        info = probe_license()
        return None if info.usable else info.text

    def license_status(self) -> str:
        return probe_license().text

    def size_limit(self) -> tuple[int, int] | None:
        return probe_license().limit

    def model_size(self, model: Model) -> tuple[int, int]:
        return model.num_vars, _row_count(model)

    def version(self) -> str:
        # lazy: optional dependency (the gurobi extra)
        import gurobipy as gp

        return ".".join(map(str, gp.gurobi.version()))

    def solve(self, model: Model, options: SolveOptions, start: ColumnStart | None,
              progress: Progress) -> BackendOutput:
        # lazy: optional dependency (the gurobi extra)
        import gurobipy as gp
        from gurobipy import GRB

        a = model.arrays()
        out = BackendOutput(status=Status.ERROR, version=self.version())
        env = _env()
        m = gp.Model(model.name, env=env)
        try:
            self._set_params(m, options)
            vtypes = np.where(a.is_int, GRB.INTEGER, GRB.CONTINUOUS).tolist()
            lb = np.where(np.isfinite(a.lb), a.lb, -GRB.INFINITY).tolist()
            ub = np.where(np.isfinite(a.ub), a.ub, GRB.INFINITY).tolist()
            xs = m.addVars(a.num_vars, lb=lb, ub=ub, obj=a.obj.tolist(), vtype=vtypes)
            x = [xs[j] for j in range(a.num_vars)]
            m.ObjCon = float(a.obj_constant)
            m.ModelSense = GRB.MAXIMIZE if a.sense == "max" else GRB.MINIMIZE
            indptr, indices, data = a.indptr, a.indices.tolist(), a.data.tolist()
            for i in range(a.num_rows):
                s, e = int(indptr[i]), int(indptr[i + 1])
                lo, hi = float(a.row_lo[i]), float(a.row_hi[i])
                if not (math.isfinite(lo) or math.isfinite(hi)):
                    continue
                expr = gp.LinExpr(data[s:e], [x[k] for k in indices[s:e]])
                if lo == hi:
                    m.addLConstr(expr, GRB.EQUAL, lo)
                    continue
                if math.isfinite(lo):
                    m.addLConstr(expr, GRB.GREATER_EQUAL, lo)
                if math.isfinite(hi):
                    m.addLConstr(expr, GRB.LESS_EQUAL, hi)
            m.update()
            if start is not None:
                idx = start.given
                m.setAttr("Start", [x[j] for j in idx.tolist()], start.values[idx].tolist())
                if start.partial:
                    out.notes.append(f"gurobi: partial start ({idx.size} values) set as Start")
            cb = self._callback(progress) if progress.tracking else None
            try:
                m.optimize(cb) if cb else m.optimize()
            except gp.GurobiError as exc:
                if getattr(exc, "errno", None) == _SIZE_LIMIT_ERRNO:
                    out.message = (
                        f"gurobi: size-limited license ({SIZE_LIMIT[0]} variables, "
                        f"{SIZE_LIMIT[1]} constraints); the model has {m.NumVars} variables "
                        f"and {m.NumConstrs} constraints"
                    )
                    return out
                raise
            if m.Status == GRB.INF_OR_UNBD:
                m.Params.DualReductions = 0
                m.reset()
                m.optimize()
                out.notes.append("gurobi: INF_OR_UNBD; re-optimised with DualReductions=0")
            self._read(m, out, model)
        finally:
            m.dispose()
            env.dispose()
        progress.update(incumbent=out.objective, bound=out.bound, nodes=out.nodes,
                        elapsed=out.runtime, force=True)
        return out

    @staticmethod
    def _set_params(m, options: SolveOptions) -> None:
        p = m.Params  # LogToConsole before OutputFlag, so nothing is echoed unasked
        p.LogToConsole = 1 if options.verbose else 0
        if options.log_file:
            p.LogFile = str(options.log_file)
        p.OutputFlag = 1 if (options.verbose or options.log_file) else 0
        if options.time_limit is not None:
            p.TimeLimit = float(options.time_limit)
        if options.threads is not None:
            p.Threads = int(options.threads)
        if options.seed is not None:
            p.Seed = int(options.seed)
        p.MIPGap = float(options.rel_gap)
        p.MIPGapAbs = float(options.abs_gap)

    @staticmethod
    def _callback(progress: Progress):
        # lazy: optional dependency (the gurobi extra)
        from gurobipy import GRB

        def cb(model, where):
            if where == GRB.Callback.MIP:
                progress.update(incumbent=model.cbGet(GRB.Callback.MIP_OBJBST),
                                bound=model.cbGet(GRB.Callback.MIP_OBJBND),
                                nodes=int(model.cbGet(GRB.Callback.MIP_NODCNT)),
                                elapsed=model.cbGet(GRB.Callback.RUNTIME))
            elif where == GRB.Callback.MIPSOL:
                progress.update(incumbent=model.cbGet(GRB.Callback.MIPSOL_OBJBST),
                                bound=model.cbGet(GRB.Callback.MIPSOL_OBJBND),
                                elapsed=model.cbGet(GRB.Callback.RUNTIME))

        return cb

    @staticmethod
    def _read(m, out: BackendOutput, model: Model) -> None:
        # lazy: optional dependency (the gurobi extra)
        from gurobipy import GRB

        _STOPPED = {getattr(GRB, n): n for n in _STOPPED_NAMES if hasattr(GRB, n)}
        st = m.Status
        is_mip = bool(m.IsMIP)
        out.runtime = float(m.Runtime)
        out.nodes = int(m.NodeCount) if is_mip else 0
        has_sol = m.SolCount > 0
        if has_sol:
            out.values = np.array(m.getAttr("X", m.getVars()), dtype=np.float64)
            out.objective = float(m.ObjVal)
        if is_mip:
            try:
                b = float(m.ObjBound)
                out.bound = b if math.isfinite(b) and abs(b) < GRB.INFINITY else None
            except Exception:
                out.bound = None
        if st == GRB.OPTIMAL:
            out.status = Status.OPTIMAL
            if not is_mip:
                out.bound = out.objective
        elif st == GRB.INFEASIBLE:
            out.status = Status.INFEASIBLE
        elif st == GRB.UNBOUNDED:
            out.status = Status.UNBOUNDED
        elif st == GRB.INF_OR_UNBD:
            out.status = Status.ERROR
            out.message = "Gurobi could not decide between infeasible and unbounded"
        elif st in _STOPPED:
            out.status = Status.FEASIBLE if has_sol else Status.NO_SOLUTION
            out.notes.append(f"gurobi: stopped: {_STOPPED[st]}")
        else:
            out.status = Status.FEASIBLE if has_sol else Status.ERROR
            out.message = f"Gurobi ended with status code {st}"
        if out.status not in (Status.OPTIMAL, Status.FEASIBLE):
            out.values = None
            out.objective = None
            if out.status != Status.NO_SOLUTION:
                out.bound = None
