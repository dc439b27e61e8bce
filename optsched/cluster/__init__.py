"""The router layer (docs/semantics.md section 6, "Clusters"): one policy per engine, a
router above them, a cluster schedule (a :class:`~optsched.schedule.Schedule` with a
:class:`~optsched.placement.Placement`) that the one evaluator judges.

>>> ev = optsched.evaluate(inst, optsched.cluster.simulate(inst, "vllm", router="lor"))

Routers register by name (:mod:`optsched.cluster.base`; ``rr``, ``lor``, ``least-kv`` route
over replicas of role ``both``, ``pd`` places prefill on prefill engines and moves the KV to
decode engines; ``p2c`` draws two replicas; ``prefix`` follows the requests' cached prefix
blocks, SGLang's cache-aware rule, on instances with block ids). :func:`replicate` turns a plain instance into
``R`` identical engines, :func:`disaggregate` into ``P`` prefill and ``D`` decode engines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..cost import PCIE4_BYTES_PER_SECOND
from ..errors import InstanceError
from ..instance import Cluster, Engine, Instance, TransferLink
from ..policies import get_spec
from ..policies.simulator import Policy
from ..schedule import Schedule
from .base import ROUTERS, Router, RouterError, RouterSpec, get_router, register_router, router_names

#: the default transfer link's bandwidth (bytes per second): 25 GB/s, a PCIe 4.0 x16 link's
#: effective rate (``optsched.cost.PCIE4_BYTES_PER_SECOND``; 200 Gb/s InfiniBand is the same)
DEFAULT_BANDWIDTH = PCIE4_BYTES_PER_SECOND
#: the most engines :func:`replicate` and :func:`disaggregate` build
MAX_ENGINES = 4096


def _count(name: str, v: object, low: int = 1) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= MAX_ENGINES:
        raise InstanceError(f"{name} must be an integer in {low}..{MAX_ENGINES}, got {v!r}")
    return v


def _plain(instance: Instance, flag: str) -> None:
    if instance.cluster is not None:
        raise InstanceError(f"{flag} applies to an instance without a cluster; this one "
                            f"declares {instance.n_engines} engines")


def replicate(instance: Instance, replicas: int) -> Instance:
    """``instance`` served by ``replicas`` identical engines of role ``both`` (ids ``"0"`` ..
    ``"R-1"``, the instance's limits and cost model)."""
    _plain(instance, "--replicas")
    engines = tuple(Engine(str(k)) for k in range(_count("replicas", replicas)))
    return instance.replace(cluster=Cluster(engines))


def default_link(instance: Instance, *, bandwidth: float = DEFAULT_BANDWIDTH, fixed: float = 0.0,
                 bytes_per_token: float | None = None) -> TransferLink:
    """The transfer link of a disaggregated cluster of ``instance``'s engines: its model's KV
    bytes per token (fp16, from the cost preset's model,
    :func:`optsched.workloads.capacity.preset_kv_bytes`) unless given, over ``bandwidth``
    bytes per second (25 GB/s) with ``fixed`` seconds per transfer (0). A cost model of no
    known model (unit time, a fitted file) needs ``bytes_per_token``."""
    if bytes_per_token is None:
        from ..workloads.capacity import preset_kv_bytes

        label = getattr(instance.cost_model, "preset", None)
        known = preset_kv_bytes(label)
        if known is None:
            raise InstanceError(f"cost model {label or instance.cost_model.kind!r} names no "
                                "model whose KV bytes per token are known; give "
                                "--transfer-bytes-per-token")
        bytes_per_token = known
    return TransferLink(bytes_per_token=bytes_per_token, bandwidth=bandwidth, fixed=fixed)


def disaggregate(instance: Instance, prefill: int, decode: int,
                 link: TransferLink | None = None) -> Instance:
    """``instance`` served by ``prefill`` engines of role ``prefill`` (ids ``"p0"`` ..) and
    ``decode`` of role ``decode`` (``"d0"`` ..), the instance's limits and cost model each,
    linked by ``link`` (:func:`default_link` when None): DistServe's and Splitwise's
    disaggregated serving (docs/semantics.md section 6, "Clusters")."""
    _plain(instance, "--prefill-replicas/--decode-replicas")
    P, D = _count("prefill replicas", prefill), _count("decode replicas", decode)
    engines = tuple(Engine(f"p{k}", "prefill") for k in range(P)) + \
        tuple(Engine(f"d{k}", "decode") for k in range(D))
    return instance.replace(cluster=Cluster(engines, link or default_link(instance)))


def identical_replicas(instance: Instance) -> int | None:
    """``R`` when ``instance``'s cluster is ``R`` engines of role ``both`` with the instance's
    own limits and cost model (what :func:`replicate` builds), else None."""
    c = instance.cluster
    if c is None:
        return None
    for e in c.engines:
        if e.role != "both" or e.limits not in (None, instance.limits) \
                or e.cost_model not in (None, instance.cost_model):
            return None
    return c.n


def replica_load(load: Any, replicas: int) -> tuple[dict[str, Any], str, str | None]:
    """The load per replica of ``replicas`` identical engines from one engine's
    :class:`~optsched.serving.load.OfferedLoad` (both sides over ``R``, docs/semantics.md
    section 6, "Load per replica"): its JSON, a line for humans and an overload warning
    (None when stable)."""
    R = replicas
    side = {k: (None if getattr(load, k) is None else getattr(load, k) / R)
            for k in ("point", "lower", "upper")}
    doc = {"replicas": R, **side, "one_engine": load.to_dict()}
    if side["point"] is None:
        return doc, f"load per replica of {R}: none ({load.describe()})", None
    lo = f"{side['lower']:.3g} certified .. " if side["lower"] is not None else ""
    line = f"load per replica of {R}: {lo}{side['point']:.3g} (one engine's: {load.point:.3g})"
    warning = None
    if side["lower"] is not None and side["lower"] > 1:
        warning = (f"the cluster is overloaded (certified: load per replica >= "
                   f"{side['lower']:.3g}): latency grows with the window's length; see --load")
    elif side["point"] > 1:
        warning = (f"the cluster is overloaded against {load.reference}'s rate (load per "
                   f"replica {side['point']:.3g}, not certified): latency grows with the "
                   "window's length; see --load")
    return doc, line, warning


def simulate(instance: Instance, policy: str | Callable[[], Policy], router: str = "rr", *,
             params: dict[str, Any] | None = None, fast: bool | None = None) -> Schedule:
    """Run ``policy`` (a registered name with ``params``, or a factory of fresh policy
    objects) on every engine of ``instance`` behind ``router``; returns the cluster schedule
    (no metrics: judge it with :func:`optsched.evaluate`). A plain instance is a one-engine
    cluster. ``fast`` picks the compiled router path for replicas
    (:func:`~optsched.cluster.replicas.run_replicas`; the same schedule)."""
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

    return run_replicas(instance, make, spec.make(), fast=fast)


__all__ = ["DEFAULT_BANDWIDTH", "ROUTERS", "Router", "RouterError", "RouterSpec", "default_link",
           "disaggregate", "get_router", "identical_replicas", "register_router", "replica_load",
           "replicate", "router_names", "simulate"]
