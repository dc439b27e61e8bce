"""``optsched simulate``: run a policy, judge its schedule with the one evaluator."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from ..cost import DEFAULT_PRESET, PRESETS
from ..errors import InputFileError
from ..evaluation import evaluate
from ..instance import HIDDEN_RATIO_MHA, Limits
from ..policies import get_spec, parse_param_args, simulate_policy
from ..workloads.capacity import preset_hidden_ratio
from . import EXIT_NO, EXIT_OK
from ._common import command_load, load_instance, output_file, print_json, say_load, table

#: ``--json`` leaves the schedule out above this many entries unless ``--with-schedule``
JSON_SCHEDULE_LIMIT = 10_000
#: the offered load (a reference policy simulated on the whole mix, docs/semantics.md
#: section 4) is computed by default up to this many requests; above, only with ``--load``
#: (on the 12,031-request Mooncake conversation trace it was a third of the command's CPU
#: time and most of its memory; ``optsched info`` always computes it)
LOAD_MAX_REQUESTS = 5_000


def register(sub) -> None:
    p = sub.add_parser(
        "simulate",
        help="run a scheduling policy on an instance or a trace and evaluate its schedule",
        description="Run a registered policy (see 'optsched policies') over an instance file "
        "or a trace CSV; the schedule is judged by the evaluator.",
    )
    p.add_argument("instance", nargs="?", help="instance JSON file (or a shipped instance name)")
    p.add_argument("--policy", required=True, help="policy name (see 'optsched policies')")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", default=[],
                   help="policy parameter (repeatable)")
    p.add_argument("--router", metavar="NAME",
                   help="route over the instance's engines (docs/semantics.md section 6, "
                   "'Clusters'): rr, lor, least-kv (replicas), pd (prefill/decode engines); "
                   "one copy of the policy per engine")
    p.add_argument("--replicas", type=int, metavar="R",
                   help="serve a plain instance on R identical engines (router rr unless "
                   "--router is given)")
    p.add_argument("--ttft-slo", type=float, help="TTFT SLO (seconds; steps under unit time) "
                   "for every request without one: the metrics then report slo_attainment")
    p.add_argument("--tpot-slo", type=float, help="TPOT SLO for every request without one")
    p.add_argument("-o", "--output",
                   help="write the schedule (.json or .npz; without a suffix: .npz above "
                   f"{JSON_SCHEDULE_LIMIT:,} entries, else .json)")
    p.add_argument("--load", action="store_true",
                   help="compute the offered load also above "
                   f"{LOAD_MAX_REQUESTS:,} requests (a reference simulation of the whole mix)")
    p.add_argument("--json", action="store_true",
                   help='print {"policy", "evaluation", "schedule"} as JSON')
    p.add_argument("--with-schedule", action="store_true",
                   help=f"with --json, include the schedule even above {JSON_SCHEDULE_LIMIT:,} "
                   "entries")
    t = p.add_argument_group("trace input (instead of INSTANCE)")
    t.add_argument("--trace", help="trace CSV (Azure, Vidur/Splitwise or arXiv format)")
    t.add_argument("--limit", type=int, help="first N requests of the trace")
    t.add_argument("--kv-capacity", type=int,
                   help="M, KV capacity in tokens (default 100000, as generate)")
    t.add_argument("--max-batch-tokens", type=int,
                   help="C, tokens per batch (default 4096, as generate)")
    t.add_argument("--max-prefill-tokens", type=int, help="P, prefill tokens per batch")
    t.add_argument("--block-size", type=int, help="KV block size (default 1)")
    t.add_argument("--hidden-cache", action="store_true",
                   help="caches may be held as hidden states (Apt-Serve; limits.hidden_cache), "
                   "charged by the preset model's head counts (limits.hidden_ratio)")
    t.add_argument("--too-long", choices=("error", "drop", "clip"), default=None,
                   help="requests with I + O - 1 > M: error (default), drop or clip the output")
    t.add_argument("--cost-model",
                   help=f"cost-model preset (default {DEFAULT_PRESET}; "
                   f"known: {', '.join(sorted(PRESETS))}) or a cost-model JSON file "
                   "(optsched fit -o)")
    p.set_defaults(func=run_simulate)


def _instance(args):
    if args.trace and args.instance:
        raise InputFileError("give an INSTANCE or --trace, not both")
    if args.trace:
        # lazy: each subcommand imports what it runs (start-up time)
        from ..cost import cost_model_arg
        from ..workloads.generators import DEFAULT_KV_CAPACITY, DEFAULT_MAX_BATCH_TOKENS
        from ..workloads.traces import load_trace_instance

        # generate's defaults (one default everywhere), said on stderr
        M = args.kv_capacity if args.kv_capacity is not None else DEFAULT_KV_CAPACITY
        C = args.max_batch_tokens if args.max_batch_tokens is not None \
            else DEFAULT_MAX_BATCH_TOKENS
        unset = [f"--{o.replace('_', '-')} {v}" for o, v in
                 (("kv_capacity", M), ("max_batch_tokens", C)) if getattr(args, o) is None]
        if unset:
            print(f"optsched simulate: note: --trace with generate's defaults "
                  f"{', '.join(unset)}", file=sys.stderr)
        limits = Limits(
            kv_capacity=M,
            max_batch_tokens=C,
            max_prefill_tokens=args.max_prefill_tokens,
            block_size=args.block_size if args.block_size is not None else 1,
            hidden_cache=args.hidden_cache,
            hidden_ratio=preset_hidden_ratio(args.cost_model or DEFAULT_PRESET) or HIDDEN_RATIO_MHA,
        )
        with warnings.catch_warnings(record=True) as caught:  # dropped/clipped counts
            warnings.simplefilter("always")
            inst = load_trace_instance(args.trace, limits,
                                       cost_model_arg(args.cost_model or DEFAULT_PRESET),
                                       limit=args.limit, too_long=args.too_long or "error")
        for w in caught:
            print(f"optsched simulate: warning: {w.message}", file=sys.stderr)
        return inst
    if not args.instance:
        raise InputFileError("give an INSTANCE file or --trace FILE")
    for opt in ("limit", "kv_capacity", "max_batch_tokens", "max_prefill_tokens", "block_size",
                "too_long", "cost_model"):
        if getattr(args, opt) is not None:
            raise InputFileError(f"--{opt.replace('_', '-')} only applies with --trace")
    return load_instance(args.instance)


def _schedule_path(path: str, n_entries: int) -> str:
    """Where ``-o PATH`` writes the schedule: ``PATH`` when it ends in ``.json`` or ``.npz``
    (JSON stays available by asking for it); a name without a suffix gets ``.npz`` above
    :data:`JSON_SCHEDULE_LIMIT` entries (a 4M-entry schedule: 0.5 MB written in ~0.15 s,
    against ~60 MB of JSON that takes seconds to parse) and ``.json`` otherwise, said on
    stderr. Other suffixes are written as JSON, as :meth:`Schedule.save` always did."""
    p = Path(path)
    if p.suffix:
        return path
    suffix = ".npz" if n_entries > JSON_SCHEDULE_LIMIT else ".json"
    chosen = output_file(str(p.with_name(p.name + suffix)))
    print(f"optsched simulate: note: -o {path} has no suffix; writing {chosen} "
          f"({n_entries:,} entries; .npz above {JSON_SCHEDULE_LIMIT:,}, give .json or .npz "
          "to choose)", file=sys.stderr)
    return str(chosen)


def _replicas(inst, replicas: int | None) -> int | None:
    """The replicas the command serves ``inst`` on when they are identical engines."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cluster import identical_replicas

    if replicas is not None:
        return replicas if inst.cluster is None else None  # replicate() refuses the latter
    return identical_replicas(inst) if inst.cluster is not None else None


