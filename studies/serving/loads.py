"""The serving study at stated offered loads (``docs/results/serving.md``): each policy against
the certified lower bound and the best known schedule, at 50/70/90% load and, labelled apart,
at the windows' own arrivals (overloaded on conversation).

Settings (one place: :data:`SETTINGS`; ``studies/serving/README.md``): ``--windows``
consecutive requests of each Azure 2023 trace from the start row drawn by each of ``--seeds``
(:func:`studies.settings.window`: ``M = 30,000``, ``C = 8,192``, Llama-2-7B/A100 preset, KV cache
only), every request with TTFT SLO 1 s and mean TPOT SLO 0.1 s. Each window is run

* stretched to offered loads 0.3, 0.5, 0.7, 0.9 and 1.3 (overloaded, labelled) (:func:`optsched.serving.load.scale_to_load`: the
  point load, the achievable side of docs/semantics.md section 4, is the target, so the
  certified load is at most the target), and
* at its own arrivals (``own``), whatever its load: the rows whose load exceeds 1 are the
  **overload** regime, reported apart (a gap there grows with the window's length,
  ``docs/results/load.md``).

Per instance: its offered load (both sides and the busiest tenth); every policy of
:data:`POLICIES` simulated and replayed by ``optsched.evaluate`` (EcoServe under both readings of
its deadline key, ``deadline=remaining`` and ``deadline=slo-length``); for total latency and
mean TTFT the certified bound ``lower_bound(inst, objective, "best")`` (the rung that gave it) and
the **best known schedule**: the best policy's schedule improved by ``improve``
(``optsched/search/lns.py``) for ``--improve-seconds`` of wall time (seed 0); for SLO attainment
the certified upper bound B12 and the best policy. Each record is appended to ``OUT.jsonl`` as
soon as it is measured (a rerun skips the records already there), so an interrupted run keeps
what it did.

    OPTSCHED_DATA=/path/to/shared/data .venv/bin/python -m studies.serving.loads

``--report`` only re-renders ``OUT.txt`` (the per-instance table) and ``OUT.md`` (the intervals
of ``docs/results/serving.md``) from ``OUT.jsonl``. CPU seconds (``time.process_time``) and the
load average are recorded with every record: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

from optsched.bounds.goodput import goodput_bound
from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.policies import get_policy, simulate
from optsched.schedule import Schedule
from optsched.search.lns import LNSError, LNSOptions, improve
from optsched.serving.load import offered_load, scale_to_load
from optsched.solving import lower_bound
from studies import settings
from studies.settings import PRESET, TRACES, C, M

#: the study's settings, written into every output (the lead re-runs the script as is)
SETTINGS: dict[str, Any] = {
    "traces": "conv,code", "seeds": "1,2,3", "windows": 1000, "loads": "0.3,0.5,0.7,0.9,1.3,own",
    "ttft_slo": 1.0, "tpot_slo": 0.1, "improve_seconds": 10.0, "bound_method": "best",
    "bound_seconds": 30.0,
}
#: label -> (registered policy, parameters); the paper policies first
POLICIES: dict[str, tuple[str, dict[str, Any]]] = {
    "vllm": ("vllm", {}),
    "sarathi": ("sarathi", {}),
    "ecoserve": ("ecoserve", {"deadline": "remaining"}),
    "ecoserve-slo-length": ("ecoserve", {"deadline": "slo-length"}),
    "aptserve-kv-only": ("aptserve-kv-only", {}),
    "svf": ("svf", {}),
    "mcsf": ("mcsf", {}),
    "rank-i": ("rank-i", {}),
    "ttft-first-sr": ("ttft-first-sr", {}),
}
PAPER = ("vllm", "sarathi", "ecoserve", "ecoserve-slo-length", "aptserve-kv-only")
LATENCY = ("total-latency", "mean-ttft")
HERE = Path(__file__).resolve().parent


def instance(trace: str, seed: int, n: int, load: str, ttft: float, tpot: float) -> Instance:
    """The seeded window, with SLOs, at its own arrivals or stretched to ``load``."""
    base = settings.window(trace, seed, n).with_default_slos(ttft, tpot)
    return base if load == "own" else scale_to_load(base, float(load))


def run_policy(inst: Instance, label: str) -> tuple[dict[str, Any], Schedule | None]:
    name, params = POLICIES[label]
    t0 = time.process_time()
    try:
        # a built policy: simulate's own ``deadline`` keyword is a wall-clock limit
        sched = simulate(inst, get_policy(name, **params))
        ev = evaluate(inst, sched)
    except Exception as e:  # a policy refusing the instance is reported, not fatal
        return {"error": str(e).splitlines()[0], "cpu_s": time.process_time() - t0}, None
    if not ev.feasible:
        return {"error": f"infeasible: {ev.violations[0]}", "cpu_s": time.process_time() - t0}, None
    return {"total-latency": ev.objective("total-latency"), "mean-ttft": ev.objective("mean-ttft"),
            "goodput": ev.metrics.get("slo_attainment"),
            "completion_rate": ev.metrics.get("completion_rate"),
            "cpu_s": time.process_time() - t0}, sched


def best_known(inst: Instance, obj: str, pols: dict[str, dict[str, Any]],
               scheds: dict[str, Schedule], seconds: float) -> dict[str, Any]:
    """The best policy for ``obj`` and ``improve`` from its schedule within ``seconds``."""
    vals = {p: v[obj] for p, v in pols.items() if v.get(obj) is not None}
    start = min(vals, key=vals.__getitem__)
    out: dict[str, Any] = {"policy": start, "policy_value": vals[start],
                           "value": vals[start], "method": None}
    if seconds <= 0:
        return out
    t0, w0 = time.process_time(), time.perf_counter()
    try:
        res = improve(inst, scheds[start], obj,
                      LNSOptions(time_limit=seconds, seed=0, progress=False))
    except LNSError as e:
        out["improve_error"] = str(e)
        return out
    out.update(value=min(res.objective, vals[start]), method=res.method,
               improve_cpu_s=time.process_time() - t0,
               improve_wall_s=time.perf_counter() - w0)
    return out


def bound(inst: Instance, obj: str, a: argparse.Namespace) -> dict[str, Any]:
    """The certified bound of ``obj``: the ``best`` ladder within ``--bound-seconds`` (its
    ``stretch`` rung, B15, iterates until the budget ends; without a limit it runs its 200
    iterations, minutes at 1,000 requests), the rung that gave it and the code it ran on."""
    t0, w0 = time.process_time(), time.perf_counter()
    limit = a.bound_seconds if a.bound_seconds > 0 else None
    b = lower_bound(inst, obj, a.bound_method, time_limit=limit)
    return {"bound": b.value, "rung": b.method, "cpu_s": time.process_time() - t0,
            "wall_s": time.perf_counter() - w0, "time_limit": limit, "commit": commit(),
            "ladder": dict(b.ladder)}


def commit() -> str:
    """The repository's commit (short hash), recorded with every bound and record."""
    try:
        out = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def measure(trace: str, seed: int, load: str, a: argparse.Namespace) -> dict[str, Any]:
    t_all = time.process_time()
    inst = instance(trace, seed, a.windows, load, a.ttft_slo, a.tpot_slo)
    t0 = time.process_time()
    ld = offered_load(inst)
    rec: dict[str, Any] = {"trace": trace, "seed": seed, "setting": load, "window": a.windows,
                           "n": inst.n,
                           "start": settings.window_row(trace, seed, a.windows),
                           "load": ld.to_dict(), "load_point": ld.point, "load_lower": ld.lower,
                           "load_cpu_s": time.process_time() - t0}
    pols, scheds = {}, {}
    for label in POLICIES:
        pols[label], s = run_policy(inst, label)
        if s is not None:
            scheds[label] = s
    rec["policies"] = pols
    rec["bounds"], rec["best"] = {}, {}
    for obj in LATENCY:
        t0 = time.process_time()
        rec["bounds"][obj] = bound(inst, obj, a)
        rec["best"][obj] = best_known(inst, obj, pols, scheds, a.improve_seconds)
    t0 = time.process_time()
    gb = goodput_bound(inst)
    rec["bounds"]["goodput"] = {"bound": gb.attainment, "rung": "B12",
                                "cpu_s": time.process_time() - t0}
    good = {p: v["goodput"] for p, v in pols.items() if v.get("goodput") is not None}
    rec["best"]["goodput"] = {"policy": max(good, key=good.__getitem__),
                              "value": max(good.values())}
    rec["cpu_s"] = time.process_time() - t_all
    rec["loadavg"] = os.getloadavg()[0]
    rec["commit"] = commit()
    return rec


