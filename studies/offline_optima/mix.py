"""InferMax's request mixes (paper section 4.6: SISO, SILO, LISO, LILO) with ``infermax``.

``n`` requests at t = 0, prompts and outputs drawn from S = {8, 16} or L = {512, 1024}
(``optsched generate mix``), C = 4096, preset ``infermax-llama2-7b-a100``. The KV capacity is
chosen so that memory binds: ``M = 4 * max(prompt and output sets)``, i.e. 64 for SISO and
4096 for the others (room for four of the longest prompts or outputs; the paper runs these mixes at
M = 100K with B = 16 ... 1024 requests, where memory binds through the request count, which
an exact model cannot reach; see formulations/infermax.md section 11). ``--kv`` overrides it.

Each instance and objective is solved twice (HiGHS, ``--threads`` threads, ``--time-limit``
each): *before* = the routing ``auto`` had before the fill variant (the flow model when its
size estimate is within ``FLOW_MAX_ARCS``, else the tight Big-M model), and *after* = today's
``auto`` (the fill model of section 11 for distinct offline requests where it applies and
fits). The table prints mix, n, seed, objective, which, variant, status, objective, bound,
gap, seconds and the model size (columns) side by side; the machine load (``uptime``) is
printed first, since the numbers depend on it.

    .venv/bin/python -m studies.offline_optima.mix [--mixes SISO,LISO] [--n 8,16]
        [--seeds 1] [--objectives makespan,total-latency] [--time-limit 60] [--threads 2]
        [--which before,after] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from optsched.cost import preset
from optsched.formulations import SolveOptions
from optsched.formulations.infermax import flow as fl
from optsched.formulations.infermax.solve import FLOW_MAX_ARCS
from optsched.instance import Limits
from optsched.solving import solve
from optsched.workloads.generators import LONG, SHORT, infermax_mix


def mix_instance(mix: str, n: int, seed: int, kv: int | None = None, C: int = 4096):
    sets = (SHORT if mix[0] == "S" else LONG) + (SHORT if mix[2] == "S" else LONG)
    M = kv if kv is not None else 4 * max(sets)
    return infermax_mix(mix, n, seed, limits=Limits(kv_capacity=M, max_batch_tokens=C),
                        cost_model=preset("infermax-llama2-7b-a100"))


def before_variant(inst, objective: str) -> str:
    """The variant ``auto`` ran before the fill model existed: the flow model when its size
    estimate at the horizon ``J`` was within ``FLOW_MAX_ARCS``, else tight; ``J`` as
    ``_run_flow`` chose it (the "auto" warm start's batches with entries + slack 2, raised to
    ``Jmax`` when affordable, formulations/infermax.md section 4)."""
    from optsched.formulations.base import Hypotheses
    from optsched.formulations.infermax.horizon import _horizon, entry_batches_upper_bound
    from optsched.formulations.infermax.model import DEFAULT_SLACK
    from optsched.formulations.infermax.solve import _flow_warm_start
    from optsched.solving import pick_warm_start

    hyp = Hypotheses()
    ws, _ = pick_warm_start(inst, objective, "auto", hyp)
    cws, ub = _flow_warm_start(inst, objective, hyp, ws)
    if cws is None:
        return "tight"
    J = _horizon(fl.entry_batches(cws), entry_batches_upper_bound(inst, objective, ub), None,
                 DEFAULT_SLACK)
    return "flow" if fl.size_estimate(inst, J) <= FLOW_MAX_ARCS else "tight"


def columns(rep) -> str:
    for note in rep.notes:
        if note.startswith("model: "):
            return note.split()[1]
    return "-"


def variant_of(rep) -> str:
    for note in rep.notes:
        if note.startswith("infermax variant "):
            return note.split()[2]
    return "?"


def run_one(inst, objective: str, params: dict, args) -> dict:
    opts = SolveOptions(time_limit=args.time_limit, threads=args.threads, progress=False,
                        params=params)
    rep = solve(inst, "infermax", objective, options=opts)
    gap = None
    if rep.objective is not None and rep.bound is not None and rep.objective > 0:
        gap = max(0.0, (rep.objective - rep.bound) / rep.objective)
    return {"variant": variant_of(rep), "status": rep.status, "objective": rep.objective,
            "bound": rep.bound, "gap": gap, "seconds": rep.runtime, "columns": columns(rep),
            "notes": list(rep.notes)}


def fmt(v, spec=".6g") -> str:
    return "-" if v is None else format(v, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mixes", default="SISO,SILO,LISO,LILO")
    ap.add_argument("--n", default="8")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--objectives", default="makespan,total-latency")
    ap.add_argument("--which", default="before,after")
    ap.add_argument("--kv", type=int, default=None, help="KV capacity M (default 4 x max prompt)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"# load: {load}; HiGHS, {args.threads} threads, {args.time_limit:g} s each; "
          f"pid {os.getpid()}")
    head = ("mix", "n", "seed", "M", "objective", "which", "variant", "status", "value",
            "bound", "gap", "seconds", "columns")
    print("\t".join(head))
    rows = []
    for mix in args.mixes.split(","):
        for n in (int(v) for v in args.n.split(",")):
            for seed in (int(v) for v in args.seeds.split(",")):
                inst = mix_instance(mix, n, seed, args.kv)
                for objective in args.objectives.split(","):
                    for which in args.which.split(","):
                        params = ({"variant": before_variant(inst, objective)} if which == "before"
                                  else {})
                        print(f"{mix} n={n} seed={seed} {objective} {which} ...", file=sys.stderr,
                              flush=True)
                        r = run_one(inst, objective, params, args)
                        r.update(mix=mix, n=n, seed=seed, M=inst.limits.kv_capacity,
                                 objective_name=objective, which=which)
                        rows.append(r)
                        print("\t".join([mix, str(n), str(seed), str(r["M"]), objective, which,
                                         r["variant"], r["status"], fmt(r["objective"]),
                                         fmt(r["bound"]), fmt(r["gap"], ".2%"),
                                         fmt(r["seconds"], ".1f"), r["columns"]]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load": load, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
