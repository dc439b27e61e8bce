"""B12e (``optsched/bounds/goodput_memory.py``, bounds.md B12 "Hidden cache"): on instances with
hidden cache the goodput bound also uses B7's KV and count shares, priced with the smaller of
the KV and the hidden charge. The bound must stay above the exhaustive optimum on small
random hidden-cache instances and above every policy on random instances up to 200
requests; on KV-only instances nothing changes."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from optsched.bounds.floors import Floors
from optsched.bounds.goodput import goodput_bound
from optsched.bounds.goodput_memory import ChargeFloors, rule_works
from optsched.cost import UnitCost, preset
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate
from optsched.schedule import Schedule


def _hidden(reqs, M, C, cost=None):
    return Instance("h", Limits(kv_capacity=M, max_batch_tokens=C, hidden_cache=True),
                    cost or UnitCost(), tuple(reqs))


def test_charge_area_is_the_hidden_charge_sum_by_hand():
    # r = 1/2, b = 1: hidden charge ceil(m / 2). I = 3, O = 3: after its generating
    # batches the request holds 3, 4, 5 tokens: charges 2 + 2 + 3 = 7 (KV: 12); first token 2.
    inst = _hidden([Request("a", 0.0, 3, 3)], M=8, C=8)
    cf = ChargeFloors(inst)
    assert cf.area.tolist() == [7] and cf.prefill_area.tolist() == [2]
    assert Floors.of(inst).area.tolist() == [12]  # the plain floors are untouched


def test_kv_only_instances_keep_the_three_rules_on_the_plain_floors():
    inst = Instance("k", Limits(kv_capacity=8, max_batch_tokens=4), UnitCost(),
                    (Request("a", 0.0, 2, 2), Request("b", 1.0, 3, 1)))
    f = Floors.of(inst)
    from optsched.bounds.srpt import MIXES, job_works

    for (w1, w2), mix in zip(rule_works(inst, f), MIXES[:3]):
        assert np.array_equal(w1, job_works(f, "mean-ttft", mix))
        assert np.array_equal(w2, job_works(f, "total-latency", mix))


def test_count_share_binds_where_the_token_share_did_not():
    # Unit time, C = 4, M = 2, hidden ratio 1/2 (b = 1): four requests I = O = 1 arrive at 0
    # with TTFT SLO 1. Token share: each prompt is 1 of C = 4 tokens, work 1/4, the four fit
    # in [0, 1]. Count share (valid with hidden cache, B12e): a batch has at most
    # min(C, M) = 2 entries (each holds >= 1 charged token after it), work 1/2 each: 2 miss.
    # Exact: hidden charge ceil(1/2) = 1, so two fit in M = 2 per batch: 2 first tokens by 1.
    reqs = [Request(f"r{k}", 0.0, 1, 1, ttft_slo=1.0) for k in range(4)]
    gb = goodput_bound(_hidden(reqs, M=2, C=4))
    assert (gb.ttft, gb.both) == (2, 2)


# -- exhaustive optimum of small unit-time hidden-cache instances ------------------------
def _charge(m: int, typ: str) -> int:
    return m if typ == "kv" else -(-m // 2)


def exhaustive_attainment(inst: Instance) -> tuple[int, list]:
    """Most requests meeting all their SLOs over every schedule of a unit-time instance
    (b = 1, ratio 1/2) whose batches start at the earliest time (no idling beyond waiting for
    an arrival the batch touches): a DFS over batches. A request that can no longer meet its
    SLOs is dropped (evicted, finished alone after everything else: it holds nothing and
    delays nobody). Returns the count and the batches (entries, evictions) of the kept part."""
    reqs = inst.requests
    C, M = inst.limits.max_batch_tokens, inst.limits.kv_capacity

    def options(i, st):
        m, g, typ, _ = st
        S = reqs[i].prompt + g
        out: list = [None]
        types = (typ,) if m > 0 else ("kv", "hidden")
        out += [(c, ty) for c in range(1, S - m + 1) for ty in types]
        return out

    @functools.cache
    def best(t: float, states: tuple) -> tuple[int, tuple]:
        live = [i for i, st in enumerate(states) if st is not None and st != "done"]
        if not live:
            return 0, ()
        top, plan = 0, ()
        for choice in itertools.product(*(options(i, states[i]) for i in live)):
            if all(c is None for c in choice):
                continue
            if sum(c[0] for c in choice if c is not None) > C:
                continue
            start = max([t] + [reqs[i].arrival for i, c in zip(live, choice) if c is not None])
            end = start + 1
            new = list(states)
            met_now, mem, entries = 0, 0, []
            for i, c in zip(live, choice):
                m, g, typ, F = states[i]
                r = reqs[i]
                if c is not None:
                    m, typ = m + c[0], c[1]
                    entries.append((r.id, c[0], c[1]))
                    if m == r.prompt + g:
                        g += 1
                        if g == 1:
                            F = end
                            if end - r.arrival > r.ttft_slo + 1e-12:
                                new[i] = None  # misses: dropped
                                continue
                        if g == r.output:
                            ok = r.output == 1 or (end - F) / (r.output - 1) <= r.tpot_slo + 1e-12
                            mem += _charge(m, typ)  # finishing requests still count
                            new[i] = "done"
                            met_now += ok
                            continue
                if F is not None and g >= 1 and r.output > 1 and \
                        (end - F) / (r.output - 1) > r.tpot_slo + 1e-12:
                    new[i] = None  # its completion is after end: TPOT missed already
                    continue
                if F is None and end - r.arrival >= r.ttft_slo + 1e-12:
                    new[i] = None  # first token at end + 1 or later
                    continue
                mem += _charge(m, typ)
                new[i] = (m, g, typ, F)
            if mem > M:
                continue
            sub, subplan = best(end, tuple(new))
            if met_now + sub > top:
                gone = [reqs[i].id for i in live if new[i] is None and states[i][0] > 0]
                top, plan = met_now + sub, ((tuple(entries), tuple(gone)),) + subplan
        return top, plan

    start = tuple((0, 0, "kv", None) for _ in reqs)
    count, plan = best(0.0, start)
    return count, list(plan)


def _schedule_of(inst: Instance, plan: list) -> Schedule:
    """The DFS's batches (each eviction moved to the next batch, as the rules require), then
    every unfinished request alone: its (re)fill and its decodes."""
    batches, pending_ev = [], []
    state = {r.id: [0, 0] for r in inst.requests}  # m, g
    for entries, gone in plan:
        batches.append(([(rid, c, ty) if ty == "hidden" else (rid, c)
                         for rid, c, ty in entries], pending_ev))
        for rid, c, _ in entries:
            m, g = state[rid]
            m += c
            r = next(x for x in inst.requests if x.id == rid)
            if m == r.prompt + g:
                g += 1
            state[rid] = [m, g]
        pending_ev = list(gone)
        for rid in gone:
            state[rid][0] = 0
    for r in inst.requests:
        m, g = state[r.id]
        if g == r.output:
            continue
        ev = list(pending_ev)
        while g < r.output:
            S = r.prompt + g
            c = min(S - m, inst.limits.max_batch_tokens)
            batches.append(([(r.id, c)], ev))
            ev = []
            m += c
            if m == S:
                g += 1
        pending_ev = []
    if pending_ev:
        batches.append(([], pending_ev))
    return Schedule.from_batches(batches)


def _random_hidden(rng, n):
    reqs = [Request(f"r{k}", float(rng.integers(0, 2)), int(rng.integers(1, 3)),
                    int(rng.integers(1, 4)), ttft_slo=float(rng.integers(1, 3)), tpot_slo=1.0)
            for k in range(n)]
    return _hidden(reqs, M=int(rng.integers(4, 6)), C=int(rng.integers(2, 4)))


@pytest.mark.parametrize("seed", range(10))
def test_bound_is_above_the_exhaustive_optimum_with_hidden_cache(seed):
    rng = np.random.default_rng(700 + seed)
    inst = _random_hidden(rng, 4)  # optimum 2-4 of 4 on these seeds, the bound often equal
    count, plan = exhaustive_attainment(inst)
    ev = evaluate(inst, _schedule_of(inst, plan))
    assert ev.feasible, ev.violations[:3]
    assert round(ev.metrics["slo_attainment"] * inst.n) == count  # the DFS counts as evaluate
    assert count <= goodput_bound(inst).both, (count, goodput_bound(inst))


@pytest.mark.parametrize("seed", range(3))
def test_bound_is_above_every_policy_up_to_200_requests_with_hidden_cache(seed):
    rng = np.random.default_rng(900 + seed)
    n = (20, 80, 200)[seed]
    cost = preset("infermax-llama2-7b-a100")
    prompts = rng.integers(16, 1500, n)
    outputs = rng.integers(1, 300, n)
    arrivals = np.sort(rng.uniform(0, n / 8.0, n))
    reqs = [Request(f"r{k}", float(arrivals[k]), int(prompts[k]), int(outputs[k]),
                    ttft_slo=float(rng.choice([0.25, 0.5, 1.0])),
                    tpot_slo=float(rng.choice([0.02, 0.05, 0.1]))) for k in range(n)]
    inst = _hidden(reqs, M=6000, C=2048, cost=cost)
    gb = goodput_bound(inst)
    names = [p.name for p in list_policies()] if n <= 20 else \
        ["vllm", "sarathi", "aptserve", "aptserve-kv-only", "ttft-first-sr", "mcsf",
         "slo-park"]
    for name in names:
        try:
            s = simulate(inst, name)
        except Exception as e:  # a policy that refuses hidden cache says so
            assert "hidden" in str(e).lower(), (name, e)
            continue
        att = evaluate(inst, s).metrics["slo_attainment"]
        assert att <= gb.attainment + 1e-12, (name, att, gb)
