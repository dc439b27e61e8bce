"""Shared by the router tests (tests/cluster/): small hand-worked clusters."""

from __future__ import annotations

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, Request


def replicas(reqs, R=2, M=100, C=100) -> Instance:
    """``R`` identical engines "0".."R-1" of role both, unit time (one batch = 1)."""
    return Instance("rep", Limits(M, C), UnitCost(), tuple(Request(*r) for r in reqs),
                    cluster=Cluster(tuple(Engine(str(k)) for k in range(R))))


def engine_of(inst, schedule) -> dict[str, str]:
    """Each request's engine (the engine of its batches; a replica schedule moves none)."""
    ev = evaluate(inst, schedule)
    assert ev.feasible, ev.violation_counts
    out: dict[str, str] = {}
    for b in schedule.to_dict()["batches"]:
        for rid, *_ in b["entries"]:
            assert out.setdefault(rid, b["engine"]) == b["engine"]
    return out
