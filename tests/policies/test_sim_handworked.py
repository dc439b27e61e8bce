"""Tiny instances whose schedules are worked out by hand (unit-time cost model).

Notation in the comments: ``x: m/S/g`` is request x's cached tokens, known tokens and
generated tokens after the batch; ``used`` is the sum of reservations (semantics section 3
memory; see ``optsched/policies/unified.py``).
"""

from __future__ import annotations

import pytest

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate


def inst(reqs, M=100, C=100, P=None):
    return Instance("hand", Limits(kv_capacity=M, max_batch_tokens=C, max_prefill_tokens=P),
                    UnitCost(), tuple(Request(*r) for r in reqs))


def batches(instance, schedule):
    """[(sorted entries, sorted evictions)] and the evaluation (asserted feasible)."""
    ev = evaluate(instance, schedule)
    assert ev.feasible, ev.violations
    out = [(sorted(b.entries), sorted(b.evict)) for b in schedule]
    return out, ev


def E(*entries, evict=()):
    return (sorted(entries), sorted(evict))


# -- vLLM: prefill priority, no hybrid batching ---------------------------------------------
VLLM_INST = [("a", 0, 4, 3), ("b", 1, 2, 2)]


def test_vllm_prefill_priority():
    i = inst(VLLM_INST)
    got, ev = batches(i, simulate(i, "vllm"))
    assert got == [
        E(("a", 4)),              # t=0: only a has arrived; prefill a -> a: 4/5/1
        E(("b", 2)),              # t=1: b waiting -> prefill first, a's decode must wait
        E(("a", 1), ("b", 1)),    # t=2: no waiting: decodes; b: 3/4/2 finished
        E(("a", 1)),              # t=3: a: 6/7/3 finished
    ]
    assert ev.metrics["makespan"] == 4


def test_sarathi_decode_priority_on_same_instance():
    i = inst(VLLM_INST)
    got, _ = batches(i, simulate(i, "sarathi"))
    assert got == [
        E(("a", 4)),
        E(("a", 1), ("b", 2)),    # decode a first, then b's prefill joins (hybrid)
        E(("a", 1), ("b", 1)),    # a: g=3 finished, b: g=2 finished
    ]


# -- SARATHI: chunked prefill and hybrid batches ----------------------------------------
def test_sarathi_chunking_hybrid():
    # C = 6, P = 4 (instance), a: I=3 O=3, b: I=7 O=2, both at 0.
    i = inst([("a", 0, 3, 3), ("b", 0, 7, 2)], C=6, P=4)
    got, _ = batches(i, simulate(i, "sarathi"))
    assert got == [
        E(("a", 3), ("b", 1)),   # R_w: a whole (3 <= P), b chunked to P - 3 = 1
        E(("a", 1), ("b", 4)),   # decode a; R_r^p: b chunk min(C-1, P) = 4 -> b: 5/7/0
        E(("a", 1), ("b", 2)),   # a finished (g=3); b completes its prefill -> g=1
        E(("b", 1)),             # b: g=2 finished
    ]


def test_vllm_long_prompt_is_chunked_even_without_chunked_prefill():
    # I = 9 > C = 4: vLLM could never run it whole; it is chunked (documented choice)
    i = inst([("a", 0, 9, 2)], C=4)
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
    i = inst([("a", 0, 2, 4), ("b", 0, 2, 4)], M=M)
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
    i = inst([("a", 0, 2, 4), ("b", 0, 2, 4)], M=6)
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
    i = inst([("b", 0, 2, 3), ("a", 0, 6, 3)], M=10)
    got, ev = batches(i, simulate(i, policy))
    assert got == expected
    assert ev.metrics["recomputed_tokens"] == recomputed


# -- MC-SF admission rule ------------------------------------------------------------------------
def test_mcsf_admission_rule():
    # M = 9, all at 0: a I=2 O=5, b I=2 O=2, c I=3 O=3; ascending O: b, c, a.
    # b0: b: KV after batch 0 is 2, finishes at +1: peak 3.  c: 3, finishes at +2.
    #     profile {t=2: 3+2=5, t=1: (3+1)+(2+1)=7} <= 9: admit. a: 2, finishes at +4:
    #     t=1: (2+1)+(3+1)+(2+1) = 10 > 9: reject (and stop).
    # b1: running b (KV 3 after, finishes now), c (4, finishes at +1); a: 2, fin +4:
    #     t=0: 3+4+2 = 9, t=1: 5+3 = 8, t=4: 6 -> admit a.
    # b2..b5: c finishes at b2, a decodes until g=5 at b5.
    i = inst([("a", 0, 2, 5), ("b", 0, 2, 2), ("c", 0, 3, 3)], M=9)
    got, ev = batches(i, simulate(i, "mcsf"))
    assert got == [
        E(("b", 2), ("c", 3)),
        E(("b", 1), ("c", 1), ("a", 2)),
        E(("c", 1), ("a", 1)),
        E(("a", 1)),
        E(("a", 1)),
        E(("a", 1)),
    ]
    assert ev.metrics["evictions"] == 0
    assert ev.metrics["peak_kv"] == 9


