"""Root LP bound of the hindsight IP with and without the completion-separation rows (H20).

For each instance of the online paper's random family (all arrivals at 0, total latency) this
builds the tight model twice (``separation=False`` / ``True``), solves both LP relaxations with
HiGHS and prints them beside the MC-SF objective (an upper bound). The LP is the bound the
branch-and-bound starts from; ``formulations/hindsight.md`` (H20) quotes these numbers.

    python -m studies.hindsight.root_lp --ns 8,12,40 --seeds 5
"""

from __future__ import annotations

import argparse
import time

from optsched.formulations.hindsight import HindsightParams, build, greedy_starts, objective_of_starts
from optsched.milp import lp_relaxation_value
from optsched.workloads.generators import online_paper_random


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="8,12,20,40")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"{'n':>3} {'seed':>4} {'MC-SF':>7} {'LP (H4)':>9} {'LP +H20':>9} {'rows H20':>8} {'s':>5}")
    for n in (int(v) for v in args.ns.split(",")):
        for seed in range(args.seeds):
            inst = online_paper_random(n, seed)
            ub = objective_of_starts(inst, "total-latency", greedy_starts(inst))
            vals, rows = [], 0
            t = time.perf_counter()
            for sep in (False, True):
                hm = build(inst, "total-latency", params=HindsightParams(separation=sep))
                vals.append(lp_relaxation_value(hm.model))
                if sep and "separation" in hm.model.groups:
                    rows = hm.model.groups["separation"].size
            print(f"{n:>3} {seed:>4} {ub:>7.0f} {vals[0]:>9.1f} {vals[1]:>9.1f} {rows:>8} "
                  f"{time.perf_counter() - t:>5.1f}", flush=True)


if __name__ == "__main__":
    main()
