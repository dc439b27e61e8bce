"""Least outstanding requests (optsched/cluster/lor.py), hand-worked."""

from __future__ import annotations

from cluster_kit import engine_of, replicas

from optsched.cluster import simulate
from optsched.evaluation import evaluate


def test_lor_counts_unfinished_requests_at_the_arrival():
    # unit time, vllm, C and M roomy. a (I=2, O=10) at 0 -> "0" (tie, first engine). b (I=2,
    # O=1) at 1: "0" has a outstanding, "1" none -> "1"; b's prefill [1, 2] finishes it at 2.
    # c (O=1) at 2: "1" finished b at 2 <= 2 -> 0 outstanding against a's 1 -> "1", done at 3.
    # d at 3 -> "1" the same way. (rr would send c to "0".)
    reqs = [("a", 0, 2, 10), ("b", 1, 2, 1), ("c", 2, 2, 1), ("d", 3, 2, 1)]
    inst = replicas(reqs)
    s = simulate(inst, "vllm", "lor")
    assert engine_of(inst, s) == {"a": "0", "b": "1", "c": "1", "d": "1"}
    ev = evaluate(inst, s)
    assert ev.completion.tolist()[1:] == [2.0, 3.0, 4.0]
    assert engine_of(inst, simulate(inst, "vllm", "rr"))["c"] == "0"


def test_lor_breaks_ties_by_engine_position():
    # everything at t = 0: outstanding 0,0 -> "0"; 1,0 -> "1"; 1,1 -> "0"
    inst = replicas([("a", 0, 1, 3), ("b", 0, 1, 3), ("c", 0, 1, 3)])
    assert engine_of(inst, simulate(inst, "vllm", "lor")) == {"a": "0", "b": "1", "c": "0"}
