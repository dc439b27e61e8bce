"""The reuse MILP's model (formulations/reuse-milp.md): the unskippable-work cut R12 by hand,
and a decoded optimum that states its hits and drops (the evaluator replays it)."""

from __future__ import annotations

from optsched.cost import UnitCost
from optsched.formulations.reuse_milp.model import build, decode, unskippable_work
from optsched.instance import Instance, Limits, Request
from optsched.milp import SolveOptions, solve
from optsched.testing import assert_feasible


def three_sharing() -> Instance:
    return Instance("three", Limits(kv_capacity=16, max_batch_tokens=4, block_size=1), UnitCost(),
                    tuple(Request(x, 0, 3, 1, prefix=(1, 2)) for x in "abc"))


def test_unskippable_work_by_hand():
    # each request: I = 3, O = 1, blocks 1, 2 listed by all three, H = min(2, floor(2 / 1)) = 2,
    # so 3 - 2 + 0 = 1 token each; blocks 1 and 2 are computed once: 2 * b = 2. Total 5, which
    # the optimum meets (a computes 3, b and c 1 each)
    assert unskippable_work(three_sharing()) == 5
    # a block listed by one request is in its own count: 3 + 0 for a alone
    solo = Instance("solo", Limits(16, 4, block_size=1), UnitCost(),
                    (Request("a", 0, 3, 1, prefix=(1, 2)),))
    assert unskippable_work(solo) == 3


def test_the_model_decodes_to_the_schedule_it_prices():
    inst = three_sharing()
    rm = build(inst, "makespan", slots=3, at_most=3)
    res = solve(rm.model, "highs", SolveOptions(time_limit=20))
    assert res.status == "optimal" and res.objective == 2  # derived in test_solve.py
    ev = assert_feasible(inst, decode(rm, res.values))
    # two batches of C = 4 compute at most 8 of the 9 prompt tokens: at least 1 hit token
    # (which ones is the solver's choice: 3 and 4 both reach makespan 2)
    assert ev.objective("makespan") == res.objective and ev.metrics["hit_tokens"] >= 1
