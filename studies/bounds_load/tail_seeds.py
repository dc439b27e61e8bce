"""P99 TTFT at stated loads on the serving study's three-seed windows: the certified ``tail``
bound (formulations/bounds.md B16) against the best of the first-token schedules computed here
(feeds docs/results/bounds.md, "Against the targets, three seeds").

Windows: exactly those of ``studies/serving/loads.py`` (1,000 consecutive requests of each
Azure trace from the rows drawn by seeds 1-3, ``M = 30,000``, ``C = 8,192``, Llama-2-7B/A100
preset, stretched to offered loads 0.3 / 0.5 / 0.7 / 0.9 / 1.3). Schedules, each replayed by
``optsched.evaluate``: ``vllm``, ``svf``, ``ttft-first``, the prefill-SRPT decoder
(``optsched.search.prefill_srpt``, margins 200/0 and 2000/2) and the prefill-first decoder
keyed by arrival (every prompt first come first served: the tail's natural order). Gap =
(best P99 - bound) / best P99. One line per window is appended to ``OUT`` (a rerun skips the
windows there); ``--summary`` prints the tables.

    OPTSCHED_DATA=/work/shared/data .venv/bin/python -m studies.bounds_load.tail_seeds
    .venv/bin/python -m studies.bounds_load.tail_seeds --summary > studies/bounds_load/tail_seeds.txt
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "tail_seeds.jsonl"
LOADS = ("0.3", "0.5", "0.7", "0.9", "1.3")


def schedules(inst) -> dict:
    """Each first-token schedule's P99 TTFT and CPU seconds (evaluated by the one evaluator)."""
    from optsched.evaluation import evaluate
    from optsched.policies import simulate
    from optsched.search.keysearch import make_decoder
    from optsched.search.prefill_srpt import prefill_srpt_schedule

    makers = {name: (lambda name=name: simulate(inst, name)) for name in
              ("vllm", "svf", "ttft-first")}
    for margin, pack in ((200, 0), (2000, 2)):
        makers[f"prefill-srpt {margin}/{pack}"] = \
            lambda m=margin, p=pack: prefill_srpt_schedule(inst, m, 32, p)
    makers["prefill-first fcfs"] = lambda: make_decoder(inst, "prefill-first").decode(
        np.asarray(inst.arrival, np.float64))
    out = {}
    for label, make in makers.items():
        t = time.process_time()
        ev = evaluate(inst, make())
        if ev.feasible:
            out[label] = {"p99-ttft": ev.objective("p99-ttft"),
                          "cpu": round(time.process_time() - t, 2)}
    return out


def run(trace: str, seed: int, load: str) -> dict:
    from optsched.serving.load import offered_load
    from optsched.solving import lower_bound
    from studies.serving.loads import instance

    inst = instance(trace, seed, 1000, load, 1.0, 0.1)
    ol = offered_load(inst)
    row = {"trace": trace, "seed": seed, "load": load, "load_certified": ol.lower,
           "load_point": ol.point, "schedules": schedules(inst), "loadavg": os.getloadavg()[0]}
    t = time.process_time()
    b = lower_bound(inst, "p99-ttft", "tail", time_limit=120)
    row["tail"] = b.value
    row["tail_cpu"] = round(time.process_time() - t, 2)
    return row


def summary(path: Path) -> None:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    rows.sort(key=lambda r: (r["trace"], LOADS.index(r["load"]), r["seed"]))
    print("| window | load (certified - point) | best P99 TTFT [schedule] | `tail` | gap | "
          "tail CPU s |")
    print("|---|---|---:|---:|---:|---:|")
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        best = min(r["schedules"], key=lambda k: r["schedules"][k]["p99-ttft"])
        v = r["schedules"][best]["p99-ttft"]
        gap = (v - r["tail"]) / v
        groups[(r["trace"], r["load"])].append(gap)
        print(f"| {r['trace']} s{r['seed']} @{r['load']} | {r['load_certified']:.2f} - "
              f"{r['load_point']:.2f} | {v:.3f} [{best}] | {r['tail']:.3f} | {100 * gap:.1f}% | "
              f"{r['tail_cpu']:.0f} |")
    print()
    print("| trace | load | windows | P99 TTFT gap |")
    print("|---|---|---:|---:|")
    for (trace, load), gs in sorted(groups.items(), key=lambda kv: (kv[0][0], LOADS.index(kv[0][1]))):
        label = f"{load} (overload)" if float(load) > 1 else load
        print(f"| {trace} | {label} | {len(gs)} | {100 * min(gs):.1f}-{100 * max(gs):.1f}% |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    if a.summary:
        summary(out)
        return
    done = {(r["trace"], r["seed"], r["load"]) for r in
            (json.loads(x) for x in out.read_text().splitlines() if x.strip())} \
        if out.exists() else set()
    for seed in (int(s) for s in a.seeds.split(",")):
        for load in a.loads.split(","):
            for trace in a.traces.split(","):
                if (trace, seed, load) in done:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    row = run(trace, seed, load)
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(f"{trace} s{seed} @{load}: tail {row['tail']:.3f} ({row['tail_cpu']:.0f} s "
                      "CPU)", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
