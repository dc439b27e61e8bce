"""The prefix-caching policies (optsched/policies/cached.py): hand-worked schedules of each
rule and cache, every schedule checked by the evaluator, and the policies without block ids."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import LinearCost, UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate

CACHED = ("vllm-apc", "sarathi-apc", "lpm", "dfs", "k-lpm", "belady")


def inst_of(reqs, M=40, C=64, b=2, cost=None):
    """``reqs``: (id, arrival, I, O, prefix ids)."""
    return Instance("c", Limits(kv_capacity=M, max_batch_tokens=C, block_size=b),
                    cost or UnitCost(), tuple(Request(*r[:4], prefix=tuple(r[4])) for r in reqs))


def rows(s):
    """The schedule as (entries, hits, drops) per batch."""
    return [(b.entries, sorted(b.hits), list(b.drop)) for b in s]


def run(inst, policy, **params):
    s = simulate(inst, policy, fast=False, **params)
    ev = evaluate(inst, s)
    assert ev.feasible, [str(v) for v in ev.violations]
    return s, ev


def test_vllm_apc_hits_the_blocks_a_finished_request_left():
    # b = 2. a (t=0): I = 5, O = 1, blocks 1, 2 (H = min(2, floor(4/2)) = 2); b (t=3): the
    # same prefix. batch 0: a computes 5 tokens and finishes; blocks 1, 2 stay cached.
    # batch 1 (idle until t = 3): b hits 4 tokens (blocks 1, 2) and computes 1 (its first
    # token); batch 2: b decodes and finishes. Nothing is dropped (M = 40 is ample).
    inst = inst_of([("a", 0, 5, 1, (1, 2)), ("b", 3, 5, 2, (1, 2))])
    s, ev = run(inst, "vllm-apc")
    assert rows(s) == [([("a", 5)], [], []), ([("b", 1)], [("b", 4)], []), ([("b", 1)], [], [])]
    assert ev.batch_start[1] == 3  # idle until b arrives
    assert ev.metrics["hit_tokens"] == 4 and ev.batch_cached_blocks.tolist() == [0, 0, 0]
    # without reuse (vllm) b computes its 5 prompt tokens, and the blocks a left are
    # dropped as soon as nobody holds them (the simulator's drops for a reuse-blind policy)
    s0, _ = run(inst, "vllm")
    assert rows(s0)[1] == ([("b", 5)], [], [2, 1])


LRU_CASE = [("a", 0, 5, 1, (1, 2)), ("c", 1, 5, 1, (3, 4)), ("d", 2, 5, 1, (5, 6))]


def test_lru_drops_the_least_recently_used_blocks_last_block_first():
    # M = 10, b = 2. batch 0: a (blocks 1, 2 + 1 private token -> 2): KV 6, a finishes;
    # its blocks are released tail first: block 2, then block 1.
    # batch 1: c needs fp(5) = 6 <= 10; cached blocks 1, 2 (4 tokens) still fit beside it
    # (KV 4 + 4 + 2 = 10): no drop. c finishes, releasing 4 then 3.
    # batch 2: d needs 6; the cached 1, 2, 3, 4 (8 tokens) leave room for 4: two blocks must
    # go, the least recently released: block 2, then block 1.
    inst = inst_of(LRU_CASE, M=10)
    s, ev = run(inst, "vllm-apc")
    assert rows(s) == [([("a", 5)], [], []), ([("c", 5)], [], []), ([("d", 5)], [], [2, 1])]
    assert ev.batch_kv.tolist() == [6, 10, 10]


def test_belady_keeps_the_blocks_a_later_request_will_hit():
    # as above, plus e (t=3) listing blocks 1, 2: their next use is e's arrival, blocks 3, 4
    # are never used again, so Belady drops 4 then 3 (LRU order among equals) and e hits 4
    # tokens in batch 3; LRU dropped 1, 2 and e computes all 5.
    case = LRU_CASE + [("e", 3, 5, 1, (1, 2))]
    inst = inst_of(case, M=10)
    s, ev = run(inst, "belady")
    assert rows(s)[2] == ([("d", 5)], [], [4, 3])
    assert rows(s)[3][:2] == ([("e", 1)], [("e", 4)])
    assert ev.metrics["hit_tokens"] == 4
    s_lru, ev_lru = run(inst, "vllm-apc")
    assert rows(s_lru)[3][:2] == ([("e", 5)], [])
    assert ev_lru.metrics["hit_tokens"] == 0
    # the cache parameter puts Belady under another order too
    s_lpm, _ = run(inst, "lpm", cache="belady")
    assert s_lpm.drop_block.tolist()[:2] == [4, 3]


# x (t=0, 6 tokens) leaves blocks 1, 2, 3 resident (it can hit only 1, 2 itself: its last
# prompt token is computed); at t = 1 arrive y (no shared block), z (blocks 1, 2: a hit of 4),
# w (1, 2, 3 of a 7-token prompt: a hit of 6), in this order. C = 6 tokens per batch.
ORDER_CASE = [("x", 0, 6, 1, (1, 2, 3)), ("y", 1, 5, 1, (4, 5)), ("z", 1, 5, 1, (1, 2)),
              ("w", 1, 7, 1, (1, 2, 3))]


def test_lpm_tries_the_longest_hit_first_and_fcfs_above_the_limit():
    # LPM tries w (hit 6, computes 1), z (hit 4, 1), then y, whose 5 tokens are chunked to
    # the 4 left of C = 6; y finishes in batch 2
    inst = inst_of(ORDER_CASE, C=6)
    s, _ = run(inst, "lpm")
    assert rows(s)[1] == ([("w", 1), ("z", 1), ("y", 4)], [("w", 6), ("z", 4)], [])
    assert rows(s)[2][0] == [("y", 1)]
    # with 3 waiting > fcfs_above = 2: arrival order, y first
    s, _ = run(inst, "lpm", fcfs_above=2)
    assert rows(s)[1][0][0] == ("y", 5)


def test_k_lpm_alternates_the_oldest_and_the_longest_match():
    # x was admission 0 (an FCFS pick). k = 2: admission 1 is an LPM pick (w, computes 1),
    # admission 2 the oldest (y, 5 tokens): 6 = C tokens, so z waits for batch 2
    inst = inst_of(ORDER_CASE, C=6)
    s, _ = run(inst, "k-lpm", k=2)
    assert rows(s)[1][0] == [("w", 1), ("y", 5)]
    assert rows(s)[2][:2] == ([("z", 1)], [("z", 4)])
    # k = 1 is FCFS: y (5) then z (1); w waits
    s, _ = run(inst, "k-lpm", k=1)
    assert rows(s)[1][0] == [("y", 5), ("z", 1)]


def test_dfs_walks_the_radix_tree_heaviest_subtree_first():
    # resident after batch 0: blocks 1, 2 (p) and 3 (q) . Waiting at t = 1, in arrival
    # order: r4 (no match: the root), r3 (match ends at block 3), r2 (ends at block 1),
    # r1 (ends at block 2, below 1). Weights: block 1 subtree 2 (r1, r2), block 3: 1.
    # DFS from the root: block 1's subtree first (block 2's r1, then 1's own r2), then
    # block 3 (r3), then the root's own r4. LPM would take r1, r3, r2, r4.
    reqs = [("p", 0, 5, 1, (1, 2)), ("q", 0, 3, 1, (3,)),
            ("r4", 1, 3, 1, (9,)), ("r3", 1, 5, 1, (3, 8)), ("r2", 1, 5, 1, (1, 7)),
            ("r1", 1, 7, 1, (1, 2, 6))]
    inst = inst_of(reqs, M=80)
    s, _ = run(inst, "dfs")
    assert [r for r, _ in rows(s)[1][0]] == ["r1", "r2", "r3", "r4"]
    s, _ = run(inst, "lpm")
    assert [r for r, _ in rows(s)[1][0]] == ["r1", "r3", "r2", "r4"]


def test_without_block_ids_each_policy_is_its_unified_configuration():
    reqs = [(f"r{k}", k * 0.5, 3 + k % 4, 1 + k % 3, ()) for k in range(12)]
    inst = inst_of(reqs, M=24, C=8, cost=LinearCost(k0=1.0, k1=0.1))
    pairs = [("vllm-apc", "vllm", {}), ("sarathi-apc", "sarathi", {}),
             ("belady", "vllm", {})]
    for cached, plain, params in pairs:
        assert simulate(inst, cached, fast=False) == simulate(inst, plain, fast=False, **params)
    for name in ("lpm", "dfs", "k-lpm"):  # FCFS order without ids: the chunked vLLM config
        s = simulate(inst, name, fast=False)
        assert evaluate(inst, s).feasible


@st.composite
def shared_instances(draw):
    """Up to 8 requests drawing their prefixes from a few shared stems (system prompts,
    conversation turns): a forest by construction."""
    b = draw(st.sampled_from([1, 2, 4]))
    stems = draw(st.integers(1, 3))
    reqs = []
    for k in range(draw(st.integers(1, 8))):
        I = draw(st.integers(1, 14))
        O = draw(st.integers(1, 4))
        stem = draw(st.integers(0, stems - 1))
        P = draw(st.integers(0, I // b))
        own = draw(st.integers(0, P))  # the last `own` blocks are the request's own
        ids = tuple(1000 * stem + p + 1 if p < P - own else 100000 + 100 * k + p
                    for p in range(P))
        reqs.append((f"q{k}", float(draw(st.integers(0, 6))), I, O, ids))
    peak = max(-(-(r[2] + r[3] - 1) // b) * b for r in reqs)
    M = draw(st.integers(peak, 3 * peak))
    C = draw(st.integers(max(b, 4), 24))
    return inst_of(reqs, M=M, C=C, b=b, cost=LinearCost(k0=0.5, k1=0.01, kpm=1e-3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_instances(), st.sampled_from(CACHED))
def test_every_cached_policy_schedule_is_feasible(inst, name):
    s = simulate(inst, name, fast=False)
    ev = evaluate(inst, s)
    assert ev.feasible, [str(v) for v in ev.violations]
    # no hit is ever claimed that the evaluator does not see, and no more than possible
    assert ev.metrics.get("hit_tokens", 0) == int(s.entry_hit.sum())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_instances(), st.sampled_from(["vllm", "sarathi", "fcfs", "mcsf", "rank-i"]))
def test_reuse_blind_policies_keep_their_times_and_drop_every_unheld_block(inst, name):
    plain = Instance(inst.name, inst.limits, inst.cost_model,
                     tuple(Request(r.id, r.arrival, r.prompt, r.output) for r in inst.requests))
    s = simulate(inst, name, fast=False)
    s0 = simulate(plain, name, fast=False)
    ev, ev0 = evaluate(inst, s), evaluate(plain, s0)
    assert ev.feasible and ev0.feasible
    assert not s.has_hits
    assert np.array_equal(ev.batch_end, ev0.batch_end)
    assert (ev.batch_kv <= ev0.batch_kv).all()
    # every block nobody holds is dropped at the next batch, and a request finishing in a
    # batch still holds its blocks in it: no block is ever cached after a batch
    if inst.has_prefix:
        assert not ev.batch_cached_blocks.any()


def test_a_reuse_aware_plan_that_breaks_a_rule_is_a_simulation_error():
    from optsched.policies.errors import SimulationError
    from optsched.policies.simulator import Plan, Policy

    class BadHit(Policy):
        reuse_aware = True

        def on_arrivals(self, idx):
            self.todo = list(idx)

        def next_batch(self):
            return Plan([0], [1], [], hits=[4])  # blocks 1, 2 are not resident

        def on_batch_end(self, plan, finished):
            pass

    inst = inst_of([("a", 0, 5, 1, (1, 2))])
    with pytest.raises(SimulationError, match="hits block 1 .position 0., which is not resident"):
        simulate(inst, BadHit())
