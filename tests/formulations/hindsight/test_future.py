"""The future-feasibility kernels (formulations/hindsight.md (H23)) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from optsched.formulations.hindsight.future import (
    NEG,
    cover_cg,
    ff_argmax,
    ff_best,
    ff_lift,
    greedy_cover,
    is_ff,
)


def _types(rng, M, n):
    """``n`` distinct types (m, r) with peak m + r - 1 <= M, sorted by r descending."""
    seen: set[tuple[int, int]] = set()
    while len(seen) < n:
        m = int(rng.integers(1, M + 1))
        seen.add((m, int(rng.integers(1, M - m + 2))))
    ts = sorted(seen, key=lambda t: -t[1])
    return np.array([t[0] for t in ts]), np.array([t[1] for t in ts])


def _multisets(m, r, M):
    """Every FF multiset (copies per type) by enumeration with (H23a) checked slot by slot."""
    caps = [M // int(x) for x in m]
    for mult in itertools.product(*(range(c + 1) for c in caps)):
        if sum(k * int(x) for k, x in zip(mult, m)) > M:
            continue
        mm = np.repeat(m, mult)
        rr = np.repeat(r, mult)
        if is_ff(mm, rr, M):
            yield np.array(mult)


def test_is_ff_by_hand():
    # two requests of 3 tokens with 5 slots left: at d = 4 they hold 2 * (3 + 4) = 14
    assert is_ff([3, 3], [5, 5], 14) and not is_ff([3, 3], [5, 5], 13)
    # a young request beside one about to finish: only its own future counts after d = 0
    assert is_ff([10, 2], [1, 9], 12) and not is_ff([10, 2], [1, 9], 11)
    assert is_ff([2], [9], 10) and not is_ff([2], [10], 10)


@pytest.mark.parametrize("seed", range(6))
def test_dp_equals_enumeration(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        M = int(rng.integers(4, 13))
        m, r = _types(rng, M, int(rng.integers(1, 4)))
        w = rng.random(m.size)
        sets = list(_multisets(m, r, M))
        best = max(float(s @ w) for s in sets)
        assert ff_best(m, r, w, M, -1) == pytest.approx(best)
        val, mult = ff_argmax(m, r, w, M)
        assert val == pytest.approx(best)
        assert float(mult @ w) == pytest.approx(best)
        assert is_ff(np.repeat(m, mult), np.repeat(r, mult), M)
        for f in range(m.size):
            forced = [float(s @ w) - w[f] for s in sets if s[f] > 0]
            got = ff_best(m, r, w, M, f)
            assert got == pytest.approx(max(forced)) if forced else got == NEG


@pytest.mark.parametrize("seed", range(4))
def test_lifted_weights_keep_the_maximum(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(30):
        M = int(rng.integers(5, 13))
        m, r = _types(rng, M, int(rng.integers(2, 5)))
        w = np.where(rng.random(m.size) < 0.5, rng.random(m.size), 0.0)
        rhs = max(1.0, ff_best(m, r, w, M, -1))
        lifted = ff_lift(m, r, w, M, rhs)
        assert np.all(lifted >= w)
        sets = list(_multisets(m, r, M))
        assert max(float(s @ lifted) for s in sets) <= rhs + 1e-9
        # maximal: raising any lifted weight by 1% breaks the bound
        for j in np.flatnonzero(lifted > w):
            up = lifted.copy()
            up[j] *= 1.01
            assert max(float(s @ up) for s in sets) > rhs + 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_cover_number_and_its_dual(seed):
    """The cover number equals the LP over all enumerated FF multisets (solved by HiGHS), the
    dual weights are feasible (every FF multiset weighs <= 1 after pricing) and the greedy
    cover is an upper bound."""
    highspy = pytest.importorskip("highspy")
    rng = np.random.default_rng(200 + seed)
    for _ in range(25):
        M = int(rng.integers(5, 12))
        m, r = _types(rng, M, int(rng.integers(2, 5)))
        y = rng.random(m.size) * rng.random() * 2
        sets = [s for s in _multisets(m, r, M) if s.any()]
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        inf = highspy.kHighsInf
        h.addRows(m.size, y, np.full(m.size, inf), 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
                  np.zeros(0))
        for s in sets:
            idx = np.flatnonzero(s).astype(np.int32)
            h.addCol(1.0, 0.0, inf, idx.size, idx, s[idx].astype(float))
        h.run()
        exact = h.getInfo().objective_function_value
        val, w, best, _ = cover_cg(m, r, y, M, np.eye(m.size, dtype=np.int64), 200)
        if exact > 1 + 1e-6:
            assert val == pytest.approx(exact, rel=1e-7)
            assert best <= 1 + 1e-7
            assert float(w @ y) == pytest.approx(exact, rel=1e-7)
        else:
            assert val <= 1 + 1e-9
        _, total = greedy_cover(m, r, y, M, 200)
        assert total >= exact - 1e-9
