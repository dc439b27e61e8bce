"""Power of two choices (Mitzenmacher, "The power of two choices in randomized load
balancing", IEEE TPDS 2001; the ``p2c`` balancer of Envoy and of llm-d's router): each arrival
draws two distinct engines uniformly at random among those that fit it and joins the one with
fewer outstanding requests (waiting or running), the one of lower position on a tie (so on two
engines it is ``lor``).

The draws come from a generator seeded with :attr:`PowerOfTwo.seed` (0) at every run, so a
run is reproducible; a request that only one engine fits goes there without a draw.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..instance import Instance
from .base import EngineState, register_router


@register_router(
    "p2c", "power of two choices: two engines drawn at random (seed 0) among those that fit, "
    "the one with fewer outstanding requests, the lower position on a tie",
    "Mitzenmacher, IEEE TPDS 12(10), 2001; Envoy's and llm-d's p2c load balancer")
class PowerOfTwo:
    name = "p2c"
    #: its compiled rule (optsched.cluster.fast)
    fast_router = "p2c"
    #: the seed of the draws (one generator per run)
    seed = 0

    def bind(self, instance: Instance, engines: Sequence[EngineState]) -> None:
        self.engines = engines
        self.rng = np.random.default_rng(self.seed)

    def route(self, i: int, t: float, candidates: Sequence[int]) -> int:
        if len(candidates) == 1:
            return candidates[0]
        a, b = self.rng.choice(len(candidates), size=2, replace=False).tolist()
        e = self.engines
        return min(candidates[a], candidates[b], key=lambda k: (e[k].outstanding(t), k))
