"""Simulator speed on the Azure LLM inference trace (conversation service, 19,366 requests).

Setting of issue 3: M = 100,000, C = 4,096, InferMax's Llama-2-7B/A100 cost preset.
For each size (first N requests of the trace) and policy it reports the batches, the
simulate and evaluate wall times, requests per second of simulate + evaluate and the
simulator's CPU time (other jobs on a shared machine inflate wall times)::

    .venv/bin/python bench/bench_simulate.py [--sizes 1000,2000,...] [--policies vllm,...]

Skips with a message when ``../shared/data`` is missing. Uses ``optsched.traces``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "traces" / "AzureLLMInferenceTrace_conv.csv"
SIZES = (1000, 2000, 5000, 10000, 19366)
POLICIES = ("vllm", "sarathi", "infermax")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--trace", default=str(TRACE))
    args = ap.parse_args(argv)
    if not Path(args.trace).exists():
        print(f"skipped: trace {args.trace} not found (../shared/data missing)")
        return 0
    from optsched.cost import PRESETS
    from optsched.evaluate import evaluate
    from optsched.instance import Limits
    from optsched.policies import simulate
    from optsched.traces import load_azure

    limits = Limits(kv_capacity=100_000, max_batch_tokens=4096)
    cost = PRESETS["infermax-llama2-7b-a100"]
    t0 = time.perf_counter()
    full = load_azure(args.trace, limits, cost)
    load_s = time.perf_counter() - t0
    print(f"trace {Path(args.trace).name}: {full.n} requests loaded in {load_s:.2f} s; "
          f"M=100,000, C=4,096, cost preset {cost.preset}")
    head = (f"{'policy':<20} {'requests':>8} {'batches':>8} {'entries':>9} {'evictions':>9} "
            f"{'sim s':>7} {'eval s':>7} {'total s':>7} {'req/s':>8} {'sim cpu s':>9} "
            f"{'feasible':>8}")
    print(head)
    print("-" * len(head))
    for policy in args.policies.split(","):
        for n in (int(x) for x in args.sizes.split(",")):
            inst = full if n >= full.n else full.replace(requests=full.requests[:n])
            c0 = time.process_time()
            t0 = time.perf_counter()
            s = simulate(inst, policy)
            t1 = time.perf_counter()
            cpu = time.process_time() - c0
            ev = evaluate(inst, s)
            t2 = time.perf_counter()
            tot = t2 - t0
            print(f"{policy:<20} {inst.n:>8} {s.n_batches:>8} {s.n_entries:>9} "
                  f"{ev.metrics['evictions']:>9} {t1 - t0:>7.2f} {t2 - t1:>7.2f} {tot:>7.2f} "
                  f"{inst.n / tot:>8.0f} {cpu:>9.2f} {str(ev.feasible):>8}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
