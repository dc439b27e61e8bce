"""Apt-Serve's per-iteration problem (Definition 1, eqs. 7-9): exact solvers agree, the greedy
as described breaks its ratio 2 when a KV cache does not fit, the repaired greedy keeps it."""

from __future__ import annotations

import random

import pytest

from optsched.oracles.aptserve import (
    HIDDEN,
    KV,
    NONE,
    VARIANTS,
    AptProblem,
    check_2approx,
    exact_bruteforce,
    exact_ip,
    greedy,
    greedy_items,
    random_problem,
    shrink,
)


def test_values_and_weights_follow_eqs_7_8():
    prob = AptProblem((10.0, 4.0), (8.0, 2.0), 0.5, 7.0)
    assert prob.value(0, KV) == 10 and prob.weight(0, KV) == 8
    assert prob.value(0, HIDDEN) == 10 - 0.5 * 8 and prob.weight(0, HIDDEN) == 4
    assert prob.value(1, NONE) == 0 and prob.weight(1, NONE) == 0
    # optimum: KV(0) does not fit with anything (8 > 7); hidden(0) 6 + KV(1) 4 = 10 at 6 memory
    assert exact_bruteforce(prob).choice == (HIDDEN, KV)


def test_marginal_gains_are_the_convex_hull():
    # p >= 2 K m: hidden item (2p/m - 2K) then the upgrade (2K), in that order
    prob = AptProblem((10.0,), (4.0,), 0.5, 10.0)
    items = greedy_items(prob)
    assert [(it.kind, it.upgrade) for it in items] == [(HIDDEN, False), (KV, True)]
    assert items[0].theta == pytest.approx(2 * 10 / 4 - 1.0) and items[1].theta == 1.0
    # p < 2 K m: one KV item p / m
    items = greedy_items(AptProblem((3.0,), (4.0,), 0.5, 10.0))
    assert [(it.kind, it.theta, it.dm) for it in items] == [(KV, 0.75, 4.0)]


def test_ip_matches_enumeration():
    pytest.importorskip("highspy")
    rng = random.Random(3)
    for _ in range(15):
        prob = random_problem(rng, 6)
        assert exact_ip(prob).value == pytest.approx(exact_bruteforce(prob).value, abs=1e-7)


def test_counterexample_kv_does_not_fit_hidden_is_filtered_out():
    # One request, p = 10, m = 10, K = 0.6, M = 6: KV needs 10 > 6; hidden needs 5 and is worth
    # 10 - 6 = 4 > 0, but 2p/m - 2K = 0.8 < p/m = 1, so the paper's refinement keeps only the KV
    # item, which never fits: greedy 0 < optimum 4 / 2.
    prob = AptProblem((10.0,), (10.0,), 0.6, 6.0)
    assert exact_bruteforce(prob).value == pytest.approx(4.0)
    assert greedy(prob).value == 0.0
    assert greedy(prob, repaired=True).value == pytest.approx(4.0)


def test_no_comparison_is_unbounded_even_when_everything_fits():
    # classic knapsack: a small dense item blocks the big one
    prob = AptProblem((2.0, 100.0), (1.0, 100.0), 10.0, 100.0)  # K large: hidden never worthwhile
    assert exact_bruteforce(prob).value == 100
    assert greedy(prob, compare=False, repaired=True).value == 2
    assert greedy(prob, repaired=True).value == 100


def test_random_check_reports_each_variant():
    st = check_2approx(trials=300, seed=1, max_requests=5)
    assert st["repaired"].violations == 0 and st["repaired"].worst_ratio >= 0.5
    assert st["paper"].violations > 0 and st["paper"].worst_ratio < 0.5
    assert st["repaired-no-comparison"].worst_ratio <= st["repaired"].worst_ratio + 1e-12


def test_shrink_gives_a_one_request_counterexample():
    prob = AptProblem((1.0, 1.0, 8.0), (3.0, 11.0, 20.0), 0.25, 10.0)
    small = shrink(prob, "paper")
    assert small.n == 1
    assert greedy(small).value < exact_bruteforce(small).value / 2


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_upgrade_never_precedes_its_hidden_item_under_rounding(variant):
    # th_h = (15 - 0.3 * 20) / 12 and th_up = 0.3 * 20 / (20 - 12) are both 0.75 exactly, but in
    # floating point th_up came out one ulp larger: the upgrade (8 units) was taken first and
    # fit the capacity 8 alone, so the greedy returned a 20-unit KV cache (found by the aptserve
    # policy's random test: "KV after the batch 56 > M = 52")
    prob = AptProblem((15.0,), (20.0,), 0.30000000000000004, 8.0, hidden_memory=(12.0,))
    items = greedy_items(prob, repaired=VARIANTS[variant]["repaired"])
    # as described: the hidden item, then its upgrade; repaired: neither fits, so no item
    assert [it.upgrade for it in items] == ([] if VARIANTS[variant]["repaired"] else [False, True])
    sel = greedy(prob, **VARIANTS[variant])
    assert sel.weight <= prob.capacity
    assert sel.choice == (NONE,)  # neither the 12-unit hidden cache nor the KV cache fits