#: the policies a refresh re-runs: EcoServe (its GT allocation was fixed after the first
#: records) and the cheap ones (a check that nothing else moved)
REFRESH = ("ecoserve", "ecoserve-slo-length", "vllm", "sarathi", "svf", "mcsf", "rank-i")


def refresh(rec: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    """A record measured before the bound had a time limit (no ``commit`` in its bounds), on
    the code of today: the latency bounds again (``bound``) and the policies of
    :data:`REFRESH`; the other policies and the best known schedules (``improve``) are kept,
    the best known value lowered if a re-run policy now beats it. The old figures stay under
    ``before`` (bounds and re-run policies), so the page can state both."""
    inst = instance(rec["trace"], rec["seed"], rec["window"], rec["setting"], a.ttft_slo,
                    a.tpot_slo)
    t0 = time.process_time()
    before: dict[str, Any] = {"bounds": {o: rec["bounds"][o] for o in LATENCY}, "policies": {}}
    for obj in LATENCY:
        rec["bounds"][obj] = bound(inst, obj, a)
    for label in REFRESH:
        before["policies"][label] = rec["policies"][label]
        rec["policies"][label], _ = run_policy(inst, label)
        for obj in LATENCY:
            v = rec["policies"][label].get(obj)
            if v is not None and v < rec["best"][obj]["value"]:
                rec["best"][obj].update(value=v, policy=label, method=None)
    rec["before"] = before
    rec["refresh_cpu_s"] = time.process_time() - t0
    rec["refresh_commit"] = commit()
    return rec


def refresh_best(rec: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    """A refreshed record's best known schedules again on today's ``improve`` (its key search
    gained decode caps since the first records): the best policy's schedule is simulated again
    and improved for ``--improve-seconds``; the lower of the old and the new value is kept
    (both are schedules the evaluator accepted), the old entry under ``before``."""
    inst = instance(rec["trace"], rec["seed"], rec["window"], rec["setting"], a.ttft_slo,
                    a.tpot_slo)
    t0 = time.process_time()
    rec.setdefault("before", {})["best"] = {o: dict(rec["best"][o]) for o in LATENCY}
    for obj in LATENCY:
        vals = {p: v[obj] for p, v in rec["policies"].items() if v.get(obj) is not None}
        start = min(vals, key=vals.__getitem__)
        _, sched = run_policy(inst, start)
        if sched is None:
            continue
        new = best_known(inst, obj, {start: rec["policies"][start]}, {start: sched},
                         a.improve_seconds)
        old = rec["before"]["best"][obj]
        rec["best"][obj] = new if new["value"] <= old["value"] else {**old, "kept": "before"}
    rec["best_commit"] = commit()
    rec["refresh_best_cpu_s"] = time.process_time() - t0
    return rec


def stale(rec: dict[str, Any]) -> bool:
    return "commit" not in rec["bounds"]["total-latency"]


# -- rendering ---------------------------------------------------------------------------

def regime(r: dict[str, Any]) -> str:
    """``load 0.5`` ... or, at the own arrivals, ``own (overload)`` / ``own (stable)``."""
    if r["setting"] != "own":
        return f"load {r['setting']}"
    pt, peak = r["load_point"], r["load"].get("peak")
    if pt is not None and pt > 1:
        return "own (overload)"
    return "own (bursty)" if peak is not None and peak > 1 else "own (stable)"


def span(xs: list[float], f: str = "{:.2f}", unit: str = "x") -> str:
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    return (f.format(lo) if f.format(lo) == f.format(hi) else f"{f.format(lo)}-{f.format(hi)}") + unit


def per_instance(recs: list[dict[str, Any]]) -> list[str]:
    head = (f"{'trace':5} {'seed':>4} {'start':>6} {'n':>5} {'setting':15} {'load':>11} "
            f"{'objective':13} {'bound':>9} {'rung':>13} {'best known':>10} {'how':>26}  "
            + "  ".join(f"{p[:12]:>12}" for p in POLICIES))
    lines = [head, "-" * len(head)]
    for r in recs:
        ld = f"{r['load_lower'] or 0:.2f}-{r['load_point'] or 0:.2f}"
        for obj in (*LATENCY, "goodput"):
            b, bk = r["bounds"][obj], r["best"][obj]
            how = bk["policy"] + (f"+{bk['method']}" if bk.get("method") else "")
            vals = [r["policies"][p].get(obj) for p in POLICIES]
            lines.append(f"{r['trace']:5} {r['seed']:>4} {r['start']:>6} {r['n']:>5} "
                         f"{regime(r):15} {ld:>11} {obj:13} {b['bound']:>9.4g} {b['rung']:>13} "
                         f"{bk['value']:>10.4g} {how[:26]:>26}  "
                         + "  ".join(f"{'-' if v is None else format(v, '.4g'):>12}" for v in vals))
    return lines


def group(recs: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in recs:
        out.setdefault((r["trace"], regime(r)), []).append(r)
    return out


def latency_table(recs: list[dict[str, Any]], obj: str) -> list[str]:
    """Per trace and regime, each policy's value over the best known schedule and over the
    bound, as intervals over the seeds."""
    cols = list(POLICIES)
    lines = ["| trace | regime | windows | load (certified-point) | best known / bound | "
             + " | ".join(f"`{p}`" for p in cols) + " |",
             "|---|---|---:|---|---:|" + "---:|" * len(cols)]
    for (trace, reg), rs in group(recs).items():
        bk = [r["best"][obj]["value"] / r["bounds"][obj]["bound"] for r in rs]
        cells = []
        for p in cols:
            v = [r["policies"][p].get(obj) for r in rs]
            if any(x is None for x in v):
                cells.append("-")
                continue
            vb = [x / r["best"][obj]["value"] for x, r in zip(v, rs, strict=True)]
            vo = [x / r["bounds"][obj]["bound"] for x, r in zip(v, rs, strict=True)]
            cells.append(f"{span(vb)} (<= {span(vo)})")
        lo = [r["load_lower"] for r in rs if r["load_lower"]]
        pt = [r["load_point"] for r in rs if r["load_point"]]
        lines.append(f"| {trace} | {reg} | {len(rs)} | {span(lo, unit='')} - {span(pt, unit='')} "
                     f"| {span(bk)} | " + " | ".join(cells) + " |")
    return lines


def goodput_table(recs: list[dict[str, Any]]) -> list[str]:
    cols = list(POLICIES)
    lines = ["| trace | regime | B12 upper bound | best policy | "
             + " | ".join(f"`{p}`" for p in cols) + " |",
             "|---|---|---:|---|" + "---:|" * len(cols)]
    for (trace, reg), rs in group(recs).items():
        ub = [100 * r["bounds"]["goodput"]["bound"] for r in rs]
        bests = sorted({r["best"]["goodput"]["policy"] for r in rs})
        cells = []
        for p in cols:
            v = [r["policies"][p].get("goodput") for r in rs]
            cells.append("-" if any(x is None for x in v)
                         else span([100 * x for x in v], "{:.0f}", "%"))
        lines.append(f"| {trace} | {reg} | {span(ub, '{:.0f}', '%')} | "
                     f"{', '.join(f'`{b}`' for b in bests)} | " + " | ".join(cells) + " |")
    return lines


def best_policies(recs: list[dict[str, Any]]) -> list[str]:
    """Which policy is best on each instance, per objective (the 'SVF is best' check)."""
    lines = []
    for obj in (*LATENCY, "goodput"):
        for (trace, reg), rs in group(recs).items():
            picks = [f"seed {r['seed']}: `{r['best'][obj]['policy']}`" for r in rs]
            lines.append(f"* {obj}, {trace}, {reg}: " + ", ".join(picks))
    return lines


def bound_changes(recs: list[dict[str, Any]]) -> list[str]:
    """The records re-run by ``--refresh``: each latency bound before (the ladder without a time
    limit, before the stretch and tail rungs) and after, and EcoServe's total latency before
    and after its allocation fix."""
    rs = [r for r in recs if "before" in r]
    if not rs:
        return []
    lines = ["| trace | seed | regime | total-latency bound before (rung) | after (rung) | mean-TTFT "
             "bound before | after | `ecoserve` before / after | `ecoserve-slo-length` before / "
             "after |", "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rs:
        b, a = r["before"]["bounds"], r["bounds"]
        e = [f"{r['before']['policies'][p].get('total-latency', 0):,.0f} / "
             f"{r['policies'][p].get('total-latency', 0):,.0f}"
             for p in ("ecoserve", "ecoserve-slo-length")]
        lines.append(f"| {r['trace']} | {r['seed']} | {regime(r)} | "
                     f"{b['total-latency']['bound']:,.0f} ({b['total-latency']['rung']}) | "
                     f"{a['total-latency']['bound']:,.0f} ({a['total-latency']['rung']}) | "
                     f"{b['mean-ttft']['bound']:.4g} ({b['mean-ttft']['rung']}) | "
                     f"{a['mean-ttft']['bound']:.4g} ({a['mean-ttft']['rung']}) | {e[0]} | {e[1]} |")
    return lines


def sentences(recs: list[dict[str, Any]]) -> list[str]:
    """One line per trace and regime: each policy on total latency, "x times the best known
    schedule and at most y times the optimum" (the page's wording of a gap)."""
    lines = []
    for (trace, reg), rs in group(recs).items():
        parts = []
        for p in POLICIES:
            v = [r["policies"][p].get("total-latency") for r in rs]
            if any(x is None for x in v):
                continue
            vb = span([x / r["best"]["total-latency"]["value"] for x, r in zip(v, rs, strict=True)])
            vo = span([x / r["bounds"]["total-latency"]["bound"] for x, r in zip(v, rs, strict=True)])
            parts.append(f"`{p}` {vb} the best known and at most {vo} the optimum")
        lines.append(f"* {trace}, {reg} ({len(rs)} window{'s' if len(rs) > 1 else ''}), total "
                     "latency: " + "; ".join(parts) + ".")
    return lines


def render(recs: list[dict[str, Any]], a: argparse.Namespace) -> tuple[str, str]:
    cfg = {k: getattr(a, k) for k in SETTINGS}
    head = [f"# studies/serving/loads.py {json.dumps(cfg)}",
            f"# M = {M}, C = {C}, {PRESET}; KV cache only; TTFT SLO {a.ttft_slo:g} s, mean TPOT "
            f"SLO {a.tpot_slo:g} s; bound: lower_bound(inst, objective, '{a.bound_method}'); best "
            f"known: the best policy improved for {a.improve_seconds:g} s wall (seed 0)",
            f"# {len(recs)} instances; CPU {sum(r['cpu_s'] for r in recs):.0f} s; "
            f"rendered {settings.load_line()}"]
    txt = "\n".join(head + per_instance(recs)) + "\n"
    md = ["<!-- generated by: .venv/bin/python -m studies.serving.loads --report -->", ""]
    for obj, title in (("total-latency", "Total latency"), ("mean-ttft", "Mean TTFT")):
        md += [f"### {title}: each policy over the best known schedule (and over the certified "
               "bound, an upper bound on its distance to the optimum)", ""]
        md += latency_table(recs, obj) + [""]
    md += ["### SLO attainment (TTFT 1 s, mean TPOT 0.1 s) against the certified upper bound", ""]
    md += goodput_table(recs) + ["", "### Best policy of each instance", ""] + best_policies(recs)
    md += ["", "### In words", ""] + sentences(recs)
    changes = bound_changes(recs)
    if changes:
        md += ["", "### Records re-run by `--refresh`: bounds and EcoServe before and after", ""]
        md += changes
    return txt, "\n".join(md) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for k, v in SETTINGS.items():
        ap.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    ap.add_argument("--out", default=str(HERE / "results" / "loads"))
    ap.add_argument("--report", action="store_true", help="only re-render OUT.txt and OUT.md")
    ap.add_argument("--refresh", action="store_true",
                    help="re-run the bounds and the REFRESH policies of the records measured "
                         "before the bound had a time limit, rewriting OUT.jsonl")
    ap.add_argument("--refresh-best", action="store_true",
                    help="re-run the best known schedules (improve) of the records measured "
                         "before today's code, rewriting OUT.jsonl")
    a = ap.parse_args()
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    jl = out.with_suffix(".jsonl")
    recs = [json.loads(x) for x in jl.read_text().splitlines()] if jl.exists() else []
    if a.refresh_best:
        for i, r in enumerate(recs):
            if r["window"] != a.windows or "commit" in r or "best_commit" in r:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                recs[i] = refresh_best(r, a)
            jl.write_text("".join(json.dumps(x) + "\n" for x in recs))
            print(f"best known again: {r['trace']} seed {r['seed']} {regime(r)}: cpu "
                  f"{r['refresh_best_cpu_s']:.0f} s", flush=True)
    elif a.refresh:
        for i, r in enumerate(recs):
            if r["window"] != a.windows or not stale(r):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                recs[i] = refresh(r, a)
            jl.write_text("".join(json.dumps(x) + "\n" for x in recs))
            print(f"refreshed {r['trace']} seed {r['seed']} {regime(r)}: cpu "
                  f"{r['refresh_cpu_s']:.0f} s", flush=True)
    elif not a.report:
        if not TRACES.is_dir():
            raise SystemExit(f"studies.serving.loads: {TRACES} is missing (set OPTSCHED_DATA)")
        done = {(r["trace"], r["seed"], r["setting"], r["window"]) for r in recs}
        # seeds outermost: an interrupted run covers every setting of the first seeds
        for seed in (int(s) for s in a.seeds.split(",")):
            for trace in a.traces.split(","):
                for load in a.loads.split(","):
                    if (trace, seed, load, a.windows) in done:
                        continue
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the overload warning: labelled here
                        rec = measure(trace, seed, load, a)
                    recs.append(rec)
                    with jl.open("a") as f:
                        f.write(json.dumps(rec) + "\n")
                    print(f"{trace} seed {seed} {regime(rec)} (load {rec['load_point']:.2f}): "
                          f"cpu {rec['cpu_s']:.0f} s, load average {rec['loadavg']:.1f}",
                          flush=True)
    recs = [r for r in recs if r["window"] == a.windows]
    txt, md = render(recs, a)
    out.with_suffix(".txt").write_text(txt)
    out.with_suffix(".md").write_text(md)
    print(f"wrote {out.with_suffix('.txt')} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
