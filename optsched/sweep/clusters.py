"""Clusters in a sweep (docs/semantics.md section 6, "Clusters"): the ``[[instances]]`` keys
that serve a generated instance, a trace window or a file on several engines at a stated load
per replica, the ``bound = "cluster"`` method (B17, ``formulations/bounds.md``) and the
metrics a cluster cell records.

``replicas = [2, 4, 8]`` serves the instance on ``R`` identical engines (``optsched generate
--replicas R``); ``prefill_replicas`` with ``decode_replicas`` on ``P`` prefill and ``D`` decode
engines over the default link (``--prefill-replicas P --decode-replicas D``). ``load = [0.7,
0.9]`` stretches the arrivals so that the one-engine offered load (section 4, the point figure)
is ``E x load`` over the ``E`` engines: each replica carries ``load`` (section 6, "Load per
replica"), as ``optsched generate --replicas R --load RHO`` does. ``ttft_slo`` / ``tpot_slo``
give every request SLOs, so the cell records goodput. Each key may be a list (a grid).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import InstanceError
from ..instance import Instance

#: the cluster keys of an ``[[instances]]`` row and the type of their values
CLUSTER_KEYS: dict[str, type] = {"replicas": int, "prefill_replicas": int, "decode_replicas": int,
                                 "load": float, "ttft_slo": float, "tpot_slo": float}
#: the bound method of the cluster floors (not a rung of the single-engine ladder)
CLUSTER_BOUND = "cluster"
#: objective name -> key of :func:`optsched.bounds.cluster.cluster_request_floors`
FLOOR_KEYS = {"total-latency": "total_latency", "makespan": "makespan", "mean-ttft": "mean_ttft"}
#: evaluator metrics a cluster cell keeps (``metrics`` column, JSON), when present
METRICS = ("mean_latency", "total_latency", "mean_ttft", "p99_ttft", "makespan", "goodput",
           "slo_attainment", "goodput_per_gpu", "transfers", "transfer_time", "batches")


def check_cluster_row(keys: set[str], where: str) -> str | None:
    """The problem with a row's cluster keys (None when they fit together)."""
    pd = {"prefill_replicas", "decode_replicas"} & keys
    if pd and len(pd) == 1:
        return f"{where}.{next(iter(pd))}: prefill_replicas and decode_replicas go together"
    if pd and "replicas" in keys:
        return (f"{where}.replicas: give replicas (identical engines) or prefill_replicas with "
                "decode_replicas (disaggregated), not both")
    return None


def split(point: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A grid point as (the generator's or trace's own parameters, the cluster keys)."""
    own = {k: v for k, v in point.items() if k not in CLUSTER_KEYS}
    return own, {k: v for k, v in point.items() if k in CLUSTER_KEYS}


def engines_of(cluster: dict[str, Any]) -> int:
    """How many engines the cluster keys ask for (1: none)."""
    if "replicas" in cluster:
        return int(cluster["replicas"])
    return int(cluster.get("prefill_replicas", 0) + cluster.get("decode_replicas", 0)) or 1


class LoadCache:
    """The offered load of each base instance, measured once (it runs reference policies) and
    reused for every cluster size and load of the grid (the load is linear in the stretch).
    Holds the instances it measured, so an ``id`` is never reused while cached."""

    def __init__(self) -> None:
        self._loads: dict[int, tuple[Instance, Any]] = {}

    def scaled(self, base: Instance, target: float) -> Instance:
        from ..serving.load import offered_load, scale_to_load

        hit = self._loads.get(id(base))
        if hit is None:
            hit = self._loads[id(base)] = (base, offered_load(base))
        return scale_to_load(base, target, hit[1])


def clustered(base: Instance, cluster: dict[str, Any], loads: LoadCache) -> Instance:
    """``base`` at the row's load per replica, with its SLOs, on the row's engines (the module
    docstring); ``base`` itself when the row has no cluster keys."""
    from ..cluster import disaggregate, replicate

    inst = base
    if "load" in cluster:
        load = cluster["load"]
        if not load > 0:
            raise InstanceError(f"load must be > 0, got {load!r}")
        inst = loads.scaled(base, engines_of(cluster) * load)
    if "ttft_slo" in cluster or "tpot_slo" in cluster:
        inst = inst.with_default_slos(cluster.get("ttft_slo"), cluster.get("tpot_slo"))
    tag = ""
    if "replicas" in cluster:
        inst, tag = replicate(inst, cluster["replicas"]), f"-R{cluster['replicas']}"
    elif "prefill_replicas" in cluster:
        P, D = cluster["prefill_replicas"], cluster["decode_replicas"]
        inst, tag = disaggregate(inst, P, D), f"-P{P}D{D}"
    if "load" in cluster:
        tag += f"-load{cluster['load']:g}"
    return inst.replace(name=f"{inst.name}{tag}") if tag else inst


def cluster_bound(instance: Instance, objective: str) -> tuple[float, dict[str, float]]:
    """B17's certified floor of ``objective`` (``formulations/bounds.md``: total latency ``>=
    sum_i chain_i``, mean TTFT ``>= mean_i prefill_chain_i``, the makespan floor over ``R``
    identical engines) and every floor of the instance."""
    from ..bounds.cluster import cluster_request_floors

    if objective not in FLOOR_KEYS:
        raise InstanceError(f"bound 'cluster' has no floor of {objective!r} "
                            f"(it has {', '.join(FLOOR_KEYS)})")
    floors = cluster_request_floors(instance)
    return floors[FLOOR_KEYS[objective]], floors


def metrics_json(metrics: dict[str, Any]) -> str:
    """The kept metrics of an evaluation (:data:`METRICS`), as the ``metrics`` column's JSON."""
    kept = {k: float(metrics[k]) for k in METRICS if metrics.get(k) is not None}
    return json.dumps(kept, sort_keys=True)


__all__ = ["CLUSTER_BOUND", "CLUSTER_KEYS", "FLOOR_KEYS", "LoadCache", "check_cluster_row",
           "cluster_bound", "clustered", "engines_of", "metrics_json", "split"]
