"""Ship the evidence for the large-n MC-SF finding: an instance of the online paper's random
family, MC-SF's schedule, and the best schedule the hindsight solve finds, with its bound.

    python -m studies.hindsight.evidence --n 40 --seed 0 --limit 60
    python -m studies.hindsight.evidence --rate 0.5 --horizon 40 --seed 0 --param memory=flow

The second form is the paper's online setting (``online_paper_horizon``: Poisson(rate)
arrivals in each of ``horizon`` rounds).

Writes ``instances/evidence/online-paper-n<n>-s<seed>.json`` (a loadable instance) and
``.schedules.json`` (both schedules and their total latencies as the evaluator replays them,
the solver's lower bound and the run's notes). The instances live outside ``instances/*.json``
on purpose: the manifest lists proven optima, and these are not proven.
``tests/project/test_evidence.py`` replays the shipped files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from optsched.evaluation import evaluate
from optsched.formulations import SolveOptions
from optsched.policies import simulate
from optsched.solving import solve
from optsched.workloads.generators import online_paper_horizon, online_paper_random

OUT = Path(__file__).resolve().parents[2] / "instances" / "evidence"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=None, help="online setting: arrivals per round")
    ap.add_argument("--horizon", type=int, default=None, help="online setting: rounds")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="hindsight formulation parameter, e.g. memory=flow")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    online = args.rate is not None or args.horizon is not None
    if online and (args.rate is None or args.horizon is None):
        ap.error("the online setting needs both --rate and --horizon")
    if online:
        inst = online_paper_horizon(args.rate, args.horizon, args.seed)
        name = inst.name
    else:
        name = f"online-paper-n{args.n}-s{args.seed}"
        inst = online_paper_random(args.n, args.seed, name=name)
    params = dict(p.split("=", 1) for p in args.param)
    setting = ("online setting (Poisson arrivals per round)" if online
               else "semi-online setting (all arrivals at 0)")
    mcsf = simulate(inst, "mcsf")
    mc = evaluate(inst, mcsf).objective("total-latency")
    rep = solve(inst, "hindsight", "total-latency", warm_start=mcsf,
                options=SolveOptions(time_limit=args.limit, threads=2, progress=True, params=params))
    best = evaluate(inst, rep.schedule).objective("total-latency")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    inst.save(out / f"{name}.json")
    (out / f"{name}.schedules.json").write_text(json.dumps({
        "instance": f"{name}.json",
        "reason": (f"online paper, {setting}: MC-SF (Algorithm 2) against the best schedule "
                   "of the paper's own model found by "
                   "`optsched solve --formulation hindsight` (local search + MILP) in "
                   f"{args.limit:g} s; the optimum lies in [lower_bound, best_found]"),
        "total_latency": {"mcsf": mc, "best_found": best, "lower_bound": rep.bound,
                          "status": rep.status},
        "notes": list(rep.notes),
        "schedules": {"mcsf": mcsf.to_dict(), "best_found": rep.schedule.to_dict()},
    }, indent=1))
    print(f"{name}: MC-SF {mc:g}, best found {best:g} (MC-SF/best {mc / best:.4f}), "
          f"bound {rep.bound}, status {rep.status} -> {out}")


if __name__ == "__main__":
    main()
