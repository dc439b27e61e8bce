"""Replicas behind a router (docs/semantics.md section 6, "Clusters"): engines of role
``both``, each running its own copy of one policy; at each arrival (in arrival order, ties in
the instance's order) every engine is run up to the arrival time, then the router picks the
request's engine from their states (Vidur's global scheduler hook: ``schedule()`` on each
request arrival, over the replicas' current state). A request stays on its engine: the
schedule moves no KV, so the evaluator can judge it engine by engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ..instance import Instance
from ..placement import PlacementBuilder
from ..policies.simulator import FAST_MIN_OUTPUT_TOKENS, Policy
from ..schedule import Schedule, ScheduleBuilder
from .base import Router, RouterError
from .engine import Batch, EngineRun


def fitting_engines(instance: Instance) -> list[list[int]]:
    """Per request, the engines of role ``both`` whose limits hold its KV peak (section 2)."""
    out: list[list[int]] = [[] for _ in range(instance.n)]
    peak = instance.prompt + instance.output - 1
    for k in range(instance.n_engines):
        e = instance.engine(k)
        if e.role != "both":
            continue
        fits = np.asarray(e.limits.kv_footprint(peak)) <= e.limits.kv_capacity  # type: ignore
        for i in np.flatnonzero(fits).tolist():
            out[i].append(k)
    return out


def run_replicas(instance: Instance, make_policy: Callable[[], Policy], router: Router, *,
                 fast: bool | None = None) -> Schedule:
    """Route ``instance``'s requests over its engines of role ``both`` (module docstring).

    ``fast``: as :func:`~optsched.policies.simulator.simulate_policy`'s, the compiled path
    (:mod:`optsched.cluster.fast`; the same schedule) for the policies and routers it covers,
    ``False`` for this Python loop, ``None`` the compiled path from
    :data:`~optsched.policies.simulator.FAST_MIN_OUTPUT_TOKENS` output tokens on."""
    roles = {instance.engine(k).role for k in range(instance.n_engines)}
    if roles != {"both"}:
        raise RouterError(f"router {router.name!r} routes over engines of role 'both', but the "
                          f"cluster has roles {sorted(roles)}; use router 'pd' for prefill/decode "
                          "engines")
    fits = fitting_engines(instance)
    if fast is None:
        fast = int(instance.output.sum()) >= FAST_MIN_OUTPUT_TOKENS
    if fast:
        compiled = _compiled(instance, make_policy, router, fits)
        if compiled is not None:
            return compiled
    engines = [EngineRun(instance.for_engine(k), make_policy(), k)
               for k in range(instance.n_engines)]
    router.bind(instance, engines)
    arr = instance.arrival
    for i in np.argsort(arr, kind="stable").tolist():
        t = float(arr[i])
        for e in engines:
            e.run_until(t)
        k = router.route(i, t, fits[i])
        if k not in fits[i]:
            raise RouterError(f"router {router.name!r} sent request {instance.ids[i]!r} to "
                              f"engine position {k}, not one of {fits[i]} that fit it")
        engines[k].arrive(i)
    for e in engines:
        e.finish()
    per = [e.batches if e.blocks is not None or not instance.has_prefix
           else engine_drops(e.instance, e.batches) for e in engines]
    return merge(instance, per)


def engine_drops(instance: Instance, batches: list[Batch]) -> list[Batch]:
    """A reuse-blind policy's batches on one engine (``instance``: the engine's) with the
    drops of every resident block of that engine nobody holds after each batch's evictions
    (:func:`~optsched.policies.reuse.auto_drops`, the single-engine rule, on the engine's own
    cache; docs/semantics.md section 6, "Clusters")."""
    from ..policies.reuse import auto_drops

    sb = ScheduleBuilder(ids=instance.ids)
    for b in batches:
        sb.add_indexed(b.req, b.tokens, b.evict)
    s = auto_drops(instance, sb.build())
    if not s.has_drops:
        return batches
    ptr, blk = s.drop_ptr.tolist(), s.drop_block.tolist()
    return [replace(b, drop=blk[ptr[j]:ptr[j + 1]]) if ptr[j + 1] > ptr[j] else b
            for j, b in enumerate(batches)]


def _compiled(instance: Instance, make_policy: Callable[[], Policy], router: Router,
              fits: list[list[int]]) -> Schedule | None:
    """The compiled path's schedule (None: it does not apply). It reads each engine's policy
    configuration only, so engines of equal limits and cost model share one bound policy
    (binding one per engine cost ~0.1 s each on 20,000 requests)."""
    from .fast import simulate_replicas_fast  # lazy: numba only when a kernel runs

    bound: list[tuple[object, object, Policy]] = []
    policies = []
    for k in range(instance.n_engines):
        e = instance.for_engine(k)
        same = [p for lim, cost, p in bound if lim == e.limits and cost == e.cost_model]
        if not same:
            same = [EngineRun(e, make_policy(), k).policy]
            bound.append((e.limits, e.cost_model, same[0]))
        policies.append(same[0])
    return simulate_replicas_fast(instance, policies, router, fits)


def merge(instance: Instance, per_engine: Sequence[Sequence[Batch]],
          transfers: dict[tuple[int, int], list[tuple[int, int]]] | None = None) -> Schedule:
    """One cluster schedule from each engine's batches, listed by start time (ties: engine
    position, then the engine's own order), the engine named on every batch;
    ``transfers[(engine, batch)]`` lists ``(request, destination)`` moves after that batch."""
    keys = [(b.start, k, j) for k, bs in enumerate(per_engine) for j, b in enumerate(bs)]
    keys.sort()
    sb = ScheduleBuilder(ids=instance.ids)
    pb = PlacementBuilder(instance.engine_ids)
    moves = transfers or {}
    for _, k, j in keys:
        b = per_engine[k][j]
        sb.add_indexed(b.req, b.tokens, b.evict, b.start if b.stated else None, hits=b.hits,
                       drop=b.drop)
        t = moves.get((k, j), ())
        pb.add_indexed(k, [r for r, _ in t], [d for _, d in t])
    sched = sb.build()
    placement, ids = pb.build(sched.ids)
    return sched.with_placement(placement, ids)


__all__ = ["engine_drops", "fitting_engines", "merge", "run_replicas"]