def _replica_load(load, replicas):
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cluster import replica_load

    return replica_load(load, replicas)


def _load_skipped(inst, asked: bool) -> str | None:
    """Why the offered load is not computed (None: it is): above
    :data:`LOAD_MAX_REQUESTS` requests unless ``--load`` asks for it."""
    if asked or inst.n <= LOAD_MAX_REQUESTS:
        return None
    return (f"offered load: not computed for {inst.n:,} requests (above "
            f"{LOAD_MAX_REQUESTS:,} it costs a reference simulation of the whole mix); "
            "--load or 'optsched info' computes it")


def run_simulate(args) -> int:
    spec = get_spec(args.policy)
    policy = spec.make(**parse_param_args(args.param))  # bad params fail before loading
    output_file(args.output)
    inst = _instance(args).with_default_slos(args.ttft_slo, args.tpot_slo)
    clustered = args.replicas is not None or args.router is not None or inst.cluster is not None
    # the offered load models one engine (optsched/serving/load.py): not a cluster's; for
    # identical replicas, per replica (docs/semantics.md section 6, "Load per replica")
    skip = _load_skipped(inst, args.load)
    load = None if clustered or skip else command_load(inst)
    replicas = _replicas(inst, args.replicas) if clustered else None
    per_replica = command_load(inst.replace(cluster=None)) if replicas and not skip else None
    # lazy: each subcommand imports what it runs (start-up time)
    from ..progress import phase

    if args.replicas is not None or args.router is not None:
        from ..cluster import replicate
        from ..cluster import simulate as simulate_cluster

        if args.replicas is not None:
            inst = replicate(inst, args.replicas)
        router = args.router or "rr"
        phase(f"simulating {spec.name} behind router {router} on {inst.n} requests, "
              f"{inst.n_engines} engines")
        schedule = simulate_cluster(inst, args.policy, router,
                                    params=parse_param_args(args.param))
    else:
        phase(f"simulating {spec.name} on {inst.n} requests")
        schedule = simulate_policy(inst, policy)
    phase(f"evaluating {schedule.n_batches} batches")
    ev = evaluate(inst, schedule)
    written = _schedule_path(args.output, schedule.n_entries) if args.output else None
    if written:
        schedule.save(written, inst)
    if args.json:
        out: dict[str, Any] = {"policy": spec.name, "evaluation": ev.to_dict(),
                               "offered_load": load.to_dict() if load is not None else None}
        if skip:
            out["offered_load_note"] = skip
        if args.router is not None or args.replicas is not None:
            out["router"] = args.router or "rr"
        if per_replica is not None:
            out["offered_load_per_replica"] = _replica_load(per_replica, replicas)[0]
        if schedule.n_entries <= JSON_SCHEDULE_LIMIT or args.with_schedule:
            out["schedule"] = schedule.to_dict()
        else:
            out["schedule"] = None
            out["schedule_omitted"] = (
                f"{schedule.n_entries} entries > {JSON_SCHEDULE_LIMIT}; use --with-schedule or -o"
            )
        print_json(out)
    else:
        # lazy: each subcommand imports what it runs (start-up time)
        from .evaluate import METRIC_ROWS

        status = "feasible" if ev.feasible else f"INFEASIBLE {ev.violation_counts}"
        print(f"policy {spec.name} on {inst.name} ({inst.n} requests): {status}")
        rows = [(label, ev.metrics[k]) for k, label in METRIC_ROWS if k in ev.metrics]
        print(table(["metric", "value"], rows))
        if written:
            print(f"schedule written to {written}")
    if skip:
        print(f"optsched simulate: {skip}", file=sys.stderr)
    elif load is not None:
        say_load(load, "simulate")
    elif per_replica is not None:
        _, line, warning = _replica_load(per_replica, replicas)
        print(f"optsched simulate: {line}", file=sys.stderr)
        if warning:
            print(f"optsched simulate: warning: {warning}", file=sys.stderr)
    else:
        print("optsched simulate: offered load: not computed for a cluster of engines that "
              "are not identical replicas (its model is one engine's)", file=sys.stderr)
    if not ev.feasible:
        print(f"optsched simulate: policy {spec.name!r} produced an infeasible schedule "
              f"(a bug): {ev.violation_counts}", file=sys.stderr)
    return EXIT_OK if ev.feasible else EXIT_NO
