"""Benchmark: replay a schedule with ~5 million entries through ``evaluate``.

Target (foundation issue): <= 10 s on the 2-core reference machine.
The schedule runs waves of K requests in lockstep (one prefill batch, then
O - 1 decode batches), so every entry is feasible and the whole replay runs.

    .venv/bin/python -m benchmarks.evaluate [--entries 5000000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from optsched.cost import PRESETS
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule


def lockstep_workload(n_entries: int, wave: int = 500, prompt: int = 10, output: int = 91):
    per_req = output  # 1 prefill entry + (output - 1) decode entries
    n = -(-n_entries // per_req)
    n = -(-n // wave) * wave
    reqs = tuple(Request(f"r{i}", 0.0, prompt, output) for i in range(n))
    inst = Instance(
        "bench-lockstep",
        Limits(kv_capacity=wave * (prompt + output - 1), max_batch_tokens=wave * prompt),
        PRESETS["infermax-llama2-7b-a100"],
        reqs,
    )
    waves = n // wave
    nb = waves * output
    members = np.arange(n).reshape(waves, wave)
    entry_req = np.repeat(members, output, axis=0).ravel()
    tokens = np.ones((waves, output, wave), np.int64)
    tokens[:, 0, :] = prompt
    batch_ptr = np.arange(nb + 1, dtype=np.int64) * wave
    sched = Schedule(
        inst.ids, batch_ptr, entry_req, tokens.ravel(),
        np.zeros(nb + 1, np.int64), np.zeros(0, np.int64), np.full(nb, np.nan),
    )
    return inst, sched


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    inst, sched = lockstep_workload(args.entries)
    build = time.perf_counter() - t0
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        ev = evaluate(inst, sched)
        times.append(time.perf_counter() - t0)
    assert ev.feasible, ev.violation_counts
    best = min(times)
    print(f"requests         {inst.n:>12,}")
    print(f"batches          {sched.n_batches:>12,}")
    print(f"entries          {sched.n_entries:>12,}")
    print(f"build (s)        {build:>12.2f}")
    print(f"evaluate (s)     {best:>12.2f}   (best of {args.repeat}; all: "
          + ", ".join(f"{t:.2f}" for t in times) + ")")
    print(f"entries / s      {sched.n_entries / best:>12,.0f}")
    print(f"target           {'met' if best <= 10 else 'MISSED'} (<= 10 s for 5 M entries)")
    print(f"makespan         {ev.metrics['makespan']:.1f} s, peak KV {ev.metrics['peak_kv']:,}")


if __name__ == "__main__":
    main()
