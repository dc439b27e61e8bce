"""Prefix reuse on the Mooncake traces: the reuse-aware policies against the certified
reuse-aware bound, and what a reuse-blind bound would claim (feeds docs/results/prefix.md).

Per window (``optsched generate mooncake --trace FILE --consecutive SIZE --seed S`` with the
trace's 512-token blocks, ``M`` = the file's longest request (the default of
``generate mooncake``), ``C = 8,192``, the Llama-2-7B/A100 preset; arrivals stretched by
``scale_to_load`` to the point load RHO, which prices every prompt token as computed, so the
load with reuse is lower):

* the reuse potential (``optsched info``: hit tokens of an unbounded cache / prompt tokens);
* the policies, every schedule replayed by ``optsched.evaluate``: ``vllm`` and ``sarathi``
  (no reuse), ``vllm-apc``, ``sarathi-apc``, ``lpm``, ``dfs``, ``k-lpm``, ``belady``; their
  total latency, mean TTFT and hit rate; the best of them is the best schedule found (the
  improvement search, LNS, does not model reuse);
* per objective, the certified bound with reuse (``best``, which climbs the reuse-aware
  rungs ``reuse-request`` and ``reuse-work``, formulations/bounds.md B19) and the reuse-blind
  ``best`` of the same window with its block ids removed (every rung, ``--blind-limit``
  seconds): what a bound that ignores reuse would claim.

CPU seconds (``time.process_time``) per part; the machine is shared, the load average is
recorded. Results are appended to ``OUT.jsonl`` one window a line (a rerun skips the windows
already there); ``--summary`` prints the tables of the results page from that file.

    OPTSCHED_DATA=/work/shared/data .venv/bin/python -m studies.prefix.study \\
        [--traces conversation,synthetic] [--seeds 0,1,2] [--loads 0.7,0.9] [--size 500] \\
        [--blind-limit 10] [--out studies/prefix/results] [--summary]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

from studies.settings import DATA, PRESET

FILES = {"conversation": "mooncake_conversation_trace.jsonl",
         "synthetic": "mooncake_synthetic_trace.jsonl"}
BLIND = ("vllm", "sarathi")
REUSE = ("vllm-apc", "sarathi-apc", "lpm", "dfs", "k-lpm", "belady")
#: reuse-blind policies with another order (shortest first, ranked, TTFT first): candidates
#: for the best schedule, and the "order, not cache" side of the comparison
ORDERS = ("svf", "rank-i", "ttft-first")
OBJS = ("total-latency", "mean-ttft")
C = 8192


def instance(trace: str, seed: int, size: int, load: float):
    """The seeded window at point load ``load`` (module docstring)."""
    from optsched.cost import preset
    from optsched.instance import Limits
    from optsched.serving.load import scale_to_load
    from optsched.workloads.mooncake import default_kv_capacity, mooncake_instance, read_mooncake

    path = DATA / "traces" / FILES[trace]
    M = default_kv_capacity(read_mooncake(path), 512)
    inst = mooncake_instance(path, Limits(M, C, block_size=512), preset(PRESET),
                             consecutive=size, seed=seed)
    return scale_to_load(inst, load)


def without_ids(inst):
    """The same window with every request's block ids removed (no reuse)."""
    from dataclasses import replace

    return inst.replace(requests=tuple(replace(r, prefix=()) for r in inst.requests))


def _timed(fn):
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def run_policies(inst, names, row: dict) -> None:
    """Each policy's schedule on ``inst``, replayed by the evaluator, into ``row``."""
    from optsched.evaluation import evaluate
    from optsched.policies import simulate

    for p in names:
        ev, t = _timed(lambda p=p: evaluate(inst, simulate(inst, p)))
        assert ev.feasible, p
        row["policies"][p] = {o: ev.objective(o) for o in OBJS}
        row["policies"][p]["hit_rate"] = float(ev.metrics.get("hit_rate", 0.0))
        row["cpu"][p] = round(t, 2)


