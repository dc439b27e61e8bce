"""The hindsight IP by ``hindsight-ff`` ((H23)-(H25), ``formulations/hindsight.md``) on the
targets of ``docs/results/hindsight.md``: proven optima or certified gaps at the paper's size.

Setting: the online paper's random family (``online_paper_random``: M ~ U[30, 50],
s ~ U[1, 5], o ~ U[1, M - s]) with all arrivals at 0 (``offline``), or its Poisson rounds
(``online_paper_horizon(rate, T, seed)``, ``online``); total latency; HiGHS for the LP and
CP-SAT for the search, ``--threads`` threads. Every answer goes through ``optsched.solve``, so the
schedule is replayed by the evaluator. Per run it records status, objective, the certified
bound (in the hindsight model: unit-time batches, no preemption), gap, wall and CPU seconds
(``time.process_time``: every thread of this process) and the load average before and after;
each run is appended to ``--out`` (JSON lines) as it ends, so a stopped sweep keeps its runs.
The summary per (setting, n): proven / runs, median wall of the proven runs, median gap over
all runs (an unproven run without a bound counts as an infinite gap), median MC-SF / best.

    python -m studies.hindsight.ff --ns 20 --limit 60 --out studies/hindsight/results/ff-n20.jsonl
    python -m studies.hindsight.ff --ns 40 --limit 600 --threads 1 --out /tmp/ff40.jsonl
    python -m studies.hindsight.ff --online --rate 1 --horizons 40 --limit 600 --out /tmp/on.jsonl
    python -m studies.hindsight.ff --summary studies/hindsight/results/ff-n20.jsonl
    python -m studies.hindsight.ff --markdown --summary studies/hindsight/results/ff-n*.jsonl
    python -m studies.hindsight.ff --summary studies/hindsight/results/ff-*-quiet.jsonl \
        --ratios studies/hindsight/results/hindsight-paper-online.json \
        studies/hindsight/results/hindsight-paper-offline.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path

from optsched.formulations import SolveOptions
from optsched.formulations.hindsight import greedy_starts, objective_of_starts
from optsched.instance import Instance
from optsched.solving import solve
from optsched.workloads.generators import online_paper_horizon, online_paper_random


def run_one(inst: Instance, label: str, n_key: int, seed: int, limit: float,
            threads: int, params: dict[str, str] | None = None) -> dict:
    """One ``hindsight-ff`` solve of ``inst`` within ``limit`` seconds, as a JSON row."""
    mcsf = objective_of_starts(inst, "total-latency", greedy_starts(inst, "mcsf"))
    opts = SolveOptions(time_limit=limit, threads=threads, progress=False, seed=seed,
                        params=dict(params or {}))
    load0 = os.getloadavg()[0]
    c0, t0 = time.process_time(), time.perf_counter()
    rep = solve(inst, "hindsight-ff", "total-latency", options=opts, warm_start=None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"setting": label, "name": inst.name, "n_key": n_key, "n": inst.n, "seed": seed,
            "limit": limit, "threads": threads, "params": dict(params or {}),
            "status": rep.status, "objective": rep.objective, "bound": rep.bound, "gap": rep.gap,
            "wall": wall, "cpu": cpu, "load": [load0, os.getloadavg()[0]], "mcsf": mcsf,
            "M": inst.limits.kv_capacity, "notes": list(getattr(rep, "notes", ()) or ())}


def record(row: dict, line: str, out: str | None) -> None:
    """Print ``line`` and append ``row`` to the JSON lines file ``out`` (when given) as soon as
    the run ends, so a stopped sweep keeps its runs."""
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def summary(rows: list[dict]) -> list[str]:
    """One line per (setting, n_key)."""
    keys = sorted({(r["setting"], r["n_key"]) for r in rows})
    out = [f"{'setting':>8} {'n':>4} {'proven':>7} {'med wall':>9} {'max wall':>9} "
           f"{'med gap':>8} {'max gap':>8} {'med cpu':>8} {'MC-SF/best':>10} {'load':>9}"]
    for setting, n in keys:
        rs = [r for r in rows if (r["setting"], r["n_key"]) == (setting, n)]
        proven = [r for r in rs if r["status"] == "optimal"]
        gaps = [r["gap"] if r["gap"] is not None else math.inf for r in rs]
        walls = [r["wall"] for r in proven]
        ratio = [r["mcsf"] / r["objective"] for r in rs if r["objective"]]
        loads = [x for r in rs for x in r["load"]]
        out.append(
            f"{setting:>8} {n:>4} {len(proven):>4}/{len(rs):<2} "
            f"{(statistics.median(walls) if walls else math.nan):>9.1f} "
            f"{(max(walls) if walls else math.nan):>9.1f} {statistics.median(gaps):>8.3%} "
            f"{max(gaps):>8.3%} {statistics.median(r['cpu'] for r in rs):>8.1f} "
            f"{(statistics.median(ratio) if ratio else math.nan):>10.4f} "
            f"{min(loads):>4.1f}-{max(loads):<4.1f}")
    return out


def markdown(rows: list[dict]) -> list[str]:
    """One Markdown row per run (for ``docs/results/hindsight.md``)."""
    out = ["| setting | instance | n | status | best found | certified bound | gap | wall s | "
           "CPU s | load | MC-SF |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["setting"], r["n_key"], r["seed"], r["n"])):
        gap = "-" if r["gap"] is None else f"{r['gap']:.1%}"
        bound = "-" if r["bound"] is None else f"{r['bound']:,.0f}"
        obj = "-" if r["objective"] is None else f"{r['objective']:,.0f}"
        out.append(f"| {r['setting']} | {_name(r)} | {r['n']} | {r['status']} | {obj} | {bound} "
                   f"| {gap} | {r['wall']:.0f} | {r['cpu']:.0f} | {r['load'][0]:.0f}-"
                   f"{r['load'][1]:.0f} | {r['mcsf']:,.0f} |")
    return out


def _name(row: dict) -> str:
    """The instance's name; rows written before names were recorded are matched by regenerating
    the candidates (the online rates 0.5, 1, 1.5) and comparing n and MC-SF's objective."""
    if row.get("name"):
        return row["name"]
    if row["setting"] == "offline":
        return online_paper_random(row["n_key"], row["seed"]).name
    for rate in (0.5, 1.0, 1.5):
        inst = online_paper_horizon(rate, row["n_key"], row["seed"])
        if inst.n == row["n"] and objective_of_starts(
                inst, "total-latency", greedy_starts(inst, "mcsf")) == row["mcsf"]:
            return inst.name
    raise ValueError(f"no online instance matches row {row['n_key']}/{row['seed']}")


