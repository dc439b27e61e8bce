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

**Load.** Each row states the RT arrival rate against the engine's saturated RT throughput:
vLLM's completions per second when ``--sat-n`` RT requests of the same length distribution
all arrive at t = 0 (measured here, not certified; the certified work limit
``optsched.serving.rate_search.work_limit_rate`` is printed beside it as an upper side). BE
work comes on top (best effort). A row with RT load >= 1 is overload: the queue grows with the
trace, so its numbers depend on the number of RT requests; they are labelled so.

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
from optsched.serving.rate_search import work_limit_rate
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


def rt_only(pool, n: int) -> Instance:
    """``n`` RT requests of the pool's lengths, all at t = 0, without BE work."""
    inst = bros_workload(pool, n, 1.0, seed=1, be_batch=8, limits=LIMITS, cost_model=COST)
    reqs = tuple(r.__class__(**{**r.to_dict(), "arrival": 0.0}) for r in inst.requests
                 if r.cls == "rt")
    return inst.replace(requests=reqs)


def saturation(pool, n: int) -> dict:
    """vLLM's saturated RT throughput (req/s) and the certified work limit on ``n`` RT
    requests arriving together (module docstring)."""
    inst = rt_only(pool, n)
    ev = evaluate(inst, simulate(inst, get_policy("vllm")))
    return {"n": n, "vllm_saturated_rps": inst.n / ev.metrics["makespan"],
            "work_limit_rps": work_limit_rate(inst)}


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
    ap.add_argument("--rt", default="120,300", help="RT request counts, comma-separated")
    ap.add_argument("--policies", default=",".join(CONFIGS), help="labels of CONFIGS")
    ap.add_argument("--sat-n", type=int, default=1000, help="RT requests of the saturation run")
    ap.add_argument("--out", type=Path, help="JSON output")
    args = ap.parse_args(argv)
    if args.setting == "azure" and not TRACE.exists():
        print(f"skipped: {TRACE} not found")
        return 0
    pool = rt_pool(args.setting)
    sat = saturation(pool, args.sat_n)
    print(f"# setting {args.setting}; load {os.getloadavg()[0]:.1f}; M = 20,000, C = 4,096, "
          f"infermax-llama2-7b-a100, BE batches of 8 "
          f"({'closed-loop' if args.setting == 'paper' else 'open-loop'})")
    print(f"# saturated RT throughput (vLLM, {sat['n']} RT at t = 0): "
          f"{sat['vllm_saturated_rps']:.2f} req/s; work limit {sat['work_limit_rps']:.2f} req/s")
    cols = ("rt_normalised_latency", "rt_ttft_attainment", "rt_tpot_token_attainment",
            "be_throughput", "be_throughput_coserving", "entries_per_batch",
            "rt_no_memory_per_iteration", "dropped", "swap_out_tokens", "cpu_s")
    print(f"{'rate':>5} {'load':>5} {'RT':>4} {'policy':20} " + " ".join(f"{c[:11]:>11}" for c in cols))
    rows = []
    for rate in (float(x) for x in args.rates.split(",")):
        for n in (int(x) for x in args.rt.split(",")):
            base = bros_workload(pool, n, rate, seed=1, be_batch=8, limits=LIMITS,
                                 cost_model=COST)
            for label in args.policies.split(","):
                row = {"rate": rate, "rt": n, "load": rate / sat["vllm_saturated_rps"],
                       **run(base, label, closed=args.setting == "paper")}
                rows.append(row)
                print(f"{rate:>5g} {row['load']:>5.2f} {n:>4} {label:20} "
                      + " ".join(f"{fmt(row.get(c)):>11}" for c in cols), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"setting": args.setting, "saturation": sat,
                                        "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
