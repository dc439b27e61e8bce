"""What the certified bounds say about serving policies on seeded windows of the Azure traces
(``docs/results/serving.md``).

Windows: ``--windows`` consecutive requests of each trace from a start row drawn by each of
``--seeds`` (:func:`optsched.workloads.traces.seeded_window`, the same windows as
``optsched generate azure --consecutive N --seed S``), own arrival times re-based to 0,
``M = 30,000``, ``C = 8,192``, Llama-2-7B preset (``infermax-llama2-7b-a100``), KV cache only
(the lower bounds refuse hidden cache, docs/semantics.md section 6). Every request gets TTFT
SLO ``--ttft-slo`` and mean TPOT SLO ``--tpot-slo``.

Per window and policy (vLLM, SARATHI, EcoServe, Apt-Serve's scheduler and the extra
``--best-of`` policies; every schedule replayed by ``optsched.evaluate``):

* total latency and mean TTFT beside the certified lower bound
  ``lower_bound(inst, objective, "best")`` (its rung: the method that gave it) and the gap
  ``(value - bound) / bound`` (:func:`optsched.comparison.gap`);
* SLO attainment (``slo_attainment``) beside the certified upper bound (bounds.md B12) and
  the gap ``(bound - attainment) / bound`` (:mod:`optsched.comparison`);
* the best policy of the window ("best") for each objective.

With ``--ceiling`` (notebook 08's setting, ``studies/serving/ceiling.py``'s instance): the certified
capacity ceiling (``optsched.serving.ceiling``) beside each ``--capacity-policies`` policy's
sustainable rate.

    OPTSCHED_DATA=/path/to/data .venv/bin/python -m studies.serving.windows \\
        [--traces conv,code] [--windows 1200] [--seeds 1,2,3] [--out studies/serving/results/serving]

Writes ``OUT.json`` and ``OUT.txt`` (the table). CPU seconds (``time.process_time``) per step;
the machine is shared: the load (``os.getloadavg``) is printed with the times.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from optsched.bounds.goodput import goodput_bound
from optsched.comparison import gap, goodput_gap_value
from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.policies import simulate
from optsched.solving import lower_bound
from studies import settings
from studies.settings import HI, LO, PRESET, TARGET, TBT, TRACES, TTFT, C, M

#: the paper policies the page reports (Apt-Serve's scheduler: KV only, as the bounds need)
PAPER = ("vllm", "sarathi", "ecoserve", "aptserve-kv-only")
OBJECTIVES = ("total-latency", "mean-ttft", "goodput")


def window(trace: str, seed: int, n: int, ttft: float, tpot: float) -> tuple[Instance, int]:
    """The seeded window with the SLO defaults on every request, and its first row."""
    inst = settings.window(trace, seed, n)
    return inst.with_default_slos(ttft, tpot), settings.window_row(trace, seed, n)


def run_policies(inst: Instance, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each policy's values (None: it failed or left a request unfinished)."""
    out = {}
    for p in names:
        t0 = time.process_time()
        try:
            ev = evaluate(inst, simulate(inst, p))
        except Exception as e:  # a policy refusing the instance is reported, not fatal
            out[p] = {"error": str(e).splitlines()[0], "cpu_s": time.process_time() - t0}
            continue
        ok = ev.feasible
        out[p] = {"total-latency": ev.objective("total-latency") if ok else None,
                  "mean-ttft": ev.objective("mean-ttft") if ok else None,
                  "goodput": ev.metrics.get("slo_attainment") if ok else None,
                  "cpu_s": time.process_time() - t0}
    return out


def bounds(inst: Instance) -> dict[str, dict[str, Any]]:
    """The certified bound, its rung and CPU time per objective."""
    out = {}
    for obj in ("total-latency", "mean-ttft"):
        t0 = time.process_time()
        b = lower_bound(inst.replace(name=inst.name), obj, "best")
        out[obj] = {"bound": b.value, "rung": b.method, "cpu_s": time.process_time() - t0}
    t0 = time.process_time()
    gb = goodput_bound(inst)
    out["goodput"] = {"bound": gb.attainment, "rung": "B12", "cpu_s": time.process_time() - t0,
                      "counts": gb.to_dict()}
    return out


def gap_of(obj: str, value: float | None, bound: float | None) -> float | None:
    if value is None or bound is None:
        return None
    return goodput_gap_value(value, bound) if obj == "goodput" else gap(value, bound)


def best_of(obj: str, pols: dict[str, dict[str, Any]]) -> tuple[str | None, float | None]:
    vals = [(p, v[obj]) for p, v in pols.items() if v.get(obj) is not None]
    if not vals:
        return None, None
    pick = max(vals, key=lambda x: x[1]) if obj == "goodput" else min(vals, key=lambda x: x[1])
    return pick


def fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}%" if pct else f"{v:.4g}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    head = (f"{'trace':5} {'seed':>4} {'start':>6} {'n':>5} {'objective':13} {'policy':17} "
            f"{'value':>9} {'bound':>9} {'rung':>9} {'gap':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['trace']:5} {r['seed']:>4} {r['start']:>6} {r['n']:>5} "
                     f"{r['objective']:13} {r['policy']:17} {fmt(r['value']):>9} "
                     f"{fmt(r['bound']):>9} {r['rung']:>9} {fmt(r['gap'], True):>7}")
    return lines


