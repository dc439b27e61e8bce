"""``optsched capacity``: the sustainable request rate of one or more policies on a trace
(``optsched.serving.rate_search``). Not to be confused with ``optsched kv-capacity`` (KV tokens
from model size and GPU memory)."""

from __future__ import annotations

import dataclasses
import sys
import time

from ..cost import DEFAULT_PRESET, PRESETS
from ..errors import InputFileError
from ..instance import HIDDEN_RATIO_MHA, Limits
from ..policies import parse_param_args
from ..workloads.capacity import preset_hidden_ratio
from ..workloads.generators import DEFAULT_KV_CAPACITY, DEFAULT_MAX_BATCH_TOKENS
from . import EXIT_OK
from ._common import fmt, image_file, load_instance, print_json, seed_arg, table

#: seconds of ``--time-limit`` kept for the table, the plot and the JSON after the searches
CAPACITY_RESERVE = 1.0


def register(sub) -> None:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..serving.rate_search import METRICS

    p = sub.add_parser(
        "capacity",
        help="sustainable request rate (--policy, --metric), or the engines a cluster needs "
        "(--max-engines / --gpus)",
        description="For each policy, the highest Poisson arrival rate (requests per second, "
        "the trace's requests with re-drawn arrivals) at which METRIC meets TARGET, by "
        "bisection over --rates; every probe is reported (stderr, and in --json). With "
        "--max-engines N or --gpus N: capacity planning of a cluster at the trace's own "
        "arrivals (colocated replicas and prefill:decode splits, a certified ceiling each; "
        "docs/semantics.md section 6, 'Capacity planning').",
    )
    p.add_argument("instance", metavar="TRACE",
                   help="trace CSV (Azure, Vidur/Splitwise, arXiv), instance JSON or shipped name")
    p.add_argument("--policy", action="append",
                   help="policy name; repeat or comma-separate for several (required for the "
                   "rate search; planning: the engine policy, default vllm)")
    p.add_argument("--metric", choices=sorted(METRICS),
                   help="; ".join(f"{m.name}: {m.help} ({m.better} is better)"
                              for m in METRICS.entries()))
    p.add_argument("--target", type=float,
                   help="the metric's bound (upper bound if lower is better, else lower bound)")
    p.add_argument("--rates", help="LO:HI requests per second (default: 1/4 to 4 times the "
                   "trace's own mean rate)")
    p.add_argument("--probes", type=int, default=8, help="probes per policy (default 8)")
    p.add_argument("--confirm", type=int, default=3, metavar="K",
                   help="stability check: a sustainable rate counts only if the target is met "
                   "and the mean latency grows at most 1.5x on the trace repeated K times at "
                   "that rate (default 3; 0 skips it and no rate is counted as checked)")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the Poisson arrivals")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", default=[],
                   help="policy parameter (one policy only; repeatable)")
    p.add_argument("--limit", type=int, help="first N requests of the trace")
    p.add_argument("--kv-capacity", type=int, default=DEFAULT_KV_CAPACITY,
                   help=f"M in tokens (default {DEFAULT_KV_CAPACITY})")
    p.add_argument("--max-batch-tokens", type=int, default=DEFAULT_MAX_BATCH_TOKENS,
                   help=f"C (default {DEFAULT_MAX_BATCH_TOKENS})")
    p.add_argument("--max-prefill-tokens", type=int, help="P (default C)")
    p.add_argument("--block-size", type=int, default=1, help="KV block size (default 1)")
    p.add_argument("--hidden-cache", action="store_true",
                   help="caches may be held as hidden states (Apt-Serve; limits.hidden_cache), "
                   "charged by the preset model's head counts (limits.hidden_ratio)")
    p.add_argument("--cost-model", default=DEFAULT_PRESET,
                   help=f"cost-model preset (default {DEFAULT_PRESET}; known: "
                   f"{', '.join(sorted(PRESETS))})")
    p.add_argument("--slo-scale", type=float, default=2.0,
                   help="JCT SLO scale for slo-attainment (default 2)")
    p.add_argument("--slo-reference", default="vllm",
                   help="policy whose run on the trace as given measures t_p and t_g "
                   "(default vllm)")
    p.add_argument("--ttft-slo", "--slo-ttft", type=float, help="TTFT SLO (seconds) for ttft-tbt-attainment; "
                   "with slo-attainment it selects Apt-Serve's SLOs (= ttft-tbt-attainment)")
    p.add_argument("--tbt-slo", type=float, help="P99 TBT SLO (seconds) for ttft-tbt-attainment; "
                   "with slo-attainment it selects Apt-Serve's SLOs (= ttft-tbt-attainment)")
    p.add_argument("--ceiling", action="store_true",
                   help="also search the certified ceiling: the rates at which the goodput "
                   "upper bound (formulations/bounds.md B12) still allows TARGET; above the "
                   "rate it rules out no scheduler reaches TARGET (ttft-tbt-attainment only)")
    p.add_argument("--ceiling-probes", type=int, default=12,
                   help="probes of the ceiling search (default 12; each is one bound, no "
                   "simulation)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds for the whole command (default: none), shared evenly by the "
                   "policies still to search; a search out of time reports the rates probed "
                   "until then ('stopped at the time limit')")
    p.add_argument("--plot", metavar="IMAGE", help="draw the metric against the rate")
    from ._capacity_plan import add_plan_arguments

    add_plan_arguments(p)
    p.add_argument("--json", action="store_true", help="print the results as one JSON document")
    p.set_defaults(func=run_capacity)


