"""Routers and prefill/decode splits on seeded Azure windows (feeds docs/results/cluster.md).

Setting (``studies/settings.py``): a seeded window of the Azure conversation trace
(``optsched generate azure --consecutive SIZE --seed S``), ``M = 30,000``, ``C = 8,192``,
InferMax's Llama-2-7B/A100 preset, requests with ``I + O - 1 > M`` dropped; vLLM on every
engine.

* ``routers``: the window's arrivals stretched so that its one-engine offered load
  (docs/semantics.md section 4, the point figure) is ``R * rho``, served by ``R`` identical
  replicas behind each router: the load per replica is ``rho`` (both sides of the load
  interval divide by ``R``: ``R`` engines each running the queued mix achieve ``R mu_ach``,
  and the busy-time floor of ``K`` copies is shared by at most ``R`` engines). Mean latency,
  mean and P99 TTFT, makespan, against B17's certified cluster floors (``formulations/
  bounds.md``: total latency ``>= sum_i chain_i``, mean TTFT ``>= mean_i prefill_chain_i``,
  the makespan floor).
* ``pd``: the same window at one-engine load ``4 * rho`` on 4 GPUs split ``P:D`` (role
  ``prefill`` / ``decode``, router ``pd``, the default link: 25 GB/s, Llama-2-7B's 524,288
  bytes per token, no fixed cost) and, beside them, 4 and 2 replicas under ``lor``; TTFT and
  TPOT SLOs on every request; goodput (requests meeting both SLOs per second of span) per
  GPU.

Each cell is appended to ``OUT.jsonl`` as measured (with its CPU seconds and the load
average), so a run can be resumed (cells already there are skipped); ``--report`` renders
``OUT.md`` (the tables on the page)::

    OPTSCHED_DATA=/path/to/shared/data nice -n 10 .venv/bin/python -m studies.cluster.routers \\
        [--size 600] [--seeds 0,1] [--replicas 2,4] [--loads 0.7,1.2] [--splits 1:1,1:3,2:2,3:1]
        [--pd-loads 0.5] [--out studies/cluster/results/cluster] [--report]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

from optsched.bounds.cluster import cluster_request_floors
from optsched.cluster import disaggregate, replicate, simulate
from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.serving.load import OfferedLoad, offered_load, scale_to_load
from studies.settings import C, M, trace_path, window, window_row

ROUTERS = ("rr", "lor", "least-kv", "p2c")
POLICY = "vllm"
#: the SLOs of the P:D table (seconds): DistServe's chatbot setting is TTFT 0.25 s and TPOT
#: 0.1 s on OPT-13B; Llama-2-7B on one A100 is faster per token, so TPOT 0.05 s
TTFT_SLO, TPOT_SLO = 0.5, 0.05
#: the attainment DistServe's goodput asks for (its section 2: 90% of requests)
TARGET = 0.9
METRICS = ("mean_latency", "mean_ttft", "p99_ttft", "makespan", "total_latency",
           "slo_attainment", "goodput", "goodput_per_gpu", "transfers", "transfer_time")


def generate_command(size: int, seed: int, load: float) -> str:
    """The ``optsched generate`` command of a cell's plain instance."""
    return (f"optsched generate azure --trace $OPTSCHED_DATA/traces/AzureLLMInferenceTrace_conv.csv "
            f"--consecutive {size} --seed {seed} --kv-capacity {M} --max-batch-tokens {C} "
            f"--too-long drop --load {load:g} -o w.json")


