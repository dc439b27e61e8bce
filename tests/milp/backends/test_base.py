"""Every backend against small MILPs whose optima are derived here by brute force.

Parametrised over ``--backends`` (tests/conftest.py); a backend that is not installed, not
licensed for the model's size or cannot take the model (CP-SAT and continuous variables) is
skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import itertools
import json

import numpy as np
import pytest

from optsched.milp import Model, SolveOptions, get_backend, solve, unsupported_reason

TOL = 1e-6
FAST = SolveOptions(threads=1, seed=1, rel_gap=0.0, abs_gap=1e-9)


def require_backend(backend: str, model: Model) -> None:
    """Skip (with the reason) when ``backend`` cannot solve ``model`` here."""
    reason = unsupported_reason(backend, model)
    if reason:
        pytest.skip(reason)


def assert_optimal(model: Model, result, expected: float) -> None:
    assert result.status == "optimal", (result.status, result.message, result.notes)
    assert result.objective == pytest.approx(expected, abs=TOL)
    assert result.bound == pytest.approx(expected, abs=1e-4 * max(1, abs(expected)))
    assert result.gap is not None and result.gap <= 1e-4
    assert model.check(result.values) == []
    assert model.objective_value(result.values) == pytest.approx(expected, abs=1e-5)
    assert result.runtime is not None and result.runtime >= 0
    assert result.solver_version
    json.dumps(result.to_dict())


# ---------------------------------------------------------------- models with derived optima
def knapsack(n: int = 12, seed: int = 3, fractional: bool = False):
    rng = np.random.default_rng(seed)
    w = rng.integers(3, 20, size=n)
    v = rng.integers(5, 30, size=n).astype(float)
    if fractional:
        v = v + 0.25 * rng.integers(0, 4, size=n)  # exercises CP-SAT's objective scaling
    cap = int(w.sum() // 3)
    m = Model("knapsack")
    x = m.add_vars("x", n, vtype="B")
    m.add_constraint(x, w, hi=cap, name="cap")
    m.set_objective(x, v, sense="max")
    # brute force over all 2^n subsets
    combos = np.array(list(itertools.product([0, 1], repeat=n)))
    feasible = combos @ w <= cap
    best = float((combos[feasible] @ v).max())
    return m, x, w, v, cap, best


def assignment(n: int = 5, seed: int = 7):
    rng = np.random.default_rng(seed)
    cost = rng.integers(1, 50, size=(n, n)).astype(float)
    m = Model("assignment")
    x = m.add_vars("x", (n, n), vtype="B")
    m.add_constraints(np.arange(n)[:, None], x[:, :], 1.0, lo=1, hi=1, name="row")
    m.add_constraints(np.arange(n)[None, :], x[:, :], 1.0, lo=1, hi=1, name="col")
    m.set_objective(x[:, :], cost)
    best = min(sum(cost[i, p[i]] for i in range(n)) for p in itertools.permutations(range(n)))
    return m, x, cost, best


def scheduling_toy():
    """One machine, time-indexed: x[j, t] = job j starts at t; minimise sum w_j C_j."""
    p = np.array([3, 1, 2, 2])
    w = np.array([1.0, 4.0, 2.0, 3.0])
    n, horizon = len(p), int(p.sum())
    m = Model("schedule")
    starts = horizon - p + 1  # job j may start at 0..horizon-p_j
    ub = np.zeros((n, horizon))
    for j in range(n):
        ub[j, : starts[j]] = 1
    x = m.add_vars("x", (n, horizon), ub=ub, vtype="B")
    m.add_constraints(np.arange(n)[:, None], x[:, :], 1.0, lo=1, hi=1, name="start_once")
    rows, cols = [], []
    for t in range(horizon):  # at most one job runs in slot t
        for j in range(n):
            for s in range(max(0, t - p[j] + 1), t + 1):
                rows.append(t)
                cols.append(x[j, s])
    m.add_constraints(rows, cols, 1.0, hi=1, name="machine")
    t = np.arange(horizon)
    m.set_objective(x[:, :], w[:, None] * (t[None, :] + p[:, None]))
    best = float("inf")
    for order in itertools.permutations(range(n)):  # no idle time in an optimal schedule
        c, total = 0, 0.0
        for j in order:
            c += p[j]
            total += w[j] * c
        best = min(best, total)
    return m, x, p, best


def facility_location(max_open: int | None = None):
    """Uncapacitated facility location with continuous assignment variables."""
    fixed = np.array([8.0, 5.0, 7.0])
    cost = np.array([[2, 9, 4, 6], [7, 3, 8, 2], [5, 5, 1, 9]], dtype=float)
    nf, nc = cost.shape
    m = Model("facility")
    open_ = m.add_vars("open", nf, vtype="B")
    y = m.add_vars("y", (nf, nc), ub=1.0)
    m.add_constraints(np.arange(nc)[None, :], y[:, :], 1.0, lo=1, hi=1, name="serve")
    # y[i, j] <= open[i]
    k = np.arange(nf * nc)
    m.add_constraints(np.concatenate([k, k]), np.concatenate([y[:, :].ravel(),
                                                              np.repeat(open_[:], nc)]),
                      np.concatenate([np.ones(nf * nc), -np.ones(nf * nc)]), hi=0, name="link")
    m.set_objective(open_, fixed)
    m.add_objective(y[:, :], cost)
    best = min(
        fixed[list(s)].sum() + cost[list(s)].min(axis=0).sum()
        for r in range(1, (max_open or nf) + 1) for s in itertools.combinations(range(nf), r)
    )
    return m, best


def multi_knapsack(n: int = 200, k: int = 5, seed: int = 11):
    rng = np.random.default_rng(seed)
    w = rng.integers(10, 100, size=(k, n))
    v = rng.integers(10, 100, size=n)
    m = Model("mknap")
    x = m.add_vars("x", n, vtype="B")
    m.add_constraints(np.arange(k)[:, None], x[None, :], w, hi=w.sum(axis=1) // 2, name="cap")
    m.set_objective(x, v, sense="max")
    return m


# ---------------------------------------------------------------- optima
def test_knapsack(backend):
    m, x, w, v, cap, best = knapsack()
    require_backend(backend, m)
    r = solve(m, backend, FAST)
    assert_optimal(m, r, best)
    chosen = m.value(x, r.values)
    assert chosen @ w <= cap and chosen @ v == pytest.approx(best)


def test_knapsack_fractional_values(backend):
    m, _, _, _, _, best = knapsack(fractional=True, seed=5)
    require_backend(backend, m)
    r = solve(m, backend, FAST)
    assert_optimal(m, r, best)
    if backend == "cpsat":
        assert any("scaled by 100" in n for n in r.notes), r.notes


def test_assignment(backend):
    m, x, cost, best = assignment()
    require_backend(backend, m)
    r = solve(m, backend, FAST)
    assert_optimal(m, r, best)
    perm = m.value(x, r.values)
    assert sorted(perm.sum(axis=0)) == [1] * 5 and sorted(perm.sum(axis=1)) == [1] * 5


def test_scheduling_toy(backend):
    m, x, p, best = scheduling_toy()
    require_backend(backend, m)
    r = solve(m, backend, FAST)
    assert_optimal(m, r, best)
    start = m.value(x, r.values).argmax(axis=1)
    order = np.argsort(start)
    assert (np.diff(start[order]) >= p[order][:-1]).all()  # no overlap


def test_mixed_integer_facility_location(backend):
    m, best = facility_location()
    require_backend(backend, m)  # CP-SAT: skipped, continuous variables
    r = solve(m, backend, FAST)
    assert_optimal(m, r, best)


def test_infeasible(backend):
    m = Model("infeasible")
    x = m.add_vars("x", 3, vtype="B")
    m.add_constraint(x, 1, lo=4, name="too_many")
    m.set_objective(x, 1)
    require_backend(backend, m)
    r = solve(m, backend, FAST)
    assert r.status == "infeasible", (r.status, r.message, r.notes)
    assert r.objective is None and r.values is None and r.gap is None


def test_integer_infeasible_but_lp_feasible(backend):
    m = Model("parity")
    x = m.add_vars("x", 2, ub=10, vtype="I")
    m.add_constraint(x, [2, 2], lo=3, hi=3, name="odd")
    m.set_objective(x, 1)
    require_backend(backend, m)
    assert solve(m, backend, FAST).status == "infeasible"


def test_unbounded(backend):
    m = Model("unbounded")
    x = m.add_vars("x", 2, vtype="I")  # [0, inf)
    m.add_constraint(x, [1, -1], hi=1, name="diff")
    m.set_objective(x, [1, 1], sense="max")
    require_backend(backend, m)
    r = solve(m, backend, FAST)
    assert r.status == "unbounded", (r.status, r.message, r.notes)
    assert r.objective is None and r.values is None


def test_time_limited_solve_returns_incumbent_and_bound(backend):
    m = multi_knapsack()
    require_backend(backend, m)
    # the all-zero start is feasible, so an incumbent exists even on a loaded machine
    start = np.zeros(m.num_vars)
    r = solve(m, backend, SolveOptions(time_limit=0.5, threads=1, seed=1), warm_start=start)
    assert r.status in ("feasible", "optimal"), (r.status, r.message, r.notes)
    assert r.objective is not None and m.check(r.values) == []
    assert r.objective == pytest.approx(m.objective_value(r.values))
    assert r.bound is not None, r.notes
    assert r.bound >= r.objective - 1e-6  # maximisation: the bound lies above
    assert r.gap == pytest.approx(abs(r.objective - r.bound) / abs(r.objective))
    if r.status == "feasible":
        assert r.runtime < 5


# ---------------------------------------------------------------- warm starts
def greedy_start(w, v, cap) -> np.ndarray:
    x = np.zeros(len(w))
    load = 0
    for j in np.argsort(-v / w):
        if load + w[j] <= cap:
            x[j], load = 1, load + w[j]
    return x


def test_warm_start_accepted_and_reported(backend):
    m, x, w, v, cap, best = knapsack(n=14, seed=4)
    require_backend(backend, m)
    start = greedy_start(w, v, cap)
    r = solve(m, backend, FAST, warm_start=start)
    assert r.warm_start_violations == 0
    assert r.warm_start_objective == pytest.approx(float(start @ v))
    assert any("accepted" in n for n in r.notes), r.notes
    assert_optimal(m, r, best)
    assert r.objective >= r.warm_start_objective - TOL


def test_warm_start_that_violates_rows_is_rejected_with_names(backend):
    m, x, w, v, cap, best = knapsack(n=10, seed=2)
    require_backend(backend, m)
    r = solve(m, backend, FAST, warm_start=np.ones(10))  # everything: over capacity
    assert r.warm_start_violations == 1 and r.warm_start_objective is None
    (note,) = [n for n in r.notes if "warm start rejected" in n]
    assert "row cap: activity" in note and "not passed to the solver" in note
    assert_optimal(m, r, best)


def test_warm_start_of_wrong_length_is_rejected(backend):
    m, _, _, _, _, best = knapsack(n=8, seed=1)
    require_backend(backend, m)
    r = solve(m, backend, FAST, warm_start=np.zeros(5))
    assert r.warm_start_violations == 1
    assert any("length 5, the model has 8 columns" in n for n in r.notes), r.notes
    assert_optimal(m, r, best)


def test_partial_warm_start(backend):
    m, x, cost, best = assignment(n=4, seed=3)
    require_backend(backend, m)
    part = np.full((4, 4), np.nan)
    part[0] = [1, 0, 0, 0]
    r = solve(m, backend, FAST, warm_start={x: part})
    assert r.warm_start_violations == 0 and r.warm_start_objective is None
    assert any("partial" in n for n in r.notes), r.notes
    if not get_backend(backend).features.partial_start:
        assert any("cannot use partial warm starts" in n for n in r.notes), r.notes
    assert_optimal(m, r, best)


# ---------------------------------------------------------------- options
def test_log_file_and_progress_line(backend, tmp_path, capsys):
    m, _, _, _, _, best = knapsack(n=10, seed=6)
    require_backend(backend, m)
    log = tmp_path / f"{backend}.log"
    r = solve(m, backend, SolveOptions(log_file=str(log), progress=True, threads=1, seed=2))
    assert_optimal(m, r, best)
    assert log.exists() and log.stat().st_size > 0
    err = capsys.readouterr().err
    assert f"[{backend}] incumbent" in err and "bound" in err and "gap" in err


# ---------------------------------------------------------------- export
def test_mps_and_lp_export_read_back_by_other_solvers(backend, tmp_path):
    """The model solved by ``backend``; its MPS and LP files read by HiGHS and Gurobi, the MPS
    by CBC via PuLP: all give the same optimum (objective constant and a ranged row
    included)."""
    m, best = facility_location(max_open=2)
    m.add_objective([], [], constant=2.5)
    m.add_constraint(m.block("open")[:], 1, lo=1, hi=2, name="open_range")  # a ranged row
    require_backend(backend, m)
    r = solve(m, backend, FAST)
    best_c = best + 2.5
    assert_optimal(m, r, best_c)
    mps, lp = tmp_path / "m.mps", tmp_path / "m.lp"
    m.write_mps(str(mps))
    m.write_lp(str(lp))
    import highspy

    for path in (mps, lp):
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        assert h.readModel(str(path)) == highspy.HighsStatus.kOk
        h.run()
        assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
        assert h.getInfo().objective_function_value == pytest.approx(best_c)
    if unsupported_reason("cbc", m) is None:
        import pulp

        from optsched.milp.backends.cbc import _cbc_path

        _, prob = pulp.LpProblem.fromMPS(str(mps), sense=pulp.LpMinimize)
        prob.solve(pulp.COIN_CMD(path=_cbc_path(), msg=False))
        assert pulp.LpStatus[prob.status] == "Optimal"
        assert pulp.value(prob.objective) == pytest.approx(best_c)
    if unsupported_reason("gurobi", m) is None:
        import gurobipy as gp

        from optsched.milp.backends.gurobi import _env

        env = _env()
        for path in (mps, lp):
            g = gp.read(str(path), env=env)
            g.optimize()
            assert g.Status == gp.GRB.OPTIMAL and g.ObjVal == pytest.approx(best_c)
            g.dispose()
        env.dispose()


def test_mps_export_of_a_maximisation_read_by_highs_and_pulp(tmp_path):
    m, _, _, _, _, best = knapsack(n=10, seed=9)
    path = tmp_path / "k.mps"
    m.write_mps(str(path))
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(path))
    h.run()
    assert h.getInfo().objective_function_value == pytest.approx(best)
    if unsupported_reason("cbc", m) is None:
        import pulp

        from optsched.milp.backends.cbc import _cbc_path

        _, prob = pulp.LpProblem.fromMPS(str(path), sense=pulp.LpMaximize)
        prob.solve(pulp.COIN_CMD(path=_cbc_path(), msg=False))
        assert pulp.value(prob.objective) == pytest.approx(best)


# ---------------------------------------------------------------- gurobi licence
def wide_model(n: int = 2001) -> tuple[Model, float]:
    m = Model("wide")
    x = m.add_vars("x", n, vtype="B")
    m.add_constraint(x, 1, hi=3, name="pick3")
    v = (np.arange(n) % 17).astype(float)
    m.set_objective(x, v, sense="max")
    return m, float(np.sort(v)[-3:].sum())  # best three values


@pytest.mark.skipif(importlib.util.find_spec("gurobipy") is None, reason="gurobipy not installed")
def test_gurobi_size_limit_gives_a_clear_message():
    m, best = wide_model()
    g = get_backend("gurobi")
    status = g.license_status()
    r = solve(m, "gurobi", FAST)
    if g.size_limit() is None:  # a full licence: it just solves
        assert_optimal(m, r, best)
        return
    assert "size-limited license (2000 variables, 2000 constraints)" in status
    assert r.status == "error" and r.values is None
    assert r.message == ("gurobi: size-limited license (2000 variables, 2000 constraints); "
                         "the model has 2001 variables and 1 constraints")
    auto = solve(m, "auto", FAST)
    assert auto.solver == "highs"
    assert any("auto: chose highs because gurobi: size-limited" in n for n in auto.notes)
    assert_optimal(m, auto, best)
    small, _ = wide_model(50)
    auto_small = solve(small, "auto", FAST)
    assert auto_small.solver == "gurobi" and auto_small.status == "optimal"
    assert any(n.startswith("auto: chose gurobi") for n in auto_small.notes)


def test_cpsat_refuses_continuous_models_with_a_message():
    m, _ = facility_location()
    r = solve(m, "cpsat")
    assert r.status == "error"
    assert "cpsat" in r.message and ("continuous" in r.message or "not installed" in r.message)


def test_backends_report_features_and_licence():
    for name in ("highs", "gurobi", "cbc", "cpsat"):
        b = get_backend(name)
        assert isinstance(b.is_available(), bool)
        assert b.license_status()
    assert get_backend("cpsat").features.continuous is False
    assert get_backend("cbc").features.partial_start is False


def test_thread_count_can_change_between_solves(backend):
    m, _, _, _, _, best = knapsack(n=9, seed=8)
    require_backend(backend, m)
    for threads in (1, 2, 1):
        assert_optimal(m, solve(m, backend, SolveOptions(threads=threads)), best)


def test_cpsat_worker_process_is_restarted_after_it_dies():
    m, _, _, _, _, best = knapsack(n=8, seed=12)
    require_backend("cpsat", m)
    from optsched.milp.backends.cpsat import _Worker

    assert_optimal(m, solve(m, "cpsat", FAST), best)
    _Worker._proc.kill()
    _Worker._proc.wait()
    assert_optimal(m, solve(m, "cpsat", FAST), best)


def test_linear_program(backend):
    """max 3x + 2y s.t. x + y <= 4, x + 3y <= 6, x <= 3, x, y >= 0; optimum by vertex
    enumeration of the 2-D polygon."""
    A = np.array([[1.0, 1], [1, 3], [1, 0], [-1, 0], [0, -1]])
    b = np.array([4.0, 6, 3, 0, 0])
    c = np.array([3.0, 2])
    best = -np.inf
    for i, j in itertools.combinations(range(len(b)), 2):
        M = A[[i, j]]
        if abs(np.linalg.det(M)) < 1e-12:
            continue
        v = np.linalg.solve(M, b[[i, j]])
        if (A @ v <= b + 1e-9).all():
            best = max(best, float(c @ v))
    m = Model("lp")
    xy = m.add_vars("xy", 2)
    m.add_constraints([0, 0, 1, 1, 2], [xy[0], xy[1], xy[0], xy[1], xy[0]], [1, 1, 1, 3, 1],
                      hi=[4, 6, 3], name="poly")
    m.set_objective(xy, c, sense="max")
    require_backend(backend, m)  # CP-SAT: skipped, continuous variables
    r = solve(m, backend, FAST)
    assert_optimal(m, r, best)
    assert r.nodes == 0 or r.nodes is None or backend == "cbc"


def test_missing_gurobi_license_is_a_message_not_a_traceback(monkeypatch):
    from optsched.milp.backends import gurobi

    text = "gurobi: no usable license (HostID mismatch)"
    monkeypatch.setattr(gurobi, "_license", gurobi.LicenseInfo(False, None, text))
    m, _, _, _, _, best = knapsack(n=8, seed=13)
    r = solve(m, "gurobi", FAST)
    assert r.status == "error" and r.message == text and r.values is None
    assert get_backend("gurobi").license_status() == text
    auto = solve(m, "auto", FAST)
    assert auto.solver == "highs" and auto.notes[0] == f"auto: chose highs because {text}"
    assert_optimal(m, auto, best)


def test_cpsat_reports_an_overflowing_model_as_an_error():
    m = Model("overflow")
    y = m.add_vars("y", 2, lb=-np.inf, vtype="I")
    m.add_constraint(y, [1e12, 3e12], lo=1e12, name="huge")
    m.set_objective(y, [1, 1])
    require_backend("cpsat", m)
    r = solve(m, "cpsat", FAST)
    assert r.status == "error" and "overflow" in r.message and "\n" not in r.message


def test_cpsat_refuses_rows_that_cannot_be_scaled_to_integers():
    m = Model("thirds")
    x = m.add_vars("x", 2, ub=5, vtype="I")
    m.add_constraint(x, [1 / 3, 1], hi=2, name="third")
    m.set_objective(x, [1, 1], sense="max")
    if get_backend("cpsat").is_available():
        reason = unsupported_reason("cpsat", m)
        assert reason == ("cpsat: coefficients of row third cannot be made integral by a "
                          "factor up to 10^6")
        assert solve(m, "cpsat").message == reason
    m2 = Model("tenths")  # decimals scale exactly: 0.1 x0 + 0.25 x1 <= 1.3
    y = m2.add_vars("y", 2, ub=20, vtype="I")
    m2.add_constraint(y, [0.1, 0.25], hi=1.3, name="dec")
    m2.set_objective(y, [1, 2], sense="max")
    best = max(a + 2 * b for a in range(21) for b in range(21) if 10 * a + 25 * b <= 130)
    require_backend("cpsat", m2)
    r = solve(m2, "cpsat", FAST)
    assert_optimal(m2, r, best)
    assert any("scaled by powers of ten (up to 10^2)" in n for n in r.notes), r.notes


@pytest.mark.skipif(importlib.util.find_spec("gurobipy") is None, reason="gurobipy not installed")
def test_gurobi_size_limit_falls_back_when_asked(capsys):
    """``fallback="highs"`` takes a model above the size-limited licence to HiGHS with a note
    (in ``notes`` and one stderr line); a model within the licence stays with Gurobi."""
    m, best = wide_model()
    r = solve(m, "gurobi", FAST, fallback="highs")
    err = capsys.readouterr().err
    if get_backend("gurobi").size_limit() is None:  # a full licence: Gurobi solves it
        assert r.solver == "gurobi" and "instead" not in err
        assert_optimal(m, r, best)
        return
    assert r.solver == "highs"
    assert_optimal(m, r, best)
    note = ("gurobi: size-limited license (2000 variables, 2000 constraints); the model has "
            "2001 variables and 1 constraints; solved with highs instead")
    assert note in r.notes and err == f"optsched: note: {note}\n"
    small, _ = wide_model(50)
    assert solve(small, "gurobi", FAST, fallback="highs").solver == "gurobi"
