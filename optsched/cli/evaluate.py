"""``optsched evaluate``: replay a schedule with the one evaluator and print its metrics."""

from __future__ import annotations

import sys

from ..evaluation import evaluate
from . import EXIT_NO, EXIT_OK
from ._common import (
    add_all_flag,
    checked_schedule,
    command_load,
    load_instance,
    print_json,
    print_violations,
    say_load,
    table,
)


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="replay a schedule and print its metrics")
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("schedule", help="schedule file (.json or .npz)")
    p.add_argument("--json", action="store_true", help="print the evaluation as JSON")
    p.add_argument("--requests", action="store_true", help="also print the per-request table")
    add_all_flag(p)
    p.set_defaults(func=run_evaluate)


#: the metrics table of ``evaluate`` and ``simulate``: (key of ``Evaluation.metrics``, label)
METRIC_ROWS = [
    ("makespan", "makespan"),
    ("total_latency", "total latency"),
    ("mean_latency", "mean latency"),
    ("mean_ttft", "mean TTFT"),
    ("p50_ttft", "p50 TTFT"),
    ("p99_ttft", "p99 TTFT"),
    ("mean_tpot", "mean TPOT"),
    ("p50_tpot", "p50 TPOT"),
    ("p99_tpot", "p99 TPOT"),
    ("max_tbt", "max TBT (longest gap)"),
    ("mean_max_tbt", "mean longest gap"),
    ("p99_tbt", "p99 TBT (all gaps)"),
    ("tokens_per_second", "tokens / time unit"),
    ("evictions", "evictions"),
    ("recomputed_tokens", "recomputed tokens"),
    ("peak_kv", "peak KV"),
    ("kv_utilisation", "KV utilisation"),
    ("slo_attainment", "SLO attainment"),
    ("completion_rate", "completions / time unit"),
    ("hidden_entries", "hidden-cache entries"),
    ("hidden_time", "hidden-cache time"),
    ("hit_tokens", "prefix hit tokens"),
    ("hit_rate", "prefix hit rate"),
    ("prefill_tokens", "computed prefill tokens"),
    ("dropped_blocks", "dropped blocks"),
    ("peak_resident_blocks", "peak resident blocks"),
    ("peak_cached_blocks", "peak cached blocks"),
    ("batches", "batches"),
    ("finished", "finished requests"),
]


def run_evaluate(args) -> int:
    inst = load_instance(args.instance)
    sched, check = checked_schedule(args.schedule, inst, "evaluate")
    load = command_load(inst)
    ev = evaluate(inst, sched)
    say_load(load, "evaluate")
    if args.json:
        print_json({**ev.to_dict(), "instance_check": check, "offered_load": load.to_dict()})
        return EXIT_OK if ev.feasible else EXIT_NO
    if not ev.feasible:
        print_violations(ev, args.all_violations)
        print("(metrics below replay the schedule as given and are not meaningful)", file=sys.stderr)
    rows = [(label, ev.metrics[k]) for k, label in METRIC_ROWS if k in ev.metrics]
    print(table(["metric", "value"], rows))
    if args.requests:
        print()
        print(table(
            ["request", "first token", "completion", "latency", "TTFT", "TPOT", "evictions"],
            [(rid, ev.first_token[i], ev.completion[i], ev.latency[i], ev.ttft[i], ev.tpot[i],
              int(ev.evictions[i])) for i, rid in enumerate(ev.request_ids)],
        ))
    return EXIT_OK if ev.feasible else EXIT_NO
