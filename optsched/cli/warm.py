"""Compile and cache the numba kernels once (``python -m optsched.cli.warm``).

The compiled simulator (:mod:`optsched.policies.fast`), router layer
(:mod:`optsched.cluster.fast`), evaluator (:mod:`optsched.evaluation.fast`) and the hindsight
model's local search (:mod:`optsched.formulations.hindsight._anneal_kernel`) are cached on
disk (``cache=True``) after their first compilation, which takes tens of CPU seconds. A
process that meets them first inside a short ``--time-limit`` would spend its budget
compiling; ``make test`` runs this module first so that no test does (CI starts from a
fresh clone with no cache).

A module of the command-line package but not a subcommand (it has no ``register``); its
imports are in :func:`warm`, so that building the full parser, which imports every module
here, does not load the policies for it."""

from __future__ import annotations

import sys
import time


def warm() -> float:
    """Run every kernel once on a small instance (both cost models); returns the seconds
    taken. Without numba there is nothing to compile and it returns at once."""
    # lazy: the full parser imports this module (module docstring)
    from ..cluster import replicate
    from ..cluster import simulate as simulate_cluster
    from ..cost import UnitCost, preset
    from ..evaluation.evaluator import _compiled
    from ..formulations.hindsight import greedy_starts, improve_starts
    from ..policies import simulate
    from ..policies.fast import HAVE_NUMBA
    from ..workloads.generators import infermax_mix

    t0 = time.perf_counter()
    if not HAVE_NUMBA:
        return 0.0
    base = infermax_mix("LILO", 8, seed=0)
    for cost in (UnitCost(), preset("infermax-llama2-7b-a100")):
        inst = base.replace(cost_model=cost)
        for name in ("vllm", "mcsf"):
            s = simulate(inst, name, fast=True)
            _compiled(inst, s)
        simulate_cluster(replicate(inst, 2), "vllm", "lor", fast=True)
    unit = base.replace(cost_model=UnitCost())
    improve_starts(unit, "total-latency", greedy_starts(unit), time_limit=60.0, max_iters=8)
    return time.perf_counter() - t0


if __name__ == "__main__":  # pragma: no cover
    took = warm()
    print(f"optsched: numba kernels compiled or loaded from the cache in {took:.1f} s",
          file=sys.stderr)
