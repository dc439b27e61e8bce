"""Window-hull rows (``optsched.formulations.hindsight.windowcuts``) against brute force: every
row holds in every feasible schedule of small instances, rows are found where the LP is
fractional, and an integer schedule's own values are never cut off."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.cost import UnitCost
from optsched.formulations.hindsight import HindsightParams, build, objective_of_starts
from optsched.formulations.hindsight.windowcuts import columns_of, separate, window_cut
from optsched.instance import Instance, Limits, Request
from optsched.milp.backends.highs import _load_arrays, new_highs

pytest.importorskip("ortools")


def _instance(rng, n: int, M: int, omax: int) -> Instance:
    reqs = []
    for i in range(n):
        I = int(rng.integers(1, 4))
        O = int(rng.integers(1, min(omax, M - I + 1) + 1))
        reqs.append(Request(f"r{i}", 0.0, I, O))
    return Instance(name="tiny", limits=Limits(kv_capacity=M, max_batch_tokens=M),
                    cost_model=UnitCost(), requests=tuple(reqs))


def _feasible_starts(inst: Instance) -> list[np.ndarray]:
    """Every start vector with starts below sum O (some optimum is among them), depth first."""
    I, O = inst.prompt.astype(int), inst.output.astype(int)
    H = int(O.sum())
    M = inst.limits.kv_capacity
    mem = np.zeros(H + int(O.max()) + 1, int)
    starts = np.zeros(inst.n, int)
    out: list[np.ndarray] = []

    def rec(i: int) -> None:
        if i == inst.n:
            out.append(starts.copy())
            return
        prof = I[i] + np.arange(O[i])
        for t in range(H):
            if np.all(mem[t:t + O[i]] + prof <= M):
                mem[t:t + O[i]] += prof
                starts[i] = t
                rec(i + 1)
                mem[t:t + O[i]] -= prof

    rec(0)
    return out


def _lp_x(hm) -> np.ndarray:
    """The LP relaxation's values of the start columns."""
    a = hm.model.arrays()
    h = new_highs()
    _load_arrays(h, a)
    h.changeColsIntegrality(a.num_vars, np.arange(a.num_vars, dtype=np.int32),
                            np.zeros(a.num_vars, dtype=np.uint8))
    h.run()
    return np.array(h.getSolution().col_value, float)[hm.x.ids]


def _rows_hold(inst: Instance) -> int:
    """Separate every window (widths 1-3, both offsets) at the LP solution; check each row on
    every feasible schedule the model represents; return how many rows were checked."""
    sched = _feasible_starts(inst)
    objs = [objective_of_starts(inst, "total-latency", s) for s in sched]
    hm = build(inst, "total-latency", None, HindsightParams(symmetry=False),
               sched[int(np.argmin(objs))])
    cols = columns_of(hm)
    x = _lp_x(hm)
    unit_of = np.zeros(inst.n, int)
    for u, members in enumerate(hm.unit_members):
        unit_of[members] = u
    index = {(int(u), int(t)): k for k, (u, t) in enumerate(zip(cols.unit, cols.start))}
    none = cols.start.size  # starts past the model's windows use no column
    used = np.array([[index.get((int(unit_of[i]), int(t)), none) for i, t in enumerate(s)]
                     for s in sched])
    checked = 0
    for width in (1, 2, 3):
        for offset in {0, width // 2}:
            rows, covers = separate(cols, x, width, offset, None)
            assert all(c > 1 for c in covers)
            for S, a, rho in rows:
                assert float(a @ x[S]) > rho  # the row cuts off the LP's point
                weight = np.zeros(none + 1)
                weight[S] = a
                worst = weight[used].sum(axis=1).max()  # the heaviest feasible schedule
                assert worst <= rho + 1e-7, (inst.requests, width)
                checked += 1
    return checked


@pytest.mark.parametrize("seed", range(3))
def test_window_rows_hold_in_every_feasible_schedule(seed):
    rng = np.random.default_rng(300 + seed)
    checked = 0
    for _ in range(10):
        inst = _instance(rng, int(rng.integers(3, 5)), int(rng.integers(6, 10)), 4)
        checked += _rows_hold(inst)
    assert checked > 0  # the LP was fractional somewhere and a window row was checked


def test_an_integer_schedule_is_covered_by_one_pattern():
    """The values of a feasible schedule are one pattern in every window: no row."""
    rng = np.random.default_rng(7)
    inst = _instance(rng, 4, 9, 4)
    s = _feasible_starts(inst)[0]
    hm = build(inst, "total-latency", None, HindsightParams(symmetry=False), s)
    cols = columns_of(hm)
    v = hm.encode_starts(s)[hm.x.ids]
    for w0 in range(int(cols.end.max())):
        touch = cols.touching(w0, 3)
        S = touch[v[touch] > 0]
        if S.size >= 2:
            assert window_cut(cols, S, v[S]) is None


def test_two_requests_that_cannot_overlap_get_a_row():
    """Two requests whose peaks exceed M together, each half-started at slot 0: the window over
    slot 0 holds two half starts that no pattern holds together, cover number 1 -> a row with
    weight on both (x_a + x_b <= 1 up to scaling); the LP point (1/2, 1/2) is covered by the two
    one-start patterns (cover 1), so it is *not* cut, while (1, 1) is."""
    inst = Instance(name="pair", limits=Limits(kv_capacity=6, max_batch_tokens=6),
                    cost_model=UnitCost(),
                    requests=(Request("a", 0.0, 2, 3), Request("b", 0.0, 3, 2)))
    hm = build(inst, "total-latency", None, HindsightParams(symmetry=False), np.array([0, 3]))
    cols = columns_of(hm)
    S = cols.touching(0, 1)
    S = S[cols.start[S] == 0]
    assert S.size == 2
    assert window_cut(cols, S, np.array([0.5, 0.5])) is None
    cut = window_cut(cols, S, np.array([1.0, 1.0]))
    assert cut is not None
    value, a, rho = cut
    assert value == pytest.approx(2.0)
    assert a @ np.array([1.0, 0.0]) <= rho + 1e-9 and a @ np.array([0.0, 1.0]) <= rho + 1e-9
    assert a @ np.array([1.0, 1.0]) > rho
