"""The UnifiedScheduler policies (optsched/policies/unified.py: the vLLM family, SARATHI, FCFS, the
ranking policies, InferMax), hand-worked on tiny instances."""

from __future__ import annotations

import warnings

import pytest
from handworked import E, batches, unit_instance
from paths import GOOD

from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate


def test_vllm_says_when_it_must_chunk_a_prompt(capsys):
    """Before: ``vllm`` (no chunked prefill) chunked a prompt longer than C in silence."""
    inst = Instance("long", Limits(64, 8), UnitCost(), (Request("a", 0.0, 20, 2),))
    with pytest.warns(UserWarning, match="vllm: 1 prompt.* longer than max_batch_tokens C = 8"):
        simulate(inst, "vllm")
    f = GOOD.parent / "arrivals-unit-3.json"  # C = 8 there; prompts of 2 fit: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        simulate(Instance.load(f), "vllm")


# -- vLLM: prefill priority, no hybrid batching ---------------------------------------------
VLLM_INST = [("a", 0, 4, 3), ("b", 1, 2, 2)]


def test_vllm_prefill_priority():
    i = unit_instance(VLLM_INST)
    got, ev = batches(i, simulate(i, "vllm"))
    assert got == [
        E(("a", 4)),              # t=0: only a has arrived; prefill a -> a: 4/5/1
        E(("b", 2)),              # t=1: b waiting -> prefill first, a's decode must wait
        E(("a", 1), ("b", 1)),    # t=2: no waiting: decodes; b: 3/4/2 finished
        E(("a", 1)),              # t=3: a: 6/7/3 finished
    ]
    assert ev.metrics["makespan"] == 4


def test_sarathi_decode_priority_on_same_instance():
    i = unit_instance(VLLM_INST)
    got, _ = batches(i, simulate(i, "sarathi"))
    assert got == [
        E(("a", 4)),
        E(("a", 1), ("b", 2)),    # decode a first, then b's prefill joins (hybrid)
        E(("a", 1), ("b", 1)),    # a: g=3 finished, b: g=2 finished
    ]


# -- SARATHI: chunked prefill and hybrid batches ----------------------------------------
def test_sarathi_chunking_hybrid():
    # C = 6, P = 4 (instance), a: I=3 O=3, b: I=7 O=2, both at 0.
    i = unit_instance([("a", 0, 3, 3), ("b", 0, 7, 2)], C=6, P=4)
    got, _ = batches(i, simulate(i, "sarathi"))
    assert got == [
        E(("a", 3), ("b", 1)),   # R_w: a whole (3 <= P), b chunked to P - 3 = 1
        E(("a", 1), ("b", 4)),   # decode a; R_r^p: b chunk min(C-1, P) = 4 -> b: 5/7/0
        E(("a", 1), ("b", 2)),   # a finished (g=3); b completes its prefill -> g=1
        E(("b", 1)),             # b: g=2 finished
    ]


def test_vllm_long_prompt_is_chunked_even_without_chunked_prefill():
    # I = 9 > C = 4: vLLM could never run it whole; it is chunked (documented choice)
    i = unit_instance([("a", 0, 9, 2)], C=4)
    got, _ = batches(i, simulate(i, "vllm"))
    assert got == [E(("a", 4)), E(("a", 4)), E(("a", 1)), E(("a", 1))]


# -- eviction and refill ----------------------------------------------------------------------
@pytest.mark.parametrize("M", [6, 7])
def test_vllm_eviction_and_refill(M):
    # a, b: I=2 O=4 (peak 5 each), both at 0.
    # b0: prefill a, b (reserve S=2 each; used 4)          a,b: 2/3/1
    # b1: decodes a, b (used 6 <= M)                       a,b: 3/4/2
    # b2: M=6: a needs 1 more (7 > 6): evict the lowest-priority running b, then a fits.
    #     M=7: a fits (7); b does not (8 > 7) and nobody ranks lower: b self-evicts.
    #     Either way: E={b}, a: 4/5/3, b: 0/4/2
    # b3: R_w: b's refill needs S=4 (4 + 4 > M): skip; decode a -> a: 5/6/4 finished
    # b4: refill b: 4 tokens -> b: 4/5/3
    # b5: decode b -> finished
    i = unit_instance([("a", 0, 2, 4), ("b", 0, 2, 4)], M=M)
    got, ev = batches(i, simulate(i, "vllm"))
    assert got == [
        E(("a", 2), ("b", 2)),
        E(("a", 1), ("b", 1)),
        E(("a", 1), evict=["b"]),
        E(("a", 1)),
        E(("b", 4)),
        E(("b", 1)),
    ]
    assert ev.metrics["evictions"] == 1
    assert ev.metrics["recomputed_tokens"] == 3


