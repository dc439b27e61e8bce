"""What checking every policy plan costs (integer tokens, indices in range).

For plans of 1, 40 and 1,000 entries given as lists and as int64 arrays it prints the time
of :func:`optsched.policies.simulator.checked_plan` next to the unchecked conversion the
simulator did before (``np.asarray(..., dtype=np.int64)``, which floors 16.5 to 16), and the
share of a whole ``simulate`` spent in the check (CPU time of this thread)::

    .venv/bin/python -m benchmarks.plan_checks [--n 2000]
"""

from __future__ import annotations

import argparse
import time
import timeit

import numpy as np


def per_call(fn, number: int = 20000) -> float:
    return timeit.timeit(fn, number=number) / number


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="requests in the simulated instance")
    args = ap.parse_args(argv)
    import optsched.policies.simulator as sim
    from optsched.instance import Limits
    from optsched.policies import Plan, simulate
    from optsched.workloads.generators import infermax_mix

    ids = tuple(f"r{i}" for i in range(5000))
    print(f"{'entries':>7} {'given as':>8} {'checked us':>10} {'unchecked us':>12} {'ratio':>6}")
    for k in (1, 40, 1000):
        for kind, plan in (("list", Plan(list(range(k)), [1] * k, [])),
                           ("array", Plan(np.arange(k), np.ones(k, np.int64),
                                          np.zeros(0, np.int64)))):
            a = per_call(lambda plan=plan: sim.checked_plan(plan, "x", 0, ids))
            b = per_call(lambda plan=plan: (np.asarray(plan.req, dtype=np.int64),
                                            np.asarray(plan.tokens, dtype=np.int64),
                                            np.asarray(plan.evict, dtype=np.int64)))
            print(f"{k:>7} {kind:>8} {a * 1e6:>10.2f} {b * 1e6:>12.2f} {a / b:>6.2f}")

    inst = infermax_mix("LISO", args.n, limits=Limits(kv_capacity=20_000, max_batch_tokens=2048),
                        seed=0)  # all at t = 0; prompts of 512 or 1,024
    original = sim.checked_plan
    spent = [0.0, 0]

    def timed(*a):
        t = time.thread_time()
        out = original(*a)
        spent[0] += time.thread_time() - t
        spent[1] += 1
        return out

    sim.checked_plan = timed
    try:
        print(f"\n{'policy':<9} {'requests':>8} {'batches':>8} {'simulate cpu s':>14} "
              f"{'check cpu s':>11} {'share':>6}")
        for policy in ("vllm", "sarathi", "infermax"):
            spent[:] = [0.0, 0]
            t = time.thread_time()
            simulate(inst, policy)
            total = time.thread_time() - t
            print(f"{policy:<9} {inst.n:>8} {spent[1]:>8} {total:>14.2f} {spent[0]:>11.3f} "
                  f"{spent[0] / total:>6.1%}")
    finally:
        sim.checked_plan = original
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
