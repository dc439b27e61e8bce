"""EcoServe's scheduling overhead against vLLM's on the Azure conversation trace.

For each policy: the whole-trace simulation wall time, the time spent inside the policy's
own hooks (``SimStats.decision_seconds``: ``on_arrivals`` + ``next_batch`` +
``on_batch_end``), the number of batches and the decision time per batch; then the ratios
to ``vllm``. EcoServe reports its scheduling time within 3% of vLLM's (section 4,
"Scheduling Time Overhead"); the target set here is a whole-trace simulation in at most
2x vLLM's time. Setting (:mod:`benchmarks.setting`): M = 100,000, C = 4,096, the InferMax
Llama-2-7B/A100 cost preset, the trace's own arrival times (or ``--rate`` Poisson)::

    .venv/bin/python -m benchmarks.ecoserve [--limit N] [--rate R] [--repeat K]

Wall times on a shared machine are inflated by other jobs, so the ratios use CPU time
(``time.process_time`` for the whole simulation, ``SimStats.decision_cpu_seconds`` for the
policy's hooks). Skips with a message when the trace is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks.setting import PRESET, TRACE, C, M

POLICIES = ("vllm", "sarathi", "orca", "ecoserve-d", "ecoserve-sd", "ecoserve-sdo", "ecoserve",
            "ecoserve-oracle")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--limit", type=int, help="first N requests (default: all)")
    ap.add_argument("--rate", type=float, help="Poisson arrivals at this rate (req/s)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--repeat", type=int, default=1, help="runs per policy; the best is kept")
    args = ap.parse_args(argv)
    if not Path(args.trace).exists():
        print(f"skipped: trace {args.trace} not found (set OPTSCHED_DATA)")
        return 0
    from optsched.cost import PRESETS
    from optsched.evaluation import evaluate
    from optsched.instance import Limits
    from optsched.policies import SimStats, simulate
    from optsched.serving.rate_search import at_rate
    from optsched.workloads.traces import load_azure

    limits = Limits(kv_capacity=M, max_batch_tokens=C)
    inst = load_azure(args.trace, limits, PRESETS[PRESET])
    if args.limit:
        inst = inst.replace(requests=inst.requests[: args.limit])
    if args.rate:
        inst = at_rate(inst, args.rate, seed=0)
    print(f"{Path(args.trace).name}: {inst.n} requests, M=100,000, C=4,096, "
          f"{'Poisson ' + str(args.rate) + ' req/s' if args.rate else 'trace arrivals'}; "
          f"shared machine: wall times include other jobs' load")
    head = (f"{'policy':<16} {'batches':>8} {'sim s':>7} {'sim cpu s':>9} {'decide cpu s':>12} "
            f"{'cpu us/batch':>12} {'sim cpu/vllm':>12} {'decide cpu/vllm':>15} "
            f"{'us/batch / vllm':>15} {'feasible':>8}")
    print(head)
    print("-" * len(head))
    base = None
    for policy in args.policies.split(","):
        best = None
        for _ in range(max(1, args.repeat)):
            stats = SimStats()
            c0 = time.process_time()
            t0 = time.perf_counter()
            s = simulate(inst, policy, stats=stats)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
            if best is None or wall < best[1]:
                best = (s, wall, cpu, stats)
        s, wall, cpu, stats = best
        ev = evaluate(inst, s)
        dec = stats.decision_cpu_seconds
        per = 1e6 * dec / max(stats.batches, 1)
        if base is None and policy == "vllm":
            base = (cpu, dec, per)
        nan = float("nan")
        print(f"{policy:<16} {stats.batches:>8} {wall:>7.2f} {cpu:>9.2f} {dec:>12.2f} "
              f"{per:>12.1f} {cpu / base[0] if base else nan:>12.2f} "
              f"{dec / base[1] if base else nan:>15.2f} {per / base[2] if base else nan:>15.2f} "
              f"{str(ev.feasible):>8}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
