"""The router layer (docs/semantics.md section 6, "Clusters"): one policy per engine, a
router above them, a cluster schedule (a :class:`~optsched.schedule.Schedule` with a
:class:`~optsched.placement.Placement`) that the one evaluator judges.

>>> ev = optsched.evaluate(inst, optsched.cluster.simulate(inst, "vllm", router="lor"))

Routers register by name (:mod:`optsched.cluster.base`; ``rr``, ``lor``, ``least-kv`` route
over replicas of role ``both``, ``pd`` places prefill on prefill engines and moves the KV to
decode engines). :func:`replicate` turns a plain instance into ``R`` identical engines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InstanceError
from ..instance import Cluster, Engine, Instance
from ..policies import get_spec
from ..policies.simulator import Policy
from ..schedule import Schedule
from .base import ROUTERS, Router, RouterError, RouterSpec, get_router, register_router, router_names


def replicate(instance: Instance, replicas: int) -> Instance:
    """``instance`` served by ``replicas`` identical engines of role ``both`` (ids ``"0"`` ..
    ``"R-1"``, the instance's limits and cost model)."""
    if instance.cluster is not None:
        raise InstanceError("--replicas applies to an instance without a cluster; this one "
                            f"declares {instance.n_engines} engines")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or not 1 <= replicas <= 4096:
        raise InstanceError(f"replicas must be an integer in 1..4096, got {replicas!r}")
    engines = tuple(Engine(str(k)) for k in range(replicas))
    return instance.replace(cluster=Cluster(engines))


def simulate(instance: Instance, policy: str | Callable[[], Policy], router: str = "rr", *,
             params: dict[str, Any] | None = None) -> Schedule:
    """Run ``policy`` (a registered name with ``params``, or a factory of fresh policy
    objects) on every engine of ``instance`` behind ``router``; returns the cluster schedule
    (no metrics: judge it with :func:`optsched.evaluate`). A plain instance is a one-engine
    cluster."""
    spec: RouterSpec = get_router(router)
    if isinstance(policy, str):
        pspec = get_spec(policy)
        kw = dict(params or {})
        pspec.parse_params(kw)  # bad parameters fail before the run
        make: Callable[[], Policy] = lambda: pspec.make(**kw)
    else:
        if params:
            raise RouterError("params apply to a policy given by name")
        make = policy
    if spec.kind == "disaggregated":
        from .pd import run_disaggregated

        return run_disaggregated(instance, make, spec.make())
    from .replicas import run_replicas

    return run_replicas(instance, make, spec.make())


__all__ = ["ROUTERS", "Router", "RouterError", "RouterSpec", "get_router", "register_router",
           "replicate", "router_names", "simulate"]