def _earlier(doc: dict) -> list[dict]:
    """Rows of a ``paper.py`` output (``rows``: name, best, bound) or of a ``proven.py`` output
    (``runs`` of the all-at-0 family: n, seed, objective, bound), as ``name``, ``best``,
    ``bound``."""
    if "rows" in doc:
        return list(doc["rows"])
    return [{"name": online_paper_random(r["n"], r["seed"]).name, "best": r["objective"],
             "bound": r["bound"]} for r in doc["runs"] if r.get("objective") is not None]


def ratios(rows: list[dict], earlier: list[dict]) -> list[str]:
    """MC-SF against the optimum of the paper's model, per instance and per setting: the best
    schedule known from any run (``rows`` of this script, ``earlier`` rows of ``paper.py``) is
    an upper bound on the optimum, so MC-SF / best is a *lower* bound on MC-SF / OPT; the best
    certified bound gives an *upper* bound, MC-SF / bound."""
    best: dict[str, dict] = {}
    for r in rows:
        b = best.setdefault(_name(r), {"setting": r["setting"], "n": r["n"], "mcsf": r["mcsf"],
                                        "best": math.inf, "bound": -math.inf})
        if r["objective"] is not None:
            b["best"] = min(b["best"], r["objective"])
        if r["bound"] is not None:
            b["bound"] = max(b["bound"], r["bound"])
    for r in earlier:
        if r["name"] in best and r.get("best") is not None:
            b = best[r["name"]]
            b["best"] = min(b["best"], r["best"])
            if r.get("bound") is not None:
                b["bound"] = max(b["bound"], r["bound"])
    out = ["| instance | n | MC-SF | best known | certified bound | MC-SF / best (<= MC-SF / OPT) "
           "| MC-SF / bound (>= MC-SF / OPT) |", "|---|---|---|---|---|---|---|"]
    for name in sorted(best, key=lambda k: (best[k]["setting"], best[k]["n"], k)):
        b = best[name]
        hi = "-" if b["bound"] <= 0 else f"{b['mcsf'] / b['bound']:.3f}"
        out.append(f"| {name} | {b['n']} | {b['mcsf']:,.0f} | {b['best']:,.0f} | "
                   f"{'-' if b['bound'] <= 0 else format(b['bound'], ',.0f')} | "
                   f"{b['mcsf'] / b['best']:.3f} | {hi} |")
    def group(b: dict) -> str:  # all at 0 per n; the online rounds together (n is random)
        return f"offline n={b['n']}" if b["setting"] == "offline" else "online"

    for setting in sorted({group(b) for b in best.values()}):
        lo = [b["mcsf"] / b["best"] for b in best.values() if group(b) == setting]
        hi = [b["mcsf"] / b["bound"] for b in best.values()
              if group(b) == setting and b["bound"] > 0]
        out.append(f"\n{setting}: {len(lo)} instances; MC-SF / best: mean {statistics.mean(lo):.4f}, "
                   f"range {min(lo):.3f}-{max(lo):.3f}, stdev "
                   f"{statistics.stdev(lo) if len(lo) > 1 else 0:.4f}"
                   + (f"; MC-SF / bound: mean {statistics.mean(hi):.4f} over {len(hi)}"
                      if hi else ""))
    return out


