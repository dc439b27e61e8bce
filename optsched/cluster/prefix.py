"""Prefix-aware routing (docs/semantics.md section 6, "Clusters", routers): SGLang's
cache-aware load-balancing router (the SGLang router documentation,
https://docs.sglang.ai/router/router.html, "Cache-Aware Load-Balancing Router", and the router
of sgl-project/sglang PR #2114), on the block ids of the prefix-reuse model.

At each arrival, over the engines that fit the request:

1. *Balance guard*: when the outstanding requests (waiting or running) are imbalanced --
   ``max - min > balance_abs`` **and** ``max > balance_rel * min`` -- route as ``lor``.
2. Otherwise the *match* of an engine is the number of the request's shareable blocks, from
   the first, that are resident on the engine's cache at the arrival (held by a request or
   cached unheld; blocks a batch under way computes count, as SGLang's router counts a routed
   request's text at once). The best match (the lowest position on a tie) wins when its
   match ratio -- matched over shareable blocks -- exceeds ``threshold`` (SGLang's
   ``cache_threshold``, 0.5); else ``lor``. Engines of equal match: the fewest outstanding
   requests, then the lowest position.

SGLang keeps an approximate radix tree per worker built from routing history; the engine's
actual resident blocks replace it here (exact at block granularity). SGLang's low-match
fallback is the worker with the smallest tree (most cache room); this router falls back to
``lor``, the load signal the other routers here compare against. ``threshold`` 0.5,
``balance_abs`` 32 and ``balance_rel`` 1.0001 are the SGLang router's defaults
(``cache_threshold``, ``balance_abs_threshold``, ``balance_rel_threshold`` of its
``RouterArgs``). An instance without block ids routes as ``lor``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..instance import Instance
from .base import EngineState, register_router


@register_router(
    "prefix", "prefix-aware (SGLang's cache-aware router): the engine holding the longest run "
    "of the request's blocks when it covers more than half of them and the load is balanced, "
    "else least outstanding requests",
    "SGLang router (docs.sglang.ai/router/router.html, cache-aware load balancing; "
    "sgl-project/sglang PR #2114)")
class PrefixAware:
    name = "prefix"
    #: the match ratio above which the best-matching engine wins (SGLang's cache_threshold)
    threshold = 0.5
    #: the balance guard: imbalanced when max - min > balance_abs and max > balance_rel * min
    balance_abs = 32
    balance_rel = 1.0001

    def bind(self, instance: Instance, engines: Sequence[EngineState]) -> None:
        self.engines = engines
        self.index = instance.prefix_index
        #: per run: arrivals routed by their match (the rest went by lor)
        self.by_match = 0

    def route(self, i: int, t: float, candidates: Sequence[int]) -> int:
        e = self.engines
        load = {k: e[k].outstanding(t) for k in candidates}
        lor = min(candidates, key=lambda k: (load[k], k))
        lo, hi = min(load.values()), max(load.values())
        shareable = int(self.index.shareable[i]) if self.index is not None else 0
        if shareable == 0 or (hi - lo > self.balance_abs and hi > self.balance_rel * lo):
            return lor
        match = {k: e[k].prefix_match(i, t) for k in candidates}
        best = min(candidates, key=lambda k: (-match[k], load[k], k))
        if match[best] / shareable > self.threshold:
            self.by_match += 1
            return best
        return lor
