"""MC-SF (optsched/policies/mcsf.py), hand-worked: its admission rule, predictions and safety net."""

from __future__ import annotations

from handworked import E, batches, unit_instance

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate


# -- MC-SF admission rule ------------------------------------------------------------------------
def test_mcsf_admission_rule():
    # M = 9, all at 0: a I=2 O=5, b I=2 O=2, c I=3 O=3; ascending O: b, c, a.
    # b0: b: KV after batch 0 is 2, finishes at +1: peak 3.  c: 3, finishes at +2.
    #     profile {t=2: 3+2=5, t=1: (3+1)+(2+1)=7} <= 9: admit. a: 2, finishes at +4:
    #     t=1: (2+1)+(3+1)+(2+1) = 10 > 9: reject (and stop).
    # b1: running b (KV 3 after, finishes now), c (4, finishes at +1); a: 2, fin +4:
    #     t=0: 3+4+2 = 9, t=1: 5+3 = 8, t=4: 6 -> admit a.
    # b2..b5: c finishes at b2, a decodes until g=5 at b5.
    i = unit_instance([("a", 0, 2, 5), ("b", 0, 2, 2), ("c", 0, 3, 3)], M=9)
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