def run_window(trace: str, seed: int, size: int, load: float, blind_limit: float) -> dict:
    import optsched
    from optsched.prefix import reuse_potential

    inst, t_gen = _timed(lambda: instance(trace, seed, size, load))
    idx = inst.prefix_index
    assert idx is not None, "a Mooncake window lists block ids"
    row: dict = {"trace": trace, "seed": seed, "size": inst.n, "load": load, "name": inst.name,
                 "M": inst.limits.kv_capacity, "C": C, "gen_cpu": round(t_gen, 2),
                 "potential": reuse_potential(idx, inst.arrival, inst.prompt),
                 "policies": {}, "reuse_bound": {}, "blind_bound": {}, "cpu": {}}
    run_policies(inst, BLIND + REUSE + ORDERS, row)
    blind = without_ids(inst)
    row["reuse_bound"], cpu = reuse_bounds(inst)
    row["cpu"].update(cpu)
    for o in OBJS:
        r, t = _timed(lambda o=o: optsched.lower_bound(blind, o, "best",
                                                       time_limit=blind_limit))
        row["blind_bound"][o] = {"value": r.value, "method": r.method}
        row["cpu"][f"blind-bound {o}"] = round(t, 2)
    row["pairs"] = rung_pairs(inst)
    row["loadavg"] = os.getloadavg()[0]
    return row


#: each reuse-blind closed-form rung and its reuse-aware version (formulations/bounds.md B19)
PAIRS = (("request", "reuse-request"), ("work", "reuse-work"), ("srpt", "reuse-srpt"))


def rung_pairs(inst) -> dict:
    """Per objective, each cheap rung on the window without ids next to its reuse version on
    the window with them: how much of a bound reuse takes away, rung by rung."""
    import optsched

    blind = without_ids(inst)
    out: dict = {}
    for o in OBJS:
        out[o] = {}
        for b, r in PAIRS:
            out[o][b] = optsched.lower_bound(blind, o, b).value
            out[o][r] = optsched.lower_bound(inst, o, r).value
    return out


def reuse_bounds(inst) -> tuple[dict, dict]:
    """Per objective, the certified bound with reuse (``best``) and its CPU seconds."""
    import optsched

    out, cpu = {}, {}
    for o in OBJS:
        r, t = _timed(lambda o=o: optsched.lower_bound(inst, o, "best", time_limit=30))
        out[o] = {"value": r.value, "method": r.method, "ladder": r.ladder}
        cpu[f"reuse-bound {o}"] = round(t, 2)
    return out, cpu


