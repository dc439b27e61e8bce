"""The certified capacity ceiling before and after B12e (``formulations/bounds.md`` B12:
the KV and count shares on hidden-cache instances) and the finer counting grid, on notebook
08's setting and on seeded windows of the conversation trace, beside the best policies'
sustainable rates.

Setting (``studies/serving/ceiling.py``): M = 10,000 in blocks of 16, C = 4,096, hidden cache,
Llama-2-7B preset, TTFT 1 s and P99 TBT 1 s, target 0.9 of every request
(``ttft-tbt-attainment``), Poisson arrivals of seed 0 scaled to each probed rate
(``rate_search.at_rate``). Instances: the first 400 conversation requests (the notebook's)
and ``--windows`` consecutive requests from the start rows of ``--seeds``
(:func:`optsched.workloads.traces.seeded_window`, as ``optsched generate azure --consecutive N --seed S``).
"Before" is B12 with the token share only on hidden instances and the 96-quantile grid (the
code before B12e and the vectorised DP, ``optsched/bounds/goodput_dp.py``).

    OPTSCHED_DATA=... .venv/bin/python -m studies.serving.ceiling_b12e [--seeds 1,2,3]
        [--windows 400] [--policies ttft-first-sr,aptserve-kv-only] [--probes 5]
"""

from __future__ import annotations

import argparse
import os
import time
from unittest import mock

import numpy as np

from optsched.bounds import goodput_dp, goodput_memory
from optsched.bounds.srpt import job_works
from optsched.serving.ceiling import ceiling
from optsched.serving.rate_search import search
from studies.settings import HI, LO, TARGET, TBT, TTFT, aptserve_windows


def token_share_only(instance, f):
    """B12 before B12e on a hidden instance: the token share alone."""
    mix = (0.0, 1.0, 0.0)
    return [(job_works(f, "mean-ttft", mix), job_works(f, "total-latency", mix))]


def base_grid(r, d, grid=None):
    """B12b's grid before the vectorised DP: 96 quantiles of the releases and deadlines."""
    pts = np.unique(np.concatenate([r, d]))
    return pts if pts.size <= 96 else np.unique(np.quantile(pts, np.linspace(0, 1, 96)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--windows", type=int, default=400)
    ap.add_argument("--policies", default="ttft-first-sr,aptserve-kv-only")
    ap.add_argument("--probes", type=int, default=5)
    args = ap.parse_args()
    print(f"# studies/serving/ceiling_b12e.py --seeds {args.seeds} --windows {args.windows} "
          f"--policies {args.policies} --probes {args.probes}; load {os.getloadavg()[0]:.1f}")
    print(f"{'instance':34} {'n':>4} {'before':>7} {'after':>7} {'cpu s':>6}  policies "
          "(sustainable req/s, share of the new ceiling)")
    for label, inst in aptserve_windows([int(s) for s in args.seeds.split(",")], args.windows):
        t0 = time.process_time()
        with mock.patch.object(goodput_memory, "rule_works", token_share_only), \
                mock.patch.object(goodput_dp, "grid_points", base_grid):
            old = ceiling(inst, TARGET, LO, HI, probes=12, ttft_slo=TTFT, tbt_slo=TBT)
        new = ceiling(inst, TARGET, LO, HI, probes=12, ttft_slo=TTFT, tbt_slo=TBT)
        cpu = time.process_time() - t0
        pols = []
        for p in filter(None, args.policies.split(",")):
            r = search(inst, p, "ttft-tbt-attainment", TARGET, LO, HI, probes=args.probes,
                       progress=False, settings={"ttft_slo": TTFT, "tbt_slo": TBT})
            rate = r.sustainable_rate or 0.0
            share = rate / new.ruled_out_rate if new.ruled_out_rate else float("nan")
            pols.append(f"{p} {rate:.2f} ({share:.0%})")
        print(f"{label:34} {inst.n:>4} {old.ruled_out_rate or float('nan'):>7.2f} "
              f"{new.ruled_out_rate or float('nan'):>7.2f} {cpu:>6.1f}  " + ", ".join(pols),
              flush=True)


if __name__ == "__main__":
    main()