@functools.lru_cache(maxsize=4)
def at_load(size: int, seed: int, load: float) -> tuple[Instance, OfferedLoad]:
    """The window with its one-engine point load set to ``load``, and that load measured."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inst = scale_to_load(window("conv", seed, size), load)
        return inst, offered_load(inst)


def run_cell(inst: Instance, router: str) -> dict[str, Any]:
    """Simulate, evaluate and bound one cluster cell; CPU seconds of each part."""
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = simulate(inst, POLICY, router)
    t1 = time.process_time()
    ev = evaluate(inst, sched)
    t2 = time.process_time()
    floors = cluster_request_floors(inst)
    t3 = time.process_time()
    out: dict[str, Any] = {"feasible": ev.feasible, "engines": inst.n_engines,
                           "gpus": ev.metrics.get("gpus", inst.n_engines),
                           "cpu_simulate": t1 - t0, "cpu_evaluate": t2 - t1,
                           "cpu_bound": t3 - t2, "floors": floors,
                           "utilisation": [e["utilisation"] for e in ev.engines]}
    out.update({k: ev.metrics[k] for k in METRICS if k in ev.metrics})
    return out


def cells(args) -> list[dict[str, Any]]:
    """Every cell to measure (its key fields; ``kind`` routers or pd)."""
    out = []
    for seed in args.seeds:
        for R in args.replicas:
            for rho in args.loads:
                out += [{"kind": "routers", "seed": seed, "R": R, "rho": rho, "router": r}
                        for r in args.routers]
        for rho in args.pd_loads:
            for split in args.splits:
                P, D = split
                out.append({"kind": "pd", "seed": seed, "rho": rho, "split": f"{P}:{D}",
                            "router": "pd"})
            out += [{"kind": "pd", "seed": seed, "rho": rho, "split": f"{R}x both",
                     "router": "lor"} for R in (4, 2)]
    return out


def key(c: dict[str, Any]) -> str:
    return json.dumps({k: c[k] for k in ("kind", "seed", "R", "rho", "split", "router") if k in c},
                      sort_keys=True)


def measure(c: dict[str, Any], size: int) -> dict[str, Any]:
    if c["kind"] == "routers":
        load = c["R"] * c["rho"]
        plain, lo = at_load(size, c["seed"], load)
        inst = replicate(plain, c["R"])
        cmd = (f"optsched simulate w.json --policy {POLICY} --replicas {c['R']} "
               f"--router {c['router']} --json")
    else:
        load = 4 * c["rho"]
        plain, lo = at_load(size, c["seed"], load)
        plain = plain.with_default_slos(TTFT_SLO, TPOT_SLO)
        if c["router"] == "pd":
            P, D = (int(x) for x in c["split"].split(":"))
            inst = disaggregate(plain, P, D)
            where = f"--prefill-replicas {P} --decode-replicas {D}"
        else:
            R = int(c["split"].split("x")[0])
            inst = replicate(plain, R)
            where = f"--replicas {R}"
        cmd = (f"optsched simulate w.json --policy {POLICY} {where} --router {c['router']} "
               f"--ttft-slo {TTFT_SLO:g} --tpot-slo {TPOT_SLO:g} --json")
    rec = {**c, "size": size, "n": plain.n, "row": window_row("conv", c["seed"], size),
           "one_engine_load": [lo.lower, lo.point], "status_one_engine": lo.status,
           "arrival_rate": lo.arrival_rate,
           "generate": generate_command(size, c["seed"], load), "simulate": cmd,
           "loadavg": os.getloadavg()[0]}
    rec.update(run_cell(inst, c["router"]))
    return rec


def gap(x: float, floor: float) -> str:
    return f"{x / floor:.3f}" if floor > 0 else "-"


def report(records: list[dict[str, Any]]) -> str:
    lines = ["## Routers", "",
             "| seed | R | load/replica | router | mean latency (s) | floor | gap | mean TTFT (s) "
             "| floor | gap | P99 TTFT (s) | makespan (s) | floor | gap | CPU s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rs = sorted((r for r in records if r["kind"] == "routers"),
                key=lambda r: (r["seed"], r["R"], r["rho"], ROUTERS.index(r["router"])))
    for r in rs:
        f = r["floors"]
        lines.append(
            f"| {r['seed']} | {r['R']} | {r['rho']:g}{' (overload)' if r['rho'] > 1 else ''} "
            f"| {r['router']} | {r['mean_latency']:.3f} | {f['mean_latency']:.3f} | "
            f"{gap(r['mean_latency'], f['mean_latency'])} | {r['mean_ttft']:.3f} | "
            f"{f['mean_ttft']:.3f} | {gap(r['mean_ttft'], f['mean_ttft'])} | "
            f"{r['p99_ttft']:.3f} | {r['makespan']:.1f} | {f['makespan']:.1f} | "
            f"{gap(r['makespan'], f['makespan'])} | {r['cpu_simulate']:.1f} |")
    lines += ["", "## Prefill:decode", "",
              "| seed | load (per GPU of 4) | engines | GPUs | router | SLO attainment | goodput "
              "(req/s) | goodput per GPU | mean TTFT (s) | mean latency (s) | transfers | "
              "CPU s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted((r for r in records if r["kind"] == "pd"),
                    key=lambda r: (r["seed"], r["rho"], r["split"])):
        lines.append(
            f"| {r['seed']} | {r['rho']:g} | {r['split']} | {r['gpus']} | {r['router']} | "
            f"{r.get('slo_attainment', float('nan')):.3f} | {r.get('goodput', float('nan')):.2f} | "
            f"{r.get('goodput_per_gpu', float('nan')):.2f} | {r['mean_ttft']:.3f} | "
            f"{r['mean_latency']:.3f} | {r.get('transfers', 0)} | {r['cpu_simulate']:.1f} |")
    lines += ["", "## Goodput per GPU (DistServe's definition)", "",
              f"The highest load per GPU on the grid at which at least {TARGET:g} of the requests "
              "meet both SLOs, and its arrival rate per GPU.", "",
              "| seed | engines | GPUs | router | loads tried (per GPU of 4) | highest with attainment >= "
              f"{TARGET:g} | its arrival rate per GPU (req/s) |", "|---|---|---|---|---|---|---|"]
    for (seed, split), rows in sorted(_by_config(records).items()):
        ok = [r for r in rows if r.get("slo_attainment", 0) >= TARGET]
        best = max(ok, key=lambda r: r["rho"]) if ok else None
        tried = ", ".join(f"{r['rho']:g}" for r in sorted(rows, key=lambda r: r["rho"]))
        rate = f"{best['arrival_rate'] / best['gpus']:.3f}" if best and best.get(
            "arrival_rate") else "-"
        lines.append(f"| {seed} | {split} | {rows[0]['gpus']} | {rows[0]['router']} | {tried} | "
                     f"{best['rho'] if best else 'none'} | {rate} |")
    return "\n".join(lines) + "\n"


def page(records: list[dict[str, Any]], improved: list[dict[str, Any]] | None = None) -> str:
    """The compact tables of docs/results/cluster.md: one row per (R, load, router), the
    seeds side by side (``s0 / s1``); ``improved`` (``improve.py``'s records) fills the "best
    schedule" column of the router each search started from (mean latency after the search;
    "-" where no search ran)."""
    rs = [r for r in records if r["kind"] == "routers"]
    seeds = sorted({r["seed"] for r in rs})
    sizes = {r["size"] for r in rs}
    cells: dict[tuple[int, float, str], dict[int, dict[str, Any]]] = {}
    for r in rs:
        cells.setdefault((r["R"], r["rho"], r["router"]), {})[r["seed"]] = r
    best: dict[tuple[int, float, str, int], dict[str, Any]] = {}
    for m in improved or []:
        if m["size"] in sizes:
            best[(m["R"], m["rho"], m["best_router"], m["seed"])] = m

    def both(c: dict[int, dict[str, Any]], f) -> str:
        return " / ".join(f(c[s]) if s in c else "-" for s in seeds)

    lines = [f"Seeds {' / '.join(map(str, seeds))} side by side.", "",
             "| R | load per replica | router | mean latency (s) | / floor | best schedule "
             "(improve from it) | mean TTFT (s) | / floor | P99 TTFT (s) | makespan / floor |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (R, rho, router), c in sorted(cells.items(),
                                      key=lambda kv: (kv[0][0], kv[0][1], ROUTERS.index(kv[0][2]))):
        found = [best.get((R, rho, router, s)) for s in seeds]
        cols = [both(c, lambda r: f"{r['mean_latency']:.2f}"),
                both(c, lambda r: gap(r["mean_latency"], r["floors"]["mean_latency"])),
                " / ".join(f"{m['mean_latency']:.3f}" if m else "-" for m in found)
                if any(found) else "",
                both(c, lambda r: f"{r['mean_ttft']:.3f}"),
                both(c, lambda r: gap(r["mean_ttft"], r["floors"]["mean_ttft"])),
                both(c, lambda r: f"{r['p99_ttft']:.2f}"),
                both(c, lambda r: gap(r["makespan"], r["floors"]["makespan"]))]
        lines.append(f"| {R} | {rho:g}{' **overload**' if rho > 1 else ''} | {router} | "
                     + " | ".join(cols) + " |")
    return "\n".join(lines) + "\n"


def _by_config(records: list[dict[str, Any]]) -> dict[tuple[int, str], list[dict[str, Any]]]:
    out: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in records:
        if r["kind"] == "pd":
            out.setdefault((r["seed"], r["split"]), []).append(r)
    return out


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def _floats(s: str) -> list[float]:
    return [float(x) for x in s.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=600)
    ap.add_argument("--seeds", type=_ints, default=[0])
    ap.add_argument("--replicas", type=_ints, default=[2, 4])
    ap.add_argument("--loads", type=_floats, default=[0.7, 1.2])
    ap.add_argument("--routers", type=lambda s: s.split(","), default=list(ROUTERS))
    ap.add_argument("--splits", type=lambda s: [tuple(int(x) for x in p.split(":"))
                                                for p in s.split(",") if p],
                    default=[(1, 1), (1, 3), (2, 2), (3, 1)])
    ap.add_argument("--pd-loads", type=_floats, default=[0.5])
    ap.add_argument("--out", default="studies/cluster/results/cluster")
    ap.add_argument("--report", action="store_true", help="only render OUT.md")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    jl = out.with_suffix(".jsonl")
    done = [json.loads(x) for x in jl.read_text().splitlines() if x.strip()] \
        if jl.exists() else []
    if not args.report:
        trace_path("conv", "studies.cluster.routers")
        seen = {key(r) for r in done}
        for c in cells(args):
            if key(c) in seen:
                continue
            rec = measure(c, args.size)
            done.append(rec)
            with jl.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(f"{key(c)} cpu {rec['cpu_simulate']:.1f}s mean latency "
                  f"{rec['mean_latency']:.3f} feasible {rec['feasible']}", flush=True)
    out.with_suffix(".md").write_text(report(done))
    imp = out.with_name("improve.jsonl")
    improved = [json.loads(x) for x in imp.read_text().splitlines() if x.strip()] \
        if imp.exists() else []
    out.with_name(out.name + "-page.md").write_text(page(done, improved))
    print(f"wrote {out.with_suffix('.md')} ({len(done)} cells)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
