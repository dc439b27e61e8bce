"""The theory policies against the certified bound on trace windows, and the claims' worst
ratios (``docs/results/claims.md``, "Theory policies").

Windows: ``--size`` consecutive requests of the Azure 2023 conversation and code traces
(``$OPTSCHED_DATA/traces``, :mod:`studies.settings`) from the row drawn by
``optsched.workloads.traces.seeded_window(trace, size, seed)`` for each seed, arrivals as in the trace
re-based to the window's first; Llama-2-7B preset (``infermax-llama2-7b-a100``),
``M = 30,000``, ``C = 8192`` (studies/bounds/upper.py's setting); requests with ``I + O - 1 > M`` are
dropped. For each window it prints the certified bound (``lower_bound(..., "best")``) and
every policy's total latency (each schedule judged by ``evaluate``), its gap
``(policy - bound) / policy`` and its CPU time (``time.process_time``).

Then each ratio claim's worst policy / exact optimum found by ``check-claim``'s hill climb
(``--claim-trials`` instances from seed ``--claim-seed``, at most ``--max-requests``).

    OPTSCHED_DATA=../shared/data .venv/bin/python -m studies.claims.theory \\
        [--seeds 1,2,3] [--traces conv,code] [--size 1000] [--claim-trials 200]

The machine is shared (2 cores): the load (``os.getloadavg``) is printed beside the times.
"""

from __future__ import annotations

import argparse
import os
import time

from optsched.checks.claims import RATIO_CLAIMS, check_claim
from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.policies import simulate
from optsched.solving import lower_bound
from studies import settings

THEORY = ("svf", "amin", "gba", "gsa", "sorted-f", "wait", "nested-wait")
PRACTICE = ("vllm", "sarathi", "mcsf", "ecoserve")


def run(inst: Instance, policy: str) -> tuple[float, float, int]:
    """(total latency, CPU seconds, evictions) of ``policy`` on ``inst``, judged by evaluate."""
    t0 = time.process_time()
    s = simulate(inst, policy)
    cpu = time.process_time() - t0
    ev = evaluate(inst, s)
    if not ev.feasible:
        raise RuntimeError(f"{policy} on {inst.name}: infeasible {ev.violations[:1]}")
    return ev.objective("total-latency"), cpu, int(ev.metrics["evictions"])


def windows_table(traces: list[str], seeds: list[int], size: int) -> None:
    for trace in traces:
        for seed in seeds:
            inst = settings.window(trace, seed, size)
            t0 = time.process_time()
            lb = lower_bound(inst, "total-latency", "best")
            t_lb = time.process_time() - t0
            print(f"\n## {inst.name}: n = {inst.n}, load {os.getloadavg()[0]:.1f}; certified "
                  f"bound {lb.value:.6g} s ({lb.method}, {t_lb:.1f} s CPU)")
            print(f"{'policy':12s} {'total latency s':>16s} {'gap to bound':>13s} "
                  f"{'evictions':>9s} {'CPU s':>7s}")
            for policy in THEORY + PRACTICE:
                val, cpu, evs = run(inst, policy)
                assert val >= lb.value * (1 - 1e-9), (policy, val, lb.value)  # a bound never exceeds
                print(f"{policy:12s} {val:16.6g} {100 * (val - lb.value) / val:12.1f}% "
                      f"{evs:9d} {cpu:7.1f}", flush=True)


def claims_table(trials: int, seed: int, max_requests: int) -> None:
    print(f"\n## ratio claims: worst policy / exact optimum, {trials} hill-climb instances "
          f"(seed {seed}, at most {max_requests} requests), load {os.getloadavg()[0]:.1f}")
    print(f"{'claim':16s} {'stated':>8s} {'worst (classical)':>18s} {'worst (ours)':>13s} "
          f"{'violations':>10s} {'CPU s':>7s}")
    for claim, (_, bound) in RATIO_CLAIMS.items():
        t0 = time.process_time()
        rep = check_claim(claim, trials, seed, max_requests)
        cpu = time.process_time() - t0
        stated = f"{bound:g}" if bound != float("inf") else "none"
        print(f"{claim:16s} {stated:>8s} {rep.worst_ratio:18.4f} "
              f"{rep.details['unrestricted']['worst_ratio']:13.4f} {rep.violations:10d} "
              f"{cpu:7.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--claim-trials", type=int, default=200)
    ap.add_argument("--claim-seed", type=int, default=0)
    ap.add_argument("--max-requests", type=int, default=4)
    ap.add_argument("--skip-windows", action="store_true")
    a = ap.parse_args()
    if not a.skip_windows:
        windows_table(a.traces.split(","), [int(s) for s in a.seeds.split(",")], a.size)
    claims_table(a.claim_trials, a.claim_seed, a.max_requests)


if __name__ == "__main__":
    main()
