"""Exhaustive exact search (formulation ``exhaustive``): hand-derived optima, pruning rules
cross-checked against a naive search, optimum <= every policy, the state-limit message."""

from __future__ import annotations

import heapq
import json
import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import LinearCost, UnitCost
from optsched.evaluation import evaluate
from optsched.formulations import Hypotheses, SolveOptions
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate
from optsched.solving import solve

OBJS = ("makespan", "total-latency", "mean-ttft")


def inst_of(reqs, M, C=100, P=None, B=None, block=1, cost=None):
    return Instance("t", Limits(M, C, P, B, block), cost or UnitCost(),
                    tuple(Request(r[0], float(r[1]), r[2], r[3]) for r in reqs))


def opt(inst, objective, **kw):
    r = search(inst, objective, SearchOptions(**kw))
    if r.schedule is not None:
        ev = evaluate(inst, r.schedule)
        assert ev.feasible, ev.violations[:3]
        assert ev.objective(objective) == pytest.approx(r.objective, rel=1e-9, abs=1e-9)
    return r


# -- hand-derived optima -----------------------------------------------------------------
def test_memory_forces_sequencing():
    # A, B: I = 2, O = 2 (peak 3), M = 3, unit time. The batch generating token j of a request
    # holds its I + j - 1 tokens, so the KV "area" to finish both is (2 + 3) * 2 = 10 <= 3 per
    # batch: at least ceil(10 / 3) = 4 batches. Running A then B takes 4: makespan 4.
    # Total latency: each request needs 2 batches (first completion >= 2), the second
    # completion >= 4 (area), so >= 6, and A-then-B gives 2 + 4 = 6.
    inst = inst_of([("A", 0, 2, 2), ("B", 0, 2, 2)], M=3)
    assert opt(inst, "makespan").objective == 4
    assert opt(inst, "total-latency").objective == 6
    # mean TTFT -- evicting is strictly better even with every request at t = 0: both first
    # tokens at batch 1 need 2 + 2 = 4 > 3 KV, so the mean is >= (1 + 2) / 2 = 1.5. Without
    # evictions the second first token needs the other request to hold < 2 tokens while it
    # does (2 + 2 > 3) and a started request holds >= 1 until it finishes (at batch 2 it holds
    # 3 with its final token): no second first token before batch 3, mean 2. With evictions:
    # A 1 token + B's 2-token prefill (3 KV, B's first token at 1), then evict B and give A its
    # second prompt token (A's first token at 2): mean 1.5.
    assert opt(inst, "mean-ttft").objective == 1.5
    assert opt(inst, "mean-ttft", no_evictions=True).objective == 2.0


def test_eviction_strictly_better_with_arrivals():
    # M = 4, unit time, C large. A: arrival 0, I = 2, O = 3 (peak 4). B: arrival 1, I = 3, O = 1.
    # Without evictions: A resident (>= 2 KV) blocks B (needs 3) until A finishes at 3, so
    # B completes at 4 (latency 3, A 3: total 6); waiting for B first gives B 1 and A 5 (6);
    # starting A, pausing it resident, does not free memory. Optimum without evictions: 6.
    # With evictions: A [0,1] (token 1), at t = 1 evict A, B [1,2] (latency 1), refill A's
    # S = 3 tokens [2,3] (token 2 -- a refill also generates), decode [3,4]: total 4 + 1 = 5.
    # Nothing beats 5: B's latency >= 1 and A needs 3 batches with B's batch not overlapping
    # A's decode (3 + KV(A) > 4 whenever A holds >= 2), so A completes >= 4.
    inst = inst_of([("A", 0, 2, 3), ("B", 1, 3, 1)], M=4)
    with_ev = opt(inst, "total-latency")
    without = opt(inst, "total-latency", no_evictions=True)
    assert with_ev.objective == 5
    assert without.objective == 6
    assert evaluate(inst, with_ev.schedule).metrics["evictions"] >= 1
    # the same through the formulation contract and the no_evictions hypothesis
    rep = solve(inst, "exhaustive", "total-latency", warm_start=None,
                hypotheses=Hypotheses(no_evictions=True))
    assert rep.status == "optimal" and rep.objective == 6


