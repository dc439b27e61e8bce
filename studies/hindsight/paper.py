"""MC-SF against the hindsight optimum at the online paper's size, both of its settings
(``formulations/hindsight.md``, "The paper's experiment"; ``docs/results/hindsight.md``).

Settings (the later version of the paper, arXiv:2502.07115; the passage is lost in our copy
``papers/001_*.txt``, so the parameters below are the ones quoted from it when this study was
set up):

* ``offline`` -- semi-online, all arrivals at 0: ``online_paper_random(n, seed)`` with
  n in 40..60 (M ~ U[30, 50], s ~ U[1, 5], o ~ U[1, M - s], I = s + 1, O = o).
* ``online`` -- arrivals over a horizon of T unit rounds (T in 40..60), the number arriving
  in each round Poisson(rate) (rate in 0.5..1.5); the same M, s, o draws; n is whatever arrived
  (``optsched.workloads.generators.online_paper_horizon``). The generator's generator's
  ``arrival="poisson"`` fixes n instead and runs the rounds until n requests arrived; with
  n = rate * T the two agree in law up to the stopping rule.

Per instance: MC-SF (the ``mcsf`` policy, replayed by ``evaluate``), then the hindsight IP
(tight variant, HiGHS, 2 threads, warm-started with MC-SF) for ``--limit`` seconds. The IP's
best schedule is an upper bound on the optimum of the paper's model and its bound a lower
bound, so ``MC-SF / best`` <= MC-SF / OPT <= ``MC-SF / bound``. Prints one row per instance
(n, seed, MC-SF, best known, bound, gap, proven?, seconds) and per-setting summaries; writes
JSON and a Markdown table.

    python -m studies.hindsight.paper --settings offline --ns 40,50,60 --seeds 5 --limit 120
    python -m studies.hindsight.paper --settings online --rates 0.5,1,1.5 --horizons 40,50,60
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from optsched.evaluation import evaluate
from optsched.formulations import SolveOptions
from optsched.instance import Instance
from optsched.policies import simulate
from optsched.solving import solve
from optsched.workloads.generators import online_paper_horizon, online_paper_random

OBJ = "total-latency"


def run_one(inst: Instance, limit: float, solver: str, params: dict) -> dict:
    mcsf = simulate(inst, "mcsf")
    mc = evaluate(inst, mcsf).objective(OBJ)
    opts = SolveOptions(solver=solver, time_limit=limit, threads=2, progress=False, params=params)
    t = time.perf_counter()
    rep = solve(inst, "hindsight", OBJ, options=opts, warm_start=mcsf)
    wall = time.perf_counter() - t
    best = evaluate(inst, rep.schedule).objective(OBJ) if rep.schedule is not None else None
    return {"name": inst.name, "n": inst.n, "M": inst.limits.kv_capacity, "mcsf": mc,
            "best": best, "bound": rep.bound, "gap": rep.gap, "status": rep.status,
            "proven": rep.status == "optimal", "seconds": wall, "solver": rep.solver,
            "params": params}


def row_text(r: dict, key: str) -> str:
    bound = "-" if r["bound"] is None else f"{r['bound']:.0f}"
    gap = "-" if r["gap"] is None else f"{r['gap']:.1%}"
    hi = "-" if not r["bound"] else f"{r['mcsf'] / r['bound']:.3f}"
    return (f"| {key} | {r['n']} | {r['mcsf']:.0f} | {r['best']:.0f} | {bound} | {gap} | "
            f"{'yes' if r['proven'] else 'no'} | {r['seconds']:.0f} | {r['mcsf'] / r['best']:.3f} | "
            f"{hi} |")


HEAD = ("| instance | n | MC-SF | best known | bound | gap | proven? | s | MC-SF/best | MC-SF/bound |\n"
        "|---|---|---|---|---|---|---|---|---|---|")


def summary(rows: list[dict], label: str) -> str:
    lo = [r["mcsf"] / r["best"] for r in rows]
    proven = [r for r in rows if r["proven"]]
    gaps = [r["gap"] for r in rows if r["gap"] is not None]
    opt = [r["mcsf"] / r["best"] for r in proven]
    return (f"{label}: {len(rows)} instances, proven {len(proven)}; MC-SF/best mean "
            f"{statistics.mean(lo):.4f} (range {min(lo):.3f}-{max(lo):.3f}); "
            f"MC-SF/OPT over proven: {statistics.mean(opt):.4f} "
            f"({sum(abs(x - 1) < 1e-9 for x in opt)} exactly optimal)" if opt else
            f"{label}: {len(rows)} instances, proven 0; MC-SF/best mean {statistics.mean(lo):.4f} "
            f"(range {min(lo):.3f}-{max(lo):.3f})") + (
            f"; median gap {statistics.median(gaps):.1%}" if gaps else "")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settings", default="offline,online")
    ap.add_argument("--ns", default="40,50,60")
    ap.add_argument("--rates", default="0.5,1,1.5")
    ap.add_argument("--horizons", default="40,50,60")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--limit", type=float, default=120.0)
    ap.add_argument("--solver", default="highs")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="hindsight formulation parameter, e.g. memory=flow search=20")
    ap.add_argument("--out", default="studies/hindsight/results/hindsight-paper")
    args = ap.parse_args(argv)
    params = dict(p.split("=", 1) for p in args.param)
    rows: list[dict] = []
    lines = [HEAD]
    print(HEAD, flush=True)
    plan: list[tuple[str, str, Instance]] = []
    settings = args.settings.split(",")
    if "offline" in settings:
        for n in (int(v) for v in args.ns.split(",")):
            for seed in range(args.seeds):
                plan.append(("offline", f"offline n={n} s{seed}", online_paper_random(n, seed)))
    if "online" in settings:
        for rate in (float(v) for v in args.rates.split(",")):
            for T in (int(v) for v in args.horizons.split(",")):
                for seed in range(args.seeds):
                    plan.append(("online", f"online r={rate:g} T={T} s{seed}",
                                 online_paper_horizon(rate, T, seed)))
    for setting, key, inst in plan:
        r = run_one(inst, args.limit, args.solver, params)
        r.update(setting=setting, key=key)
        rows.append(r)
        line = row_text(r, key)
        lines.append(line)
        print(line, flush=True)
    sums = [summary([r for r in rows if r["setting"] == s], s) for s in settings
            if any(r["setting"] == s for r in rows)]
    for s in sums:
        print(s, flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"limit": args.limit, "solver": args.solver, "params": params, "rows": rows,
           "summary": sums}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    out.with_suffix(".md").write_text("\n".join(lines + [""] + sums) + "\n")
    print(f"results written to {out}.json / .md")


if __name__ == "__main__":
    main()