def test_vllm_ef_reserves_peak_and_never_evicts():
    # same instance, M=6: vllm-ef reserves I + O - 1 = 5 per request, so b waits for a
    i = unit_instance([("a", 0, 2, 4), ("b", 0, 2, 4)], M=6)
    got, ev = batches(i, simulate(i, "vllm-ef"))
    assert got == [E(("a", 2)), E(("a", 1)), E(("a", 1)), E(("a", 1)),
                   E(("b", 2)), E(("b", 1)), E(("b", 1)), E(("b", 1))]
    assert ev.metrics["evictions"] == 0


# -- InferMax vs SARATHI: whom to evict ----------------------------------------------------------
@pytest.mark.parametrize("policy, expected, recomputed", [
    # b0: prefill b (2) and a (6), used 8.  b1: decodes b, a -> used 10 = M.
    # b2, SARATHI (arrival order b, a): b needs 1 more -> evict the last, a (7 tokens).
    ("sarathi", [E(("b", 2), ("a", 6)), E(("b", 1), ("a", 1)), E(("b", 1), evict=["a"]),
                 E(("a", 8))], 7),
    # b2, InferMax (longest m first: a, b): a needs 1 more -> evict the shortest, b (3).
    ("infermax", [E(("b", 2), ("a", 6)), E(("b", 1), ("a", 1)), E(("a", 1), evict=["b"]),
                  E(("b", 4))], 3),
])
def test_infermax_keeps_long_requests(policy, expected, recomputed):
    i = unit_instance([("b", 0, 2, 3), ("a", 0, 6, 3)], M=10)
    got, ev = batches(i, simulate(i, policy))
    assert got == expected
    assert ev.metrics["recomputed_tokens"] == recomputed


# -- vLLM's admission limits: KV watermark and max_num_seqs ------------------------------------
def _blocks(reqs, M, b):
    return Instance("hand", Limits(kv_capacity=M, max_batch_tokens=M, block_size=b), UnitCost(),
                    tuple(Request(*r) for r in reqs))


@pytest.mark.parametrize("b", [1, 4])
def test_vllm_watermark_keeps_one_percent_of_blocks_free_at_admission(b):
    # M = 100 blocks of b tokens; a: I = 60b, b: I = 40b, O = 1 (each finishes in its prefill).
    # watermark 0.01: int(0.01 * 100) = 1 block = b tokens stays free after an admission.
    # t=0: a reserves 60b, 60b + b <= 100b: admitted. b reserves 40b, but only 40b are free
    #      and 40b + b > 40b: b waits (and closes R_w). Batch 0 = a alone, a finishes.
    # t=1: 100b free, b admitted. Without the watermark both fit in batch 0.
    i = _blocks([("a", 0, 60 * b, 1), ("b", 0, 40 * b, 1)], M=100 * b, b=b)
    got, ev = batches(i, simulate(i, "vllm"))
    assert got == [E(("a", 60 * b)), E(("b", 40 * b))]
    assert ev.metrics["makespan"] == 2
    got, _ = batches(i, simulate(i, "vllm", watermark=0.0))
    assert got == [E(("a", 60 * b), ("b", 40 * b))]


def test_vllm_watermark_is_waived_for_a_request_that_needs_the_whole_cache():
    # a: I = 100 = M. With the watermark (1 token) it could never be admitted (vLLM rejects
    # such a prompt); we admit it when it fits outright, so the run ends instead of stalling.
    i = _blocks([("a", 0, 100, 1)], M=100, b=1)
    got, _ = batches(i, simulate(i, "vllm"))
    assert got == [E(("a", 100))]


def test_vllm_max_num_seqs_caps_resident_requests_not_batch_entries():
    # a, b, c: I = 2, O = 3, all at 0; max_num_seqs = 2.
    # t=0: a, b admitted (2 resident); c would be the third resident: waits. a, b: 2/3/1
    # t=1: c still waits (a, b hold KV): decodes a, b -> 3/4/2
    # t=2: decodes a, b -> g = 3, both finish and free their KV
    # t=3: c admitted: prefill; t=4, t=5: its decodes.
    i = unit_instance([("a", 0, 2, 3), ("b", 0, 2, 3), ("c", 0, 2, 3)])
    got, _ = batches(i, simulate(i, "vllm", max_num_seqs=2))
    assert got == [
        E(("a", 2), ("b", 2)),
        E(("a", 1), ("b", 1)),
        E(("a", 1), ("b", 1)),
        E(("c", 2)),
        E(("c", 1)),
        E(("c", 1)),
    ]
    # vLLM's default cap (256) does not bind here: all three run together
    got, _ = batches(i, simulate(i, "vllm"))
    assert got == [E(("a", 2), ("b", 2), ("c", 2))] + [E(("a", 1), ("b", 1), ("c", 1))] * 2


def test_vllm_family_defaults_are_vllms():
    from optsched.policies import get_policy

    for name in ("vllm", "vllm-hy", "sarathi", "sarathi-pc", "vllm-ef"):
        p = get_policy(name)
        assert (p.watermark, p.max_num_seqs) == (0.01, 256), name
    p = get_policy("infermax")
    assert p.watermark == 0.0