def test_evictions_never_help_here_all_at_zero():
    # Two requests at t = 0 on the instance above (B moved to 0): the optimum is the same with
    # and without evictions (found by the search, stated here as a regression).
    inst = inst_of([("A", 0, 2, 3), ("B", 0, 3, 1)], M=4)
    for obj in OBJS:
        assert opt(inst, obj).objective == opt(inst, obj, no_evictions=True).objective


def test_chunking_needed_when_C_is_small():
    # C = 2, one request I = 4, O = 2: the prompt must be split 2 + 2 (two batches, the second
    # generates token 1), then one decode: makespan 3. Without chunking no batch can hold the
    # prompt, so the restricted search proves infeasibility.
    inst = inst_of([("A", 0, 4, 2)], M=8, C=2)
    r = opt(inst, "makespan")
    assert r.objective == 3
    assert [b.entries for b in r.schedule] == [[("A", 2)], [("A", 2)], [("A", 1)]]
    assert opt(inst, "makespan", no_chunking=True).status == "infeasible"


def test_prefill_budget_and_batch_size():
    # P = 1: the 3-token prompt takes 3 batches (prefill entries), the decode is not limited
    # by P: makespan 4. max_batch_size = 1 with two 1-token requests: 2 batches.
    assert opt(inst_of([("A", 0, 3, 2)], M=8, C=10, P=1), "makespan").objective == 4
    assert opt(inst_of([("A", 0, 1, 1), ("B", 0, 1, 1)], M=8, B=1), "makespan").objective == 2
    assert opt(inst_of([("A", 0, 1, 1), ("B", 0, 1, 1)], M=8), "makespan").objective == 1


def test_block_size_counts_whole_blocks():
    # block 2, M = 4: A and B (I = 1, O = 2) each hold 1 -> 2 blocks' worth 2 each (4 total)
    # after prefill, then 2 tokens -> still 2 each: both fit all along, makespan 2. With I = 2,
    # O = 2 (KV 2 then 3 -> 4 in blocks) they cannot decode together: makespan 3 (A's decode
    # then B's, after a joint prefill of 2 + 2 = 4).
    assert opt(inst_of([("A", 0, 1, 2), ("B", 0, 1, 2)], M=4, block=2), "makespan").objective == 2
    r = opt(inst_of([("A", 0, 2, 2), ("B", 0, 2, 2)], M=4, block=2), "makespan")
    assert r.objective == 3


def test_idle_until_arrival_is_an_edge():
    # A single request arriving at 5: the first batch starts at 5 (stated), makespan 6;
    # latency 1.
    inst = inst_of([("A", 5, 1, 1)], M=4)
    r = opt(inst, "makespan")
    assert r.objective == 6
    assert r.schedule.batch(0).start == 5.0
    assert opt(inst, "total-latency").objective == 1


def test_linear_cost_prices_with_the_cost_model():
    cm = LinearCost(k0=0.5, k1=0.01, kpq=1e-3, kpm=2e-3, kdm=1e-3, kpr=0.05, kdr=0.02)
    inst = inst_of([("A", 0, 3, 2), ("B", 0, 2, 2)], M=6, C=8, cost=cm)
    for obj in OBJS:
        rep = solve(inst, "exhaustive", obj, warm_start=None)
        assert rep.status == "optimal", rep.message
        assert rep.bound == rep.objective
        # the unpruned search (no R3/R4/R6/R8) prices the same cost model independently
        assert rep.objective == pytest.approx(opt(inst, obj, pruning=False).objective, rel=1e-12)


