"""Simulator and evaluator speed on the Azure LLM inference trace (conversation service,
19,366 requests): optsched's compiled fast path against its Python path (the reference),
side by side in one run, with the schedules checked identical batch for batch.

Setting of issue 3 / issue 31: trace arrivals, M = 100,000, C = 4,096, InferMax's
Llama-2-7B/A100 cost preset. For each size (first N requests of the trace) and policy it
prints the batches, the simulation time of each path (wall and process CPU: other jobs on a
shared machine inflate wall times, CPU is the steadier figure), their ratio, whether the
schedules are identical, and the evaluation time (compiled one-pass replay vs the vectorised
replay, same verdict and metrics)::

    .venv/bin/python bench/bench_simulate.py [--sizes 1000,19366] [--policies vllm,...]
        [--no-python]   # skip the slow Python path (fast path and evaluation only)

The first call of each kernel in a fresh process loads it from numba's cache (or compiles
it, the very first time, ~30-70 s CPU); ``--cold`` reports that call separately. The
whole-process time of ``optsched simulate`` is measured with ``/usr/bin/time`` (README).
Skips with a message when ``../shared/data`` is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: ``OPTSCHED_DATA`` if set (a worktree), else ``../shared/data`` (tests/shared_data.py's rule)
DATA = Path(os.environ.get("OPTSCHED_DATA", ROOT.parent / "shared" / "data"))
TRACE = DATA / "traces" / "AzureLLMInferenceTrace_conv.csv"
SIZES = (1000, 5000, 19366)
POLICIES = ("vllm", "sarathi", "fcfs", "infermax", "mcsf")
COLUMNS = ("batch_ptr", "entry_req", "entry_tokens", "evict_ptr", "evict_req")


def _timed(f, *args, **kwargs):
    c0, t0 = time.process_time(), time.perf_counter()
    out = f(*args, **kwargs)
    return out, time.perf_counter() - t0, time.process_time() - c0


def _same(a, b) -> bool:
    return a.ids == b.ids and all(np.array_equal(getattr(a, c), getattr(b, c)) for c in COLUMNS) \
        and np.array_equal(a.start, b.start, equal_nan=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--no-python", action="store_true", help="skip the Python path")
    args = ap.parse_args(argv)
    if not Path(args.trace).exists():
        print(f"skipped: trace {args.trace} not found (../shared/data missing)")
        return 0
    from optsched import evaluate as E
    from optsched.cost import PRESETS
    from optsched.instance import Limits
    from optsched.policies import simulate
    from optsched.traces import load_azure

    limits = Limits(kv_capacity=100_000, max_batch_tokens=4096)
    cost = PRESETS["infermax-llama2-7b-a100"]
    full, t_load, _ = _timed(lambda: load_azure(args.trace, limits, cost))
    print(f"trace {Path(args.trace).name}: {full.n} requests loaded in {t_load:.2f} s; "
          f"M=100,000, C=4,096, cost preset {cost.preset}")
    # first calls load the kernels from numba's cache (compile them the very first time)
    tiny = full.replace(requests=full.requests[:50])
    _, t_sim0, c_sim0 = _timed(lambda: simulate(tiny, "vllm"))
    big = simulate(full.replace(requests=full.requests[:2000]), "vllm")
    inst2k = full.replace(requests=full.requests[:2000])
    _, t_ev0, c_ev0 = _timed(lambda: E._compiled(inst2k, big))
    print(f"first kernel calls (cache load or compile): simulate {t_sim0:.2f} s wall "
          f"{c_sim0:.2f} s CPU, evaluate {t_ev0:.2f} s wall {c_ev0:.2f} s CPU")
    head = (f"{'policy':<10} {'requests':>8} {'batches':>8} {'entries':>9} | "
            f"{'fast s':>7} {'cpu':>6} | {'python s':>8} {'cpu':>6} | {'ratio':>6} "
            f"{'same':>5} | {'eval1 s':>7} {'cpu':>6} | {'evalvec s':>9} {'cpu':>6} | "
            f"{'ratio':>6} {'same':>5}")
    print(head)
    print("-" * len(head))
    for policy in args.policies.split(","):
        for n in (int(x) for x in args.sizes.split(",")):
            inst = full if n >= full.n else full.replace(requests=full.requests[:n])
            s, t_f, c_f = _timed(simulate, inst, policy, fast=True)
            if args.no_python:
                t_p = c_p = float("nan")
                same = "-"
            else:
                r, t_p, c_p = _timed(simulate, inst, policy, fast=False)
                same = str(_same(s, r))
            ev1, t_e1, c_e1 = _timed(E._compiled, inst, s)
            saved = E.COMPILED_MIN_ENTRIES
            E.COMPILED_MIN_ENTRIES = 1 << 62
            try:
                ev2, t_e2, c_e2 = _timed(E.evaluate, inst, s)
            finally:
                E.COMPILED_MIN_ENTRIES = saved
            same_ev = ev1 is not None and ev1.metrics == ev2.metrics
            print(f"{policy:<10} {inst.n:>8} {s.n_batches:>8} {s.n_entries:>9} | "
                  f"{t_f:>7.3f} {c_f:>6.3f} | {t_p:>8.2f} {c_p:>6.2f} | {c_p / c_f:>5.0f}x "
                  f"{same:>5} | {t_e1:>7.3f} {c_e1:>6.3f} | {t_e2:>9.2f} {c_e2:>6.2f} | "
                  f"{c_e2 / c_e1:>5.0f}x {str(same_ev):>5}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
