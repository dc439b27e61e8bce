"""Time of the certified lower bounds on the full Azure 2023 traces (conversation: 19,366
requests; code), each rung on its own.

Setting of ``docs/results/bounds.md``: ``M = 30,000``, ``C = 8,192``, InferMax's Llama-2-7B/A100
preset, requests with ``I + O - 1 > M`` dropped; ``makespan`` with every arrival at 0 (the
offline setting) and ``total-latency`` / ``mean-ttft`` with the trace's own arrivals. Each rung
runs on a fresh copy of the instance (no floors cached by an earlier rung), ``--repeat`` times;
the table shows the bound, the fastest wall time and its process CPU time (the machine is
shared: CPU is the steadier figure), and the load::

    .venv/bin/python -m benchmarks.bounds [--traces conv,code] [--rungs request,work,srpt,mbt]
        [--repeat 3]

Skips a trace with a message when it is missing.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

from benchmarks.setting import PRESET
from optsched.bounds import bound_methods, lower_bound
from optsched.cost import preset
from optsched.instance import Instance, Limits, Request
from optsched.workloads.traces import azure_trace, load_azure

M, C = 30_000, 8192
RUNGS = ("request", "work", "srpt", "mbt", "combinatorial", "events")
CELLS = (("offline", "makespan"), ("own arrivals", "total-latency"), ("own arrivals", "mean-ttft"))


def trace_instances(kind: str) -> dict[str, Instance]:
    """The full trace with its own arrivals and with every arrival at 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the count of dropped requests
        own = load_azure(azure_trace(kind), Limits(kv_capacity=M, max_batch_tokens=C),
                         preset(PRESET), too_long="drop")
    at0 = own.replace(requests=tuple(Request(r.id, 0.0, r.prompt, r.output) for r in own.requests))
    return {"own arrivals": own, "offline": at0}


def timed(inst: Instance, objective: str, rung: str, repeat: int) -> tuple[float, float, float]:
    """(bound, fastest wall seconds, that run's CPU seconds), a fresh instance each run."""
    best = (0.0, float("inf"), 0.0)
    for _ in range(repeat):
        fresh = inst.replace(name=inst.name)
        c0, w0 = time.process_time(), time.perf_counter()
        v = lower_bound(fresh, objective, rung).value
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if wall < best[1]:
            best = (v, wall, cpu)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--rungs", default=",".join(RUNGS))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    methods = bound_methods()
    print(f"# benchmarks.bounds, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'trace':5} {'n':>6} {'setting':12} {'objective':14} {'rung':14} {'bound':>12} "
          f"{'wall s':>8} {'cpu s':>8}")
    for kind in args.traces.split(","):
        if not azure_trace(kind).exists():
            print(f"skipped {kind}: {azure_trace(kind)} not found (set OPTSCHED_DATA)")
            continue
        insts = trace_instances(kind)
        for setting, objective in CELLS:
            inst = insts[setting]
            for rung in args.rungs.split(","):
                if objective not in methods[rung].objectives:
                    continue
                v, wall, cpu = timed(inst, objective, rung, args.repeat)
                print(f"{kind:5} {inst.n:>6} {setting:12} {objective:14} {rung:14} {v:>12.6g} "
                      f"{wall:>8.3f} {cpu:>8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
