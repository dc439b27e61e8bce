"""HiGHS through highspy's direct API (the default backend; no files are written)."""

from __future__ import annotations

import importlib.util
import math
from typing import TYPE_CHECKING

import numpy as np

from ...runtime.stdout_guard import c_stdout_to_stderr, silenced_c_stdout
from ...solve_types import Status
from .base import Backend, BackendOutput, ColumnStart, Features, register

if TYPE_CHECKING:
    from ...solve_types import SolveOptions
    from ..model import Model
    from ..progress import Progress


_scheduler_threads: int | None = None  # threads of HiGHS's global scheduler, once we set it


def new_highs():
    """A ``highspy.Highs`` with its output off. highspy >= 1.16 prints a banner on file
    descriptor 1 when the first instance of a process is built, before any option can be set:
    it goes to the null device. Build every HiGHS instance through this function."""
    # lazy: the solver library loads only when a solve runs (start-up time)
    import highspy

    with silenced_c_stdout():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


def run_highs(h):
    """``h.run()`` with anything HiGHS prints on standard output (its log, when the caller
    turned it on) sent to stderr."""
    with c_stdout_to_stderr():
        return h.run()


def _load_arrays(h, a) -> None:
    """Pass a ModelArrays to a highspy.Highs instance (row-wise matrix)."""
    # lazy: the solver library loads only when a solve runs (start-up time)
    import highspy

    sense = highspy.ObjSense.kMaximize if a.sense == "max" else highspy.ObjSense.kMinimize
    status = h.passModel(
        a.num_vars, a.num_rows, a.nnz, int(highspy.MatrixFormat.kRowwise), int(sense),
        float(a.obj_constant), a.obj, a.lb, a.ub, a.row_lo, a.row_hi,
        a.indptr.astype(np.int32), a.indices.astype(np.int32), a.data,
        a.is_int.astype(np.int32),
    )
    if status == highspy.HighsStatus.kError:
        raise RuntimeError("HiGHS rejected the model (passModel returned an error)")


