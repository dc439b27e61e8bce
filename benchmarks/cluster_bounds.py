"""Time of every certified cluster bound on the full Azure 2023 conversation trace (its own
arrivals, ``benchmarks/setting.py``: ``M = 100,000``, ``C = 4,096``, InferMax's Llama-2-7B/A100
preset) over ``R`` replicas and over ``R/2`` prefill plus ``R/2`` decode engines
(``benchmarks/cluster.py``'s link): B17's makespan floor and per-request floors and B17g's
SLO-attainment ceiling (``formulations/bounds.md``). The target is 60 s per bound. Each row:
CPU and wall seconds of this process, the bound's value; the load average is printed first::

    .venv/bin/python -m benchmarks.cluster_bounds [--replicas 2,8] [--size N]
        [--ttft-slo 0.5] [--tpot-slo 0.05]

Skips with a message when the trace is missing.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable

from benchmarks.cluster import cluster_of
from benchmarks.setting import PRESET, TRACE, C, M
from optsched.bounds.cluster import cluster_makespan_floor, cluster_request_floors
from optsched.bounds.cluster_goodput import cluster_goodput_bound
from optsched.cost import preset
from optsched.instance import Instance, Limits
from optsched.workloads.traces import load_azure


def bounds(ttft: float, tpot: float) -> dict[str, Callable[[Instance], str]]:
    """Each cluster bound as a function of the instance, rendered for the table."""
    def makespan(inst: Instance) -> str:
        return f"makespan >= {cluster_makespan_floor(inst):.2f} s"

    def requests(inst: Instance) -> str:
        f = cluster_request_floors(inst)
        return f"mean latency >= {f['mean_latency']:.3f} s, mean TTFT >= {f['mean_ttft']:.4f} s"

    def goodput(inst: Instance) -> str:
        g = cluster_goodput_bound(inst, ttft, tpot)
        return f"meeting TTFT {ttft} s and TPOT {tpot} s: <= {g.both} of {g.n}"

    return {"B17 makespan": makespan, "B17 per-request": requests, "B17g ceiling": goodput}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", default="2,8")
    ap.add_argument("--size", type=int, default=0, help="first N requests (0: all)")
    ap.add_argument("--ttft-slo", type=float, default=0.5)
    ap.add_argument("--tpot-slo", type=float, default=0.05)
    args = ap.parse_args()
    if not TRACE.exists():
        print(f"# benchmarks.cluster_bounds: skipped, {TRACE} is missing")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = load_azure(TRACE, Limits(kv_capacity=M, max_batch_tokens=C), preset(PRESET),
                          too_long="drop")
    if args.size:
        full = full.replace(requests=full.requests[:args.size])
    print(f"# benchmarks.cluster_bounds, {full.n} requests, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'engines':>10} {'bound':<16} {'cpu s':>7} {'wall s':>7}  value")
    for R in (int(x) for x in args.replicas.split(",")):
        for kind, label in (("lor", f"{R} x both"), ("pd", f"{R // 2}:{R - R // 2}")):
            inst = cluster_of(full, R, kind)
            for name, f in bounds(args.ttft_slo, args.tpot_slo).items():
                c0, w0 = time.process_time(), time.perf_counter()
                value = f(inst)
                print(f"{label:>10} {name:<16} {time.process_time() - c0:7.2f} "
                      f"{time.perf_counter() - w0:7.2f}  {value}", flush=True)


if __name__ == "__main__":
    main()