def _policies(args) -> list[str]:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..policies import get_spec

    names = [n.strip() for item in args.policy for n in item.split(",") if n.strip()]
    if not names:
        raise InputFileError("--policy: give at least one policy name")
    if args.param and len(names) > 1:
        raise InputFileError("--param applies to one policy; give a single --policy")
    params = parse_param_args(args.param)
    for n in names:
        get_spec(n).make(**params)  # unknown names and bad parameters fail here
    return names


def _rates(args, instance) -> tuple[float, float]:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..serving.rate_search import trace_rate

    if args.rates is None:
        r0 = trace_rate(instance)
        if r0 <= 0:
            raise InputFileError("--rates LO:HI is needed: the trace has no arrival spread")
        return r0 / 4, r0 * 4
    lo, sep, hi = args.rates.partition(":")
    try:
        lo_f, hi_f = float(lo), float(hi)
    except ValueError:
        raise InputFileError(f"--rates {args.rates!r}: expected LO:HI numbers") from None
    if not sep or not (0 < lo_f < hi_f) or hi_f == float("inf"):
        raise InputFileError(f"--rates {args.rates!r}: expected 0 < LO < HI")
    return lo_f, hi_f


def _instance(args):
    if not args.instance.lower().endswith(".csv"):
        inst = load_instance(args.instance)
        if args.hidden_cache and not inst.limits.hidden_cache:
            ratio = preset_hidden_ratio(getattr(inst.cost_model, "preset", None)) or inst.limits.hidden_ratio
            inst = inst.replace(limits=dataclasses.replace(inst.limits, hidden_cache=True,
                                                           hidden_ratio=ratio))
        return inst
    # lazy: each subcommand imports what it runs (start-up time)
    from ..workloads.traces import load_trace_instance

    limits = Limits(kv_capacity=args.kv_capacity, max_batch_tokens=args.max_batch_tokens,
                    max_prefill_tokens=args.max_prefill_tokens, block_size=args.block_size,
                    hidden_cache=args.hidden_cache,
                    hidden_ratio=preset_hidden_ratio(args.cost_model) or HIDDEN_RATIO_MHA)
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cost import cost_model_arg

    return load_trace_instance(args.instance, limits, cost_model_arg(args.cost_model),
                               limit=args.limit)


