"""The ``parts`` rung (formulations/bounds.md B20) on the seed-1 windows of ``study.py``: its
value and CPU seconds against the whole-window rungs of ``results.jsonl`` (read only; feeds
docs/results/bounds.md, "Stable loads"). One window a line in ``parts.jsonl``; ``--summary``
prints the table (``parts.txt``).

    OPTSCHED_DATA=/work/shared/data nice -n 10 .venv/bin/python -m studies.bounds_load.parts \\
        [--traces conv,code] [--loads 0.3,0.5,0.7] [--max-part 40] [--summary]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np

from studies.bounds_load.study import OLD_RUNGS, instance

HERE = Path(__file__).resolve().parent


def run(trace: str, load: str, max_part: int) -> dict:
    from optsched.bounds import Budget
    from optsched.bounds import parts as P

    inst = instance(trace, 1, 1200, load)
    P.MAX_PART = max_part
    t, w = time.process_time(), time.perf_counter()
    res = P.parts_bound(inst, "total-latency", Budget.seconds(None))
    return {"trace": trace, "seed": 1, "size": inst.n, "load": load, "max_part": max_part,
            "min_part": P.MIN_PART, "iterations": P.PART_ITERATIONS,
            "parts": res.value * (1 - 1e-9), "cpu": round(time.process_time() - t, 1),
            "wall": round(time.perf_counter() - w, 1), "loadavg": os.getloadavg()[0],
            "notes": list(res.notes)}


def summary(out: Path) -> None:
    old = {(r["trace"], str(r["load"])): r for r in map(json.loads, (HERE / "results.jsonl")
           .read_text().splitlines()) if int(r["seed"]) == 1}
    print("| window | max part | parts; in system at cuts; stretch > cheap on; sum over parts "
          "| best TL | before (rung) | stretch (CPU s) | parts (CPU s) | gap before | gap stretch "
          "| gap with parts |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in map(json.loads, out.read_text().splitlines()):
        o = old.get((r["trace"], r["load"]))
        if o is None:
            continue
        best = min(v["total-latency"] for v in o["schedules"].values() if v["feasible"])
        b = {k: o["bounds"][k] for k in OLD_RUNGS}
        ob = max(b, key=b.get)
        st = o["bounds"]["stretch"]
        m = re.search(r"(\d+) parts .*?\((\d+) requests in the system.*above the cheap rungs on "
                      r"(\d+)", r["notes"][0])
        sm = re.search(r"; sum ([0-9.e+]+)", r["notes"][0])
        cut = f"{m[1]}; {m[2]}; {m[3]}; {float(sm[1]):,.0f}" if m and sm else "?"
        print(f"| {r['trace']} s1 @{r['load']} | {r['max_part']} | {cut} | {best:,.0f} | {b[ob]:,.0f} "
              f"({ob}) | {st:,.0f} ({o['cpu']['stretch']:.0f}) | {r['parts']:,.0f} "
              f"({r['cpu']:.0f}) | {(best - b[ob]) / best:.1%} | "
              f"{(best - max(b[ob], st)) / best:.1%} | "
              f"{(best - max(b[ob], st, r['parts'])) / best:.1%} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--loads", default="0.3,0.5,0.7")
    ap.add_argument("--max-part", type=int, default=40)
    ap.add_argument("--out", default=str(HERE / "parts"))
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    out = Path(a.out + ".jsonl")
    if a.summary:
        summary(out)
        return
    for trace in a.traces.split(","):
        for load in a.loads.split(","):
            row = run(trace, load, a.max_part)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(trace, load, round(row["parts"], 1), row["cpu"], "s CPU", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
