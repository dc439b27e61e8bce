"""The ``hindsight-ff`` method (formulations/hindsight.md (H23)-(H25)) against brute force:
every (H23) cut holds in every feasible schedule, the certified bound never exceeds the
optimum, and the proven optimum is the enumerated one."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.cost import UnitCost
from optsched.formulations import SolveOptions
from optsched.formulations.hindsight import HindsightParams, build, objective_of_starts
from optsched.formulations.hindsight.lpbound import root_bound
from optsched.instance import Instance, Limits, Request
from optsched.solving import solve
from optsched.workloads.generators import online_paper_random

pytest.importorskip("ortools")


def _instance(rng, n: int, M: int, omax: int, spread: int = 0) -> Instance:
    reqs = []
    for i in range(n):
        I = int(rng.integers(1, 4))
        O = int(rng.integers(1, min(omax, M - I + 1) + 1))
        reqs.append(Request(f"r{i}", float(rng.integers(0, spread + 1)), I, O))
    return Instance(name="tiny", limits=Limits(kv_capacity=M, max_batch_tokens=M),
                    cost_model=UnitCost(), requests=tuple(reqs))


def _feasible_starts(inst: Instance):
    """Every start vector of the model (all starts < max arrival + sum O, which holds some
    optimum: an idle slot before the last start could be closed), by depth-first search."""
    I, O = inst.prompt.astype(int), inst.output.astype(int)
    e = np.ceil(inst.arrival).astype(int)
    H = int(e.max() + O.sum())
    M = inst.limits.kv_capacity
    mem = np.zeros(H + int(O.max()) + 1, int)
    starts = np.zeros(inst.n, int)

    def rec(i):
        if i == inst.n:
            yield starts.copy()
            return
        prof = I[i] + np.arange(O[i])
        for t in range(e[i], H):
            if np.all(mem[t:t + O[i]] + prof <= M):
                mem[t:t + O[i]] += prof
                starts[i] = t
                yield from rec(i + 1)
                mem[t:t + O[i]] -= prof

    yield from rec(0)


def _cut_table(lb, M: int) -> np.ndarray:
    """``tab[m, r]``: each cut's weight of type (m, r) (types the model never has weigh 0)."""
    tab = np.zeros((M + 2, M + 2, lb.weights.shape[0]))
    tm, tr = lb.types
    tab[tm, tr] = lb.weights.T
    return tab


def _check_instance(inst: Instance, most: int = 3000) -> tuple[float, float, int]:
    """(bound, optimum, cuts) after checking every cut in every slot of the feasible schedules
    (all of them, or the first ``most`` and every optimal one)."""
    sched = list(_feasible_starts(inst))
    objs = np.array([objective_of_starts(inst, "total-latency", s) for s in sched])
    opt = float(objs.min())
    ub = sched[int(np.argmin(objs))]
    hm = build(inst, "total-latency", None, HindsightParams(), ub)
    lb = root_bound(hm, deadline=None)
    if lb.weights.shape[0]:
        tab = _cut_table(lb, inst.limits.kv_capacity)
        I, O = inst.prompt.astype(int), inst.output.astype(int)
        keep = set(range(min(most, len(sched)))) | set(np.flatnonzero(objs == opt).tolist())
        for k in keep:
            s = sched[k]
            req = np.repeat(np.arange(inst.n), O)
            age = np.arange(req.size) - np.repeat(np.cumsum(O) - O, O)
            load = np.zeros((int((s + O).max()), lb.weights.shape[0]))
            np.add.at(load, s[req] + age, tab[I[req] + age, O[req] - age])
            assert np.all(load <= lb.rho + 1e-7), (inst.requests, s.tolist())
    return lb.value, opt, lb.weights.shape[0]


@pytest.mark.parametrize("seed", range(3))
def test_cuts_hold_in_every_feasible_schedule(seed):
    rng = np.random.default_rng(seed)
    cuts = 0
    for _ in range(12):
        inst = _instance(rng, int(rng.integers(3, 5)), int(rng.integers(6, 10)), 4)
        bound, opt, k = _check_instance(inst)
        assert bound <= opt + 1e-6
        cuts += k
    assert cuts > 0  # the check saw cuts, not only instances whose LP was already integral


# the slow step: 20 x 20 instances of 3-4 requests, M up to 12, outputs up to 5, arrivals spread
# over 0-2 slots (the enumeration is exhaustive: 5 requests take minutes an instance)
@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_cuts_hold_in_every_feasible_schedule_many(seed):
    rng = np.random.default_rng(1000 + seed)
    for _ in range(20):
        inst = _instance(rng, int(rng.integers(3, 5)), int(rng.integers(6, 13)), 5,
                         spread=int(rng.integers(0, 3)))
        bound, opt, _ = _check_instance(inst)
        assert bound <= opt + 1e-6