def test_mcsf_uses_predictions_when_given():
    # C = 2 lets one prompt in per batch. True outputs would put b (O=1) first; the
    # predictions (a: 1, b: 3) put a first.
    reqs = (Request("a", 0, 2, 3, predicted_output=1), Request("b", 0, 2, 1, predicted_output=3))
    i = Instance("p", Limits(kv_capacity=100, max_batch_tokens=2), UnitCost(), reqs)
    s = simulate(i, "mcsf")
    assert evaluate(i, s).feasible
    assert s.batch(0).entries == [("a", 2)]
    # without predictions MC-SF uses the true lengths (documented fallback)
    plain = i.replace(requests=tuple(Request(r.id, 0, r.prompt, r.output) for r in reqs))
    assert simulate(plain, "mcsf").batch(0).entries == [("b", 2)]


def test_mcsf_safety_net_when_predictions_are_too_short():
    # both predicted to finish at once; really O=4: at b2 the KV would be 8 > M = 6,
    # so the most recently admitted request (b) is evicted and refilled later
    reqs = (Request("a", 0, 2, 4, predicted_output=1), Request("b", 0, 2, 4, predicted_output=1))
    i = Instance("p", Limits(kv_capacity=6, max_batch_tokens=100), UnitCost(), reqs)
    got, ev = batches(i, simulate(i, "mcsf"))
    assert got[:3] == [E(("a", 2), ("b", 2)), E(("a", 1), ("b", 1)), E(("a", 1), evict=["b"])]
    assert ev.metrics["evictions"] == 1


# -- alpha-protection greedy: clearing at the batch that would overflow -----------------------
def test_alpha_greedy_clears_all_at_overflow():
    # M=10, alpha=0.25 -> threshold 7.5; a, b: I=3 O=5 at 0.
    # b0: admit a (3), b (6 <= 7.5).  b1: decodes -> 8.  b2: decodes -> 10.
    # b3: decodes would give 12 > 10: clear both (eviction-only batch, no time).
    # b4: refill a (S=6 <= 7.5); b would make 12 > 7.5.  b5: a decodes, finishes (g=5).
    # b6: refill b.  b7: b finishes.
    i = inst([("a", 0, 3, 5), ("b", 0, 3, 5)], M=10)
    got, ev = batches(i, simulate(i, "alpha-greedy", alpha=0.25))
    assert got == [
        E(("a", 3), ("b", 3)),
        E(("a", 1), ("b", 1)),
        E(("a", 1), ("b", 1)),
        E(evict=["a", "b"]),
        E(("a", 6)),
        E(("a", 1)),
        E(("b", 6)),
        E(("b", 1)),
    ]
    assert ev.metrics["evictions"] == 2
    assert ev.metrics["makespan"] == 7  # the clearing batch takes no time


def test_beta_one_clears_like_greedy():
    i = inst([("a", 0, 3, 5), ("b", 0, 3, 5), ("c", 1, 2, 4)], M=10)
    assert simulate(i, "alpha-beta-clearing", alpha=0.25, beta=1.0) == \
        simulate(i, "alpha-greedy", alpha=0.25)


def test_beta_clearing_is_seeded():
    reqs = [(f"r{k}", k % 3, 2 + k % 4, 3 + k % 5) for k in range(8)]
    i = inst(reqs, M=12)
    a = simulate(i, "alpha-beta-clearing", beta=0.3, seed=7)
    assert a == simulate(i, "alpha-beta-clearing", beta=0.3, seed=7)
    assert evaluate(i, a).feasible
    # the cache overflows on this instance, so the draws matter: seed and beta are used
    assert evaluate(i, a).metrics["evictions"] > 0
    assert simulate(i, "alpha-beta-clearing", beta=0.3, seed=8) != a
    assert simulate(i, "alpha-beta-clearing", beta=0.9, seed=7) != a


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
    i = inst([("a", 0, 2, 3), ("b", 0, 2, 3), ("c", 0, 2, 3)])
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
