"""Least KV load (optsched/cluster/least_kv.py), hand-worked against lor."""

from __future__ import annotations

from cluster_kit import engine_of, replicas

from optsched.cluster import simulate

# At 0 (no batch has run, KV 0 everywhere, ties on outstanding): a (I=1) -> "0", b (I=20) ->
# "1", c (I=1) -> "0". Unit time, vllm: batch [0, 1] prefills a and c on "0" (KV 2) and b on
# "1" (KV 20). d arrives at 1.5, while the batches [1, 2] run: the KV after the last batch
# that ended by 1.5 is 2 on "0" and 20 on "1" (M = 100 both): least-kv picks "0"; lor sees
# 2 outstanding on "0" against 1 on "1" and picks "1".
REQS = [("a", 0, 1, 10), ("b", 0, 20, 10), ("c", 0, 1, 10), ("d", 1.5, 1, 10)]


def test_least_kv_follows_the_kv_in_use_not_the_request_count():
    inst = replicas(REQS)
    assert engine_of(inst, simulate(inst, "vllm", "least-kv")) == \
        {"a": "0", "b": "1", "c": "0", "d": "0"}
    assert engine_of(inst, simulate(inst, "vllm", "lor"))["d"] == "1"
