"""Capacity planning on seeded Azure conversation windows (feeds docs/results/cluster.md,
"Capacity planning"): for Llama-2-7B and Llama-2-70B, the smallest configuration (colocated
replicas or a prefill:decode split) at which 90% of the requests meet their TTFT and TPOT
SLOs, and the best configuration at a fixed engine count, each beside its certified ceiling
(``formulations/bounds.md`` B17g), with the brute-force sweep at the fixed count as a check.

Setting: a seeded ``SIZE``-request window of the Azure 2023 conversation trace (``optsched
generate azure --consecutive SIZE --seed S``), requests with ``I + O - 1 > M`` dropped, its
arrivals stretched so that its one-engine offered load (the point figure, docs/semantics.md
section 4) is ``LOAD``: the arrival rate is ``LOAD`` times what one engine sustains on the
mix. vLLM on every engine, ``lor`` over replicas, ``pd`` over splits, the default link
(25 GB/s, the model's fp16 KV bytes per token, no fixed cost).

* ``7b``: InferMax's Llama-2-7B/A100 preset, one engine = one A100, ``M = 30,000``,
  ``C = 8,192`` (the page's other tables), TTFT 0.5 s and TPOT 0.05 s;
* ``70b``: InferMax's Llama-2-70B on 4 A100s (TP4) preset, one engine = a tensor-parallel
  group of 4 A100-80GB (``gpus = 4``), ``M = 549,316`` tokens (``kv_capacity``: fp16, 80
  layers, 8 KV heads of 128, 320 GB less 140 GB of weights), ``C = 8,192``, TTFT 2.5 s and
  TPOT 0.15 s (DistServe's chatbot SLOs on OPT-66B).

Each cell is appended to ``OUT.jsonl`` as measured (CPU seconds, load average); a run
resumes; ``--report`` renders ``OUT.md``::

    OPTSCHED_DATA=/path/to/shared/data nice -n 10 .venv/bin/python -m studies.cluster.capacity \\
        [--size 400] [--seeds 0,1,2] [--models 7b,70b] [--loads 2,3] [--max-engines 5] \\
        [--at 4] [--slos TTFT,TPOT] [--out studies/cluster/results/capacity] [--report]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

from optsched.cluster import default_link
from optsched.cost import preset
from optsched.instance import Instance, Limits
from optsched.serving.capacity import Plan, Setting, brute_force, preset_gpus, search
from optsched.serving.load import offered_load, scale_to_load
from optsched.workloads.traces import window_instance
from studies.settings import C, trace_path, window_row

#: per model: the cost preset, M, the TTFT and TPOT SLOs (seconds)
MODELS = {"7b": ("infermax-llama2-7b-a100", 30_000, 0.5, 0.05),
          "70b": ("infermax-llama2-70b-4xa100", 549_316, 2.5, 0.15)}
TARGET = 0.9
TRACE = "$OPTSCHED_DATA/traces/AzureLLMInferenceTrace_conv.csv"


def instance(model: str, seed: int, size: int, load: float) -> Instance:
    name, M, _, _ = MODELS[model]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = window_instance(trace_path("conv"), size, seed, Limits(kv_capacity=M, max_batch_tokens=C),
                            preset(name), format="azure", too_long="drop")
        return scale_to_load(w, load)


def setting(model: str, inst: Instance, slos: tuple[float, float] | None = None) -> Setting:
    name, _, ttft, tpot = MODELS[model]
    ttft, tpot = slos or (ttft, tpot)
    return Setting(ttft, tpot, TARGET, "lor", "vllm", default_link(inst), preset_gpus(name))


def commands(model: str, seed: int, size: int, load: float, plan_args: str, s: Setting
             ) -> list[str]:
    name, M, ttft, tpot = MODELS[model][0], MODELS[model][1], s.ttft, s.tpot
    return [f"optsched generate azure --trace {TRACE} --consecutive {size} --seed {seed} "
            f"--kv-capacity {M} --max-batch-tokens {C} --cost-model {name} --too-long drop "
            f"--load {load:g} -o w.json",
            f"optsched capacity w.json --ttft-slo {ttft:g} --tpot-slo {tpot:g} "
            f"--attainment {TARGET:g} {plan_args} --json"]


def summary(plan: Plan) -> dict[str, Any]:
    return {"outcomes": [o.to_dict() for o in plan.outcomes], "simulations": plan.simulations,
            "smallest": None if plan.smallest is None else plan.smallest.label,
            "best": {str(n): None if c is None else c.label for n, c in plan.best.items()},
            "stopped": plan.stopped}


def measure(model: str, seed: int, size: int, load: float, max_engines: int, at: int,
            slos: tuple[float, float] | None = None) -> dict[str, Any]:
    inst = instance(model, seed, size, load)
    lo = offered_load(inst)
    s = setting(model, inst, slos)
    rec: dict[str, Any] = {"model": model, "seed": seed, "size": size, "load": load, "n": inst.n,
                           "row": window_row("conv", seed, size),
                           "one_engine_load": [lo.lower, lo.point],
                           "arrival_rate": lo.arrival_rate, "setting": s.to_dict(),
                           "loadavg": os.getloadavg()[0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.process_time()
        small = search(inst, list(range(1, max_engines + 1)), s, load_lower=lo.lower)
        t1 = time.process_time()
        fixed = search(inst, [at], s, load_lower=lo.lower)
        t2 = time.process_time()
        brute = brute_force(inst, [at], s)
        t3 = time.process_time()
    rec.update({"smallest": summary(small), "at": at, "fixed": summary(fixed),
                "brute": summary(brute), "cpu_smallest": t1 - t0, "cpu_fixed": t2 - t1,
                "cpu_brute": t3 - t2,
                "same_answer": fixed.best == brute.best,
                "commands": commands(model, seed, size, load, f"--max-engines {max_engines}", s)
                + commands(model, seed, size, load, f"--gpus {at * s.gpus_per_engine}", s)[1:]})
    return rec


def _cell(o: dict[str, Any]) -> str:
    att = "-" if o["attainment"] is None else f"{o['attainment']:.3f}"
    return f"{att} (<= {o['ceiling']:.3f})"


def report(records: list[dict[str, Any]]) -> str:
    out = ["# Capacity planning (studies/cluster/capacity.py)", "",
           f"Target: {TARGET:.0%} of the requests meet both SLOs. Cells: attainment "
           "(certified ceiling B17g); `-` not simulated (ceiling below the target or the best).",
           ""]
    groups = sorted({(r["model"], r["setting"]["ttft_slo"], r["setting"]["tpot_slo"])
                     for r in records}, key=lambda g: (list(MODELS).index(g[0]), -g[2]))
    for model, ttft, tpot in groups:
        recs = sorted((r for r in records if (r["model"], r["setting"]["ttft_slo"],
                                               r["setting"]["tpot_slo"]) == (model, ttft, tpot)),
                      key=lambda r: (r["load"], r["seed"]))
        name, M = MODELS[model][:2]
        per = recs[0]["setting"]["gpus_per_engine"]
        at = recs[0]["at"]
        labels = [o["label"] for o in recs[0]["brute"]["outcomes"]]
        out += [f"## {name}: TTFT {ttft:g} s, TPOT {tpot:g} s, M = {M:,}, {per} GPU(s) per engine",
                "", "| one-engine load | seed | smallest meeting 90% (GPUs) | simulations / "
                "configurations | best at " + f"{at * per} GPUs | " + " | ".join(labels)
                + " | search = brute force | CPU s (smallest / fixed / brute) |",
                "|" + "---|" * (7 + len(labels))]
        for r in recs:
            sm = r["smallest"]
            gpus = next((o["gpus"] for o in sm["outcomes"] if o["label"] == sm["smallest"]), None)
            where = f"{sm['smallest']} ({gpus})" if sm["smallest"] else "none"
            n_conf = sum(len(_configs(k)) for k in range(1, _max_count(sm) + 1))
            cells = {o["label"]: _cell(o) for o in r["brute"]["outcomes"]}
            out.append(f"| {r['load']:g} | {r['seed']} | {where} | {sm['simulations']} / "
                       f"{n_conf} | {r['fixed']['best'][str(at)]} | "
                       + " | ".join(cells[lab] for lab in labels)
                       + f" | {'yes' if r['same_answer'] else '**no**'} ("
                       f"{r['fixed']['simulations']} vs {r['brute']['simulations']}) | "
                       f"{r['cpu_smallest']:.1f} / {r['cpu_fixed']:.1f} / {r['cpu_brute']:.1f} |")
        out.append("")
    return "\n".join(out)


def _configs(n: int) -> list[int]:
    return list(range(n))  # n replicas and n - 1 splits


def _max_count(summary_: dict[str, Any]) -> int:
    return max(o["engines"] for o in summary_["outcomes"])


def _floats(s: str) -> list[float]:
    return [float(x) for x in s.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=400)
    ap.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2])
    ap.add_argument("--models", type=lambda s: s.split(","), default=list(MODELS))
    ap.add_argument("--loads", type=_floats, default=[2.0, 3.0])
    ap.add_argument("--max-engines", type=int, default=5)
    ap.add_argument("--at", type=int, default=4, help="the fixed engine count")
    ap.add_argument("--out", default="studies/cluster/results/capacity")
    ap.add_argument("--slos", type=_floats, metavar="TTFT,TPOT",
                    help="SLOs (seconds) for every model instead of the defaults above")
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args(argv)
    path = Path(args.out + ".jsonl")
    records = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    if not args.report:
        done = {(r["model"], r["seed"], r["size"], r["load"], r["setting"]["ttft_slo"],
                 r["setting"]["tpot_slo"]) for r in records}
        for model in args.models:
            for load in args.loads:
                for seed in args.seeds:
                    slos = tuple(args.slos) if args.slos else MODELS[model][2:]
                    if (model, seed, args.size, load, *slos) in done:
                        continue
                    rec = measure(model, seed, args.size, load, args.max_engines, args.at,
                                  (slos[0], slos[1]))
                    records.append(rec)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with path.open("a") as f:
                        f.write(json.dumps(rec) + "\n")
                    print(f"{model} load {load:g} seed {seed}: smallest "
                          f"{rec['smallest']['smallest']}, best at {args.at} "
                          f"{rec['fixed']['best']}, same as brute force: {rec['same_answer']} "
                          f"(CPU {rec['cpu_smallest'] + rec['cpu_fixed'] + rec['cpu_brute']:.0f} s)",
                          flush=True)
    Path(args.out + ".md").write_text(report(records) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