def run_capacity(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..serving.rate_search import METRICS, RateSearchError, resolve_metric, search, slo_from_reference
    from ._capacity_plan import planning, run_plan

    if planning(args):
        return run_plan(args, _instance)
    for opt in ("policy", "metric", "target"):
        if getattr(args, opt) is None:
            raise InputFileError(f"--{opt} is required (or --max-engines / --gpus to plan a "
                                 "cluster)")
    names = _policies(args)
    if args.probes < 2:
        raise InputFileError(f"--probes must be >= 2, got {args.probes}")
    if args.confirm < 0:
        raise InputFileError(f"--confirm must be >= 0, got {args.confirm}")
    for opt in ("ttft_slo", "tbt_slo", "slo_scale"):
        v = getattr(args, opt)
        if v is not None and not v > 0:
            raise InputFileError(f"--{opt.replace('_', '-')} must be > 0, got {v}")
    plot = image_file(args.plot, "--plot") if args.plot else None
    settings = {"ttft_slo": args.ttft_slo, "tbt_slo": args.tbt_slo}
    resolved = resolve_metric(args.metric, settings)
    if resolved != args.metric:
        print(f"--metric {args.metric} with --ttft-slo/--tbt-slo: {resolved} (Apt-Serve's "
              "SLO attainment)", file=sys.stderr, flush=True)
        args.metric = resolved
    metric = METRICS[args.metric]
    missing = [k for k in metric.needs if k != "slo" and settings.get(k) is None]
    if missing:
        raise InputFileError(f"--metric {args.metric} needs --{missing[0].replace('_', '-')}")
    if args.ceiling and args.metric != "ttft-tbt-attainment":
        raise InputFileError(f"--ceiling bounds ttft-tbt-attainment (give --ttft-slo and "
                             f"--tbt-slo), not {args.metric}")
    if args.ceiling and args.ceiling_probes < 2:
        raise InputFileError(f"--ceiling-probes must be >= 2, got {args.ceiling_probes}")
    inst = _instance(args)
    lo, hi = _rates(args, inst)
    if "slo" in metric.needs or args.json:
        print(f"measuring t_p, t_g with {args.slo_reference} on the trace as given ...",
              file=sys.stderr, flush=True)
        settings["slo"] = slo_from_reference(inst, args.slo_reference, args.slo_scale)
    params = parse_param_args(args.param)
    if args.time_limit is not None and not args.time_limit > 0:
        raise InputFileError(f"--time-limit must be > 0 seconds, got {args.time_limit:g}")
    # lazy: each subcommand imports what it runs (start-up time)
    from ..solving.budget import command_seconds

    end = None if args.time_limit is None else \
        time.perf_counter() + command_seconds(args.time_limit) - CAPACITY_RESERVE
    results = []
    for k, name in enumerate(names):
        # each policy left gets an equal share of what is left
        deadline = None if end is None else \
            time.perf_counter() + (end - time.perf_counter()) / (len(names) - k)
        print(f"{name}: searching {lo:g}..{hi:g} req/s for {args.metric} "
              f"{'<=' if metric.better == 'lower' else '>='} {args.target:g}",
              file=sys.stderr, flush=True)
        try:
            results.append(search(inst, name, args.metric, args.target, lo, hi,
                                  probes=args.probes, seed=args.seed, params=params,
                                  settings=settings, confirm_factor=args.confirm,
                                  deadline=deadline))
            if results[-1].stopped:
                print(f"{name}: stopped at the time limit after {len(results[-1].probes)} "
                      "probe(s)", file=sys.stderr, flush=True)
        except RateSearchError as e:
            raise InputFileError(str(e)) from None
    ceil = _ceiling(args, inst, lo, hi) if args.ceiling else None
    if plot:
        _draw(results, args, plot)
    if args.json:
        print_json({"trace": args.instance, "requests": inst.n, "metric": args.metric,
                    "better": metric.better, "target": args.target, "rates": [lo, hi],
                    "seed": args.seed, "slo": settings["slo"].to_dict(),
                    "results": [r.to_dict() for r in results],
                    "ceiling": None if ceil is None else ceil.to_dict()})
        return EXIT_OK
    rows: list[tuple[object, ...]] = []
    for r in results:
        rate = r.sustainable_rate
        if rate is None and r.lowest_failing_rate is None:
            text = "none probed"
        elif rate is None:
            text = f"< {lo:g} (misses at the lowest rate)"
        elif r.lowest_failing_rate is None:
            text = f">= {hi:g} (meets at the highest rate)"
        else:
            text = f"{fmt(rate, 4)} (misses at {fmt(r.lowest_failing_rate, 4)})"
        if r.stopped:
            text += " (stopped at the time limit)"
        above = rate is not None and r.work_limit is not None and rate > r.work_limit
        load = None if r.at_rate is None else r.at_rate.load
        rows.append((r.policy, text, fmt(r.throughput, 4) if r.throughput else "n/a",
                     "n/a" if load is None else fmt(load, 3),
                     fmt(r.work_limit, 4) if r.work_limit else "n/a",
                     "yes" if above else "no", _stability(r),
                     "-" if r.counted_rate is None else fmt(r.counted_rate, 4), len(r.probes)))
    print(f"sustainable rate on {inst.n} requests: {args.metric} "
          f"{'<=' if metric.better == 'lower' else '>='} {args.target:g}")
    head = ["policy", "sustainable req/s", "completed req/s", "load", "work limit req/s",
            "above the limit", f"x{args.confirm} trace" if args.confirm else "stability",
            "counted req/s", "probes"]
    if ceil is not None:  # the certified ceiling beside every policy's rate
        head.append("certified ceiling req/s")
        text = (f">= {hi:g}" if ceil.ruled_out_rate is None
                else f"< {fmt(ceil.ruled_out_rate, 4)}")
        rows = [(*row, text) for row in rows]
    print(table(head, rows))
    if any(r.sustainable_rate is not None and r.work_limit is not None
           and r.sustainable_rate > r.work_limit for r in results):
        print("a rate above the work limit (the rate total work allows) is not sustainable on "
              "a longer trace: the trace is too short for the queue to build up")
    print("completed req/s: requests finished per second of the run at that rate; load: its "
          "arrival rate over the mix's saturated rate (docs/semantics.md section 4); counted: "
          "the highest checked rate at most the work limit that holds on the longer trace "
          "(target met, mean latency at most 1.5x)")
    if ceil is not None:
        _print_ceiling(ceil, results, lo, hi)
    if plot:
        print(f"plot written to {plot}")
    return EXIT_OK


def _stability(r) -> str:
    """The stability check in words: the target on the longer trace and the latency growth."""
    if r.confirmation is None:
        return "not checked"
    g = r.latency_growth
    text = (f"{'holds' if r.holds else 'fails'} ({fmt(r.confirmation.value, 3)}, latency "
            f"x{'n/a' if g is None else fmt(g, 3)})")
    if not r.holds:
        text += ("; none below holds" if r.stable_rate is None
                 else f"; holds at {fmt(r.stable_rate, 4)}")
    return text


def _ceiling(args, inst, lo: float, hi: float):
    """The certified ceiling search (``optsched.serving.ceiling``) on the policies' arrival draw."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..bounds.goodput import GoodputError
    from ..serving.ceiling import ceiling
    from ..serving.rate_search import RateSearchError

    print(f"ceiling: bisecting {lo:g}..{hi:g} req/s on the goodput upper bound",
          file=sys.stderr, flush=True)
    try:
        c = ceiling(inst, args.target, lo, hi, probes=args.ceiling_probes, seed=args.seed,
                    ttft_slo=args.ttft_slo, tbt_slo=args.tbt_slo)
    except (RateSearchError, GoodputError) as e:
        raise InputFileError(str(e)) from None
    for p in c.probes:
        print(f"  bound rate {p.rate:.6g}: at most {p.value:.4g} "
              f"({'allows' if p.allows else 'rules out'} {args.target:g}; {p.seconds:.1f} s)",
              file=sys.stderr, flush=True)
    return c


def _print_ceiling(c, results, lo: float, hi: float) -> None:
    if c.ruled_out_rate is None:
        print(f"certified ceiling: none below {hi:g} req/s (the bound allows the target "
              "at every probed rate)")
        return
    print(f"certified ceiling: at {fmt(c.ruled_out_rate, 4)} req/s no scheduler reaches the "
          f"target on this arrival draw (the bound allows it at "
          f"{'no probed rate' if c.allowed_rate is None else fmt(c.allowed_rate, 4)})")
    best = max((r.counted_rate for r in results if r.counted_rate is not None), default=None)
    if best is not None:
        print(f"best policy's counted rate {fmt(best, 4)} req/s = "
              f"{best / c.ruled_out_rate:.0%} of the ceiling")
    else:
        print("no policy's rate is counted (below the work limit and stable on the longer "
              "trace), so none is set against the ceiling")


def _draw(results, args, path: str) -> None:
    # lazy: matplotlib loads only when a chart is drawn (start-up time)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for r in results:
        pts = sorted((p.rate, p.value) for p in r.probes if p.value is not None)
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=r.policy)
    ax.axhline(args.target, color="grey", linestyle="--", label=f"target {args.target:g}")
    ax.set_xlabel("arrival rate (requests/s)")
    ax.set_ylabel(args.metric)
    ax.set_xscale("log")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
