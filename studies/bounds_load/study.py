"""How far from optimal at the loads papers use: certified bounds on seeded Azure windows at
offered loads 0.3 / 0.5 / 0.7 / 0.9 and overloaded (feeds docs/results/bounds.md, "Stable
loads", and docs/results/serving.md).

Per window (``optsched generate azure --consecutive SIZE --seed S`` with ``M = 30,000``,
``C = 8,192``, the Llama-2-7B preset, arrivals stretched by ``scale_to_load`` to the point load;
``own`` keeps the trace's own arrivals):

* its offered load (``optsched.serving.load.offered_load``: certified side, point, busiest tenth);
* the policies (every schedule replayed by ``optsched.evaluate``): vLLM, SARATHI, EcoServe,
  Apt-Serve (``aptserve``; these instances have no hidden cache, so KV only), and for the best
  schedule also ``svf``, ``rank-i`` with and without a residency cap of 4 (``max_num_seqs``),
  ``ttft-first`` and the prefill-SRPT decoder at two settings (mean and P99 TTFT);
* total latency: the rungs of the ladder before this study (``combinatorial``, ``spread``,
  ``coupled``, ``dual``; "before" is their largest) and ``stretch`` (B15) for
  ``--stretch-iterations`` dual iterations steered to the best schedule's value ("after");
* mean TTFT: ``best`` (the ``events`` / ``srpt`` rungs); P99 TTFT: ``tail`` (B16).

CPU seconds (``time.process_time``) per part; the machine is shared, the load average is
recorded. Results are appended to ``OUT.jsonl`` one window a line (a rerun skips the windows
already there); ``--summary`` prints the tables of the results page from that file.

    OPTSCHED_DATA=/work/shared/data .venv/bin/python -m studies.bounds_load.study \\
        [--traces conv,code] [--seeds 0,1,2] [--loads 0.3,0.5,0.7,0.9,1.3] [--size 1200] \\
        [--workers 2] [--out studies/bounds_load/results] [--summary]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

DATA = Path(os.environ.get("OPTSCHED_DATA", Path(__file__).resolve().parents[3] / "shared"
                           / "data"))
FILES = {"conv": "AzureLLMInferenceTrace_conv.csv", "code": "AzureLLMInferenceTrace_code.csv"}
PAPERS = ("vllm", "sarathi", "ecoserve", "aptserve")
OTHERS = (("svf", {}), ("rank-i", {}), ("rank-i", {"max_num_seqs": 4}), ("ttft-first", {}))
OLD_RUNGS = ("combinatorial", "spread", "coupled", "dual")
OBJS = ("total-latency", "mean-ttft", "p99-ttft")


def instance(trace: str, seed: int, size: int, load: str):
    from optsched.cost import preset
    from optsched.instance import Limits
    from optsched.serving.load import scale_to_load
    from optsched.workloads.traces import window_instance

    inst = window_instance(DATA / "traces" / FILES[trace], size, seed,
                           Limits(kv_capacity=30_000, max_batch_tokens=8192),
                           preset("infermax-llama2-7b-a100"), too_long="drop")
    return inst if load == "own" else scale_to_load(inst, float(load))


def _timed(fn):
    t = time.process_time()
    out = fn()
    return out, round(time.process_time() - t, 2)


def run_window(trace: str, seed: int, size: int, load: str, iterations: int) -> dict:
    from optsched.bounds import Budget, Floors
    from optsched.bounds.stretch import dual_bound
    from optsched.evaluation import evaluate
    from optsched.policies import simulate
    from optsched.search.prefill_srpt import prefill_srpt_schedule
    from optsched.serving.load import offered_load
    from optsched.solving import lower_bound

    inst = instance(trace, seed, size, load)
    ol = offered_load(inst)
    row: dict = {"trace": trace, "seed": seed, "size": inst.n, "load": load, "name": inst.name,
                 "load_certified": ol.lower, "load_point": ol.point, "load_peak": ol.peak,
                 "loadavg": os.getloadavg()[0], "schedules": {}, "bounds": {}, "cpu": {}}

    def score(label, sched, cpu):
        ev = evaluate(inst, sched)
        row["schedules"][label] = {o: ev.objective(o) for o in OBJS} | {
            "busy": float(ev.batch_duration.sum()), "cpu": cpu, "feasible": ev.feasible}

    for name in PAPERS:
        s, c = _timed(lambda name=name: simulate(inst, name))
        score(name, s, c)
    for name, params in OTHERS:
        s, c = _timed(lambda name=name, params=params: simulate(inst, name, **params))
        score(name + "".join(f" cap{v}" for v in params.values()), s, c)
    for margin, pack in ((200, 0), (2000, 2)):
        s, c = _timed(lambda m=margin, p=pack: prefill_srpt_schedule(inst, m, 32, p))
        score(f"prefill-srpt {margin}/{pack}", s, c)
    ok = {k: v for k, v in row["schedules"].items() if v["feasible"]}
    best_tl = min(v["total-latency"] for v in ok.values())
    for rung in OLD_RUNGS:
        b, c = _timed(lambda rung=rung: lower_bound(inst, "total-latency", rung).value)
        row["bounds"][rung] = b
        row["cpu"][rung] = c
    d, c = _timed(lambda: dual_bound(Floors.of(inst), Budget.seconds(None), iterations,
                                     target_value=best_tl))
    # the rung's own lowering (lower_bound's SAFETY; arrivals already start at 0)
    row["bounds"]["stretch"] = d.value * (1 - 1e-9)
    row["cpu"]["stretch"] = c
    row["stretch_iterations"] = d.iterations
    for obj, method in (("mean-ttft", "best"), ("p99-ttft", "tail")):
        b, c = _timed(lambda obj=obj, method=method: lower_bound(inst, obj, method, time_limit=120))
        row["bounds"][obj] = b.value
        row["bounds"][obj + " method"] = b.method
        row["cpu"][obj] = c
    return row


def tail_schedules(row: dict, size: int) -> dict:
    """The prefill-first decoder (``optsched.search.prefill_phase``) keyed by arrival (every
    prompt first come first served: the tail's natural order) and by prompt length, scored on
    the window of ``row`` (added after the main run: ``--tails``)."""
    from optsched.evaluation import evaluate
    from optsched.search.keysearch import make_decoder

    inst = instance(row["trace"], int(row["seed"]), size, str(row["load"]))
    dec = make_decoder(inst, "prefill-first")
    for label, key in (("prefill-first fcfs", inst.arrival), ("prefill-first prompt", inst.prompt)):
        t = time.process_time()
        ev = evaluate(inst, dec.decode(np.asarray(key, np.float64)))
        row["schedules"][label] = {o: ev.objective(o) for o in OBJS} | {
            "busy": float(ev.batch_duration.sum()), "cpu": round(time.process_time() - t, 2),
            "feasible": ev.feasible}
    return row


def _key(r: dict) -> tuple:
    return (r["trace"], int(r["seed"]), str(r["load"]))


def summary(path: Path) -> None:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    order = {"0.3": 0, "0.5": 1, "0.7": 2, "0.9": 3}
    rows.sort(key=lambda r: (r["trace"], order.get(str(r["load"]), 9), r["seed"]))
    print("| window | load (certified - point; busiest tenth) | best TL [schedule] | bound before "
          "(rung) | stretch | gap before | gap after | stretch CPU s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        sch = {k: v for k, v in r["schedules"].items() if v["feasible"]}
        bk = min(sch, key=lambda k: sch[k]["total-latency"])
        best = sch[bk]["total-latency"]
        old = {k: r["bounds"][k] for k in OLD_RUNGS}
        ob = max(old, key=old.get)
        after = max(old[ob], r["bounds"]["stretch"])
        print(f"| {r['trace']} s{r['seed']} @{r['load']} | {r['load_certified']:.2f}-"
              f"{r['load_point']:.2f}; {r['load_peak'] or float('nan'):.2f} | {best:,.0f} [{bk}] | "
              f"{old[ob]:,.0f} ({ob}) | {r['bounds']['stretch']:,.0f} | "
              f"{(best - old[ob]) / best:.1%} | {(best - after) / best:.1%} | "
              f"{r['cpu']['stretch']:.0f} |")
    print()
    print("| window | best mean TTFT [schedule] | bound (rung) | gap | best P99 TTFT [schedule] "
          "| `tail` | gap |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        sch = {k: v for k, v in r["schedules"].items() if v["feasible"]}
        m = min(sch, key=lambda k: sch[k]["mean-ttft"])
        p = min(sch, key=lambda k: sch[k]["p99-ttft"])
        bm, bp = r["bounds"]["mean-ttft"], r["bounds"]["p99-ttft"]
        print(f"| {r['trace']} s{r['seed']} @{r['load']} | {sch[m]['mean-ttft']:.3f} [{m}] | "
              f"{bm:.3f} ({r['bounds']['mean-ttft method']}) | "
              f"{(sch[m]['mean-ttft'] - bm) / sch[m]['mean-ttft']:.1%} | "
              f"{sch[p]['p99-ttft']:.3f} [{p}] | {bp:.3f} | "
              f"{(sch[p]['p99-ttft'] - bp) / sch[p]['p99-ttft']:.1%} |")
    print()
    print("| window | " + " | ".join(f"{p} / bound" for p in PAPERS) + " |")
    print("|---|" + "---:|" * len(PAPERS))
    for r in rows:
        after = max(max(r["bounds"][k] for k in OLD_RUNGS), r["bounds"]["stretch"])
        cells = [f"{r['schedules'][p]['total-latency'] / after:.2f}x" for p in PAPERS]
        print(f"| {r['trace']} s{r['seed']} @{r['load']} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--loads", default="0.3,0.5,0.7,0.9,1.3")
    ap.add_argument("--size", type=int, default=1200)
    ap.add_argument("--stretch-iterations", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--tails", action="store_true",
                    help="add the prefill-first schedules to every window of OUT.jsonl")
    a = ap.parse_args()
    out = Path(a.out + ".jsonl")
    if a.summary:
        summary(out)
        return
    if a.tails:
        rows = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
        rows = [r if "prefill-first fcfs" in r["schedules"] else tail_schedules(r, a.size)
                for r in rows]
        out.write_text("".join(json.dumps(r, default=float) + "\n" for r in rows))
        return
    done = {_key(json.loads(x)) for x in out.read_text().splitlines() if x.strip()} \
        if out.exists() else set()
    # one seed at every load first (the seeds in the order given), the traces alternating
    todo = [(t, int(s), a.size, ld, a.stretch_iterations) for s in a.seeds.split(",")
            for ld in a.loads.split(",") for t in a.traces.split(",")
            if (t, int(s), ld) not in done]
    with ProcessPoolExecutor(max_workers=a.workers) as pool:
        futs = {pool.submit(run_window, *task): task for task in todo}
        for fut in as_completed(futs):
            row = fut.result()
            with out.open("a") as f:
                f.write(json.dumps(row, default=float) + "\n")
            print(f"{_key(row)} done: stretch {row['bounds']['stretch']:.1f} "
                  f"({row['cpu']['stretch']:.0f} s CPU)", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
