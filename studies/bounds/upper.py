"""The schedule side on trace windows with their own arrivals.

Windows of the Azure 2023 conversation and code traces (``$OPTSCHED_DATA/traces``,
:mod:`studies.settings`), each ``--size`` consecutive requests starting at a
row drawn by ``optsched.workloads.traces.window_start(n_rows, size, seed)`` (the windows of
``studies/bounds/trace_bounds.py``), arrivals as in the trace re-based to the window's first arrival.
Llama-2-7B preset (``infermax-llama2-7b-a100``), ``M = 30,000``,
``C = 8192``; requests with ``I + O - 1 > M`` are dropped.

Per window and objective (total latency, mean TTFT) it prints side by side:

* every registered policy's objective (each schedule replayed by ``evaluate``), the best one
  and its time ("before": what ``compare`` found without this work);
* ``ttft-first`` (``optsched/policies/ttft_first.py``) and its time;
* ``improve`` (``optsched/search/lns.py``) for ``--lns-seconds`` from the best of those schedules,
  the method that found its result, and its time;
* the certified bound (``combinatorial``) and the gap ``(best - bound) / best`` before and
  after.

``--summary AFTER.json [--before BEFORE.json]`` prints the Markdown table of a finished run
(the README's); ``--ttft-parts`` splits ttft-first's mean TTFT into the wait before a
request's first batch and the span to its first token, beside the ``request`` rung.

    .venv/bin/python -m studies.bounds.upper [--seeds 1,2,3] [--traces conv,code]
        [--size 1200] [--lns-seconds 60] [--skip-policies ...] [--json out.json]

The machine is shared (2 cores, other jobs running): times are pessimistic.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from optsched.bounds import lower_bound
from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.policies import list_policies, simulate
from optsched.search.lns import LNSOptions, improve
from studies import settings

OBJECTIVES = ("total-latency", "mean-ttft")
NEW_POLICIES = ("ttft-first", "ttft-first-sr")


def window(trace: str, seed: int, size: int) -> Instance:
    """``size`` consecutive requests from a row drawn by ``seed``; own arrivals, re-based
    (:func:`studies.settings.window`: the same windows as ``trace_bounds.py``), named
    ``<trace>-seed<seed>-rows<lo>-<hi>``."""
    inst = settings.window(trace, seed, size)
    return inst.replace(name=inst.name.removeprefix("AzureLLMInferenceTrace_"))


def run_policy(inst: Instance, name: str) -> dict:
    t0 = time.perf_counter()
    try:
        s = simulate(inst, name)
    except Exception as e:  # noqa: BLE001 - a policy that cannot run this window is a row
        return {"error": str(e).splitlines()[0], "seconds": time.perf_counter() - t0}
    ev = evaluate(inst, s)
    sec = time.perf_counter() - t0
    if not ev.feasible:
        return {"error": f"infeasible: {ev.violations[0]}", "seconds": sec}
    return {"schedule": s, "seconds": sec,
            **{o: ev.objective(o) for o in OBJECTIVES}}


def cell(inst: Instance, objective: str, runs: dict, lns_seconds: float, seed: int) -> dict:
    t0 = time.perf_counter()
    lb = lower_bound(inst, objective, "combinatorial")
    t_lb = time.perf_counter() - t0
    old = {k: v for k, v in runs.items() if k not in NEW_POLICIES and objective in v}
    new = {k: v for k, v in runs.items() if k in NEW_POLICIES and objective in v}
    b_old = min(old, key=lambda k: old[k][objective])
    b_all = min({**old, **new}, key=lambda k: {**old, **new}[k][objective])
    out = {"bound": lb.value, "rung": lb.method, "bound_seconds": t_lb,
           "best_policy": b_old, "best_policy_value": old[b_old][objective],
           "best_policy_seconds": old[b_old]["seconds"],
           "new": {k: {"value": v[objective], "seconds": v["seconds"]} for k, v in new.items()},
           "start": b_all}
    if lns_seconds > 0:
        start = {**old, **new}[b_all]["schedule"]
        res = improve(inst, start, objective,
                      LNSOptions(time_limit=lns_seconds, seed=seed, progress=True))
        ev = evaluate(inst, res.schedule)
        assert ev.feasible and abs(ev.objective(objective) - res.objective) <= 1e-9 * res.objective
        assert res.objective <= {**old, **new}[b_all][objective]
        out["lns"] = {"value": res.objective, "method": res.method, "seconds": res.runtime,
                      "decodes": res.priority_decodes, "windows": res.windows_solved}
    return out


def fmt_row(name: str, obj: str, c: dict) -> str:
    before = c["best_policy_value"]
    after = min([before] + [v["value"] for v in c["new"].values()]
                + ([c["lns"]["value"]] if "lns" in c else []))
    gap_b = (before - c["bound"]) / before
    gap_a = (after - c["bound"]) / after
    new = "  ".join(f"{k} {v['value']:.4g} ({v['seconds']:.1f}s)" for k, v in c["new"].items())
    lns = (f"improve {c['lns']['value']:.4g} [{c['lns']['method']}] ({c['lns']['seconds']:.0f}s)"
           if "lns" in c else "")
    return (f"{name:28s} {obj:13s} bound {c['bound']:.4g} ({c['rung']}) | before "
            f"{c['best_policy']} {before:.4g} ({c['best_policy_seconds']:.1f}s) gap "
            f"{100 * gap_b:.1f}% | {new} | {lns} | after gap {100 * gap_a:.1f}%")


def ttft_parts(inst: Instance, policy: str = "ttft-first") -> dict:
    """Where ``policy``'s mean TTFT goes: the wait from arrival to the request's first
    batch, and the span from there to the end of the batch that gives its first token
    (its prefill, chunks and the batch's other entries), beside the ``request`` rung (each
    prompt's prefill alone, ``formulations/bounds.md``) and the certified bound."""
    s = simulate(inst, policy)
    ev = evaluate(inst, s)
    first, token = np.full(inst.n, -1), np.full(inst.n, -1)
    g = np.zeros(inst.n, np.int64)
    for j in range(s.n_batches):
        a, b = s.batch_ptr[j], s.batch_ptr[j + 1]
        for r, c in zip(s.entry_req[a:b].tolist(), s.entry_tokens[a:b].tolist()):
            if first[r] < 0:
                first[r] = j
            if token[r] < 0:
                g[r] += c
                if g[r] >= inst.prompt[r]:
                    token[r] = j
    start, end = ev.batch_start, ev.batch_end
    return {"mean_ttft": ev.objective("mean-ttft"),
            "wait": float((start[first] - inst.arrival).mean()),
            "own": float((end[token] - start[first]).mean()),
            "request_rung": lower_bound(inst, "mean-ttft", "request").value,
            "bound": lower_bound(inst, "mean-ttft", "combinatorial").value,
            "busy_share": float((end - start).sum() / end[-1]),
            "evictions": ev.metrics["evictions"]}


def summary(after: dict, before: dict | None) -> str:
    """A Markdown table from this script's JSON (``--json``); ``before``: a run of the code
    before the change (every registered policy and its ``improve``), whose best schedule is
    the "before" column, beside ``after``'s ``improve`` and the method that found each."""
    lines = ["| window | objective | bound (rung) | best registered policy | before: best "
             "[method] | gap before | after: improve 60 s [method] | gap after |",
             "|---|---|---:|---|---|---:|---|---:|"]
    for k, c in after.items():
        name, obj = k.split("/")
        b = (before or {}).get(k, c)
        pols = {p: v for p, v in b["policies"].items() if v is not None and p not in NEW_POLICIES}
        best = min(pols, key=pols.__getitem__)
        cands = {f"policy {p}": v for p, v in b["policies"].items() if v is not None}
        if "lns" in b:
            cands[f"improve: {b['lns']['method']}"] = b["lns"]["value"]
        bm = min(cands, key=cands.__getitem__)
        bv = cands[bm]
        lns = c["lns"]
        after_v = min(bv, lns["value"])
        lines.append(
            f"| {name} | {obj} | {c['bound']:.4g} ({c['rung']}) | {best} {pols[best]:.4g} | "
            f"{bv:.4g} [{bm}] | {100 * (bv - c['bound']) / bv:.1f}% | "
            f"{lns['value']:.4g} [{lns['method']}] | "
            f"{100 * (after_v - c['bound']) / after_v:.1f}% |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--size", type=int, default=1200)
    ap.add_argument("--lns-seconds", type=float, default=60.0)
    ap.add_argument("--policies", default="", help="comma list (default: every registered one)")
    ap.add_argument("--skip-policies", default="")
    ap.add_argument("--json", default=None)
    ap.add_argument("--objectives", default=",".join(OBJECTIVES))
    ap.add_argument("--summary", default=None, metavar="JSON",
                    help="only print the Markdown table of a finished run's JSON")
    ap.add_argument("--before", default=None, metavar="JSON",
                    help="with --summary: a run of the code before the change (the before "
                    "column: its best policy and its improve)")
    ap.add_argument("--ttft-parts", action="store_true",
                    help="only print where ttft-first's mean TTFT goes on each window")
    a = ap.parse_args()
    if a.ttft_parts:
        for trace in a.traces.split(","):
            for seed in (int(x) for x in a.seeds.split(",")):
                inst = window(trace, seed, a.size)
                p = ttft_parts(inst)
                print(f"{inst.name}: " + ", ".join(f"{k} {v:.4g}" for k, v in p.items()),
                      flush=True)
        return
    if a.summary:
        print(summary(json.loads(Path(a.summary).read_text()),
                      json.loads(Path(a.before).read_text()) if a.before else None))
        return
    names = ([p for p in a.policies.split(",") if p] or [p.name for p in list_policies()])
    names = [p for p in names if p not in a.skip_policies.split(",")]
    names += [p for p in NEW_POLICIES if p not in names]
    results = {}
    for trace in a.traces.split(","):
        for seed in (int(s) for s in a.seeds.split(",")):
            inst = window(trace, seed, a.size)
            span = float(inst.arrival.max())
            print(f"# {inst.name}: {inst.n} requests over {span:.0f} s", flush=True)
            runs = {p: run_policy(inst, p) for p in names}
            for p, r in runs.items():
                if "error" in r:
                    print(f"  {p}: {r['error']}", file=sys.stderr)
            for obj in a.objectives.split(","):
                c = cell(inst, obj, runs, a.lns_seconds, seed)
                print(fmt_row(inst.name, obj, c), flush=True)
                results[f"{inst.name}/{obj}"] = {
                    **c, "policies": {p: r.get(obj) for p, r in runs.items()},
                    "policy_seconds": {p: r["seconds"] for p, r in runs.items()}}
            if a.json:  # after every window: a long run leaves what it measured
                Path(a.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
