"""InferMax eviction family (paper section 5.1): mean TTFT and total latency, flow vs Big-M.

The family of ``studies/offline_optima/family.py`` (B = O = 4 identical requests, M = max(2I, I+O-1),
C = 4096, preset ``infermax-llama2-7b-a100``), objectives ``mean-ttft`` and ``total-latency``
(``--objectives``), optionally with arrivals (``--arrival-gap g``: request k arrives at
``k * g`` seconds, the online variant). Each instance is solved with the variants named by
``--variants`` (``auto`` = the flow model of formulations/infermax.md sections 9 and 12 where it
applies; ``tight`` = the Big-M model, which is what ``auto`` used for these objectives before
section 12), HiGHS, ``--threads`` threads, ``--time-limit`` seconds each. For ``I <=
--exhaustive-max-I`` the exhaustive search (no MILP) is run as a cross-check. The table
prints, per I, objective and variant: status, objective, bound, gap, seconds, the model
``auto`` chose, vLLM's value and the exhaustive optimum.

    .venv/bin/python -m studies.offline_optima.latency [--sizes 1,2,4]
        [--objectives mean-ttft,total-latency] [--variants auto,tight] [--arrival-gap 0.005]
        [--time-limit 60] [--threads 2] [--exhaustive-max-I 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from optsched.evaluation import evaluate
from optsched.formulations import SolveOptions
from optsched.policies import simulate
from optsched.solving import solve
from optsched.workloads.generators import eviction_family


def with_arrivals(inst, gap: float):
    """Request ``k`` arrives at ``k * gap`` seconds (the family's online variant)."""
    if gap <= 0:
        return inst
    reqs = tuple(type(r)(r.id, k * gap, r.prompt, r.output) for k, r in enumerate(inst.requests))
    return inst.replace(requests=reqs, name=f"{inst.name}-gap{gap:g}")


def model_of(notes) -> str:
    """Which model answered, from the solve notes."""
    text = " ".join(notes)
    if "variant flow" in text:
        tags = [t for t, key in (("F12", "first-token reduction"), ("F14", "eq. F14"),
                                 ("F15", "eq. F15")) if key in text]
        return "flow" + ("+" + "+".join(tags) if tags else "")
    return "tight" if "variant tight" in text else "plain" if "variant plain" in text else "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(str(2 ** k) for k in range(11)))
    ap.add_argument("--objectives", default="mean-ttft,total-latency")
    ap.add_argument("--variants", default="auto,tight")
    ap.add_argument("--arrival-gap", type=float, default=0.0,
                    help="seconds between consecutive arrivals (0: all at 0, offline)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--exhaustive-max-I", type=int, default=2,
                    help="cross-check with the exhaustive search up to this I (0: never)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows = []
    print(f"{'I':>5} {'objective':>13} {'gap s':>6} {'variant':>7} {'status':>9} "
          f"{'value ms':>11} {'bound ms':>11} {'gap':>8} {'sec':>6} {'model':>14} "
          f"{'vllm ms':>9} {'exh. ms':>9}", flush=True)
    for I in (int(s) for s in args.sizes.split(",")):
        inst = with_arrivals(eviction_family(I), args.arrival_gap)
        for objective in args.objectives.split(","):
            vllm = evaluate(inst, simulate(inst, "vllm")).objective(objective)
            ex = None
            if I <= args.exhaustive_max_I:
                r = solve(inst, "exhaustive", objective,
                          options=SolveOptions(time_limit=args.time_limit, progress=False,
                                               params={"max_states": 400_000}))
                ex = r.objective if r.status == "optimal" else None
            for variant in args.variants.split(","):
                t0 = time.perf_counter()
                r = solve(inst, "infermax", objective,
                          options=SolveOptions(time_limit=args.time_limit, threads=args.threads,
                                               progress=False, params={"variant": variant}))
                dt = time.perf_counter() - t0
                row = dict(I=I, objective=objective, arrival_gap=args.arrival_gap,
                           variant=variant, status=r.status, value=r.objective, bound=r.bound,
                           gap=r.gap, seconds=dt, model=model_of(r.notes), vllm=vllm,
                           exhaustive=ex, restricted=r.restricted, message=r.message,
                           notes=list(r.notes))
                rows.append(row)

                def ms(v):
                    return "-" if v is None else f"{1e3 * v:.4f}"

                gap = "-" if r.gap is None else f"{100 * r.gap:.2f}%"
                status = r.status + ("*" if r.restricted and r.status == "optimal" else "")
                print(f"{I:>5} {objective:>13} {args.arrival_gap:>6g} {variant:>7} {status:>9} "
                      f"{ms(r.objective):>11} {ms(r.bound):>11} {gap:>8} {dt:>6.1f} "
                      f"{row['model']:>14} {ms(vllm):>9} {ms(ex):>9}", flush=True)
    print("* = optimal among schedules with at most J batches only (horizon not certified)",
          file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