@pytest.mark.parametrize("seed", range(2))
def test_proven_optimum_is_the_enumerated_one(seed):
    rng = np.random.default_rng(50 + seed)
    for _ in range(6):
        inst = _instance(rng, int(rng.integers(3, 5)), int(rng.integers(6, 11)), 5,
                         spread=int(rng.integers(0, 3)))
        opt = min(objective_of_starts(inst, "total-latency", s) for s in _feasible_starts(inst))
        rep = solve(inst, "hindsight-ff", "total-latency",
                    options=SolveOptions(time_limit=30, threads=1, progress=False))
        assert rep.status == "optimal"
        assert rep.objective == pytest.approx(opt)


@pytest.mark.parametrize("n,seed", [(6, 0), (6, 3), (7, 1)])
def test_agrees_with_the_hindsight_ip(n, seed):
    """The online paper's family: hindsight-ff proves the optimum the hindsight IP proves (an
    independent method: branch and bound on the time-indexed IP, no (H23)-(H25))."""
    inst = online_paper_random(n, seed)
    ref = solve(inst, "hindsight", "total-latency",
                options=SolveOptions(time_limit=60, threads=1, progress=False))
    got = solve(inst, "hindsight-ff", "total-latency",
                options=SolveOptions(time_limit=60, threads=1, progress=False))
    assert ref.status == "optimal"
    assert got.status == "optimal"
    assert got.objective == pytest.approx(ref.objective)
    assert any(note.startswith("model: the online paper's hindsight IP") for note in got.notes)


def test_safe_bound_holds_for_perturbed_duals():
    """(H24a) is a bound for *any* duals of the admitted signs, not only optimal ones: perturbing
    HiGHS's duals keeps it at most the optimum (and at most the LP), and the unperturbed duals
    reproduce the LP optimum."""
    pytest.importorskip("highspy")
    from optsched.formulations.hindsight.lpbound import safe_bound
    from optsched.milp.backends.highs import _load_arrays, new_highs, run_highs

    rng = np.random.default_rng(7)
    for _ in range(4):
        inst = _instance(rng, 4, int(rng.integers(7, 10)), 4)
        sched = list(_feasible_starts(inst))
        opt = min(objective_of_starts(inst, "total-latency", s) for s in sched)
        hm = build(inst, "total-latency", None, HindsightParams(), sched[0])
        a = hm.model.arrays()
        h = new_highs()
        _load_arrays(h, a)
        h.changeColsIntegrality(a.num_vars, np.arange(a.num_vars, dtype=np.int32),
                                np.zeros(a.num_vars, dtype=np.uint8))
        run_highs(h)
        lp = h.getInfo().objective_function_value
        cap = np.full(a.num_vars, float(inst.n))
        value, _ = safe_bound(h, cap)
        assert value == pytest.approx(lp, rel=1e-6, abs=1e-5)
        duals = np.array(h.getSolution().row_dual, float)
        for _ in range(5):
            bad, _ = safe_bound(h, cap, duals + rng.normal(0, 0.3, duals.size))
            assert bad <= lp + 1e-6 and bad <= opt + 1e-6


def test_bound_stopped_at_the_deadline_is_still_a_bound():
    """(H24a) when the time is up before the LP finishes (or before any cut round): the bound
    comes from whatever duals HiGHS had, and stays at most the optimum."""
    import time

    rng = np.random.default_rng(11)
    for _ in range(4):
        inst = _instance(rng, 4, int(rng.integers(7, 10)), 4)
        sched = list(_feasible_starts(inst))
        opt = min(objective_of_starts(inst, "total-latency", s) for s in sched)
        hm = build(inst, "total-latency", None, HindsightParams(), sched[0])
        lb = root_bound(hm, deadline=time.perf_counter() - 1.0)
        assert lb.rounds <= 1 and lb.cuts == 0
        assert lb.value <= opt + 1e-6
        assert lb.rc.shape == lb.x.shape


def test_a_resolve_gets_the_time_left_not_the_time_left_minus_earlier_solves():
    """HiGHS's run clock adds up every run of one object, and ``time_limit`` is compared with it.
    The cut loop re-solves one LP round after round, so its limit must be that clock plus the
    time left: after earlier solves that together took longer than the time left, a re-solve that
    fits in the time left must still finish (with the time left as the limit it stopped at once)."""
    import time

    pytest.importorskip("highspy")
    from optsched.formulations.hindsight.lpbound import _run
    from optsched.milp.backends.highs import _load_arrays, new_highs

    inst = online_paper_random(8, 0)
    hm = build(inst, "total-latency", None, HindsightParams(),
               np.zeros(inst.n, np.int64) + np.arange(inst.n) * int(inst.output.max()))
    a = hm.model.arrays()
    h = new_highs()
    _load_arrays(h, a)
    h.changeColsIntegrality(a.num_vars, np.arange(a.num_vars, dtype=np.int32),
                            np.zeros(a.num_vars, dtype=np.uint8))
    t = time.perf_counter()
    assert _run(h, None)
    left = 5 * (time.perf_counter() - t) + 0.05  # one solve fits five times over
    while h.getRunTime() <= 2 * left:  # earlier solves together take longer than that
        h.clearSolver()
        assert _run(h, None)
    h.clearSolver()
    assert _run(h, time.perf_counter() + left)
