"""``optsched validate``: is a schedule feasible? The one evaluator, from the shell."""

from __future__ import annotations

from ..evaluation import evaluate
from . import EXIT_NO, EXIT_OK
from ._common import add_all_flag, checked_schedule, fmt, load_instance, print_json, print_violations


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a schedule against an instance (exit 0 feasible, 1 not)")
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("schedule", help="schedule file (.json or .npz)")
    p.add_argument("--json", action="store_true", help="print the evaluation as JSON")
    add_all_flag(p)
    p.set_defaults(func=run_validate)


def run_validate(args) -> int:
    inst = load_instance(args.instance)
    sched, check = checked_schedule(args.schedule, inst, "validate")
    ev = evaluate(inst, sched)
    if args.json:
        print_json({**ev.to_dict(), "instance_check": check})
    elif ev.feasible:
        print(f"feasible: {ev.metrics['batches']} batches, {inst.n} requests, "
              f"makespan {fmt(ev.metrics['makespan'])}")
    else:
        print_violations(ev, args.all_violations)
    return EXIT_OK if ev.feasible else EXIT_NO
