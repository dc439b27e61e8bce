"""The solver-neutral model: blocks, vectorised constraints, assembly, check, options, results."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from optsched.milp import (
    CheckViolation,
    Model,
    ModelError,
    OptionsError,
    SolveOptions,
    SolveResult,
    UnknownSolverError,
    backend_names,
    get_backend,
    relative_gap,
    solve,
)
from optsched.milp.progress import make_progress


def dense(model: Model) -> np.ndarray:
    a = model.arrays()
    out = np.zeros((a.num_rows, a.num_vars))
    for i in range(a.num_rows):
        for k in range(a.indptr[i], a.indptr[i + 1]):
            out[i, a.indices[k]] += a.data[k]
    return out


# ---------------------------------------------------------------- blocks
def test_block_indexing_yields_column_ids():
    m = Model()
    a = m.add_vars("a", 3)
    x = m.add_vars("x", (2, 4), vtype="B")
    s = m.add_var("s", lb=-1, ub=1)
    assert m.num_vars == 3 + 8 + 1
    assert isinstance(x[1, 2], np.integer) and x[1, 2] == 3 + 1 * 4 + 2
    assert x[0, :].tolist() == [3, 4, 5, 6]
    assert x[:, 1].tolist() == [4, 8]
    assert x[np.array([1, 0]), np.array([3, 0])].tolist() == [10, 3]
    assert x.ids.shape == (2, 4) and not x.ids.flags.writeable
    assert a[:].tolist() == [0, 1, 2] and s == 11
    assert x.label(10) == "x[1,3]" and m.col_label(11) == "s" and m.block_of(2) is a


def test_block_errors_name_the_block():
    m = Model()
    x = m.add_vars("x", (2, 3))
    with pytest.raises(ModelError, match=r"block 'x' \(shape \(2, 3\)\): bad index"):
        x[2, 0]
    with pytest.raises(ModelError, match="already exists"):
        m.add_vars("x", 2)
    with pytest.raises(ModelError, match="unknown vtype"):
        m.add_vars("y", 2, vtype="Q")
    with pytest.raises(ModelError, match=r"bad bounds at z\[1\]: lb=5.0, ub=2.0"):
        m.add_vars("z", 3, lb=[0, 5, 0], ub=2)
    with pytest.raises(ModelError, match="bad shape"):
        m.add_vars("w", (-1,))
    with pytest.raises(ModelError, match="invalid"):
        m.add_vars("bad name", 1)


def test_binary_bounds_are_clipped_and_vtypes_recorded():
    m = Model()
    m.add_vars("b", 2, lb=-3, ub=9, vtype="binary")
    m.add_vars("i", 2, lb=-3, ub=9, vtype="integer")
    m.add_vars("c", 1)
    a = m.arrays()
    assert a.lb.tolist() == [0, 0, -3, -3, 0] and a.ub.tolist() == [1, 1, 9, 9, np.inf]
    assert a.is_int.tolist() == [True] * 4 + [False]
    assert m.num_integer == 4 and m.is_mip


def test_set_bounds_replaces_one_side_and_validates():
    m = Model()
    b = m.add_vars("b", 2, vtype="binary")
    x = m.add_vars("x", 3, ub=5.0)
    m.arrays()  # cached arrays are rebuilt after the change
    m.set_bounds([x[1], b[0]], ub=np.inf)  # binaries stay clipped to [0, 1]
    m.set_bounds(x[2], lb=2.0)
    a = m.arrays()
    assert a.lb.tolist() == [0, 0, 0, 0, 2] and a.ub.tolist() == [1, 1, 5, np.inf, 5]
    with pytest.raises(ModelError, match="x"):
        m.set_bounds(x[0], lb=7.0)  # lb > ub
    with pytest.raises(ModelError, match="column ids"):
        m.set_bounds([99], ub=1.0)


# ---------------------------------------------------------------- constraints
def test_add_constraints_broadcasts_and_assembles_csr():
    m = Model()
    x = m.add_vars("x", (3, 4))
    w = np.arange(12.0).reshape(3, 4)
    g = m.add_constraints(np.arange(3)[:, None], x[:, :], w, hi=[5, 6, 7], name="rows")
    h = m.add_constraints(np.arange(4)[None, :], x[:, :], 1.0, lo=1, name="cols")
    assert (g.start, g.size, h.start, h.size) == (0, 3, 3, 4)
    expected = np.zeros((7, 12))
    for i in range(3):
        for j in range(4):
            expected[i, 4 * i + j] = w[i, j]
            expected[3 + j, 4 * i + j] = 1.0
    np.testing.assert_array_equal(dense(m), expected)
    a = m.arrays()
    assert a.row_lo.tolist() == [-np.inf] * 3 + [1] * 4
    assert a.row_hi.tolist() == [5, 6, 7] + [np.inf] * 4
    assert a.nnz == 11 + 12  # the zero coefficient w[0, 0] is dropped
    assert m.row_label(1) == "rows[1]" and m.row_label(6) == "cols[3]"


def test_duplicates_are_summed_and_cancelling_entries_dropped():
    m = Model()
    x = m.add_vars("x", 3)
    m.add_constraints([0, 0, 0, 1, 1], [x[0], x[0], x[1], x[2], x[2]], [1, 2, 5, 1, -1],
                      hi=[10, 10])
    np.testing.assert_array_equal(dense(m), [[3, 5, 0], [0, 0, 0]])
    assert m.arrays().nnz == 2


def test_single_constraint_and_sense_rhs():
    m = Model()
    x = m.add_vars("x", 3)
    m.add_constraint(x[:], [1, 2, 3], sense="<=", rhs=4, name="le")
    m.add_constraint(x[:2], 1, sense=">=", rhs=1)
    m.add_constraint(x, 1, sense="==", rhs=2, name="eq")
    a = m.arrays()
    assert a.row_lo.tolist() == [-np.inf, 1, 2] and a.row_hi.tolist() == [4, np.inf, 2]
    assert m.row_label(0) == "le" and m.row_label(1) == "c1" and m.row_label(2) == "eq"


def test_constraint_errors_name_group_row_and_column():
    m = Model()
    x = m.add_vars("x", 3)
    with pytest.raises(ModelError, match=r"group 'g': local row id 2 outside 0..1"):
        m.add_constraints([0, 2], [x[0], x[1]], 1.0, hi=[1, 1], name="g")
    with pytest.raises(ModelError, match=r"group 'g': column id 7 does not exist"):
        m.add_constraints([0], [7], 1.0, hi=1, name="g")
    with pytest.raises(ModelError, match=r"row g\[1\] has bad bounds lo=3.0, hi=1.0"):
        m.add_constraints([0, 1], [x[0], x[1]], 1.0, lo=[0, 3], hi=1, name="g")
    with pytest.raises(ModelError, match=r"coefficient nan of x\[1\] in row g\[0\]"):
        m.add_constraints([0], [x[1]], np.nan, hi=1, name="g")
    with pytest.raises(ModelError, match="not both"):
        m.add_constraint(x[:], 1, lo=0, sense="<=", rhs=1)
    with pytest.raises(ModelError, match="do not broadcast"):
        m.add_constraints([0, 1, 2], [x[0], x[1]], 1.0, hi=1)
    m.add_constraint(x[:], 1, hi=1, name="g")
    with pytest.raises(ModelError, match="constraint group 'g' already exists"):
        m.add_constraint(x[:], 1, hi=1, name="g")


def test_objective_value_and_values_by_block():
    m = Model()
    x = m.add_vars("x", (2, 2), vtype="I")
    y = m.add_var("y")
    m.set_objective(x[:, :], [[1, 2], [3, 4]], constant=10, sense="max")
    m.add_objective([y, y], [0.5, 0.5])
    vals = np.array([1, 0, 2, 1.0000001, 3])
    assert m.objective_value(vals) == pytest.approx(10 + 1 + 6 + 4.0000004 + 3)
    np.testing.assert_array_equal(m.value(x, vals), [[1, 0], [2, 1]])
    assert m.value("y", vals) == 3.0
    assert m.sense == "max"
    with pytest.raises(ModelError, match="no block 'z'"):
        m.value("z", vals)
    with pytest.raises(ModelError, match="unknown sense"):
        m.set_objective(x[0, 0], 1, sense="up")


# ---------------------------------------------------------------- check
def small_model() -> tuple[Model, object, object]:
    m = Model()
    x = m.add_vars("x", (2, 2), vtype="B")
    y = m.add_vars("y", 1, lb=-1, ub=2)
    m.add_constraints(np.arange(2)[:, None], x[:, :], 1.0, lo=1, hi=1, name="assign")
    m.add_constraint([x[0, 0], y[0]], [1, 1], hi=2.5, name="cap")
    return m, x, y


def test_check_accepts_a_feasible_point():
    m, _, _ = small_model()
    assert m.check([1, 0, 0, 1, 1.5]) == []


def test_check_finds_each_kind_of_violation():
    m, _, _ = small_model()
    (v,) = m.check([1, 0, 0])
    assert v.kind == "length" and "length 3" in str(v)
    viols = m.check([1, 0, 0.5, 0.5, 3.0])
    kinds = {(v.kind, v.where) for v in viols}
    assert kinds == {("bound", "y[0]"), ("integrality", "x[1,0]"), ("integrality", "x[1,1]"),
                     ("row", "cap")}
    cap = next(v for v in viols if v.kind == "row")
    assert cap.value == pytest.approx(4.0) and cap.amount == pytest.approx(1.5)
    assert "row cap: activity 4 outside [-inf, 2.5]" in str(cap)
    viols = m.check([1, 1, 0, 0, 0])
    assert [(v.kind, v.where) for v in viols] == [("row", "assign[0]"), ("row", "assign[1]")]
    (nan,) = m.check([1, 0, 0, 1, np.nan])
    assert nan.kind == "value" and nan.where == "y[0]"


def test_check_tolerance_and_partial():
    m, _, _ = small_model()
    assert m.check([1, 0, 0, 1 + 1e-8, 1.5]) == []
    assert m.check([1, 0, 0, 1 + 1e-3, 1.5], tol=1e-2) == []
    # partial: NaN = not given; rows touching unknown columns are skipped
    assert m.check([1, np.nan, np.nan, np.nan, np.nan], partial=True) == []
    viols = m.check([1, 1, np.nan, np.nan, np.nan], partial=True)
    assert [(v.kind, v.where) for v in viols] == [("row", "assign[0]")]
    assert isinstance(viols[0], CheckViolation)


# ---------------------------------------------------------------- options, results, progress
def test_options_validate():
    with pytest.raises(OptionsError, match="time_limit"):
        SolveOptions(time_limit=0)
    with pytest.raises(OptionsError, match="threads"):
        SolveOptions(threads=0)
    with pytest.raises(OptionsError, match="rel_gap"):
        SolveOptions(rel_gap=-1)
    with pytest.raises(OptionsError, match="seed"):
        SolveOptions(seed=-2)
    assert SolveOptions(time_limit=2).to_dict()["time_limit"] == 2


def test_gap_is_computed_in_one_place_and_results_are_jsonable():
    r = SolveResult(status="feasible", solver="x", objective=100.0, bound=110.0,
                    values=np.array([1.0, np.inf]), notes=["a"])
    assert r.gap == pytest.approx(0.1) == relative_gap(100.0, 110.0)
    assert relative_gap(0.0, 1.0) == pytest.approx(1e10)
    assert relative_gap(None, 1.0) is None and relative_gap(1.0, float("inf")) is None
    d = json.loads(json.dumps(r.to_dict(include_values=True)))
    assert d["gap"] == pytest.approx(0.1) and d["values"] == [1.0, "inf"] and d["notes"] == ["a"]
    assert "values" not in r.to_dict()
    with pytest.raises(ValueError, match="unknown status"):
        SolveResult(status="done", solver="x")
    assert "gap=10%" in r.summary()


def test_progress_line_only_when_asked_or_on_a_terminal():
    buf = io.StringIO()
    p = make_progress("demo", None, buf)  # StringIO is not a terminal
    p.update(incumbent=5, bound=4)
    p.close()
    assert buf.getvalue() == ""
    p = make_progress("demo", True, buf)  # asked for, not a terminal: whole lines
    p.update(incumbent=5, bound=4, nodes=3, elapsed=1.5)
    p.close()
    text = buf.getvalue()
    assert text.startswith("[demo] incumbent 5  bound 4  gap 20.00%  nodes 3  1.5s\n")
    assert "\r" not in text

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    p = make_progress("demo", None, tty)  # a terminal: one live line, redrawn
    p.update(incumbent=5, bound=4, nodes=3, elapsed=1.5, force=True)
    p.close()
    text = tty.getvalue()
    assert text.startswith("\r[demo] incumbent 5  bound 4  gap 20.00%  nodes 3  1.5s")
    assert text.endswith("\n")


# ---------------------------------------------------------------- registry
def test_registry_lists_all_backends_default_first():
    assert backend_names() == ["highs", "gurobi", "cbc", "cpsat"]
    for name in backend_names():
        b = get_backend(name)
        assert b.name == name and isinstance(b.license_status(), str)
    with pytest.raises(UnknownSolverError, match="unknown solver 'nope'"):
        solve(Model(), "nope")


# ---------------------------------------------------------------- scale
def test_a_million_nonzeros_build():
    """Structure only; the time is measured by ``benchmarks/milp_build.py``."""
    jobs, slots = 1000, 500
    m = Model("big")
    x = m.add_vars("x", (jobs, slots), vtype="B")
    m.add_constraints(np.arange(jobs)[:, None], x[:, :], 1.0, lo=1, hi=1, name="assign")
    size = np.arange(jobs) % 7 + 1.0
    m.add_constraints(np.arange(slots)[None, :], x[:, :], size[:, None], hi=20, name="cap")
    m.set_objective(x[:, :], np.arange(slots)[None, :] * size[:, None])
    a = m.arrays()
    assert a.nnz == 2 * jobs * slots