def rebound(path: Path, size: int) -> None:
    """Recompute the reuse-aware bounds and the rung pairs of every window of ``path`` (after a
    change of the reuse rungs; the policies' schedules do not depend on them), and run the
    policies of :data:`ORDERS` where they are missing."""
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    for r in rows:
        inst = instance(r["trace"], r["seed"], size, r["load"])
        run_policies(inst, [p for p in ORDERS if p not in r["policies"]], r)
        r["reuse_bound"], cpu = reuse_bounds(inst)
        r["cpu"].update(cpu)
        r["pairs"] = rung_pairs(inst)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def summary(path: Path) -> str:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    names = BLIND + REUSE + ORDERS
    out = []
    for o in OBJS:
        fmt = (lambda x: f"{x:,.0f}") if o == "total-latency" else (lambda x: f"{x:.2f}")
        out.append(f"\n{o} (s). gap: best schedule / reuse bound - 1; blind / apc: the "
                   "reuse-blind bound over the best reuse-aware policy\n")
        out.append("| trace | seed | hit share | " + " | ".join(names) + " | best | reuse bound "
                   "(rung) | gap | blind bound (rung) | blind / apc |")
        out.append("|" + "---|" * (len(names) + 8))
        for r in rows:
            pol = {p: v[o] for p, v in r["policies"].items()}
            best_p = min(pol, key=lambda p: pol[p])
            best_apc = min(pol[p] for p in REUSE)
            rb, bb = r["reuse_bound"][o], r["blind_bound"][o]
            out.append(f"| {r['trace']} | {r['seed']} | {r['potential']['hit_share']:.1%} | "
                       + " | ".join(fmt(pol[p]) if p in pol else "-" for p in names)
                       + f" | {best_p} | {fmt(rb['value'])} ({rb['method']}) | "
                       f"{pol[best_p] / rb['value'] - 1:.0%} | {fmt(bb['value'])} "
                       f"({bb['method']}) | {bb['value'] / best_apc:.2f} |")
    out.append("\nhit rate of each reuse-aware policy (hit tokens / (hit + computed prefill "
               "tokens))\n")
    out.append("| trace | seed | load | " + " | ".join(REUSE) + " |")
    out.append("|" + "---|" * (3 + len(REUSE)))
    for r in rows:
        out.append(f"| {r['trace']} | {r['seed']} | {r['load']} | " + " | ".join(
            f"{r['policies'][p]['hit_rate']:.1%}" for p in REUSE) + " |")
    for o in OBJS:
        out.append(f"\nrung by rung, {o}: each reuse-blind closed form on the window without "
                   "ids / its reuse-aware version (B19) on the window\n")
        out.append("| trace | seed | " + " | ".join(f"{b} / {q}" for b, q in PAIRS) + " |")
        out.append("|" + "---|" * (2 + len(PAIRS)))
        fmt = (lambda x: f"{x:,.0f}") if o == "total-latency" else (lambda x: f"{x:.2f}")
        for r in rows:
            if "pairs" in r:
                pr = r["pairs"][o]
                out.append(f"| {r['trace']} | {r['seed']} | " + " | ".join(
                    f"{fmt(pr[b])} / {fmt(pr[q])}" for b, q in PAIRS) + " |")
    cpu = sum(sum(r["cpu"].values()) + r["gen_cpu"] for r in rows)
    out.append(f"\n{len(rows)} windows at point load {sorted({r['load'] for r in rows})}, "
               f"{cpu:,.0f} CPU seconds in all (load average "
               f"{min(r['loadavg'] for r in rows):.1f}-{max(r['loadavg'] for r in rows):.1f})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="conversation,synthetic")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--loads", default="0.7,0.9")
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--blind-limit", type=float, default=10.0)
    ap.add_argument("--out", default="studies/prefix/results")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--rebound", action="store_true",
                    help="recompute the reuse-aware bounds and rung pairs of the recorded windows")
    a = ap.parse_args(argv)
    bad = [t for t in a.traces.split(",") if t not in FILES]
    try:
        [int(x) for x in a.seeds.split(",")] + [float(x) for x in a.loads.split(",")]
    except ValueError:
        ap.error(f"--seeds and --loads take comma-separated numbers, got {a.seeds!r}, "
                 f"{a.loads!r}")
    if bad:
        ap.error(f"--traces: unknown trace(s) {', '.join(bad)}; choose from {', '.join(FILES)}")
    out = Path(a.out + ".jsonl")
    if a.summary:
        print(summary(out))
        return 0
    if a.rebound:
        warnings.simplefilter("ignore")
        rebound(out, a.size)
        return 0
    for f in FILES.values():
        if not (DATA / "traces" / f).exists():
            print(f"studies.prefix.study: {DATA / 'traces' / f} not found (set OPTSCHED_DATA)",
                  file=sys.stderr)
            return 2
    done = set()
    if out.exists():
        done = {(r["trace"], r["seed"], r["load"]) for r in
                (json.loads(x) for x in out.read_text().splitlines() if x.strip())}
    warnings.simplefilter("ignore")
    for load in (float(x) for x in a.loads.split(",")):
        for trace in a.traces.split(","):
            for seed in (int(s) for s in a.seeds.split(",")):
                if (trace, seed, load) in done:
                    continue
                row = run_window(trace, seed, a.size, load, a.blind_limit)
                with out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(f"{trace} seed {seed} load {load}: cpu {sum(row['cpu'].values()):.1f} s",
                      file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
