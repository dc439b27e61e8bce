"""Certified floors for a cluster of identical engines (``formulations/bounds.md``,
B17 "Clusters"): B3 (each request's own chain of batches) and B5 (the busy time of every
arrival suffix) with that busy time shared by the ``R`` engines.

Not a registered rung: the ladder's rungs model one engine (section 6 refuses a cluster
there); :func:`cluster_makespan_floor` is called on a cluster instance directly.
"""

from __future__ import annotations

import numpy as np

from ..errors import InstanceError
from ..instance import Instance
from .floors import Floors
from .work import _suffix, busy_floor


def identical_engine(instance: Instance) -> Instance:
    """The requests on the one engine every engine equals (limits and cost model), without
    the cluster; a one-line :class:`InstanceError` when the engines differ."""
    if instance.has_prefix and not instance.single_engine:
        raise InstanceError("cluster bound (B17): does not model prefix reuse (a hit skips "
                            "work the floors count); drop the block ids to bound the cluster")
    first = instance.engine(0)
    for k in range(1, instance.n_engines):
        e = instance.engine(k)
        if e.limits != first.limits or e.cost_model != first.cost_model:
            raise InstanceError(f"cluster makespan bound: engine {e.id!r} differs from engine "
                                f"{first.id!r} in its limits or cost model; the bound (B17) "
                                "needs identical engines")
    one = instance.for_engine(0)
    for key in [k for k in one.__dict__ if k.startswith("_bound_floors")]:
        del one.__dict__[key]  # floors of the cluster instance's own limits
    return one


def cluster_makespan_floor(instance: Instance) -> float:
    """B17: ``max(max_i a_i + chain_i, max_t t + busy(suffix_t) / R)`` over ``R`` identical
    engines (any roles, any transfers)."""
    one = identical_engine(instance)
    R = instance.n_engines
    f = Floors.of(one)
    order = np.argsort(one.arrival, kind="stable")
    a = one.arrival[order]

    def s(x, op=np.add):
        return _suffix(np.asarray(x)[order], op)

    busy = busy_floor(f, s(f.own_batches, np.maximum), s(f.tokens), s(f.area),
                      s(f.own_batches), s(f.kmin, np.maximum), s(one.prompt),
                      s(f.kmin), s(f.entry_cost))
    return float(max((a + busy / R).max(), (one.arrival + f.chain).max()))


def cluster_request_floors(instance: Instance) -> dict[str, float]:
    """B17's per-request floors over identical engines (B3 on a cluster): total latency
    ``>= sum_i chain_i``, mean TTFT ``>= mean_i prefill_chain_i``, and the makespan floor of
    :func:`cluster_makespan_floor` (keys ``total_latency``, ``mean_latency``, ``mean_ttft``,
    ``makespan``, as the evaluator's metrics)."""
    f = Floors.of(identical_engine(instance))
    n = max(instance.n, 1)
    total = float(f.chain.sum())
    return {"total_latency": total, "mean_latency": total / n,
            "mean_ttft": float(f.prefill_chain.sum()) / n,
            "makespan": cluster_makespan_floor(instance)}


__all__ = ["cluster_makespan_floor", "cluster_request_floors", "identical_engine"]
