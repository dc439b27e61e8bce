"""Hand-worked instances and the schedules policies give on them (unit time unless stated)."""

from __future__ import annotations

from optsched.cost import (
    LinearCost,
    UnitCost,
)
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate


def hand_instance(reqs, M, C, **limits) -> Instance:
    return Instance("hand", Limits(kv_capacity=M, max_batch_tokens=C, **limits), UnitCost(),
                    tuple(Request(*r) for r in reqs))


def run_feasible(instance, policy):
    schedule = simulate(instance, policy)
    ev = evaluate(instance, schedule)
    assert ev.feasible, ev.violations
    return [sorted(b.entries) for b in schedule], ev


def hidden_instance(cost=None, M=16, block=1, reqs=None):
    return Instance("h", Limits(kv_capacity=M, max_batch_tokens=64, block_size=block,
                                hidden_cache=True),
                    cost or LinearCost(k0=1.0, k1=0.0, rho=0.25),
                    reqs or (Request("a", 0, 5, 3), Request("b", 0, 4, 2)))


def two_hidden(hidden=True):
    return Instance("t", Limits(kv_capacity=8, max_batch_tokens=8, hidden_cache=hidden),
                    UnitCost(), (Request("a", 0, 2, 2), Request("b", 0, 2, 2)))


def swap_instance(cost=None, host=8, M=8, block=1):
    return Instance("t", Limits(kv_capacity=M, max_batch_tokens=8, host_capacity=host,
                                block_size=block),
                    cost or LinearCost(k0=1.0, kswap=0.5),
                    (Request("a", 0, 4, 3), Request("b", 0, 4, 2)))


#: a prefills, is swapped out whole while b runs, is swapped back in and finishes.
SWAP_ROUND_TRIP = {"batches": [
    {"entries": [["a", 4]]},
    {"entries": [["b", 4]], "swap_out": [["a", 4]]},
    {"entries": [["b", 1]]},
    {"entries": [["a", 1]], "swap_in": ["a"]},
    {"entries": [["a", 1]]},
]}


def theory_instance(reqs, M, C=None):
    return Instance("theory-hand", Limits(kv_capacity=M, max_batch_tokens=C or M), UnitCost(),
                    tuple(Request(*r) for r in reqs))


def entries(schedule):
    return [sorted(b.entries) for b in schedule]


def total(i, s):
    ev = evaluate(i, s)
    assert ev.feasible, ev.violations[:3]
    return ev.objective("total-latency"), ev.metrics["evictions"]


def unit_instance(reqs, M=100, C=100, P=None):
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


# -- BROS batch time budget --------------------------------------------
# x (BE, I = 2, O = 3) arrives at 0; a and b (RT, I = 1, O = 2) at 0.2 with TTFT SLOs 0.5 and
# 10 and TPOT SLO 10. Unit time: every batch takes 1, so a budget >= 1 holds every entry.
LATE = [Request("x", 0, 2, 3, cls="be"),
        Request("a", 0.2, 1, 2, cls="rt", ttft_slo=0.5, tpot_slo=10.0),
        Request("b", 0.2, 1, 2, cls="rt", ttft_slo=10.0, tpot_slo=10.0)]


def shared_instance() -> Instance:
    """Two requests whose prompts share their first KV block (block size 2, docs/semantics.md
    section 6, "Prefix reuse"): ``a`` lists blocks 1, 2 and ``b`` blocks 1, 3."""
    return Instance("shared", Limits(kv_capacity=16, max_batch_tokens=16, block_size=2),
                    UnitCost(), (Request("a", 0, 5, 2, prefix=(1, 2)),
                                 Request("b", 0, 5, 2, prefix=(1, 3))))