# -- pruning rules vs a naive search ------------------------------------------------------
def naive_opt(inst: Instance, objective: str) -> float:
    """A second, deliberately plain reading of semantics 3: unit time, all arrivals at 0.
    Dijkstra over exact per-request (g, m) states; every batch is any choice per request of
    skip / process c (1 <= c <= S - m) / evict (m > 0), eviction-only batches included (they
    take no time); no symmetry, dominance or eviction rules."""
    lim = inst.limits
    b = lim.block_size
    fp = lambda m: -(-m // b) * b  # noqa: E731
    I = [r.prompt for r in inst.requests]
    O = [r.output for r in inst.requests]
    n = inst.n
    start = tuple((0, 0) for _ in range(n))
    best = {start: 0}
    heap = [(0, start)]
    while heap:
        cost, s = heapq.heappop(heap)
        if cost > best[s]:
            continue
        if objective == "mean-ttft" and all(g >= 1 for g, _ in s):
            # finishing is free for TTFT and always possible (evict all, run one at a time)
            return cost / n
        if all(g == O[i] for i, (g, _) in enumerate(s)):
            return cost / n if objective == "mean-ttft" else cost

        def choices(i, s=s):
            g, m = s[i]
            if g == O[i]:
                return [("skip", 0)]
            out = [("skip", 0)] + [("proc", c) for c in range(1, I[i] + g - m + 1)]
            if m > 0:
                out.append(("evict", 0))
            return out

        def rec(i, acc, choices=choices):
            if i == n:
                yield list(acc)
                return
            for ch in choices(i):
                acc.append(ch)
                yield from rec(i + 1, acc)
                acc.pop()

        for batch in rec(0, []):
            if all(k == "skip" for k, _ in batch):
                continue
            new, tok, pre, ent, kv = [], 0, 0, 0, 0
            for i, (kind, c) in enumerate(batch):
                g, m = s[i]
                S = I[i] + g
                if kind == "evict":
                    new.append((g, 0))
                    continue
                if kind == "proc":
                    decode = g >= 1 and m == S - 1
                    tok += c
                    pre += 0 if decode else c
                    ent += 1
                    m += c
                    if m == S:
                        g += 1
                if g < O[i] or kind == "proc":
                    kv += fp(m)
                new.append((g, 0) if g == O[i] else (g, m))
            if tok > lim.max_batch_tokens or pre > lim.prefill_budget or kv > lim.kv_capacity:
                continue
            if lim.max_batch_size is not None and ent > lim.max_batch_size:
                continue
            if ent == 0:
                d = 0
            elif objective == "makespan":
                d = 1
            elif objective == "total-latency":
                d = sum(1 for i in range(n) if s[i][0] < O[i])
            else:
                d = sum(1 for i in range(n) if s[i][0] == 0)
            t = tuple(new)
            if cost + d < best.get(t, math.inf):
                best[t] = cost + d
                heapq.heappush(heap, (cost + d, t))
    return math.inf


@st.composite
def tiny_offline(draw):
    n = draw(st.integers(1, 3))
    reqs = [(f"q{i}", 0, draw(st.integers(1, 3)), draw(st.integers(1, 3))) for i in range(n)]
    if n > 1 and draw(st.booleans()):  # identical requests exercise the symmetry rule
        reqs = [(f"q{i}", 0, reqs[0][2], reqs[0][3]) for i in range(n)]
    peak = max(r[2] + r[3] - 1 for r in reqs)
    block = draw(st.sampled_from([1, 1, 2]))
    M = draw(st.integers(peak, peak + 3))
    M = -(-M // block) * block
    C = draw(st.integers(1, 6))
    P = draw(st.one_of(st.none(), st.integers(1, C)))
    B = draw(st.sampled_from([None, None, 1, 2]))
    return inst_of(reqs, M=M, C=C, P=P, B=B, block=block)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_offline(), st.sampled_from(OBJS))
def test_search_matches_naive_reference(inst, objective):
    r = opt(inst, objective, max_states=50_000)
    assert r.status == "optimal"
    assert r.objective == pytest.approx(naive_opt(inst, objective), abs=1e-9)


@st.composite
def tiny_any(draw):
    n = draw(st.integers(1, 3))
    online = draw(st.booleans())
    reqs = [(f"q{i}", draw(st.integers(0, 2)) if online else 0, draw(st.integers(1, 3)),
             draw(st.integers(1, 3))) for i in range(n)]
    peak = max(r[2] + r[3] - 1 for r in reqs)
    M = draw(st.integers(peak, peak + 3))
    C = draw(st.integers(1, 6))
    lin = draw(st.booleans())
    cm = LinearCost(k0=0.5, k1=0.01, kpq=1e-2, kpm=3e-2, kdm=1e-3, kpr=0.05, kdr=-0.005,
                    kpl=0.2, kpb=0.1, kdb=0.05) if lin else UnitCost()
    return inst_of(reqs, M=M, C=C, cost=cm)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_any(), st.sampled_from(OBJS), st.booleans())
def test_pruning_rules_keep_the_optimum(inst, objective, no_ev):
    # R3, R4, R6 (bounds) and R8 switched off must give the same optimum (arrivals, linear
    # cost with negative kdr and batch-level terms included)
    a = opt(inst, objective, no_evictions=no_ev)
    b = opt(inst, objective, no_evictions=no_ev, pruning=False)
    assert a.status == b.status
    if a.objective is not None:
        assert a.objective == pytest.approx(b.objective, abs=1e-9)


