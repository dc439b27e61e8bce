"""Prefix-aware routing on Mooncake conversation windows (docs/results/cluster.md,
"Prefix-aware routing"): 300 consecutive requests from a seeded start row, 4 replicas at a
load per replica of 0.7, vllm-apc on every engine behind rr, lor and prefix; hit rate, mean
and P99 TTFT, mean latency, as the evaluator reports them. Runs the CLI (the commands are in
each record) and appends one record per cell to ``results/prefix.jsonl`` with its CPU seconds
and the load average; ``--report`` renders ``results/prefix.md``.

    OPTSCHED_DATA=/work/shared/data nice -n 10 .venv/bin/python -m studies.cluster.prefix
    .venv/bin/python -m studies.cluster.prefix --report
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent / "results"
ROUTERS = ("rr", "lor", "prefix")
KEYS = ("hit_rate", "hit_tokens", "mean_ttft", "p99_ttft", "mean_latency")


def generate_cmd(seed: int, size: int, replicas: int, load: float, out: str,
                 trace_name: str = "conversation") -> list[str]:
    trace = os.path.join(os.environ.get("OPTSCHED_DATA", "../shared/data"), "traces",
                         f"mooncake_{trace_name}_trace.jsonl")
    return ["optsched", "generate", "mooncake", "--trace", trace, "--consecutive", str(size),
            "--seed", str(seed), "--cost-model", "infermax-llama2-7b-a100",
            "--max-batch-tokens", "8192", "--load", str(load), "--replicas", str(replicas),
            "-o", out]


def _run(cmd: list[str]) -> tuple[str, float]:
    """stdout and the child's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    exe = str(Path(sys.executable).parent / cmd[0])
    done = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done.stdout, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def measure(seeds: list[int], size: int, replicas: int, load: float, trace: str) -> None:
    HERE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, open(HERE / "prefix.jsonl", "a") as f:
        for seed in seeds:
            inst = os.path.join(tmp, f"m{seed}.json")
            gen = generate_cmd(seed, size, replicas, load, inst, trace)
            _run(gen)
            for router in ROUTERS:
                sim = ["optsched", "simulate", inst, "--policy", "vllm-apc", "--router", router,
                       "--json"]
                out, cpu = _run(sim)
                ev = json.loads(out)["evaluation"]
                rec = {"trace": trace, "seed": seed, "size": size, "replicas": replicas, "load": load,
                       "router": router, "feasible": ev["feasible"],
                       **{k: ev["metrics"].get(k) for k in KEYS}, "cpu_seconds": round(cpu, 2),
                       "loadavg": os.getloadavg()[0],
                       "commands": [" ".join(gen[:-2]) + " -o X.json",
                                    " ".join(sim).replace(inst, "X.json")]}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                print(json.dumps(rec), file=sys.stderr)


def report() -> str:
    recs = [json.loads(x) for x in (HERE / "prefix.jsonl").read_text().splitlines() if x]
    lines = ["| trace | seed | router | hit rate | mean TTFT (s) | P99 TTFT (s) | mean latency (s) | "
             "CPU s |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted(recs, key=lambda r: (r.get("trace", "conversation"), r["seed"],
                                         ROUTERS.index(r["router"]))):
        ok = "" if r["feasible"] else " (infeasible)"
        lines.append(f"| {r.get('trace', 'conversation')} | {r['seed']} | {r['router']}{ok} | "
                     f"{100 * r['hit_rate']:.2f}% | "
                     f"{r['mean_ttft']:.2f} | {r['p99_ttft']:.2f} | {r['mean_latency']:.2f} | "
                     f"{r['cpu_seconds']:.1f} |")
    text = "\n".join(lines) + "\n"
    (HERE / "prefix.md").write_text(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--size", type=int, default=300)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--load", type=float, default=0.7)
    ap.add_argument("--trace", default="conversation", choices=("conversation", "synthetic"))
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args()
    if not a.report:
        measure([int(s) for s in a.seeds.split(",")], a.size, a.replicas, a.load, a.trace)
    print(report())


if __name__ == "__main__":
    main()
