"""The house offered load of the instances this study measured under its first load definition.

``FINDINGS.md``'s figures were measured before ``optsched.serving.load`` existed, with the load
stated as *an arrival rate over vLLM's completions per second when the requests all arrive at
t = 0* (one queued copy: "vLLM-queued"). This script rebuilds exactly those instances (the same
generators, seeds and rates) and prints, for each, the old figure beside the house's offered load
(docs/semantics.md section 4): the point (upper side: the rate over the best reference policy's
throughput on queued copies of the mix), its certified lower side, and the load of the busiest
tenth of the requests. No policy under study is re-run: the measured figures do not change, only
the load they are stated at.

* BROS (``bros_points.py``): the RT requests of ``bros_workload`` (paper-like: ShareGPT-like RT
  lengths; Azure: the conversation trace), M = 20,000, C = 4,096, seed 1; the old denominator
  was vLLM on 1,000 RT requests at t = 0.
* EcoServe (``ecoserve_readings.py``): the seeded 1,200-request windows, Poisson arrivals (seed
  0) at 0.5 / 0.7 / 0.9 times vLLM's rate on the window queued at t = 0, and the own arrivals.

    OPTSCHED_DATA=/work/shared/data .venv/bin/python -m studies.papers36.house_loads \\
        > studies/papers36/house-loads.txt
"""

from __future__ import annotations

import argparse
import os
import time

from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.policies import get_policy, simulate
from optsched.serving.load import offered_load
from optsched.serving.rate_search import at_rate
from optsched.workloads.hybrid import bros_workload
from studies.papers36.bros_points import COST, LIMITS, TRACE, rt_part, rt_pool
from studies.papers36.ecoserve_readings import DATA, window

#: (setting, RT requests, RT rates in req/s) of the recorded BROS rows; the 0.5 / 0.7 / 0.9
#: rates of the paper-like setting are recomputed from the old denominator (``old_bros``)
BROS_ROWS = (("paper", 120, (0.5, 0.7, 0.9), None), ("paper", 120, None, (24.0,)),
             ("paper", 300, None, (24.0,)), ("azure", 60, None, (1.0, 2.0, 4.0)))


def vllm_queued(inst: Instance) -> float:
    """The old denominator: vLLM's completions per second with every request at t = 0."""
    burst = at_rate(inst, 1e12, seed=0)
    return burst.n / evaluate(burst, simulate(burst, get_policy("vllm"))).metrics["makespan"]


def cells(inst: Instance) -> str:
    t0 = time.process_time()
    ld = offered_load(inst)
    f = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    return (f"{f(ld.point):>6} {f(ld.lower):>6} {f(ld.peak):>6} {ld.status:>22} "
            f"{ld.reference or '-':>8} {time.process_time() - t0:5.1f}")


def bros() -> None:
    print("## BROS: RT offered load of the RT requests alone (BE work comes on top)")
    print(f"{'setting':8} {'RT':>4} {'rate':>6} {'old':>6} {'house':>6} {'cert.':>6} "
          f"{'peak':>6} {'status':>22} {'ref.':>8} {'cpu s':>5}")
    for setting, n, shares, rates in BROS_ROWS:
        if setting == "azure" and not TRACE.exists():
            continue
        pool = rt_pool(setting)
        one = rt_part(bros_workload(pool, 1000, 1.0, seed=1, be_batch=8, limits=LIMITS,
                                    cost_model=COST))
        sat = vllm_queued(one)
        for rate in rates or tuple(x * sat for x in shares):
            inst = rt_part(bros_workload(pool, n, rate, seed=1, be_batch=8, limits=LIMITS,
                                         cost_model=COST))
            print(f"{setting:8} {n:>4} {rate:>6.2f} {rate / sat:>6.2f} {cells(inst)}",
                  flush=True)


def ecoserve(traces: list[str], seeds: list[int]) -> None:
    print("## EcoServe: the seeded 1,200-request windows")
    print(f"{'window':8} {'row':>5} {'rate':>6} {'old':>6} {'house':>6} {'cert.':>6} "
          f"{'peak':>6} {'status':>22} {'ref.':>8} {'cpu s':>5}")
    for trace in traces:
        for seed in seeds:
            base = window(trace, seed, 1200)
            sat = vllm_queued(base)
            for x in (0.5, 0.7, 0.9):
                inst = at_rate(base, x * sat, seed=0)
                print(f"{trace} s{seed:<3} {x:>5} {x * sat:>6.2f} {x:>6.2f} {cells(inst)}",
                      flush=True)
            own = offered_load(base).arrival_rate or 0.0
            print(f"{trace} s{seed:<3} {'own':>5} {own:>6.2f} {own / sat:>6.2f} {cells(base)}",
                  flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("bros", "ecoserve"))
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--seeds", default="1,2,3")
    args = ap.parse_args(argv)
    print(f"# load average {os.getloadavg()[0]:.1f}; old = rate / vLLM-queued rate (one copy at "
          "t = 0); house = optsched.serving.load point (upper side), cert. = certified lower "
          "side, peak = busiest tenth")
    if args.only != "ecoserve":
        bros()
    if args.only != "bros" and (DATA / "traces").is_dir():
        ecoserve(args.traces.split(","), [int(s) for s in args.seeds.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
