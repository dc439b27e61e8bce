"""A restricted model's optimum is never taken for the optimum of docs/semantics.md.

``seq-unit-3`` (makespan): the hindsight IP (no preemption, no chunking, unit slots) proves
6, while pausing a request gives 5 (instances/manifest.json records both, proved by the
exhaustive search and the InferMax MILP). Its "optimum" and its bound must therefore not
serve as a gap reference or a lower bound.
"""

from __future__ import annotations

from pathlib import Path

from optsched.comparison import compare
from optsched.formulations import SolveOptions
from optsched.formulations.base import bound_is_global
from optsched.instance import Instance
from optsched.solving import solve

ROOT = Path(__file__).resolve().parents[1]
SEQ = Instance.load(ROOT / "instances" / "seq-unit-3.json")
OPTS = SolveOptions(time_limit=30, progress=False)


def test_hindsight_optimum_is_flagged_restricted_and_lies_above_the_true_optimum():
    rep = solve(SEQ, "hindsight", "makespan", options=OPTS)
    true = solve(SEQ, "exhaustive", "makespan", options=OPTS)
    assert rep.status == "optimal" and true.status == "optimal"
    assert rep.restricted and rep.global_bound is None and not bound_is_global(rep)
    assert not true.restricted and true.global_bound == true.objective
    # the restriction costs something here, so using it as a lower bound would be wrong
    assert rep.objective > true.objective
    assert rep.to_dict()["restricted"] is True


def test_compare_never_measures_gaps_against_a_restricted_optimum():
    cmp = compare(SEQ, ["fcfs"], optimal=True, formulation="hindsight", objective="makespan",
                  time_limit=30)
    assert cmp.optimum is not None and cmp.optimum.objective is not None
    assert cmp.reference_kind == "bound" and cmp.reference is not None
    assert cmp.reference <= solve(SEQ, "exhaustive", "makespan", options=OPTS).objective + 1e-9
    assert all(r.gap is None or r.gap >= -1e-9 for r in cmp.rows)


def test_hypotheses_restrict_the_problem():
    from optsched.formulations import Hypotheses

    rep = solve(SEQ, "exhaustive", "makespan", hypotheses=Hypotheses(no_evictions=True),
                options=OPTS)
    assert rep.restricted and rep.global_bound is None


def test_uncertified_batch_horizon_is_flagged_restricted():
    """k0 = 1/64 per batch, kpr = 1/16 per prefill entry, all else free; q0 (I=1, O=1), q1 and
    q2 (I=1, O=2), total latency. One request at a time in 5 batches ends at 5, 11, 17 (q0; q2's
    prefill + decode; q1's): 33/64. The InferMax models' horizon is J = 4 batches, whose best is
    q0 alone (5) then q1 and q2 together (prefill 9, decode 1): 5 + 15 + 15 = 35/64."""
    from optsched.cost import LinearCost
    from optsched.instance import Limits, Request

    inst = Instance("horizon", Limits(kv_capacity=5, max_batch_tokens=3),
                    LinearCost(k0=1 / 64, kpr=1 / 16),
                    (Request("q0", 0.0, 1, 1), Request("q1", 0.0, 1, 2), Request("q2", 0.0, 1, 2)))
    ex = solve(inst, "exhaustive", "total-latency", options=OPTS)
    assert ex.status == "optimal" and ex.objective * 64 == 33
    for variant in ("flow", "tight"):
        rep = solve(inst, "infermax", "total-latency",
                    options=SolveOptions(time_limit=30, progress=False, params={"variant": variant}))
        assert rep.objective * 64 >= 35 - 1e-9
        assert rep.restricted and rep.global_bound is None, variant
