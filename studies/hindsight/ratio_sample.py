"""MC-SF against the best schedule found, on many seeded instances of the online paper's family: a
lower bound on MC-SF / OPT per instance, and its mean with a standard error, to set beside the
paper's averages (1.005 all at 0, n = 40-60; 1.047 online).

The best schedule of an instance is an upper bound on the optimum of the paper's model (unit
time, no preemption, no chunking), so MC-SF / best <= MC-SF / OPT, and the sample mean of
MC-SF / best is a lower bound on the sample mean of MC-SF / OPT. Nothing here certifies an upper
bound on the ratio (``ff.py`` does, where its LP bound reaches).

Per instance: MC-SF (the paper's Algorithms 1-2, ``greedy_starts(inst, "mcsf")``; a test checks
it gives the ``mcsf`` policy's start slots) and the best of the list schedules improved by the
local search (H21) with a fixed number of moves (``--moves`` times n: the result depends on the
seed, not on the machine's speed). Both schedules are replayed by the evaluator, and their total
latency must equal the model's objective. Settings:

* ``offline``: ``online_paper_random(n, seed)``, all arrivals at 0, n in ``--ns``;
* ``online``: ``online_paper_horizon(rate, T, seed)``, Poisson(rate) arrivals per round, rates in
  ``--rates``, T in ``--horizons``.

    python -m studies.hindsight.ratio_sample --seeds 20 --out studies/hindsight/results/ratio-sample.jsonl
    python -m studies.hindsight.ratio_sample --summary studies/hindsight/results/ratio-sample.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from optsched.evaluation import evaluate
from optsched.formulations.hindsight import greedy_starts, objective_of_starts
from optsched.formulations.hindsight.heuristics import improve_starts
from optsched.formulations.hindsight.solve import best_known_starts
from optsched.formulations.hindsight.starts import schedule_from_starts
from optsched.instance import Instance
from optsched.workloads.generators import online_paper_horizon, online_paper_random
from studies.hindsight.ff import record

OBJ = "total-latency"


def replayed(inst: Instance, starts) -> float:
    """Total latency of ``starts`` as the evaluator replays it; it must equal the model's."""
    ev = evaluate(inst, schedule_from_starts(inst, starts))
    if not ev.feasible:
        raise RuntimeError(f"{inst.name}: the evaluator rejects a start vector")
    value = float(ev.objective(OBJ))
    if abs(value - objective_of_starts(inst, OBJ, starts)) > 1e-6 * max(1.0, value):
        raise RuntimeError(f"{inst.name}: the evaluator's objective differs from the model's")
    return value


def run_one(inst: Instance, setting: str, key: str, seed: int, moves: int) -> dict:
    t0 = time.process_time()
    mcsf = replayed(inst, greedy_starts(inst, "mcsf"))
    start, src, _ = best_known_starts(inst, OBJ, None, 0.0)
    found, _ = improve_starts(inst, OBJ, start, time_limit=math.inf, max_iters=moves * inst.n,
                              seed=seed)
    best = replayed(inst, found)
    return {"setting": setting, "key": key, "name": inst.name, "n": inst.n, "seed": seed,
            "mcsf": mcsf, "best": best, "ratio": mcsf / best, "moves": moves * inst.n,
            "cpu": time.process_time() - t0}


def plan(args) -> list[tuple[str, str, int, Instance]]:
    seeds = range(args.seed0, args.seed0 + args.seeds)
    out: list[tuple[str, str, int, Instance]] = []
    if args.ns:
        out += [("offline", f"n={n}", s, online_paper_random(n, s))
                for n in (int(x) for x in args.ns.split(",")) for s in seeds]
    if args.rates:
        out += [("online", f"rate={r:g} T={T}", s, online_paper_horizon(r, T, s))
                for r in (float(x) for x in args.rates.split(","))
                for T in (int(x) for x in args.horizons.split(",")) for s in seeds]
    return out


def summary(rows: list[dict]) -> list[str]:
    """Per setting and per (setting, key): instances, mean MC-SF / best with its standard error,
    range, and how many have MC-SF strictly above the best schedule (then MC-SF is not optimal)."""
    out = [f"{'setting':>8} {'key':>16} {'inst':>5} {'mean':>7} {'s.e.':>7} {'min':>6} "
           f"{'max':>6} {'MC-SF > best':>12}"]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["setting"], r["key"]), []).append(r)
        groups.setdefault((r["setting"], "all"), []).append(r)
    for (setting, key), rs in sorted(groups.items()):
        x = [r["ratio"] for r in rs]
        se = statistics.stdev(x) / math.sqrt(len(x)) if len(x) > 1 else math.nan
        above = sum(r["mcsf"] > r["best"] + 1e-9 for r in rs)
        out.append(f"{setting:>8} {key:>16} {len(x):>5} {statistics.mean(x):>7.4f} {se:>7.4f} "
                   f"{min(x):>6.3f} {max(x):>6.3f} {above:>7}/{len(x):<4}")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="40,50,60", help="offline: numbers of requests ('' for none)")
    ap.add_argument("--rates", default="0.5,1,1.5", help="online: arrival rates ('' for none)")
    ap.add_argument("--horizons", default="40,60", help="online: numbers of rounds T")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--moves", type=int, default=500, help="local-search moves per request")
    ap.add_argument("--out", default=None, help="JSON lines, appended instance by instance")
    ap.add_argument("--summary", nargs="*", metavar="JSONL", help="only summarise these files")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.moves < 0:
        ap.error("--seeds must be at least 1 and --moves at least 0")
    if args.summary:
        rows = [json.loads(x) for f in args.summary for x in Path(f).read_text().splitlines()
                if x.strip()]
        print("\n".join(summary(rows)))
        return
    rows = []
    for setting, key, seed, inst in plan(args):
        row = run_one(inst, setting, key, seed, args.moves)
        rows.append(row)
        record(row, f"{row['name']}: n={row['n']} MC-SF {row['mcsf']:g} best {row['best']:g} "
               f"ratio {row['ratio']:.4f} cpu {row['cpu']:.1f} s", args.out)
    print("\n".join(summary(rows)), flush=True)


if __name__ == "__main__":
    main()
