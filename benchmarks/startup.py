"""Where the seconds of one ``optsched simulate`` / ``optsched evaluate`` process go:
the whole command's steps replayed one by one in a fresh process, each timed (process CPU
and wall), for this source tree and optionally an older one side by side::

    .venv/bin/python -m benchmarks.startup [--before DIR] [--repeat 3]

``simulate``: full Azure conversation trace (19,366 requests), vLLM, M = 100,000, C = 4,096,
InferMax's Llama-2-7B preset, ``-o .npz``, as ``benchmarks/simulate.py --process`` runs it;
``evaluate``: that instance's JSON and that ``.npz``. Each step is what the command does
(cli imports, trace parse and instance build, ``import numba``, the kernel's first call =
numba's cached-code load, the simulation, the evaluation with its kernel's load, the
``.npz`` write; for evaluate the instance JSON, the ``.npz`` read, the instance check,
the report), so the steps sum to about the command's CPU (``benchmarks/simulate.py --process``
measures the command itself). Both trees need a warm numba cache (``python -m
optsched.cli.warm`` with the tree first on PYTHONPATH). Prints the minimum over ``--repeat``
runs of each step (the machine is shared: the least disturbed run of each). Skips with a
message when the trace is missing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.setting import TRACE

#: the source tree measured (the one this benchmark is in)
ROOT = Path(__file__).resolve().parents[1]

_CLOCK = """
import sys, time
_rows, _last = [], [time.process_time(), time.perf_counter()]
def mark(name):
    c, w = time.process_time(), time.perf_counter()
    _rows.append((name, c - _last[0], w - _last[1]))
    _last[0], _last[1] = c, w
"""

SIMULATE = _CLOCK + """
import warnings
import numpy as np; mark("import numpy")
import optsched.cli, optsched.cli.simulate; mark("import optsched cli, simulate")
from optsched.cost import cost_model_arg
from optsched.instance import Limits
from optsched.workloads.traces import load_trace_instance
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    inst = load_trace_instance(sys.argv[1], Limits(kv_capacity=100_000, max_batch_tokens=4096),
                               cost_model_arg("infermax-llama2-7b-a100"))
    mark("trace CSV -> instance")
    from optsched.policies import get_policy, simulate_policy
    policy = get_policy("vllm"); mark("policy lookup")
    import numba; mark("import numba")
    simulate_policy(inst.replace(requests=inst.requests[:20]), get_policy("vllm"), fast=True)
    mark("kernel first call (cache load)")
    s = simulate_policy(inst, policy, fast=True); mark("simulate 19,366 requests")
from optsched.evaluation import evaluate
ev = evaluate(inst, s); mark("evaluate (+ its kernel load)")
s.save(sys.argv[2], inst); mark("write .npz")
inst.save(sys.argv[3])
for name, c, w in _rows:
    print(f"{name}\\t{c}\\t{w}")
"""

EVALUATE = _CLOCK + """
import numpy as np; mark("import numpy")
import optsched.cli, optsched.cli.validate as V; mark("import optsched cli, validate")
from optsched.cli._common import checked_schedule, load_instance
inst = load_instance(sys.argv[3]); mark("instance JSON -> instance")
from optsched.schedule import Schedule, instance_check
s = Schedule.load(sys.argv[2]); mark("read .npz")
check = instance_check(s, inst); mark("instance check (content hash)")
import numba; mark("import numba")
from optsched.evaluation import evaluate
ev = evaluate(inst, s); mark("evaluate (+ kernel load)")
text = V.table(["metric", "value"], [(label, ev.metrics[k]) for k, label in V.METRIC_ROWS
                                     if k in ev.metrics]); mark("report (table)")
import json
from optsched.cli._common import print_json
d = {**ev.to_dict(), "instance_check": check}; json.dumps(d, allow_nan=False)
mark("report (--json, not printed)")
for name, c, w in _rows:
    print(f"{name}\\t{c}\\t{w}")
"""


def _run(code: str, src: Path, argv: list[str]) -> list[tuple[str, float, float]]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True,
                         text=True, cwd=tempfile.gettempdir())
    if out.returncode:
        raise SystemExit(f"{src}: step run failed: {out.stderr.strip().splitlines()[-1:]}")
    rows = [line.split("\t") for line in out.stdout.strip().splitlines()]
    return [(n, float(c), float(w)) for n, c, w in rows]


def _best(runs: list[list[tuple[str, float, float]]]) -> list[tuple[str, float, float]]:
    """Each step's minimum CPU and minimum wall over the runs."""
    return [(runs[0][k][0], min(r[k][1] for r in runs), min(r[k][2] for r in runs))
            for k in range(len(runs[0]))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--before", metavar="DIR", help="an older source tree, side by side")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if not Path(args.trace).exists():
        print(f"skipped: trace {args.trace} not found (set OPTSCHED_DATA)")
        return 0
    trees = [("after", ROOT)] + ([("before", Path(args.before))] if args.before else [])
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as d:
        npz, inst = str(Path(d) / "s.npz"), str(Path(d) / "conv.json")
        table: dict[str, dict[str, list]] = {}
        for _ in range(args.repeat):  # interleaved: the trees see the same load
            for label, src in trees:
                t = table.setdefault(label, {"simulate": [], "evaluate": []})
                t["simulate"].append(_run(SIMULATE, src, [args.trace, npz, inst]))
                t["evaluate"].append(_run(EVALUATE, src, [args.trace, npz, inst]))
        for command in ("simulate", "evaluate"):
            best = {label: _best(table[label][command]) for label, _ in trees}
            head = f"{command + ' step':<34} | " + " | ".join(
                f"{label + ' CPU':>10} {label + ' wall':>11}" for label, _ in trees)
            print(head)
            print("-" * len(head))
            for k, (name, _, _) in enumerate(best["after"]):
                print(f"{name:<34} | " + " | ".join(
                    f"{best[label][k][1]:>10.3f} {best[label][k][2]:>11.3f}"
                    if k < len(best[label]) and best[label][k][0] == name else f"{'-':>10} {'-':>11}"
                    for label, _ in trees))
            print(f"{'sum of steps':<34} | " + " | ".join(
                f"{sum(r[1] for r in best[label]):>10.3f} {sum(r[2] for r in best[label]):>11.3f}"
                for label, _ in trees))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