def _plan(args) -> list[tuple[str, int, int, Instance]]:
    seeds = range(args.seed0, args.seed0 + args.seeds)
    if args.online:
        return [("online", T, s, online_paper_horizon(args.rate, T, s))
                for T in (int(x) for x in args.horizons.split(",")) for s in seeds]
    return [("offline", n, s, online_paper_random(n, s))
            for n in (int(x) for x in args.ns.split(",")) for s in seeds]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="20", help="offline: numbers of requests")
    ap.add_argument("--online", action="store_true", help="the Poisson rounds instead")
    ap.add_argument("--rate", type=float, default=1.0, help="online: arrivals per round")
    ap.add_argument("--horizons", default="40", help="online: numbers of rounds T")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--limit", type=float, default=60.0, help="seconds per solve")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a hindsight-ff parameter (formulations/hindsight.md), e.g. cut_share=0.9")
    ap.add_argument("--out", default=None, help="JSON lines, appended run by run")
    ap.add_argument("--summary", nargs="*", metavar="JSONL", help="only summarise these files")
    ap.add_argument("--markdown", action="store_true", help="with --summary: one row per run")
    ap.add_argument("--ratios", nargs="*", metavar="JSON", default=None,
                    help="with --summary: MC-SF / best and MC-SF / bound per instance, the best "
                    "and the bound over these runs and the rows of these paper.py or proven.py "
                    "outputs")
    args = ap.parse_args(argv)
    if args.summary:
        rows = [json.loads(x) for f in args.summary for x in Path(f).read_text().splitlines()
                if x.strip()]
        if args.ratios is not None:
            earlier = [r for f in args.ratios for r in _earlier(json.loads(Path(f).read_text()))]
            print("\n".join(ratios(rows, earlier)))
        else:
            print("\n".join(markdown(rows) if args.markdown else summary(rows)))
        return
    bad = [p for p in args.param if "=" not in p]
    if bad:
        ap.error(f"--param {bad[0]!r}: expected KEY=VALUE")
    params = dict(p.split("=", 1) for p in args.param)
    rows = []
    for label, key, seed, inst in _plan(args):
        row = run_one(inst, label, key, seed, args.limit, args.threads, params)
        rows.append(row)
        record(row, f"{label} n={row['n']} seed={seed}: {row['status']} {row['objective']} "
               f"bound {row['bound']} gap {row['gap']} wall {row['wall']:.1f} s cpu "
               f"{row['cpu']:.1f} s load {row['load']}", args.out)
    print("\n".join(summary(rows)), flush=True)


if __name__ == "__main__":
    main()