@register
class HighsBackend(Backend):
    """HiGHS MIP/LP solver.

    Bound: ``info.mip_dual_bound`` for MIPs, the optimal objective for LPs. Warm start:
    ``setSolution`` (complete start as a dense solution, partial start as a sparse one, which
    HiGHS tries to complete). Progress: the improving-solution and MIP-interrupt callbacks.
    When HiGHS can only say "infeasible or unbounded", the model is solved again without
    presolve to tell which.
    """

    name = "highs"
    order = 0
    features = Features()

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("highspy") is None:
            return "highs: highspy not installed (pip install highspy)"
        return None

    def version(self) -> str:

        return str(new_highs().version())

    def solve(self, model: Model, options: SolveOptions, start: ColumnStart | None,
              progress: Progress) -> BackendOutput:
        # lazy: the solver library loads only when a solve runs (start-up time)
        import highspy

        a = model.arrays()
        h = new_highs()
        out = BackendOutput(status=Status.ERROR, version=self.version())
        self._set_options(h, options)
        _load_arrays(h, a)
        if start is not None:
            if start.partial:
                idx = start.given
                h.setSolution(int(idx.size), idx.astype(np.int32), start.values[idx])
                out.notes.append(f"highs: partial start with {idx.size} of {a.num_vars} "
                                 "values passed to setSolution (HiGHS completes it)")
            else:
                sol = highspy.HighsSolution()
                sol.col_value = start.values.tolist()
                sol.value_valid = True
                h.setSolution(sol)
        if progress.tracking and a.is_int.any():
            def on_event(e) -> None:
                d = e.data_out
                progress.update(incumbent=d.mip_primal_bound, bound=d.mip_dual_bound,
                                nodes=d.mip_node_count, elapsed=d.running_time)

            h.cbMipImprovingSolution.subscribe(on_event)
            h.cbMipInterrupt.subscribe(on_event)
        run_status = run_highs(h)
        status = h.getModelStatus()
        MS = highspy.HighsModelStatus
        if status == MS.kUnboundedOrInfeasible:
            h2 = new_highs()
            self._set_options(h2, options)
            h2.setOptionValue("presolve", "off")
            _load_arrays(h2, a)
            run_highs(h2)
            out.notes.append("highs: 'infeasible or unbounded' after presolve; solved again "
                             "without presolve to decide")
            h, status = h2, h2.getModelStatus()
        info = h.getInfo()
        out.runtime = float(h.getRunTime())
        is_mip = bool(a.is_int.any())
        out.nodes = int(info.mip_node_count) if is_mip else 0
        has_sol = int(info.primal_solution_status) == int(highspy.SolutionStatus.kSolutionStatusFeasible)
        if has_sol:
            out.values = np.array(h.getSolution().col_value, dtype=np.float64)
            out.objective = float(info.objective_function_value)
        if is_mip:
            b = float(info.mip_dual_bound)
            out.bound = b if math.isfinite(b) else None
        if status == MS.kOptimal:
            out.status = Status.OPTIMAL
            if not is_mip:
                out.bound = out.objective
        elif status == MS.kModelEmpty:
            out.status = Status.OPTIMAL
            out.values = np.zeros(0)
            out.objective = out.bound = float(a.obj_constant)
        elif status == MS.kInfeasible:
            out.status, out.values, out.objective, out.bound = Status.INFEASIBLE, None, None, None
        elif status == MS.kUnbounded:
            out.status, out.values, out.objective, out.bound = Status.UNBOUNDED, None, None, None
        elif status == MS.kUnboundedOrInfeasible:
            out.status = Status.ERROR
            out.message = "HiGHS could not decide between infeasible and unbounded"
        elif status in (MS.kTimeLimit, MS.kIterationLimit, MS.kInterrupt, MS.kSolutionLimit,
                        getattr(MS, "kObjectiveBound", None), getattr(MS, "kObjectiveTarget",
                                                                      None)):
            out.status = Status.FEASIBLE if has_sol else Status.NO_SOLUTION
            out.notes.append(f"highs: stopped: {h.modelStatusToString(status)}")
        else:
            out.status = Status.FEASIBLE if has_sol else Status.ERROR
            out.message = f"HiGHS ended with status {h.modelStatusToString(status)!r}"
            if run_status == highspy.HighsStatus.kError:
                out.message += " (run() returned an error; see the log with verbose=True)"
        if out.status not in (Status.OPTIMAL, Status.FEASIBLE):
            out.values = None
            out.objective = None
            if out.status != Status.NO_SOLUTION:
                out.bound = None
        if is_mip and out.status in (Status.OPTIMAL, Status.FEASIBLE) and out.bound is None:
            out.notes.append("highs: no finite dual bound reported")
        progress.update(incumbent=out.objective, bound=out.bound, nodes=out.nodes,
                        elapsed=out.runtime, force=True)
        return out

    @staticmethod
    def _set_options(h, options: SolveOptions) -> None:
        global _scheduler_threads
        # lazy: the solver library loads only when a solve runs (start-up time)
        import highspy

        h.setOptionValue("output_flag", bool(options.verbose or options.log_file))
        h.setOptionValue("log_to_console", bool(options.verbose))
        if options.log_file:
            h.setOptionValue("log_file", str(options.log_file))
        if options.time_limit is not None:
            h.setOptionValue("time_limit", float(options.time_limit))
        if options.threads is not None:
            if _scheduler_threads != int(options.threads):
                # HiGHS's thread pool is global and fixed once started: restart it
                highspy.Highs.resetGlobalScheduler(True)
                _scheduler_threads = int(options.threads)
            h.setOptionValue("threads", int(options.threads))
        if options.seed is not None:
            h.setOptionValue("random_seed", int(options.seed))
        h.setOptionValue("mip_rel_gap", float(options.rel_gap))
        h.setOptionValue("mip_abs_gap", float(options.abs_gap))
