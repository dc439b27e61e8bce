"""The evaluator's prefix-reuse rules (docs/semantics.md section 6, "Prefix reuse"): one
hand-worked replay per rule, one test per violation code, the metrics, and a property test
against a deliberately naive batch-by-batch replay written from the doc (below)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import LinearCost, UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule


def inst_of(reqs, M=64, C=4096, b=4, cost=None):
    """``reqs``: (id, arrival, I, O, prefix ids)."""
    return Instance("p", Limits(kv_capacity=M, max_batch_tokens=C, block_size=b),
                    cost or UnitCost(), tuple(Request(*r[:4], prefix=tuple(r[4])) for r in reqs))


def sched(*batches):
    return Schedule.from_batches(batches)


def codes(ev):
    return sorted({v.code for v in ev.violations})


# a: I = 10, O = 2, blocks (1, 2) of b = 4 tokens (8 tokens; 2 private in the partial block)
# b: the same prompt prefix; H = min(2, floor(9 / 4)) = 2 shareable blocks for both
AB = [("a", 0, 10, 2, (1, 2)), ("b", 0, 10, 2, (1, 2))]


# --- hand-worked replays -------------------------------------------------------------------


def test_shared_blocks_count_once_and_a_hit_computes_nothing():
    # batch 0: a computes 10 tokens: holds blocks 1, 2 (f = min(2, 10 // 4) = 2), private
    #   10 - 8 = 2 -> one block of 4; KV = 4 * 2 + 4 = 12; a generates its first token
    # batch 1: a decodes (m = 11, private 3 -> 4; g = 2 = O, finishes); b hits 8 tokens
    #   (blocks 1, 2 resident) and computes 2 (m = 10, private 2 -> 4, first token);
    #   KV = 8 + 4 + 4 = 16 (without sharing it would be 12 + 12 = 24)
    # batch 2: b decodes and finishes; a's blocks are held by b; KV = 8 + 4 = 12
    # batch 3: nobody holds blocks 1, 2 (cached); dropping both takes no time; KV 0
    inst = inst_of(AB)
    ev = evaluate(inst, sched(
        {"entries": [["a", 10]]},
        {"entries": [["a", 1], ["b", 2]], "hits": [["b", 8]]},
        {"entries": [["b", 1]]},
        {"entries": [], "drop": [2, 1]}))
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [12, 16, 12, 0]
    assert ev.batch_resident_blocks.tolist() == [2, 2, 2, 0]
    assert ev.batch_cached_blocks.tolist() == [0, 0, 0, 0]
    assert ev.entry_cached.tolist() == [0, 10, 8, 10]  # b's entry: 8 hit tokens are context
    assert ev.entry_decode.tolist() == [False, True, False, True]
    assert ev.batch_prefill_tokens.tolist() == [10, 2, 0, 0]  # hits are not processed
    assert ev.hit_tokens.tolist() == [0, 8]
    assert ev.metrics["makespan"] == 3  # the drop-only batch takes no time
    assert ev.metrics["hit_tokens"] == 8 and ev.metrics["prefill_tokens"] == 12
    assert ev.metrics["hit_rate"] == pytest.approx(8 / 20)
    assert ev.metrics["dropped_blocks"] == 2
    assert ev.metrics["peak_resident_blocks"] == 2 and ev.metrics["peak_cached_blocks"] == 0
    assert ev.metrics["peak_kv"] == 16


def test_finished_requests_leave_cached_blocks_that_count_until_dropped():
    # a alone (M = 12): batch 0 prefill (KV 12), batch 1 decode, a finishes (KV 8 + 4 = 12);
    # after it blocks 1, 2 are cached: 8 tokens of KV that nobody holds
    inst = inst_of(AB[:1] + [("c", 0, 4, 1, ())], M=12)
    kept = evaluate(inst, sched(([("a", 10)],), ([("a", 1)],), ([("c", 4)],)))
    # batch 2: c (4 private tokens) next to the 8 cached ones: 12 <= 12, fits
    assert kept.feasible and kept.batch_kv.tolist() == [12, 12, 12]
    assert kept.batch_cached_blocks.tolist() == [0, 0, 2]
    inst5 = inst_of(AB[:1] + [("c", 0, 5, 1, ())], M=12)
    # c with 5 tokens (8 in blocks) does not fit next to them, unless a block is dropped
    over = evaluate(inst5, sched(([("a", 10)],), ([("a", 1)],), ([("c", 5)],)))
    assert codes(over) == ["KV_OVERFLOW"] and over.batch_kv.tolist() == [12, 12, 16]
    fits = evaluate(inst5, sched(([("a", 10)],), ([("a", 1)],), {"entries": [["c", 5]], "drop": [2]}))
    assert fits.feasible and fits.batch_kv.tolist() == [12, 12, 12]


def test_an_evicted_request_keeps_its_blocks_cached_and_hits_them_on_refill():
    # a computes 10 (blocks 1, 2), is evicted in batch 1 (private tokens freed, blocks stay
    # cached: KV 8), then refills with a hit of 8 and 2 computed tokens (first token, m = 10)
    inst = inst_of(AB[:1], cost=LinearCost(k0=1.0, k1=0.1, kpm=0.01))
    ev = evaluate(inst, sched(([("a", 10)],), ([], ["a"]), {"entries": [["a", 2]], "hits": [["a", 8]]},
                              ([("a", 1)],)))
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [12, 8, 12, 12]
    assert ev.batch_cached_blocks.tolist() == [0, 2, 0, 0]
    assert ev.metrics["recomputed_tokens"] == 10  # the m thrown away (hits included later)
    # batch 2 costs k0 + k1 * 2 + kpm * 2 * 8: two computed tokens after 8 hit tokens
    assert ev.batch_duration[2] == pytest.approx(1.0 + 0.2 + 0.01 * 16)
    # batch 0: k0 + k1 * 10 (no cached context)
    assert ev.batch_duration[0] == pytest.approx(2.0)


def test_two_requests_completing_one_block_in_one_batch_leave_one_copy():
    # a and b compute their 10 tokens in the same batch: blocks 1, 2 once, two private blocks
    inst = inst_of(AB)
    ev = evaluate(inst, sched(([("a", 10), ("b", 10)],), ([("a", 1), ("b", 1)],)))
    assert ev.feasible and ev.batch_kv.tolist() == [16, 16]
    assert ev.batch_resident_blocks.tolist() == [2, 2]


def test_a_hit_can_start_at_a_later_block_boundary():
    # b computes its first block itself (m = 4), then hits block 2 (computed by a) from m = 4
    inst = inst_of(AB)
    ev = evaluate(inst, sched(([("a", 10), ("b", 4)],),
                              {"entries": [["b", 2]], "hits": [["b", 4]]}, ([("a", 1), ("b", 1)],)))
    assert ev.feasible, ev.violations
    assert ev.entry_cached.tolist() == [0, 0, 8, 10, 10]
    assert ev.hit_tokens.tolist() == [0, 4]


def test_without_block_ids_nothing_changes():
    plain = Instance("p", Limits(64, 4096, block_size=4), UnitCost(),
                     (Request("a", 0, 10, 2), Request("b", 0, 10, 2)))
    s = sched(([("a", 10), ("b", 10)],), ([("a", 1), ("b", 1)],))
    ev = evaluate(plain, s)
    assert ev.batch_kv.tolist() == [24, 24]
    assert "hit_tokens" not in ev.metrics and ev.hit_tokens.size == 0
    assert "hit_tokens" not in ev.to_dict()["requests"][0]


def test_reuse_blind_schedule_with_drops_prices_like_the_instance_without_ids():
    # no hits, every unheld block dropped: the same batch times as without ids, memory <=
    cost = LinearCost(k0=1.0, k1=0.1, kpq=1e-3, kpm=2e-3, kdm=1e-2)
    inst = inst_of(AB, cost=cost)
    plain = Instance("p", inst.limits, cost, tuple(Request(*r[:4]) for r in AB))
    rows = [([("a", 10)],), ([("a", 1), ("b", 10)],), {"entries": [["b", 1]]}]
    ev, ev0 = evaluate(inst, sched(*rows)), evaluate(plain, sched(*rows))
    assert ev.feasible and ev0.feasible
    assert ev.batch_end.tolist() == ev0.batch_end.tolist()
    assert (ev.batch_kv <= ev0.batch_kv).all()


# --- one test per violation code -------------------------------------------------------------


def test_hit_invalid():
    inst = inst_of(AB)
    run = ([("a", 10)],)
    # misaligned: a hit of 6 tokens is not whole blocks of 4
    ev = evaluate(inst, sched(run, {"entries": [["b", 2]], "hits": [["b", 6]]}))
    assert "HIT_INVALID" in codes(ev)
    v = [x for x in ev.violations if x.code == "HIT_INVALID"][0]
    assert (v.batch, v.request) == (1, "b") and "2 shareable blocks (8 tokens)" in v.message
    # from a cached-token count that is not a block boundary (b holds 1 token)
    ev = evaluate(inst, sched(run, ([("b", 1)],), {"entries": [["b", 1]], "hits": [["b", 4]]}))
    assert "HIT_INVALID" in codes(ev)
    # c: I = 8 = two full blocks, but a prefill computes the last prompt token, so only
    # H = floor(7 / 4) = 1 block is shareable, also on a refill (S = 9 after one token):
    # batch 1 computes c's 8 tokens (first token), batch 2 evicts it, batch 3 hits both
    # blocks and computes the generated token -- a valid token count, an invalid hit
    inst = inst_of(AB[:1] + [("c", 0, 8, 2, (1, 2)), ("d", 0, 9, 1, ())])
    ev = evaluate(inst, sched(([("a", 10)],), ([("a", 1), ("c", 8)],), ([], ["c"]),
                              {"entries": [["c", 1], ["d", 9]], "hits": [["c", 8]]}))
    assert codes(ev) == ["HIT_INVALID"]
    v = ev.violations[0]
    assert (v.batch, v.request) == (3, "c") and "1 shareable blocks (4 tokens)" in v.message
    # d lists no blocks: nothing to hit
    ev = evaluate(inst, sched(([("a", 10)],), {"entries": [["d", 1]], "hits": [["d", 4]]}))
    assert "HIT_INVALID" in codes(ev)


def test_hit_not_resident():
    inst = inst_of(AB)
    # block 1 is computed by a in the same batch: not yet resident for b's hit
    ev = evaluate(inst, sched({"entries": [["a", 10], ["b", 2]], "hits": [["b", 8]]},
                              ([("a", 1), ("b", 1)],)))
    assert codes(ev) == ["HIT_NOT_RESIDENT"]
    v = ev.violations[0]
    assert (v.batch, v.request) == (0, "b")
    assert "block 1 (position 0) and 1 more" in v.message
    # applied as given: b's state is the hit's, and it finishes
    assert ev.metrics["finished"] == 2
    # a block dropped earlier in the batch is not resident either
    ev = evaluate(inst, sched(([("a", 10)],), ([("a", 1)],),
                              {"entries": [["b", 2]], "hits": [["b", 8]], "drop": [2]},
                              ([("b", 1)],)))
    assert codes(ev) == ["HIT_NOT_RESIDENT"] and "block 2 (position 1)" in ev.violations[0].message


def test_duplicate_drop():
    inst = inst_of(AB[:1])
    ev = evaluate(inst, sched(([("a", 10)],), ([("a", 1)],), {"entries": [], "drop": [1, 1]}))
    assert codes(ev) == ["DUPLICATE_DROP"] and ev.violations[0].batch == 2
    assert ev.metrics["dropped_blocks"] == 1


def test_drop_not_resident():
    inst = inst_of(AB[:1])
    ev = evaluate(inst, sched({"entries": [["a", 10]], "drop": [1]}, ([("a", 1)],),
                              {"entries": [], "drop": [77]}))
    assert codes(ev) == ["DROP_NOT_RESIDENT"]
    assert [v.batch for v in ev.violations] == [0, 2]
    assert "no request lists it" in ev.violations[1].message


def test_drop_referenced():
    inst = inst_of(AB[:1])
    ev = evaluate(inst, sched(([("a", 10)],), {"entries": [["a", 1]], "drop": [1]}))
    assert codes(ev) == ["DROP_REFERENCED"] and ev.violations[0].batch == 1
    # ignored: the block stays resident
    assert ev.batch_resident_blocks.tolist() == [2, 2]
    # an eviction in the same batch releases the hold first (rule order: evict, then drop)
    ev = evaluate(inst, sched(([("a", 10)],), {"entries": [], "evict": ["a"], "drop": [1, 2]},
                              ([("a", 10)],), ([("a", 1)],)))
    assert ev.feasible and ev.batch_resident_blocks.tolist() == [2, 0, 2, 2]


def test_tokens_over_available_after_a_hit():
    inst = inst_of(AB)
    ev = evaluate(inst, sched(([("a", 10)],), {"entries": [["b", 3]], "hits": [["b", 8]]}))
    assert "TOKENS_OVER_AVAILABLE" in codes(ev)
    v = [x for x in ev.violations if x.code == "TOKENS_OVER_AVAILABLE"][0]
    assert "after a hit of 8" in v.message and "only 2 are available" in v.message


# --- the format -----------------------------------------------------------------------------


def test_hits_and_drops_round_trip_json_and_npz(tmp_path):
    s = sched(([("a", 10)],), {"entries": [["a", 1], ["b", 2]], "hits": [["b", 8]], "drop": [5]},
              {"entries": [], "drop": [2, 1]})
    assert s.has_hits and s.has_drops
    assert Schedule.from_dict(s.to_dict()) == s
    assert s.to_dict()["batches"][1] == {"entries": [["a", 1], ["b", 2]], "hits": [["b", 8]],
                                        "drop": [5]}
    for name in ("s.json", "s.npz"):
        s.save(tmp_path / name)
        back = Schedule.load(tmp_path / name)
        assert back == s and back.entry_hit.tolist() == [0, 0, 8]
        assert back.drop_block.tolist() == [5, 2, 1]
    assert s.without_starts().entry_hit.tolist() == [0, 0, 8]
    other = sched(([("a", 10)],), {"entries": [["a", 1], ["b", 2]], "drop": [5]},
                  {"entries": [], "drop": [2, 1]})
    assert other != s  # the hit is part of the schedule


@pytest.mark.parametrize("batch, message", [
    ({"entries": [["a", 1]], "hits": [["b", 4]]}, "hit for request 'b', which has no entry"),
    ({"entries": [["a", 1]], "hits": [["a", 4], ["a", 4]]}, "two hits for request 'a'"),
    ({"entries": [["a", 1]], "hits": [["a", -4]]}, "must be >= 0 tokens"),
    ({"entries": [["a", 1]], "drop": [-1]}, "block id must be an integer"),
    ({"entries": [["a", 1]], "drop": "x"}, "'drop' must be a list"),
])
def test_malformed_hits_and_drops_are_format_errors(batch, message):
    from optsched.errors import ScheduleFormatError

    with pytest.raises(ScheduleFormatError, match=message):
        Schedule.from_batches([batch])


# --- property: the evaluator against a naive replay of the doc -------------------------------


@st.composite
def prefix_instances(draw, roomy=False):
    """Up to 5 requests whose block ids come from a small random trie (ids shared by
    construction: the id of a block is its path of branch choices); ``roomy``: memory for
    everything at once."""
    b = draw(st.sampled_from([1, 2, 4]))
    n = draw(st.integers(1, 5))
    paths: dict[tuple[int, ...], int] = {}
    reqs = []
    for k in range(n):
        I = draw(st.integers(1, 12))
        O = draw(st.integers(1, 4))
        P = draw(st.integers(0, I // b))
        choice = tuple(draw(st.lists(st.integers(0, 1), min_size=P, max_size=P)))
        ids = tuple(paths.setdefault(choice[:p + 1], len(paths) + 100) for p in range(P))
        reqs.append(Request(f"q{k}", 0.0, I, O, prefix=ids))
    peak = max(-(-(r.prompt + r.output - 1) // b) * b for r in reqs)
    M = 100 * peak if roomy else draw(st.integers(peak, 3 * peak))
    return Instance("hyp", Limits(M, 10_000, block_size=b), UnitCost(), tuple(reqs))


class Naive:
    """The rules of "Prefix reuse", batch by batch, state recomputed from scratch."""

    def __init__(self, inst: Instance):
        self.inst = inst
        self.b = inst.limits.block_size
        self.S = [r.prompt for r in inst.requests]
        self.m = [0] * inst.n
        self.g = [0] * inst.n
        self.done = [False] * inst.n
        self.R: set[int] = set()
        self.codes: set[str] = set()
        self.kv: list[int] = []
        self.res: list[int] = []
        self.cached: list[int] = []
        self.hits = [0] * inst.n

    def held(self, i: int) -> set[int]:
        r = self.inst.requests[i]
        return set(r.prefix[:min(len(r.prefix), self.m[i] // self.b)])

    def shareable(self, i: int) -> int:
        r = self.inst.requests[i]
        return min(len(r.prefix), (r.prompt - 1) // self.b)

    def batch(self, entries, hits, evict, drop) -> None:
        b = self.b
        for i in evict:
            self.m[i] = 0
        holders = set().union(*(self.held(i) for i in range(self.inst.n))) if self.inst.n else set()
        seen: set[int] = set()
        for x in drop:
            if x in seen:
                self.codes.add("DUPLICATE_DROP")
            elif x not in self.R:
                self.codes.add("DROP_NOT_RESIDENT")
            elif x in holders:
                self.codes.add("DROP_REFERENCED")
            else:
                self.R.discard(x)
            seen.add(x)
        before = set(self.R)
        for i, c in entries:
            h = hits.get(i, 0)
            r = self.inst.requests[i]
            if h:
                m0, m1 = self.m[i], self.m[i] + h
                if m0 % b or h % b or m1 > self.shareable(i) * b:
                    self.codes.add("HIT_INVALID")
                covered = r.prefix[min(len(r.prefix), m0 // b):min(len(r.prefix), m1 // b)]
                if any(x not in before for x in covered):
                    self.codes.add("HIT_NOT_RESIDENT")
            self.hits[i] += h
            self.m[i] += h + c
            self.R |= self.held(i)
        finishing = []
        for i, _ in entries:
            if self.m[i] == self.S[i]:
                self.g[i] += 1
                self.S[i] += 1
                if self.g[i] == self.inst.requests[i].output:
                    finishing.append(i)
        holding = [i for i in range(self.inst.n) if not self.done[i]]
        priv = sum(-(-(self.m[i] - b * len(self.held(i))) // b) * b for i in holding)
        self.kv.append(b * len(self.R) + priv)
        held = set().union(*(self.held(i) for i in holding)) if holding else set()
        self.res.append(len(self.R))
        self.cached.append(len(self.R - held))
        if self.kv[-1] > self.inst.limits.kv_capacity:
            self.codes.add("KV_OVERFLOW")
        for i in finishing:
            self.done[i] = True
            self.m[i] = 0


def _random_run(data, inst: Instance, messy: bool) -> tuple[Schedule, Naive]:
    """Random batches applied to the naive replay: ``messy`` ones with invalid hits and drops
    among the valid ones, else valid hits and drops only (and every request in every other
    batch, so most runs finish)."""
    nv = Naive(inst)
    b = inst.limits.block_size
    rows = []
    for _ in range(30):
        live = [i for i in range(inst.n) if not nv.done[i]]
        if not live:
            break
        chosen = live if not messy and len(rows) % 2 else data.draw(
            st.lists(st.sampled_from(live), unique=True, min_size=0, max_size=len(live)))
        entries, hits = [], {}
        for i in chosen:
            r = inst.requests[i]
            if nv.m[i] % b == 0 and (not messy or data.draw(st.integers(0, 3)) == 0):
                k = nv.m[i] // b
                run = 0
                while k + run < nv.shareable(i) and r.prefix[k + run] in nv.R:
                    run += 1
                h = data.draw(st.sampled_from([run * b, (run + 1) * b, b // 2 or 1])
                              if messy else st.just(run * b))
                if 1 <= nv.S[i] - nv.m[i] - h:
                    hits[i] = h
            room = nv.S[i] - nv.m[i] - hits.get(i, 0)
            entries.append((i, data.draw(st.integers(1, room))))
        evict = [i for i in live if i not in chosen and nv.m[i] > 0
                 and data.draw(st.integers(0, 9)) == 0]
        if messy:
            pool = sorted(nv.R) + [99999]
        else:  # cached blocks: resident, held by nobody after the evictions
            m_after_evict = [0 if i in evict else nv.m[i] for i in range(inst.n)]
            held = {x for i in range(inst.n) if not nv.done[i] for x in
                    inst.requests[i].prefix[:min(len(inst.requests[i].prefix),
                                                 m_after_evict[i] // b)]}
            pool = sorted(nv.R - held)
        drop = data.draw(st.lists(st.sampled_from(pool), max_size=3, unique=not messy)
                         if pool else st.just([]))
        nv.batch(entries, hits, evict, drop)
        ids = inst.ids
        rows.append({"entries": [[ids[i], c] for i, c in entries],
                     "hits": [[ids[i], h] for i, h in hits.items() if h],
                     "evict": [ids[i] for i in evict], "drop": drop})
    if not all(nv.done):
        nv.codes.add("INCOMPLETE")
    return Schedule.from_batches(rows), nv


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_evaluator_agrees_with_a_naive_replay(data):
    messy = data.draw(st.booleans())
    inst = data.draw(prefix_instances(roomy=not messy))
    s, nv = _random_run(data, inst, messy)
    ev = evaluate(inst, s)
    assert set(ev.violation_counts) == nv.codes
    assert ev.batch_kv.tolist() == nv.kv
    if inst.has_prefix or s.has_hits or s.has_drops:
        assert ev.batch_resident_blocks.tolist() == nv.res
        assert ev.batch_cached_blocks.tolist() == nv.cached
        assert ev.hit_tokens.tolist() == nv.hits
    else:  # no block anywhere: the evaluation of before, without the reuse arrays
        assert ev.hit_tokens.size == 0 and not any(nv.res) and "hit_tokens" not in ev.metrics
    assert ev.metrics["finished"] == sum(nv.done)
    if ev.feasible:
        assert math.isfinite(ev.metrics["makespan"])
        # every token of the prompts and outputs is computed once or hit, plus refills
        computed = int(s.entry_tokens.sum())
        assert computed + ev.metrics.get("hit_tokens", 0) == int(
            (inst.prompt + inst.output - 1).sum()) + ev.metrics["recomputed_tokens"]


def test_every_prefix_code_is_reached_by_the_naive_generator_too():
    """The property test above can fail on each of the reuse codes (it is not vacuous): one
    schedule per code, built as the generator builds them, is told apart by the naive replay."""
    inst = inst_of(AB)
    for rows, code in (
        ([{"entries": [["a", 10], ["b", 2]], "hits": [["b", 8]]}], "HIT_NOT_RESIDENT"),
        ([{"entries": [["a", 10]]}, {"entries": [["b", 2]], "hits": [["b", 6]]}], "HIT_INVALID"),
        ([{"entries": [["a", 10]], "drop": [1]}], "DROP_NOT_RESIDENT"),
        ([{"entries": [["a", 10]]}, {"entries": [["a", 1]], "drop": [1]}], "DROP_REFERENCED"),
        ([{"entries": [["a", 10]]}, {"entries": [["a", 1]]}, {"entries": [], "drop": [1, 1]}],
         "DUPLICATE_DROP"),
    ):
        nv = Naive(inst)
        idx = inst.index
        for row in rows:
            nv.batch([(idx[r], c) for r, c in row["entries"]],
                     {idx[r]: h for r, h in row.get("hits", [])}, [], row.get("drop", []))
        assert code in nv.codes
        assert code in evaluate(inst, Schedule.from_batches(rows)).violation_counts


def test_numpy_ids_are_accepted():
    inst = Instance("p", Limits(64, 4096, block_size=4), UnitCost(),
                    (Request("a", 0, 10, 2, prefix=np.array([1, 2])),))
    assert inst.requests[0].prefix == (1, 2)


# --- the compiled replay (optsched.evaluation.fast.replay_prefix) --------------------------------

FIELDS = ("first_token", "completion", "latency", "ttft", "tpot", "evictions",
          "recomputed_tokens", "batch_start", "batch_end", "batch_duration", "batch_kv",
          "batch_tokens", "batch_prefill_tokens", "batch_prefill_entries",
          "batch_decode_entries", "entry_decode", "entry_cached", "entry_generates",
          "hit_tokens", "batch_resident_blocks", "batch_cached_blocks")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_compiled_replay_answers_exactly_for_the_feasible_schedules(data):
    from optsched.evaluation import evaluator as E

    messy = data.draw(st.booleans())
    inst = data.draw(prefix_instances(roomy=not messy))
    inst = Instance(inst.name, inst.limits, LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-3,
                                                       kdm=1e-3, kpr=0.05, kdr=0.02),
                    inst.requests)
    s, _ = _random_run(data, inst, messy)
    ref = evaluate(inst, s)  # vectorised (few entries)
    got = E._compiled(inst, s)
    assert (got is not None) == ref.feasible
    if got is None:
        return
    assert got.metrics == ref.metrics
    for f in FIELDS:
        x, y = getattr(got, f), getattr(ref, f)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f


# --- the command line: violations exit 1, bad block ids exit 2 ---------------------------------


def test_cli_reports_reuse_violations_and_refuses_bad_ids(tmp_path, capsys):
    import json

    from optsched.cli import main

    inst = inst_of(AB)
    ip = tmp_path / "i.json"
    inst.save(ip)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"batches": [
        {"entries": [["a", 10], ["b", 2]], "hits": [["b", 8]]},
        {"entries": [["a", 1], ["b", 1]], "drop": [1]}]}))
    assert main(["validate", str(ip), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "HIT_NOT_RESIDENT (batch 0, request 'b'): hit covers block 1" in out
    assert "DROP_REFERENCED (batch 1): drops block 1, which 2 request(s) hold" in out
    good = tmp_path / "good.json"
    assert main(["simulate", str(ip), "--policy", "vllm-apc", "-o", str(good)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(ip), str(good)]) == 0
    assert "prefix hit tokens" in capsys.readouterr().out
    d = inst.to_dict()
    d["requests"][1]["prefix"] = [2, 3]
    ip.write_text(json.dumps(d))
    assert main(["info", str(ip)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "request 'b': field 'prefix' is not prefix-consistent: block 2" in err
