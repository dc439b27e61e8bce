"""The exhaustive search with prefix reuse (optsched/formulations/exhaustive/reuse.py,
formulations/exhaustive-reuse.md): optima derived by hand (one needs hits, one needs drops),
the pruning rules E4/E5 against the search without them, the size guard, and on random tiny
instances with sharing: every reuse-aware bound rung <= the exact optimum <= every policy
(docs/semantics.md section 6, "Prefix reuse"; formulations/bounds.md B19)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import optsched
from optsched.bounds import bound_methods
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.formulations.base import FormulationError
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.formulations.exhaustive.reuse import MAX_REQUESTS
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate
from optsched.schedule import Schedule
from optsched.testing import (
    assert_bound_valid,
    assert_feasible,
    tiny_prefix_instance,
    tiny_prefix_instances,
)

OBJS = ("makespan", "total-latency", "mean-ttft")
REUSE_RUNGS = [m.name for m in bound_methods().values() if m.reuse_aware]


def opt(inst: Instance, objective: str, **kw):
    """The search's optimum, its schedule replayed by the evaluator (which must agree)."""
    r = search(inst, objective, SearchOptions(**kw))
    assert r.status == "optimal", r.message
    ev = assert_feasible(inst, r.schedule)
    assert ev.objective(objective) == pytest.approx(r.objective, rel=1e-9, abs=1e-12)
    return r, ev


def three_sharing() -> Instance:
    """Three requests of 3 prompt tokens and 1 output token listing blocks 1, 2 (b = 1), C = 4."""
    return Instance("three", Limits(kv_capacity=16, max_batch_tokens=4, block_size=1), UnitCost(),
                    tuple(Request(x, 0, 3, 1, prefix=(1, 2)) for x in "abc"))


def test_an_optimum_that_needs_hits():
    inst = three_sharing()
    # Without reuse: 9 prompt tokens, C = 4 per batch -> at least 3 batches. With reuse: the
    # first batch can hit nothing (nothing is resident), and two prompts (6 tokens) exceed C,
    # so it finishes at most one request: batch 1 computes a's 3 tokens (blocks 1, 2 join R);
    # batch 2: b and c each hit 2 tokens (H = min(2, floor((3 - 1) / 1)) = 2) and compute 1.
    # Makespan 2, which needs hits (2 batches of C = 4 cannot compute 9 tokens); total
    # latency: one request done after batch 1 at best, the others after >= 2: 1 + 2 + 2 = 5.
    r, ev = opt(inst, "makespan")
    assert r.objective == 2 and ev.metrics["hit_tokens"] > 0
    assert opt(inst, "total-latency")[0].objective == 5
    # the same prompts without ids, by the reuse-blind search: 3 (an independent check)
    blind = inst.replace(requests=tuple(Request(q.id, 0, 3, 1) for q in inst.requests))
    assert search(blind, "makespan").objective == 3


def test_an_optimum_that_needs_a_drop_to_admit_a_request():
    # a lists blocks 1, 2 and c blocks 7, 8 (b = 2), I = 5, O = 1; M = 6 = fp(5), C = 5: one
    # prompt per batch, so makespan >= 2. After a finishes, its blocks 1, 2 stay cached (4
    # tokens); c then needs blocks 7, 8 (4) and a private block (2): 4 + 4 + 2 = 10 > M = 6,
    # so batch 2 must drop both cached blocks (k = ceil((10 - 6) / 2) = 2). Optimum 2.
    inst = Instance("drop", Limits(kv_capacity=6, max_batch_tokens=5, block_size=2), UnitCost(),
                    (Request("a", 0, 5, 1, prefix=(1, 2)), Request("c", 0, 5, 1, prefix=(7, 8))))
    r, ev = opt(inst, "makespan")
    assert r.objective == 2 and ev.metrics["dropped_blocks"] == 2
    d = r.schedule.to_dict()
    assert sorted(d["batches"][1]["drop"]) in ([1, 2], [7, 8])
    # the same batches without the drops overflow the KV cache
    for b in d["batches"]:
        b.pop("drop", None)
    bad = evaluate(inst, Schedule.from_dict(d))
    assert not bad.feasible and bad.violations[0].code == "KV_OVERFLOW"


@pytest.mark.parametrize("seed", [5, *(pytest.param(s, marks=pytest.mark.slow)
                                      for s in (0, 4, 6))])
def test_pruning_rules_keep_the_optimum(seed):
    """E4 (fewest drops) and E5 (necessary evictions) against every drop set and eviction."""
    inst = tiny_prefix_instance(seed)
    for objective in OBJS:
        pruned = search(inst, objective, SearchOptions(max_states=3000))
        full = search(inst, objective, SearchOptions(max_states=3000, pruning=False))
        assert pruned.status == full.status == "optimal", (pruned.message, full.message)
        assert pruned.objective == pytest.approx(full.objective, rel=1e-9)


def test_the_size_guard_refuses_in_one_line():
    inst = Instance("big", Limits(64, 64, block_size=2), UnitCost(),
                    tuple(Request(f"r{k}", 0, 4, 1, prefix=(1,)) for k in range(MAX_REQUESTS + 1)))
    with pytest.raises(FormulationError, match="too large for the exhaustive search") as e:
        search(inst, "makespan")
    assert "\n" not in str(e.value) and f"{MAX_REQUESTS + 1} requests" in str(e.value)


def test_state_limit_is_no_solution_not_a_wrong_answer():
    r = search(three_sharing(), "makespan", SearchOptions(max_states=3))
    assert r.status == "no_solution" and "state limit 3" in r.message


#: the reuse-aware policies and the reuse-blind vLLM (the fast test runs these only)
NAMED = ("vllm", "vllm-apc", "sarathi-apc", "lpm", "dfs", "k-lpm", "belady")


def _sandwich(inst: Instance, policies: tuple[str, ...] | None = None) -> None:
    """Every reuse-aware rung <= the exact optimum <= every policy that runs on ``inst``."""
    evs = {}
    for name in policies or tuple(s.name for s in list_policies()):
        try:
            evs[name] = evaluate(inst, simulate(inst, name))
        except optsched.OptschedError:
            continue  # a policy that refuses this instance (e.g. needs SLOs)
    assert set(NAMED) <= set(evs)
    for objective in OBJS:
        best = search(inst, objective, SearchOptions(max_states=3000, time_limit=3))
        if best.status != "optimal":
            continue  # not proven in budget: nothing is claimed
        value = assert_feasible(inst, best.schedule).objective(objective)
        lb = optsched.lower_bound(inst, objective, "best", time_limit=2.0)
        # best climbs every reuse-aware rung; its ladder holds each one's value
        assert set(lb.ladder) <= set(REUSE_RUNGS) and lb.ladder
        assert_bound_valid({**lb.ladder, "best": lb.value}, value, "the exhaustive optimum", inst)
        for name, ev in evs.items():
            assert ev.feasible, name
            assert value <= ev.objective(objective) * (1 + 1e-9) + 1e-12, (name, objective)


def test_bounds_below_the_optimum_below_every_policy_on_one_instance():
    _sandwich(three_sharing(), NAMED)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(inst=tiny_prefix_instances())
def test_bounds_below_the_optimum_below_every_policy(inst):
    _sandwich(inst)
