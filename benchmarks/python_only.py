"""Which built-in policies still run only in Python, and what their Python path costs: the
evidence for "kernels where it pays" (``docs/results/speed.md``).

For every registered policy it says whether a compiled kernel applies
(:func:`optsched.policies.fast.fast_config`) and, on seeded windows of the Azure
conversation trace (:func:`optsched.workloads.traces.seeded_window`, the one window definition;
M = 100,000, C = 4,096, InferMax's Llama-2-7B/A100 preset), the Python path's batches and
process CPU seconds (``time.process_time``: the machine is shared), and its CPU per batch::

    OPTSCHED_DATA=/work/shared/data .venv/bin/python -m benchmarks.python_only \\
        [--size 2000] [--seeds 0,1] [--policies sorted-f,gba,...]

By default only the policies without a kernel run (``--all`` adds the others' Python path
for comparison). Skips with a message when the trace is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from benchmarks.setting import PRESET, TRACE, C, M


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--policies", help="comma-separated (default: every policy, see --all)")
    ap.add_argument("--all", action="store_true", help="also the policies that have a kernel")
    args = ap.parse_args(argv)
    if not TRACE.exists():
        print(f"skipped: trace {TRACE} not found (set OPTSCHED_DATA)")
        return 0
    from optsched.cost import PRESETS
    from optsched.instance import Limits
    from optsched.policies import get_policy, list_policies, simulate
    from optsched.policies.fast import fast_config
    from optsched.policies.simulator import SimView, _Sim, bind_predictor, known_outputs
    from optsched.workloads.traces import read_trace, seeded_window, trace_to_instance

    raw = read_trace(TRACE, format="azure")
    limits = Limits(kv_capacity=M, max_batch_tokens=C)
    cost = PRESETS[PRESET]
    names = args.policies.split(",") if args.policies else [s.name for s in list_policies()]
    print(f"{'policy':<20} {'kernel':>6} {'seed':>4} {'requests':>8} {'batches':>8} | "
          f"{'python cpu s':>12} {'us/batch':>8}")
    for seed in (int(x) for x in args.seeds.split(",")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inst = trace_to_instance(seeded_window(raw, args.size, seed), limits, cost,
                                     name=f"conv-w{seed}", too_long="drop")
        for name in names:
            p = get_policy(name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sim = _Sim(inst)
                view = SimView(sim, known_outputs(inst, p.hypothetical, p.output_fallback))
                bind_predictor(inst, p, view, sim)  # EcoServe's length predictor
                p.bind(view)
                kernel = fast_config(inst, p) is not None
            if kernel and not args.all:
                continue
            c0 = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s = simulate(inst, name, fast=False)
            cpu = time.process_time() - c0
            print(f"{name:<20} {str(kernel):>6} {seed:>4} {inst.n:>8} {s.n_batches:>8} | "
                  f"{cpu:>12.2f} {1e6 * cpu / max(s.n_batches, 1):>8.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
