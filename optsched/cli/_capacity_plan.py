"""``optsched capacity --max-engines N | --gpus N``: capacity planning of a cluster
(``optsched.serving.capacity``): which configurations of colocated replicas and
prefill:decode splits meet a TTFT/TPOT SLO attainment target on a trace, with a certified
ceiling per configuration (``formulations/bounds.md`` B17g)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from ..errors import InputFileError
from . import EXIT_OK
from ._common import fmt, print_json, table

#: the options that only capacity planning reads (their dest names)
PLAN_ONLY = ("tpot_slo", "attainment", "router", "gpus_per_engine", "transfer_bandwidth",
             "transfer_fixed", "transfer_bytes_per_token", "only")
#: the rate search's options that planning does not read
RATE_ONLY = ("metric", "target", "rates", "tbt_slo", "ceiling", "plot", "param")
#: seconds of ``--time-limit`` kept for the table and the JSON after the search
PLAN_RESERVE = 0.5


def add_plan_arguments(p) -> None:
    g = p.add_argument_group("capacity planning (with --max-engines or --gpus)")
    g.add_argument("--max-engines", type=int, metavar="N",
                   help="plan over 1..N engines: the smallest configuration meeting the target")
    g.add_argument("--gpus", type=int, metavar="N",
                   help="plan at N GPUs: the best configuration (N / --gpus-per-engine engines)")
    g.add_argument("--tpot-slo", "--slo-tpot", type=float,
                   help="TPOT SLO (seconds) of every request without its own (with --ttft-slo)")
    g.add_argument("--attainment", type=float, default=0.9,
                   help="the share of requests that must meet both SLOs (default 0.9, "
                   "DistServe's goodput)")
    g.add_argument("--router", default="lor",
                   help="router of the colocated replicas (default lor); splits run 'pd'")
    g.add_argument("--gpus-per-engine", type=int,
                   help="GPUs of one engine, a tensor-parallel group (default: the cost "
                   "preset's, 4 for infermax-llama2-70b-4xa100, else 1)")
    g.add_argument("--only", choices=("colocated", "splits"),
                   help="plan only colocated replicas or only prefill:decode splits")
    g.add_argument("--transfer-bandwidth", type=float, metavar="BYTES_PER_S",
                   help="link bandwidth of the splits in bytes per second (default 25e9)")
    g.add_argument("--transfer-fixed", type=float, metavar="SECONDS",
                   help="fixed time of every transfer (default 0)")
    g.add_argument("--transfer-bytes-per-token", type=float, metavar="BYTES",
                   help="KV bytes per token (default: the cost preset's model in fp16)")


def _given(args, names: tuple[str, ...]) -> list[str]:
    defaults = {"attainment": 0.9, "router": "lor", "param": [], "ceiling": False}
    return [n for n in names if getattr(args, n, None) not in (None, defaults.get(n))]


def planning(args) -> bool:
    """Whether ``args`` ask for capacity planning; one-line errors for options of the other
    mode."""
    plan = args.max_engines is not None or args.gpus is not None
    if args.max_engines is not None and args.gpus is not None:
        raise InputFileError("give --max-engines or --gpus, not both")
    wrong = _given(args, RATE_ONLY) if plan else _given(args, PLAN_ONLY)
    if wrong:
        flag = "--" + wrong[0].replace("_", "-")
        raise InputFileError(f"{flag} applies to the rate search, not with --max-engines / "
                             "--gpus" if plan else f"{flag} applies with --max-engines or --gpus")
    return plan


def _counts(args, per_engine: int) -> list[int]:
    if args.max_engines is not None:
        if not 1 <= args.max_engines <= 64:
            raise InputFileError(f"--max-engines must be in 1..64, got {args.max_engines}")
        return list(range(1, args.max_engines + 1))
    if args.gpus < 1 or args.gpus % per_engine:
        raise InputFileError(f"--gpus {args.gpus}: must be a positive multiple of the GPUs of "
                             f"one engine ({per_engine})")
    if args.gpus // per_engine > 64:
        raise InputFileError(f"--gpus {args.gpus}: at most 64 engines")
    return [args.gpus // per_engine]


def _setting(args, inst):
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cluster import DEFAULT_BANDWIDTH, default_link, get_router
    from ..policies import get_spec
    from ..serving.capacity import Setting, preset_gpus

    if args.ttft_slo is None or args.tpot_slo is None:
        raise InputFileError("capacity planning needs --ttft-slo and --tpot-slo")
    names = [n.strip() for item in args.policy or ["vllm"] for n in item.split(",") if n.strip()]
    if len(names) != 1:
        raise InputFileError(f"capacity planning runs one engine policy, got {names}")
    get_spec(names[0])
    get_router(args.router)
    per = args.gpus_per_engine or preset_gpus(getattr(inst.cost_model, "preset", None))
    link = None
    if args.only != "colocated":
        link = default_link(
            inst, bytes_per_token=args.transfer_bytes_per_token,
            bandwidth=DEFAULT_BANDWIDTH if args.transfer_bandwidth is None
            else args.transfer_bandwidth,
            fixed=0.0 if args.transfer_fixed is None else args.transfer_fixed)
    return Setting(args.ttft_slo, args.tpot_slo, args.attainment, args.router, names[0], link,
                   per)


def run_plan(args, read: Callable[[Any], Any]) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..serving.capacity import search
    from ..serving.load import arrival_rate, certified_rate
    from ..solving.budget import command_seconds

    if args.time_limit is not None and not args.time_limit > 0:
        raise InputFileError(f"--time-limit must be > 0 seconds, got {args.time_limit:g}")
    inst = read(args)
    s = _setting(args, inst)
    counts = _counts(args, s.gpus_per_engine)
    end = None if args.time_limit is None else \
        time.perf_counter() + command_seconds(args.time_limit) - PLAN_RESERVE
    lam, mu = arrival_rate(inst), certified_rate(inst)
    load = lam / mu if lam and mu else None
    print(f"planning {inst.n} requests on {counts[0]}..{counts[-1]} engines of "
          f"{s.gpus_per_engine} GPU(s): TTFT <= {s.ttft:g} s, TPOT <= {s.tpot:g} s for "
          f"{s.target:.0%}", file=sys.stderr, flush=True)
    plan = search(inst, counts, s, colocated=args.only != "splits",
                  splits=args.only != "colocated", deadline=end, load_lower=load,
                  progress=lambda m: print(m, file=sys.stderr, flush=True))
    if args.json:
        print_json({"trace": args.instance, "requests": inst.n, "arrival_rate": lam,
                    "certified_load_one_engine": load, **plan.to_dict()})
        return EXIT_OK
    _print(plan, s, inst.n, load)
    return EXIT_OK


def _status(o, target: float) -> str:
    from ..serving.capacity import CANNOT, NOT_REACHED, PRUNED

    if o.status == CANNOT or o.ceiling is not None and o.ceiling < target:
        text = "cannot (certified)"
        if o.attainment is not None:
            text += f", {'meets' if o.attainment >= target else 'misses'}"
        return text
    if o.status == NOT_REACHED:
        return "not reached (time limit)"
    if o.status == PRUNED:
        return "not simulated (ceiling below the best)"
    return "meets" if o.attainment >= target else "misses"


def _print(plan, s, n: int, load: float | None) -> None:
    rows = [(o.config.engines, o.gpus, o.config.label,
             "-" if o.ceiling is None else fmt(o.ceiling, 3),
             "-" if o.attainment is None else fmt(o.attainment, 3),
             "-" if o.goodput_per_gpu is None else fmt(o.goodput_per_gpu, 4),
             "-" if o.load_lower is None else fmt(o.load_lower, 3), _status(o, s.target))
            for o in sorted(plan.outcomes, key=lambda o: (o.config.engines, o.config.rank))]
    print(f"capacity plan on {n} requests: TTFT <= {s.ttft:g} s and TPOT <= {s.tpot:g} s for "
          f"{s.target:.0%} of the requests; {s.policy} on every engine, {s.router} over "
          f"replicas, pd over splits; {s.gpus_per_engine} GPU(s) per engine")
    print(table(["engines", "GPUs", "configuration", "ceiling", "attainment", "goodput/GPU",
                 "certified load/engine", "status"], rows))
    if len(plan.counts) == 1:
        c = plan.best.get(plan.counts[0])
        o = None if c is None else plan.outcome(c)
        print("best configuration: " + ("none (stopped at the time limit)" if o is None else
                                       f"{o.config.label} ({fmt(o.attainment, 3)}, "
                                       f"{'meets' if o.attainment >= s.target else 'misses'} "
                                       "the target)"))
    elif plan.smallest is not None:
        o = plan.outcome(plan.smallest)
        print(f"smallest configuration meeting the target: {plan.smallest.label} on "
              f"{o.gpus} GPU(s) ({fmt(o.attainment, 3)})")
    else:
        print("no configuration examined meets the target"
              + (" (stopped at the time limit)" if plan.stopped else ""))
    print("ceiling: no router or policy attains more on that configuration (B17g, "
          "formulations/bounds.md); certified load/engine > 1: the colocated replicas cannot "
          f"keep up with this arrival rate in the long run (one engine's: "
          f"{'n/a' if load is None else fmt(load, 3)})")
