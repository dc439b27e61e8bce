"""``optsched check-claim``: test a published claim against exact oracles on random instances."""

from __future__ import annotations

import json

from ..errors import OptschedError
from . import EXIT_NO, EXIT_OK
from ._common import fmt, output_dir, print_json, seed_arg, table


class CheckClaimInputError(OptschedError):
    """Bad arguments for check-claim (exit code 2)."""


def register(sub) -> None:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..checks.claims import CLAIMS

    p = sub.add_parser(
        "check-claim",
        help="test a published scheduling claim against exact optima on random tiny instances",
        description="mcsf-optimal: Theorem 4.2 of the online-scheduling paper (MC-SF minimises total "
        "latency with all requests at 0, equal prompts, unit time), against the exhaustive optimum of "
        "the paper's model (and, reported separately, the optimum with evictions/chunking allowed). "
        "aptserve-2approx: Apt-Serve's greedy is a 2-approximation of its per-iteration problem "
        "(Definition 1). amin-hsf-optimal: the A_min paper's hindsight benchmark (shortest first with "
        "exact lengths, equal prompts, all at 0) is optimal; same model and oracles as mcsf-optimal, "
        "plus A_min's worst ratio to the optimum. svf-ratio: a seeded hill climb for the worst "
        "SVF / optimum (paper: at most 5); gba-ratio, gsa-ratio, sorted-f-ratio: the same for GBA "
        "(10.67), GSA (61.92) and Sorted-F (constant not stated). "
        "Exit 0: no violation found; 1: the claim is violated; 2: bad input.",
    )
    p.add_argument("claim", choices=CLAIMS)
    p.add_argument("--trials", type=int, default=None,
                   help="random instances (default 200 for mcsf-optimal, amin-hsf-optimal, svf-ratio; "
                   "1000 for "
                   "aptserve-2approx)")
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument("--max-requests", type=int, default=None,
                   help="largest instance (default 4 for mcsf-optimal, amin-hsf-optimal, svf-ratio; 6 for "
                   "aptserve-2approx)")
    p.add_argument("--write", default=None, metavar="DIR",
                   help="mcsf-optimal, amin-hsf-optimal: write the minimal counterexample (svf-ratio: the "
                   "worst instance found) with its schedules to DIR")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..checks.claims import check_claim

    exact = args.claim != "aptserve-2approx"  # the others use exhaustive-search oracles
    trials = args.trials if args.trials is not None else (200 if exact else 1000)
    if trials < 1:
        raise CheckClaimInputError(f"--trials must be >= 1, got {trials}")
    if args.max_requests is not None and not 1 <= args.max_requests <= 12:
        raise CheckClaimInputError(f"--max-requests must be in 1..12, got {args.max_requests}")
    output_dir(args.write, "--write")
    if args.write is not None and not exact:
        raise CheckClaimInputError("--write applies to mcsf-optimal, amin-hsf-optimal and the "
                                   "*-ratio claims only (it writes the counterexample or worst "
                                   "instance)")
    try:
        rep = check_claim(args.claim, trials, args.seed, args.max_requests, write=args.write)
    except ValueError as e:
        if isinstance(e, OptschedError):
            raise
        raise CheckClaimInputError(str(e)) from None
    if args.json:
        print_json(rep.to_dict())
    else:
        rows = [("claim", rep.claim), ("trials run", rep.trials), ("claim violations", rep.violations),
                ("worst ratio", fmt(rep.worst_ratio))]
        print(table(["", ""], rows))
        for name, d in rep.details.items():
            if isinstance(d, dict) and "worst_ratio" in d:
                extra = {k: v for k, v in d.items() if k not in ("worst_instance",)}
                print(f"  {name}: " + ", ".join(f"{k}={fmt(v)}" for k, v in extra.items()))
        for n in rep.notes:
            print(f"note: {n}")
        if rep.counterexample is None:
            print("counterexample: none found")
        else:
            print("minimal counterexample:")
            print(json.dumps({k: v for k, v in rep.counterexample.items() if k != "schedules"}, indent=1))
            for name, s in rep.counterexample["schedules"].items():
                print(f"schedule {name}: {json.dumps(s)}")
    return EXIT_NO if rep.violations else EXIT_OK
