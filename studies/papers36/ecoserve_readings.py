"""EcoServe under both readings of its deadline key (section 3.3), against the certified bound
and vLLM / SARATHI on seeded windows of the Azure traces, at stable loads and in overload.

Windows: ``docs/results/serving.md``'s -- 1,200 consecutive requests of each trace from the
start row drawn by seeds 1, 2, 3 (``optsched.workloads.traces.window_instance``), M = 30,000,
C = 8,192, ``infermax-llama2-7b-a100``, every request with TTFT SLO 1 s and mean TPOT SLO 0.1 s.

**Load.** Each row states its offered load (``optsched.serving.load``, docs/semantics.md
section 4): the arrival rate over the best saturated throughput of reference policies on
queued copies of the window's mix (the point figure, the upper side), with the certified lower
side and the busiest tenth's load beside it. A row at load ``x`` re-times the window's requests
as a seeded Poisson process (``at_rate``, seed 0) stretched to point load ``x``
(``scale_to_load``); the row ``own`` keeps the trace's own arrivals (overload where its load is
above 1, labelled so: there latency grows with the window's length). (The figures in
``FINDINGS.md`` were measured when a row at ``x`` was ``x`` times vLLM's completions per
second on the window queued at t = 0; their house loads are in ``house-loads.txt``.)

Per row and policy: total latency and its ratio to the certified lower bound
(``lower_bound(inst, "total-latency", "best")``), mean TTFT, and SLO attainment beside its
certified upper bound (B12, ``optsched.bounds.goodput.goodput_bound``). CPU seconds per row.

    OPTSCHED_DATA=/work/shared/data .venv/bin/python studies/papers36/ecoserve_readings.py \\
        --out studies/papers36/ecoserve-readings.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

from optsched.bounds.goodput import goodput_bound
from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits
from optsched.policies import get_policy, simulate
from optsched.serving.load import OfferedLoad, offered_load, scale_to_load
from optsched.serving.rate_search import at_rate, trace_rate
from optsched.solving import lower_bound
from optsched.workloads.traces import window_instance

DATA = Path(os.environ.get("OPTSCHED_DATA", Path(__file__).resolve().parents[2].parent
                           / "shared" / "data"))
LIMITS = Limits(kv_capacity=30_000, max_batch_tokens=8192)
POLICIES = {"vllm": ("vllm", {}), "sarathi": ("sarathi", {}),
            "ecoserve (remaining)": ("ecoserve", {"deadline": "remaining"}),
            "ecoserve (slo-length)": ("ecoserve", {"deadline": "slo-length"})}


def window(trace: str, seed: int, n: int) -> Instance:
    path = DATA / "traces" / f"AzureLLMInferenceTrace_{trace}.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return window_instance(path, n, seed, LIMITS, preset("infermax-llama2-7b-a100"),
                               format="azure", too_long="drop")


def at_loads(base: Instance, loads: list[float]) -> list[tuple[float, Instance]]:
    """``base``'s requests as Poisson arrivals (seed 0) stretched to each point load."""
    poisson = at_rate(base, trace_rate(base), seed=0)
    load = offered_load(poisson)  # the mix is the window's: one reference run for all loads
    return [(x, scale_to_load(poisson, x, load)) for x in loads]


def load_cells(load: OfferedLoad) -> dict:
    return {"load": load.point, "load_certified": load.lower, "load_peak": load.peak,
            "load_status": load.status, "rate": load.arrival_rate}


def row(inst: Instance) -> dict:
    t0 = time.process_time()
    inst = inst.with_default_slos(1.0, 0.1)
    bound = lower_bound(inst, "total-latency", "best")
    good = goodput_bound(inst).attainment
    out = {"bound": bound.value, "rung": bound.method, "slo_bound": good, "policies": {}}
    for label, (name, params) in POLICIES.items():
        ev = evaluate(inst, simulate(inst, get_policy(name, **params)))
        assert ev.feasible, label
        tl = ev.objective("total-latency")
        out["policies"][label] = {"total_latency": tl, "ratio": tl / bound.value,
                                  "mean_ttft": ev.objective("mean-ttft"),
                                  "slo_attainment": ev.metrics["slo_attainment"],
                                  "throughput_rps": inst.n / ev.metrics["makespan"]}
    out["cpu_s"] = time.process_time() - t0
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--n", type=int, default=1200)
    ap.add_argument("--loads", default="0.5,0.7,0.9", help="offered loads; the trace's own "
                    "arrivals are always added as 'own'")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if not (DATA / "traces").is_dir():
        print(f"skipped: {DATA / 'traces'} not found")
        return 0
    print(f"# load average {os.getloadavg()[0]:.1f}; M = 30,000, C = 8,192, infermax-llama2-7b-a100,"
          " TTFT SLO 1 s, mean TPOT SLO 0.1 s; ratio = total latency / certified bound")
    print(f"{'window':12} {'load':>6} {'req/s':>6} {'bound':>9} {'SLO ub':>6}  "
          + "  ".join(f"{p:>28}" for p in POLICIES) + "   cpu s")
    results = []
    for trace in args.traces.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            base = window(trace, seed, args.n)
            cases: list[tuple[float | str, Instance]] = [
                *at_loads(base, [float(x) for x in args.loads.split(",")]), ("own", base)]
            for label, inst in cases:
                lc = load_cells(offered_load(inst))
                r = row(inst)
                rec = {"trace": trace, "seed": seed, "n": base.n, "own": label == "own", **lc, **r}
                results.append(rec)
                cells = "  ".join(
                    f"{v['ratio']:>6.2f}x {v['mean_ttft']:>7.3g}s {100 * v['slo_attainment']:>5.1f}%"
                    f" {v['throughput_rps']:>5.2f}" for v in r["policies"].values())
                tag = f"{lc['load']:.2f}" + ("*" if label == "own" else "")
                print(f"{trace} s{seed:<7} {tag:>6} {lc['rate']:>6.2f} {r['bound']:>9.4g} "
                      f"{100 * r['slo_bound']:>5.1f}%  {cells}   {r['cpu_s']:.0f}", flush=True)
    print("# * the trace's own arrivals (overload when the load is above 1); cells: ratio to the "
          "bound, mean TTFT, SLO attainment, completions per second")
    if args.out:
        args.out.write_text(json.dumps({"policies": list(POLICIES), "rows": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
