"""InferMax eviction family (paper section 5.1) with the ``infermax`` formulation.

B = O = 4 identical requests, M = max(2I, I + O - 1), C = 4096, preset
``infermax-llama2-7b-a100`` (``kpm = 2 kpq``) and, with ``--costs preset,fitted``, the cost
model ``optsched fit`` gives on ``--profiling`` (Llama-2-7B, A100: ``kpm < 2 kpq``, so the flow
model runs continuing chunks on a ``kpq' = kpm/2`` chain plus a remainder bound, formulations/
infermax.md F2c, and the tight model prices the convex remainder ``(kpq - kpm/2) c^2`` on lazily
added secants with the batch-count cuts, eqs. 27-27d), objective ``makespan``; I in
{1, 2, 4, ..., 1024}. Each instance is solved with the default ``auto`` variant (the flow model
of section 9 when it is small enough, else tight) and the plain transcription (HiGHS, 2
threads, 60 s each) and, for reference, with ``--no-evictions``. The table prints, per cost
model, I and variant: status, objective, bound, gap, seconds, evictions in the answer, the
makespans of vLLM and of the eviction-free optimum, and which model answered.

    .venv/bin/python -m studies.offline_optima.family [--sizes 1,2,4] [--variants auto,plain,tight,flow]
        [--costs preset,fitted] [--profiling $OPTSCHED_DATA/profiling]
        [--time-limit 60] [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.formulations import Hypotheses, SolveOptions
from optsched.policies import simulate
from optsched.solving import solve
from optsched.workloads.fit import fit_linear_cost
from optsched.workloads.generators import eviction_family
from studies.settings import PRESET, PROFILING


def cost_models(names: str, profiling: str) -> dict:
    out = {}
    for name in names.split(","):
        if name == "preset":
            out[name] = preset(PRESET)
        elif name == "fitted":
            if not Path(profiling).is_dir():
                print(f"skipping the fitted cost model: no profiling data at {profiling}",
                      file=sys.stderr)
                continue
            out[name] = fit_linear_cost(profiling, "Llama-2-7b-hf", "a100").cost
            c = out[name]
            print(f"fitted cost model: kpq = {c.kpq:.4g}, kpm = {c.kpm:.4g} "
                  f"(2 kpq = {2 * c.kpq:.4g})", file=sys.stderr)
        else:
            raise SystemExit(f"unknown cost model {name!r}: choose preset or fitted")
    return out


def model_used(notes) -> str:
    """Which model answered, from the solve notes: flow (F2 / F2b / F2c), tight (eq. 27), ..."""
    text = " ".join(notes)
    if "variant flow" in text:
        return "flow F2c" if "F2c" in text else "flow"
    if "eq. 27" in text:
        return "tight eq.27"
    return next((n.split("variant ", 1)[1].split()[0] for n in notes if "variant " in n), "-")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(str(2 ** k) for k in range(11)))
    ap.add_argument("--variants", default="auto,plain")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-ef", action="store_true", help="skip the eviction-free reference solve")
    ap.add_argument("--ef-time-limit", type=float, default=20.0,
                    help="time limit of the eviction-free reference solve (* = not proven)")
    ap.add_argument("--costs", default="preset",
                    help="comma-separated cost models: preset (InferMax's) and/or fitted")
    ap.add_argument("--profiling",
                    default=str(PROFILING),
                    help="profiling directory for the fitted cost model")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    costs = cost_models(args.costs, args.profiling)
    rows = []
    hdr = (f"{'cost':>6} {'I':>5} {'variant':>7} {'status':>9} {'objective ms':>13} {'bound ms':>10} "
           f"{'gap':>8} {'sec':>6} {'evict':>5} {'vllm ms':>9} {'EF-opt ms':>10}  model")
    print(hdr, flush=True)
    for I, (cname, cost) in ((int(s), c) for s in args.sizes.split(",") for c in costs.items()):
        inst = eviction_family(I, cost_model=cost)
        vllm = evaluate(inst, simulate(inst, "vllm")).objective("makespan")
        ef = None
        if not args.no_ef:
            r = solve(inst, "infermax", "makespan", hypotheses=Hypotheses(no_evictions=True),
                      options=SolveOptions(time_limit=args.ef_time_limit, threads=args.threads,
                                           progress=False))
            ef = (r.objective, r.status)
        for variant in args.variants.split(","):
            t0 = time.perf_counter()
            r = solve(inst, "infermax", "makespan",
                      options=SolveOptions(time_limit=args.time_limit, threads=args.threads,
                                           progress=False, params={"variant": variant}))
            dt = time.perf_counter() - t0
            ev = r.evaluation.metrics["evictions"] if r.evaluation is not None else None
            row = dict(cost=cname, I=I, variant=variant, status=r.status, objective=r.objective,
                       bound=r.bound, gap=r.gap, seconds=dt, evictions=ev, vllm=vllm,
                       ef_opt=None if ef is None else ef[0],
                       ef_status=None if ef is None else ef[1], message=r.message,
                       notes=list(r.notes), model=model_used(r.notes))
            rows.append(row)

            def ms(v):
                return "-" if v is None else f"{1e3 * v:.4f}"

            gap = "-" if r.gap is None else f"{100 * r.gap:.2f}%"
            efs = "-" if ef is None else ms(ef[0]) + ("" if ef[1] == "optimal" else "*")
            print(f"{cname:>6} {I:>5} {variant:>7} {r.status:>9} {ms(r.objective):>13} {ms(r.bound):>10} "
                  f"{gap:>8} {dt:>6.1f} {str(ev):>5} {ms(vllm):>9} {efs:>10}  {row['model']}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
