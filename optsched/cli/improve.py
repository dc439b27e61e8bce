"""``optsched improve``: large-neighbourhood search from a policy's schedule or a file."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..evaluation import OBJECTIVES, evaluate
from . import EXIT_OK, EXIT_SOLVER_ERROR
from ._common import checked_schedule, load_instance, output_file, print_json, seed_arg, table

#: share of --time-limit the start policy may take; seconds kept for the replay and output
START_SHARE, FINISH_SECONDS = 0.7, 0.5


def register(sub) -> None:
    p = sub.add_parser(
        "improve",
        help="improve a schedule by large-neighbourhood search (any size)",
        description="Start from a policy's schedule (or a schedule file); on 100 requests or "
        "more, first search priority keys decoded by the compiled MC-SF/ranking kernels (and "
        "prefill-first schedules for mean TTFT; optsched/search/keysearch.py), then search priority "
        "orders decoded by the simulator (seed keys, crowded batches, key mixes, time windows "
        "after a kept prefix), then repeatedly re-solve a window of consecutive batches exactly "
        "while the rest stays fixed, and keep every improvement the evaluator confirms "
        "(optsched/search/lns.py). The result is feasible and never worse than the start; 'method' "
        "says which neighbourhood found it. On a cluster of replicas (engines of role 'both', "
        "identical or not), --from is a router or a schedule file and the search moves one "
        "request to another engine or swaps two across engines, re-simulating --policy on the "
        "engines that changed (optsched/search/assignment.py). Exit 0: done; 2: bad input.",
    )
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("--from", dest="start", required=True, metavar="POLICY|SCHEDULE",
                   help="a policy name (see 'optsched policies') or a schedule file")
    p.add_argument("--policy", default=None,
                   help="cluster instances: the engine policy every engine runs (default vllm)")
    p.add_argument("--max-moves", type=int, default=None,
                   help="cluster instances: stop after this many candidate moves")
    p.add_argument("--objective", default="makespan", choices=OBJECTIVES)
    p.add_argument("--time-limit", type=float, default=10.0,
                   help="seconds for the whole command (default 10)")
    p.add_argument("--seed", type=seed_arg, default=0, help="random seed (default 0)")
    p.add_argument("--max-window", type=int, default=4, help="batches per window (default 4)")
    p.add_argument("--max-requests", type=int, default=4,
                   help="requests a window may touch (default 4)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-o", "--output", default=None, help="write the improved schedule here")
    p.set_defaults(func=run)


def _start_schedule(inst, start: str, deadline: float):
    # lazy: each subcommand imports what it runs (start-up time)
    from ..policies import POLICIES, simulate

    if start in POLICIES:
        return simulate(inst, start, deadline=deadline), start
    if Path(start).exists():
        return checked_schedule(start, inst, "improve")[0], Path(start).name
    # lazy: each subcommand imports what it runs (start-up time)
    from ..search.lns import LNSError

    raise LNSError(f"--from {start}: neither a policy (see 'optsched policies') nor a "
                   f"schedule file")


def run(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..search.lns import LNSError, LNSOptions, check_supported, improve
    from ..solving.budget import command_seconds

    t0 = time.perf_counter()
    limit = command_seconds(args.time_limit)  # the budget counts from the command's start
    out = output_file(args.output)
    opts = LNSOptions(time_limit=args.time_limit, seed=args.seed, max_window=args.max_window,
                      max_requests=args.max_requests, progress=True)
    inst = load_instance(args.instance)
    if inst.cluster is not None and inst.cluster.n > 1:
        return _run_cluster(args, inst, t0, limit, out)
    if args.policy is not None or args.max_moves is not None:
        raise LNSError("--policy and --max-moves apply to a cluster instance; on one engine "
                       "--from names the policy")
    check_supported(inst)  # before the start schedule: a refusal costs no simulation
    # lazy: each subcommand imports what it runs (start-up time)
    from ..policies import SimulationTimeout
    from ..progress import phase

    phase(f"start schedule: {args.start}")
    try:  # the start schedule draws on the budget too: it must leave time for the rest
        sched, origin = _start_schedule(inst, args.start,
                                        t0 + START_SHARE * limit)
    except SimulationTimeout as e:
        print(f"optsched improve: {e}: no start schedule within {START_SHARE:.0%} of "
              f"--time-limit {args.time_limit:g} s; give a longer limit or a schedule file",
              file=sys.stderr)
        return EXIT_SOLVER_ERROR  # no answer in time: not a proof that none exists (exit 1)
    left = limit - (time.perf_counter() - t0) - FINISH_SECONDS
    if left <= 0:
        print("improve: the time limit passed while building the start schedule",
              file=sys.stderr)
        left = 1e-3
    phase(f"large-neighbourhood search for {left:.1f} s")
    res = improve(inst, sched, args.objective, LNSOptions(**{**opts.__dict__, "time_limit": left}))
    ev = evaluate(inst, res.schedule)  # the one evaluator judges the result
    if out:
        res.schedule.save(out, inst)
    if args.json:
        print_json({"instance": inst.name, "requests": inst.n, "from": origin,
                    "feasible": ev.feasible, **res.to_dict()})
        return EXIT_OK
    rows = [("from", origin), ("objective", args.objective),
            ("start", res.start_objective), ("improved", res.objective),
            ("iterations", res.iterations), ("windows solved", res.windows_solved),
            ("improvements", res.improvements), ("method", res.method),
            ("runtime (s)", round(res.runtime, 3))]
    print(table(["", "result"], rows))
    return EXIT_OK


def _run_cluster(args, inst, t0: float, limit: float, out: str | None) -> int:
    """``improve`` on a cluster of replicas: local search over the request-to-engine assignment
    from a router's schedule or a file (optsched/search/assignment.py)."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cluster import simulate as simulate_cluster
    from ..cluster.base import ROUTERS
    from ..policies import get_spec
    from ..progress import phase
    from ..search.assignment import (
        AssignmentOptions,
        AssignmentSearchError,
        check_cluster_supported,
        improve_assignment,
    )

    check_cluster_supported(inst)  # before the start schedule: a refusal costs no simulation
    policy = args.policy or "vllm"
    spec = get_spec(policy)
    make = lambda: spec.make()  # noqa: E731
    if args.start in ROUTERS.names():
        phase(f"start schedule: router {args.start}, policy {policy}")
        sched, origin = simulate_cluster(inst, make, args.start), f"{args.start}+{policy}"
    elif Path(args.start).exists():
        sched, origin = checked_schedule(args.start, inst, "improve")[0], Path(args.start).name
    else:
        raise AssignmentSearchError(f"--from {args.start}: neither a router (one of "
                                    f"{', '.join(ROUTERS.names())}) nor a schedule file")
    left = max(1e-3, limit - (time.perf_counter() - t0) - FINISH_SECONDS)
    phase(f"assignment search for {left:.1f} s")
    res = improve_assignment(inst, sched, make, args.objective,
                             AssignmentOptions(time_limit=left, seed=args.seed,
                                               max_moves=args.max_moves))
    ev = evaluate(inst, res.schedule)  # the one evaluator judges the result
    if out:
        res.schedule.save(out, inst)
    if args.json:
        print_json({"instance": inst.name, "requests": inst.n, "engines": inst.n_engines,
                    "from": origin, "policy": policy, "feasible": ev.feasible,
                    **res.to_dict()})
        return EXIT_OK
    rows = [("from", origin), ("objective", args.objective),
            ("start", res.start_objective), ("improved", res.objective),
            ("moves tried", res.moves_tried), ("moves accepted", res.moves_accepted),
            ("rejected (infeasible)", res.moves_rejected_infeasible), ("method", res.method),
            ("runtime (s)", round(res.runtime, 3))]
    print(table(["", "result"], rows))
    return EXIT_OK