def ceiling_part(policies: list[str], probes: int) -> dict[str, Any]:
    """Notebook 08's setting (studies/serving/ceiling.py): the ceiling and each policy's rate."""
    from optsched.serving.ceiling import ceiling
    from optsched.serving.rate_search import search

    inst = settings.aptserve_instance(400)
    t0 = time.process_time()
    c = ceiling(inst, TARGET, LO, HI, probes=12, ttft_slo=TTFT, tbt_slo=TBT)
    out: dict[str, Any] = {"ceiling": c.ruled_out_rate, "allowed": c.allowed_rate,
                           "ceiling_cpu_s": time.process_time() - t0, "policies": {}}
    for p in policies:
        t0 = time.process_time()
        r = search(inst, p, "ttft-tbt-attainment", TARGET, LO, HI, probes=probes,
                   progress=False, settings={"ttft_slo": TTFT, "tbt_slo": TBT})
        out["policies"][p] = {"sustainable": r.sustainable_rate,
                              "fails_at": r.lowest_failing_rate,
                              "cpu_s": time.process_time() - t0}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--windows", type=int, default=1200, help="requests per window")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--best-of", default="mcsf,ttft-first-sr,rank-i",
                    help="extra policies for the best policy of each window")
    ap.add_argument("--ttft-slo", type=float, default=1.0)
    ap.add_argument("--tpot-slo", type=float, default=0.1)
    ap.add_argument("--ceiling", action="store_true",
                    help="also notebook 08's capacity ceiling (about 5 minutes more)")
    ap.add_argument("--capacity-policies", default="aptserve-kv-only,ttft-first-sr")
    ap.add_argument("--capacity-probes", type=int, default=6)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "serving"))
    args = ap.parse_args()
    if not TRACES.is_dir():
        raise SystemExit(f"studies.serving.windows: {TRACES} is missing (set OPTSCHED_DATA)")
    names = list(PAPER) + [p for p in args.best_of.split(",") if p and p not in PAPER]
    rows: list[dict[str, Any]] = []
    windows = []
    t_all = time.perf_counter()
    for trace in args.traces.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            inst, start = window(trace, seed, args.windows, args.ttft_slo, args.tpot_slo)
            pols = run_policies(inst, names)
            bds = bounds(inst)
            windows.append({"trace": trace, "seed": seed, "start": start, "n": inst.n,
                            "policies": pols, "bounds": bds, "load": os.getloadavg()[0]})
            for obj in OBJECTIVES:
                b = bds[obj]
                for p in list(PAPER) + ["best"]:
                    label, v = best_of(obj, pols) if p == "best" else (p, pols[p].get(obj))
                    rows.append({"trace": trace, "seed": seed, "start": start, "n": inst.n,
                                 "objective": obj, "policy": p if p != "best" else
                                 f"best: {label}", "value": v, "bound": b["bound"],
                                 "rung": b["rung"], "gap": gap_of(obj, v, b["bound"])})
            for line in table(rows)[2:][-len(OBJECTIVES) * (len(PAPER) + 1):]:
                print(line, flush=True)
            print(f"  cpu s: policies {sum(p['cpu_s'] for p in pols.values()):.1f}, bounds "
                  + ", ".join(f"{o} {bds[o]['cpu_s']:.1f}" for o in OBJECTIVES)
                  + f"; load {os.getloadavg()[0]:.1f}", flush=True)
    cap = ceiling_part(args.capacity_policies.split(","), args.capacity_probes) \
        if args.ceiling else None
    head = [f"# studies/serving/windows.py --traces {args.traces} --windows {args.windows} --seeds "
            f"{args.seeds} --ttft-slo {args.ttft_slo:g} --tpot-slo {args.tpot_slo:g}"
            + (" --ceiling" if args.ceiling else ""),
            f"# M = {M}, C = {C}, {PRESET}; bound = lower_bound(inst, objective, 'best'), "
            "goodput = slo_attainment vs the B12 upper bound; gap: (value - bound) / bound, "
            "goodput (bound - value) / bound",
            f"# wall {time.perf_counter() - t_all:.0f} s, load {os.getloadavg()[0]:.1f}"]
    lines = head + table(rows)
    if cap is not None:
        lines += ["", f"# notebook 08's setting (400 conversation requests, M = 10,000, hidden "
                  f"cache, TTFT 1 s, P99 TBT 1 s, 90%): certified ceiling {fmt(cap['ceiling'])}"
                  f" req/s (allowed at {fmt(cap['allowed'])})"]
        for p, r in cap["policies"].items():
            share = (r["sustainable"] or 0) / cap["ceiling"] if cap["ceiling"] else None
            lines.append(f"#   {p:18} sustainable {fmt(r['sustainable'])} req/s (fails at "
                         f"{fmt(r['fails_at'])}) = {fmt(share, True)} of the ceiling")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"args": vars(args), "rows": rows, "windows": windows, "capacity": cap}, indent=1))
    print("\n".join(lines[len(head) + len(table(rows)):]))
    print(f"wrote {out.with_suffix('.txt')} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