# -- optimum <= every policy ---------------------------------------------------------------
@st.composite
def policy_instances(draw):
    n = draw(st.integers(1, 3))
    online = draw(st.booleans())
    reqs = [(f"q{i}", draw(st.integers(0, 3)) if online else 0, draw(st.integers(1, 4)),
             draw(st.integers(1, 3))) for i in range(n)]
    peak = max(r[2] + r[3] - 1 for r in reqs)
    M = draw(st.integers(peak, peak * 2))
    C = draw(st.integers(max(1, peak // 2), peak * 2))
    lin = draw(st.booleans())
    cm = LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02) if lin else UnitCost()
    return inst_of(reqs, M=M, C=C, cost=cm)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy_instances())
def test_optimum_is_at_most_every_policy(inst):
    values = {}
    for spec in list_policies():
        ev = evaluate(inst, simulate(inst, spec.name))
        assert ev.feasible, (spec.name, ev.violations[:3])
        values[spec.name] = ev
    for obj in OBJS:
        r = opt(inst, obj, max_states=50_000)
        if r.status != "optimal":
            continue
        for name, ev in values.items():
            assert r.objective <= ev.objective(obj) + 1e-9, (obj, name)


# -- the formulation contract, limits and the CLI -------------------------------------------
def test_solve_contract_and_schedule_passes_evaluate():
    inst = inst_of([("A", 0, 2, 3), ("B", 1, 3, 1)], M=4)
    for obj in OBJS:
        rep = solve(inst, "exhaustive", obj, warm_start=None)
        assert rep.status == "optimal" and rep.evaluation.feasible
        assert rep.gap == 0
        d = rep.to_dict()
        assert d["formulation"] == "exhaustive" and d["solver"] == "exhaustive"


def test_state_limit_message():
    inst = inst_of([(f"q{i}", 0, 4, 4) for i in range(3)] + [("z", 0, 3, 2)], M=9, C=6)
    r = search(inst, "total-latency", SearchOptions(max_states=50))
    assert r.status == "no_solution" and r.schedule is None
    assert r.message.startswith("state limit 50 reached after ")
    assert "instance too large for exhaustive search" in r.message
    rep = solve(inst, "exhaustive", "total-latency", warm_start=None,
                options=SolveOptions(params={"max_states": 50}))
    assert rep.status == "no_solution" and "state limit 50" in rep.message


def test_unknown_param_and_hypotheses_are_rejected():
    from optsched.formulations import FormulationError

    inst = inst_of([("A", 0, 1, 1)], M=2)
    with pytest.raises(FormulationError, match="unknown parameter"):
        solve(inst, "exhaustive", "makespan", warm_start=None, options=SolveOptions(params={"x": 1}))
    with pytest.raises(FormulationError, match="hypotheses"):
        solve(inst, "exhaustive", "makespan", warm_start=None,
              hypotheses=Hypotheses(order=(("A", "A"),)))


def test_at_most_hypothesis_proves_infeasible():
    inst = inst_of([("A", 0, 2, 3), ("B", 1, 3, 1)], M=4)
    rep = solve(inst, "exhaustive", "total-latency", warm_start=None, hypotheses=Hypotheses(at_most=4.5))
    assert rep.status == "infeasible"
    rep = solve(inst, "exhaustive", "total-latency", warm_start=None, hypotheses=Hypotheses(at_most=5))
    assert rep.status == "optimal" and rep.objective == 5


def test_cli_solve_json(tmp_path):
    p = tmp_path / "i.json"
    inst_of([("A", 0, 2, 2), ("B", 0, 2, 2)], M=3).save(p)
    out = subprocess.run([sys.executable, "-m", "optsched", "solve", str(p), "--formulation",
                          "exhaustive", "--objective", "makespan", "--json", "--warm-start", "none"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["status"] == "optimal" and d["objective"] == 4 and d["bound"] == 4
    out = subprocess.run([sys.executable, "-m", "optsched", "solve", str(p), "--formulation",
                          "exhaustive", "--param", "max_states=2", "--json", "--warm-start", "none"],
                         capture_output=True, text=True)
    # stopped at its state limit: no answer and no proof, a solver failure (exit 3;
    # exit 1 is only "infeasible")
    assert out.returncode == 3
    assert "state limit 2" in json.loads(out.stdout)["message"]
