"""Solver-neutral MILP layer: a vectorised model, four backends behind one ``solve``.

Declare variable blocks
-----------------------
    from optsched.milp import Model, SolveOptions, solve
    m = Model("sched")
    x = m.add_vars("x", (J, T), vtype="B")            # binary block, shape (J, T)
    s = m.add_vars("s", J, lb=0, ub=release_max)       # continuous, bounds broadcast
    z = m.add_var("makespan", lb=0)                    # scalar column -> int id

A block is a :class:`VarBlock`; indexing it (``x[j, t]``, ``x[:, 3]``, ``x[idx_j, idx_t]``)
gives numpy arrays of global column ids, ``x.ids`` the whole id array. ``vtype`` is "C", "I"
or "B"; use ``-inf``/``inf`` for free directions. Errors are :class:`ModelError` naming the
block and index.

Add constraints, vectorised
---------------------------
``add_constraints(rows, cols, coefs, lo=None, hi=None, name=...)`` takes COO triplets whose
row ids are local to the call (0..nrows-1); ``rows``, ``cols`` and ``coefs`` broadcast
together, duplicates are summed. ``lo``/``hi`` are scalars or per-row arrays (None = no
limit), or give ``sense="<=" | ">=" | "=="`` with ``rhs``::

    m.add_constraints(np.arange(J)[:, None], x[:, :], 1.0, lo=1, hi=1, name="assign")
    m.add_constraints(np.arange(T)[None, :], x[:, :], size[:, None], hi=cap, name="cap")
    m.add_constraint([z, s[0]], [1, -1], sense=">=", rhs=p[0], name="mk0")   # one row

Each call makes a named :class:`ConstraintGroup`; rows are reported as ``cap[5]``. The CSR
matrix is assembled once, when a backend or writer calls ``m.arrays()`` (about 0.2 s for a
million nonzeros).

Objective, export
-----------------
``m.set_objective(cols, coefs, constant=0.0, sense="min" | "max")`` replaces it,
``m.add_objective(cols, coefs, constant)`` adds terms. ``m.write_mps(path)`` /
``m.write_lp(path)`` write files HiGHS, CBC, Gurobi and PuLP's ``LpProblem.fromMPS`` read
(ranged rows split into ``_lo``/``_hi`` rows, the objective constant as a column
``OBJ_CONST`` fixed to 1; see :mod:`optsched.milp.export`).

Solve
-----
    res = solve(m, "highs", SolveOptions(time_limit=60, threads=2, seed=0, rel_gap=1e-4,
                                         abs_gap=1e-6, log_file="run.log", progress=None))

``solver`` is "highs" (default), "gurobi", "cbc", "cpsat" or "auto" (Gurobi when installed and
licensed for the model's size, else HiGHS; the reason is the first entry of ``res.notes``).
``progress=None`` shows the live line (incumbent, bound, gap, nodes, elapsed) only when stderr
is a terminal. ``solve`` does not raise for solver trouble: a missing or unlicensed solver
(e.g. Gurobi's 2000 variables / 2000 constraints pip licence), a model the backend cannot take
(CP-SAT needs all-integer data) or a solver failure gives ``status="error"`` and a
``message``; ``unsupported_reason(solver, model)`` tells beforehand. ``solve(m, "gurobi",
fallback="highs")`` (what the formulations pass) solves a model above a size-limited licence
with HiGHS instead, with a note in ``res.notes`` and on stderr.

Read the result
---------------
:class:`SolveResult` (frozen; ``to_dict()`` is JSON-able): ``status`` in optimal, feasible,
infeasible, unbounded, no_solution, error; ``objective``; ``bound`` (best proven bound, same
sense: <= objective when minimising); ``gap`` = ``|obj - bound| / max(|obj|, 1e-10)``,
computed here for every backend; ``runtime`` (solver), ``wall_time`` (whole call); ``nodes``;
``solver``, ``solver_version``; ``values`` (full column vector or None); ``notes``;
``message``. Then::

    sched = m.value(x, res.values)        # shape (J, T), integer blocks rounded
    m.objective_value(res.values)

Warm starts and check
---------------------
``m.check(values, tol=1e-6)`` lists :class:`CheckViolation` s (kind "length", "value",
"bound", "integrality", "row"; ``where`` like ``x[2,7]`` or ``cap[5]``). ``solve(...,
warm_start=v)`` takes a full vector or ``{block or name: block-shaped array}``; NaN or a left
out block means "not given" (a partial start). The start is checked first: if anything is
violated it is NOT passed to the solver, ``warm_start_violations`` counts the violations and a
note lists the first five. A complete, clean start is passed (HiGHS ``setSolution``, Gurobi
``Start``, CP-SAT hints, CBC MIP start) and ``warm_start_objective`` reports its objective. A
clean partial start goes to HiGHS (sparse ``setSolution``), Gurobi and CP-SAT as a hint; CBC
cannot take one (noted).

Backends (``optsched.milp.backends``; one module each, registered by name)
-------------------------------------------------------------------------
Each has ``is_available()``, ``license_status()``, ``version()``, ``features``
(:class:`Features`: continuous, warm_start, partial_start, bound, threads, seed, progress,
unbounded). HiGHS runs in process via highspy; Gurobi via gurobipy; CBC via PuLP's CBC
binary; CP-SAT in a helper process (OR-Tools ships its own ``libhighs.so.1``, which cannot be
loaded next to highspy's), with row and objective coefficients scaled to integers by powers
of ten (named in the notes; objective and bound reported unscaled). Do not import ``ortools``
in a process that uses HiGHS.
"""

from ..solve_types import STATUSES, SolveOptions, Status, relative_gap
from .backends import Backend, Features, backend_names, get_backend
from .errors import (
    MilpError,
    ModelError,
    OptionsError,
    SolverUnavailableError,
    UnknownSolverError,
    WarmStartError,
)
from .model import BINARY, CONTINUOUS, INTEGER, CheckViolation, ConstraintGroup, Model, VarBlock
from .result import SolveResult
from .solve import (
    available_backends,
    backend_info,
    choose_auto,
    lp_relaxation_value,
    solve,
    unsupported_reason,
)

__all__ = [
    "BINARY", "CONTINUOUS", "INTEGER", "STATUSES",
    "Backend", "CheckViolation", "ConstraintGroup", "Features", "MilpError", "Model",
    "ModelError", "OptionsError", "SolveOptions", "SolveResult", "SolverUnavailableError", "Status",
    "UnknownSolverError", "VarBlock", "WarmStartError",
    "available_backends", "backend_info", "backend_names", "choose_auto",
    "get_backend", "lp_relaxation_value", "relative_gap", "solve", "unsupported_reason",
]
