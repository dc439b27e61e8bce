"""Bound ``events`` (optsched/bounds/events.py, formulations/bounds.md B14) by hand: the
ordered completion events of a pair, the busy-period split, and never below ``srpt``. Its
validity against exhaustive optima and every policy is in tests/bounds/test_every_rung.py."""

from __future__ import annotations

import pytest

from optsched.bounds import lower_bound
from optsched.bounds.events import busy_periods, event_bound, ordered_partitions
from optsched.cost import LinearCost
from optsched.instance import Instance, Limits, Request


def test_ordered_partitions_are_fubini_many():
    assert [sum(1 for _ in ordered_partitions(list(range(n)))) for n in range(5)] == [1, 1, 3, 13, 75]


def test_pair_by_hand():
    # a = (0, 1), p = (10, 1), h = 1, own = a + h + p = (11, 3). Orders:
    # {0},{1}: T1 = 11, T2 = max(12, 3, t=0: 0 + 11 + 2 = 13, t=1: 1 + 1 + 1 = 3) = 13 -> 24
    # {1},{0}: T1 = max(3, t=1: 1 + 1 + 1) = 3, T2 = max(4, 11, t=0: 0 + 11 + 2 = 13) -> 16
    # {0,1}:   T = max(11, 3, t=0: 0 + 11 + 1 = 12, t=1: 1 + 1 + 1) = 12 -> 24. Least: 16.
    assert event_bound([0.0, 1.0], [10.0, 1.0], [11.0, 3.0], 1.0) == pytest.approx(16.0)


def test_busy_periods_split_at_idle_gaps():
    # works 2 from 0 and 1 (busy until 4), then 5 (idle gap): [[0, 1], [2]]
    assert busy_periods([1.0, 0.0, 5.0], [2.0, 2.0, 2.0]) == [[1, 0], [2]]


def test_lifts_srpt_on_an_overlapping_pair():
    # batch time 1 + tokens (k0 = 1, k1 = 1): a (0, I=10), b (1, I=1). Best schedule: a's
    # chunk of 0 tokens is impossible, so either a 0-11 then b 11-13 (TTFT 11 + 12), b waits
    # to 1: b 1-3, a 3-14 (TTFT 2 + 14 = 16), or a's 1-token chunk 0-2, b 2-4, a 4-14 (3 + 14).
    # The events bound: releases 0, 1, p = (10, 1), h = 1, own (11, 3): order {b},{a}:
    # T_b = max(2, t=1: 1 + 1 + 1) = 3, T_a = max(4, 11, t=0: 0 + 11 + 2) = 13 -> 3 - 1 + 13 = 15
    # ({a},{b}: 11 + 13 - 1 = 23; together: 12 + 12 - 1 = 23), so mean TTFT >= 7.5 <= 8.
    inst = Instance(
        "hand",
        Limits(kv_capacity=40, max_batch_tokens=16),
        LinearCost(k0=1.0, k1=1.0, kpq=0.0, kpm=0.0, kdm=0.0, kpr=0.0, kdr=0.0),
        (Request("a", 0.0, 10, 1), Request("b", 1.0, 1, 1)),
    )
    ev = lower_bound(inst, "mean-ttft", "events").value
    assert ev == pytest.approx(7.5)
    assert ev >= lower_bound(inst, "mean-ttft", "srpt").value
