"""Prefill/decode disaggregation (optsched/cluster/pd.py), hand-worked."""

from __future__ import annotations

import pytest

from optsched.cluster import RouterError, replicate, simulate
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, Request, TransferLink

#: 4 tokens move in 0.5 + 4 / 8 = 1 time unit
LINK = TransferLink(bytes_per_token=1, bandwidth=8, fixed=0.5)


def pd(reqs, M=16, Md=None, n_decode=1):
    engines = (Engine("p", "prefill"),) + tuple(
        Engine(f"d{k}", "decode", limits=Limits(Md or M, 64)) for k in range(n_decode))
    return Instance("pd", Limits(M, 64), UnitCost(), tuple(Request(*r) for r in reqs),
                    cluster=Cluster(engines, LINK))


def test_one_request_prefills_moves_and_decodes():
    # a (I=4, O=3): prefill on p in [0, 1] (first token at 1), transfer of m = 4 tokens listed
    # on that batch: ts = 1, te = 2; decodes on d0 in [2, 3] and [3, 4]: completion 4
    inst = pd([("a", 0, 4, 3)])
    s = simulate(inst, "vllm", "pd")
    assert s.to_dict()["batches"] == [
        {"entries": [["a", 4]], "engine": "p", "transfer": [["a", "d0"]]},
        {"entries": [["a", 1]], "engine": "d0"}, {"entries": [["a", 1]], "engine": "d0"}]
    ev = evaluate(inst, s)
    assert ev.feasible and ev.first_token.tolist() == [1.0] and ev.completion.tolist() == [4.0]
    assert ev.metrics["transfers"] == 1 and ev.metrics["transfer_tokens"] == 4


def test_a_one_token_request_never_leaves_the_prefill_engine():
    inst = pd([("a", 0, 4, 1)])
    s = simulate(inst, "vllm", "pd")
    assert s.to_dict()["batches"] == [{"entries": [["a", 4]], "engine": "p"}]


def test_a_transfer_waits_for_room_on_the_decode_engine():
    # d0 holds 8 tokens; a and b (I=4, O=3, peak 6) both prefill in [0, 1]. d0 reserves a's
    # peak 6 at 1; b (6 more) must wait until a's last decode frees it: a decodes in [2, 3] and
    # [3, 4] (finished at 4). b's transfer is decided just after 4, on a new batch of p without
    # entries (p is idle), so ts just after 4, te = ts + 1, and b decodes in [te, te+1],
    # [te+1, te+2]: completion just after 7
    inst = pd([("a", 0, 4, 3), ("b", 0, 4, 3)], Md=8)
    s = simulate(inst, "vllm", "pd")
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violation_counts
    assert ev.completion[0] == 4.0 and ev.completion[1] == pytest.approx(7.0)
    assert ev.completion[1] > 7.0
    assert ev.metrics["transfers"] == 2


def test_pd_refuses_replicas_and_replica_routers_refuse_roles():
    with pytest.raises(RouterError, match="'prefill' and 'decode'"):
        simulate(replicate(pd([("a", 0, 4, 3)]).replace(cluster=None), 2), "vllm", "pd")
    with pytest.raises(RouterError, match="role 'both'"):
        simulate(pd([("a", 0, 4, 3)]), "vllm", "lor")
