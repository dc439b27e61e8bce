"""The bound methods' contract (optsched/bounds/base.py): unknown methods and objectives are
errors, a user's method runs from a file, and bounds stay tight and valid at epoch-time
arrivals. That every registered rung is at most every optimum (shipped, exhaustive, every
policy's objective) is tests/bounds/test_every_rung.py; each rung's pieces by hand are in its
own file (tests/bounds/test_srpt.py, test_floors.py, ...)."""

from __future__ import annotations

import math

import pytest
from handworked import shared_instance
from paths import GOOD, REPO

from optsched.bounds import BoundError, bound_methods, lower_bound
from optsched.cost import DEFAULT_PRESET, preset
from optsched.evaluation import evaluate
from optsched.instance import Instance, Request
from optsched.policies import simulate


def test_unknown_method_and_objective_are_errors():
    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    with pytest.raises(BoundError, match="unknown bound method"):
        lower_bound(inst, "makespan", "nope")
    with pytest.raises(BoundError, match="does not support"):
        lower_bound(inst, "makespan", "srpt")
    assert math.isfinite(lower_bound(inst, "mean-ttft", "combinatorial").value)


def test_own_bound_method_from_a_file(tmp_path):
    f = tmp_path / "mybound.py"
    f.write_text("from optsched.bounds import BoundResult\n"
                 "def half(instance, objective, budget):\n"
                 "    '''half the number of requests'''\n"
                 "    return BoundResult(instance.n / 2, 'half', objective)\n")
    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    assert lower_bound(inst, "makespan", f"{f}:half").value == pytest.approx(1.5)








def test_epoch_arrivals_keep_the_bound_tight():
    """Before: the bound's relative safety margin (1e-9) was taken of the epoch time itself,
    1.7 s below the optimum at t = 1.7e9 while the whole schedule lasts 0.04 s. Shifted, the
    bound is the shifted instance's plus the offset, and still below the optimum."""
    from optsched.solving import lower_bound

    base = Instance.load(GOOD).replace(cost_model=preset(DEFAULT_PRESET))
    off = 1.7e9
    epoch = base.replace(requests=tuple(
        Request(r.id, off + r.arrival * 0.01, r.prompt, r.output) for r in base.requests))
    zero = base.replace(requests=tuple(
        Request(r.id, r.arrival * 0.01, r.prompt, r.output) for r in base.requests))
    a = lower_bound(epoch, "makespan", time_limit=10).value
    b = lower_bound(zero, "makespan", time_limit=10).value
    assert abs(a - (b + off)) < 1e-5  # a few ulps of 1.7e9 (2.4e-7 each)
    best = evaluate(epoch, simulate(epoch, "vllm")).objective("makespan")
    assert a <= best


#: every registered rung that does not model prefix reuse
REUSE_BLIND = [m.name for m in bound_methods().values() if not m.reuse_aware]


@pytest.mark.parametrize("method", REUSE_BLIND)
def test_every_reuse_blind_rung_refuses_an_instance_with_prefix_ids(method):
    """A hit skips prefill work and a shared block occupies memory once (docs/semantics.md
    section 6), so a rung that does not model reuse is refused there, in one line naming it."""
    inst = shared_instance()
    for objective in bound_methods()[method].objectives:
        with pytest.raises(BoundError, match=f"'{method}' does not model prefix reuse") as e:
            lower_bound(inst, objective, method)
        assert "\n" not in str(e.value)


def test_best_refuses_in_one_line_when_no_rung_models_prefix_reuse(monkeypatch):
    import optsched.bounds.best as best

    blind = [m for m in best.rungs(cheap=False, below=best.RANK) if not m.reuse_aware]
    monkeypatch.setattr(best, "rungs", lambda **_: blind)
    with pytest.raises(BoundError, match="no rung of the ladder models prefix reuse") as e:
        lower_bound(shared_instance(), "total-latency", "best")
    assert "\n" not in str(e.value) and "combinatorial" not in str(e.value)
