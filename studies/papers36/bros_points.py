"""BROS (paper 003) at the paper's operating point and at stable loads, on our model.

Two settings, both with M = 20,000 tokens, C = 4,096, the ``infermax-llama2-7b-a100`` preset and
BE batches of 8 requests (prompt U(512, 1024), output U(32, 128); section 7.1):

* ``paper`` -- RT requests with ShareGPT-like lengths (``optsched generate chat-like --dataset
  sharegpt``, BROS Table 2's means and spreads) arriving as a Poisson process, TTFT SLO 0.4 s,
  TPOT SLO 0.2 s; BE batches submitted closed-loop (each when the previous completes under the
  policy measured, ``optsched.workloads.hybrid.closed_loop_be``), as section 7.1 does.
* ``azure`` -- notebook 07's setting: RT lengths drawn from the Azure conversation trace, BE
  batches submitted open-loop at the times their standalone service estimate gives
  (``bros_workload``): a BE backlog.

**Load.** Each row states its RT offered load (``optsched.serving.load.offered_load``,
docs/semantics.md section 4) of the RT requests alone, at their arrivals: the arrival rate over
the best saturated throughput of reference policies on queued copies of the RT mix (the point
figure, the upper side), with the certified lower side beside it (B4's busy-time floor). BE
work comes on top (best effort). ``--loads`` picks the rates from stated loads (``x`` times the
mix's achievable rate); ``--rates`` takes them as given (the paper's 24 req/s). A row at RT load
above 1 is overload: the queue grows with the trace, so its numbers depend on the number of RT
requests; they are labelled so. (The figures in ``FINDINGS.md`` were measured when the
load's denominator was vLLM's completions per second on 1,000 RT requests at t = 0; the house
loads of those same instances are in ``house-loads.txt``.)

Per run: RT normalised latency (mean latency / output tokens), TTFT attainment, per-token TPOT
attainment, BE throughput over the run and while RT requests are in the system (BE co-serving),
mean entries per batch, the RT requests per iteration that found no memory, drops, swapped-out
tokens; CPU seconds (``time.process_time``) and the load average at the start.

    OPTSCHED_DATA=/work/shared/data .venv/bin/python studies/papers36/bros_points.py \\
        --setting paper --rates 24 --rt 120,300 --out studies/papers36/bros-paper-24.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from optsched.cost import PRESETS
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits
from optsched.metrics.serving import mechanism_stats
from optsched.policies import get_policy, simulate
from optsched.serving.load import OfferedLoad, offered_load
from optsched.workloads.generators import generate
from optsched.workloads.hybrid import bros_workload, closed_loop_be, hybrid_metrics

DATA = Path(os.environ.get("OPTSCHED_DATA", Path(__file__).resolve().parents[2].parent
                           / "shared" / "data"))
TRACE = DATA / "traces" / "AzureLLMInferenceTrace_conv.csv"
LIMITS = Limits(kv_capacity=20_000, max_batch_tokens=4096)
COST = PRESETS["infermax-llama2-7b-a100"]
#: label -> (policy, parameters); "bros (before)" is the code before this study's fixes
CONFIGS = {
    "vllm": ("vllm", {}),
    "sarathi": ("sarathi", {}),
    "bros-rr": ("bros-rr", {}),
    "bros (before)": ("bros", {"drop": False, "rt_victim": "recompute", "admission": "greedy"}),
    "bros (as written)": ("bros", {"admission": "greedy"}),
    "bros": ("bros", {}),
    "bros init_batch=256": ("bros", {"init_batch": 256}),
}


def rt_pool(setting: str) -> Instance | Path:
    if setting == "azure":
        return TRACE
    return generate("chat-like", n=5000, rate=1.0, seed=3, dataset="sharegpt", limits=LIMITS,
                    cost_model=COST)


def rt_part(inst: Instance) -> Instance:
    """The RT requests of a BROS workload at their arrivals, without BE work."""
    return inst.replace(requests=tuple(r for r in inst.requests if r.cls == "rt"))


def rt_load(inst: Instance) -> OfferedLoad:
    """The RT offered load of a BROS workload (module docstring)."""
    return offered_load(rt_part(inst))


def rates_for(pool, n: int, loads: list[float]) -> list[float]:
    """RT rates at the stated loads: ``x`` times the achievable rate of ``n`` RT requests of
    the pool's mix (the mix of ``bros_workload``'s seeded draw, whatever the rate)."""
    mu = rt_load(bros_workload(pool, n, 1.0, seed=1, be_batch=8, limits=LIMITS,
                               cost_model=COST)).achievable_rate
    if mu is None:
        raise SystemExit("no reference policy ran on the RT mix: its load is unknown")
    return [x * mu for x in loads]


def run(base: Instance, label: str, closed: bool) -> dict:
    name, params = CONFIGS[label]
    made = []

    def make():
        made.append(get_policy(name, **params))
        return made[-1]

    t0 = time.process_time()
    if closed:
        r = closed_loop_be(base, make)
        inst, batches, sched, ev = r.instance, r.batches, r.schedule, r.evaluation
    else:
        inst, batches = base, None
        sched = simulate(inst, make())
        ev = evaluate(inst, sched)
    policy = made[-1]
    assert ev.feasible, (label, ev.violations[:3])
    m = hybrid_metrics(inst, ev, sched)
    mech = mechanism_stats(inst, sched, ev, policy)
    return {"policy": label, **m, "be_batches": batches, "makespan": ev.metrics["makespan"],
            "entries_per_batch": mech["mean_entries_per_batch"],
            "kv_use": mech["mean_kv_utilisation"],
            **{k: mech[k] for k in ("rt_no_memory_per_iteration", "dropped", "drains",
                                    "cap_stop_share", "budget_stop_share") if k in mech},
            "cpu_s": time.process_time() - t0}


def fmt(x, nd=4) -> str:
    if x is None:
        return "n/a"
    return f"{x:.{nd}g}" if isinstance(x, float) else str(x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", choices=("paper", "azure"), default="paper")
    ap.add_argument("--rates", default="24", help="RT arrival rates (req/s), comma-separated")
    ap.add_argument("--loads", help="RT offered loads instead of --rates, comma-separated")
    ap.add_argument("--rt", default="120,300", help="RT request counts, comma-separated")
    ap.add_argument("--policies", default=",".join(CONFIGS), help="labels of CONFIGS")
    ap.add_argument("--out", type=Path, help="JSON output")
    args = ap.parse_args(argv)
    if args.setting == "azure" and not TRACE.exists():
        print(f"skipped: {TRACE} not found")
        return 0
    pool = rt_pool(args.setting)
    print(f"# setting {args.setting}; load {os.getloadavg()[0]:.1f}; M = 20,000, C = 4,096, "
          f"infermax-llama2-7b-a100, BE batches of 8 "
          f"({'closed-loop' if args.setting == 'paper' else 'open-loop'})")
    print("# load: RT offered load (point, upper side) and its certified lower side, "
          "optsched.serving.load")
    cols = ("rt_normalised_latency", "rt_ttft_attainment", "rt_tpot_token_attainment",
            "be_throughput", "be_throughput_coserving", "entries_per_batch",
            "rt_no_memory_per_iteration", "dropped", "swap_out_tokens", "cpu_s")
    print(f"{'rate':>5} {'load':>5} {'cert.':>5} {'RT':>4} {'policy':20} "
          + " ".join(f"{c[:11]:>11}" for c in cols))
    rows = []
    for n in (int(x) for x in args.rt.split(",")):
        rates = ([float(x) for x in args.rates.split(",")] if not args.loads else
                 rates_for(pool, n, [float(x) for x in args.loads.split(",")]))
        for rate in rates:
            base = bros_workload(pool, n, rate, seed=1, be_batch=8, limits=LIMITS,
                                 cost_model=COST)
            load = rt_load(base)
            for label in args.policies.split(","):
                row = {"rate": rate, "rt": n, "load": load.point, "load_certified": load.lower,
                       "offered_load": load.to_dict(),
                       **run(base, label, closed=args.setting == "paper")}
                rows.append(row)
                print(f"{rate:>5.3g} {fmt(load.point, 3):>5} {fmt(load.lower, 3):>5} {n:>4} {label:20} "
                      + " ".join(f"{fmt(row.get(c)):>11}" for c in cols), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"setting": args.setting, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
