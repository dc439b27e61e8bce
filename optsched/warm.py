"""Compile and cache the numba kernels once (``python -m optsched.warm``).

The compiled simulator (:mod:`optsched.policies.fast`) and evaluator
(:mod:`optsched.evaluate_fast`) are cached on disk (``cache=True``) after their first
compilation, which takes tens of CPU seconds. A process that meets them first inside a short
``--time-limit`` would spend its budget compiling; ``make test`` runs this module first so
that no test does (CI starts from a fresh clone with no cache)."""

from __future__ import annotations

import sys
import time

from .cost import UnitCost, preset
from .evaluate import _compiled
from .policies import simulate
from .policies.fast import HAVE_NUMBA
from .workloads.generators import infermax_mix


def warm() -> float:
    """Run every kernel once on a small instance (both cost models); returns the seconds
    taken. Without numba there is nothing to compile and it returns at once."""

    t0 = time.perf_counter()
    if not HAVE_NUMBA:
        return 0.0
    base = infermax_mix("LILO", 8, seed=0)
    for cost in (UnitCost(), preset("infermax-llama2-7b-a100")):
        inst = base.replace(cost_model=cost)
        for name in ("vllm", "mcsf"):
            s = simulate(inst, name, fast=True)
            _compiled(inst, s)
    return time.perf_counter() - t0


if __name__ == "__main__":  # pragma: no cover
    took = warm()
    print(f"optsched: numba kernels compiled or loaded from the cache in {took:.1f} s",
          file=sys.stderr)
