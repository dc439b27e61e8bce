"""Warm-start replays per solve (issue 27 item 1): how often each entry point simulates a
policy and replays (``evaluate``) the schedule it simulated, on shipped instances and seeded
Azure windows (:func:`optsched.workloads.traces.seeded_window`, Llama-2-7B preset, M = 30,000).

Only the command line and ``optsched.compare`` are called, so the same script runs
against an older checkout for the "before" column::

    OPTSCHED_TRACES=/work/shared/data/traces PYTHONPATH=$PWD python bench/bench_pipeline.py
    PYTHONPATH=/path/to/old/checkout python bench/bench_pipeline.py   # before

Columns: entry point, instance, requests, status, the warm start's policy, simulations
(all policies), replays of the chosen warm start's schedule (by identity: the schedule the
policy returned), all ``evaluate`` calls, CPU seconds (``time.process_time``) and wall
seconds; the load (``uptime``) is printed first.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACES = Path(os.environ.get("OPTSCHED_TRACES", REPO.parent / "shared" / "data" / "traces"))

import optsched.evaluation.evaluator as E  # noqa: E402
import optsched.policies as P  # noqa: E402
from optsched import compare  # noqa: E402
from optsched.cli import main  # noqa: E402
from optsched.cost import preset  # noqa: E402
from optsched.data import load_instance  # noqa: E402
from optsched.instance import Instance, Limits  # noqa: E402

MODULES = ("optsched.cli.solve", "optsched.comparison.logic", "optsched.solving.budget",
           "optsched.search.lns", "optsched.formulations.base",
           "optsched.formulations.infermax.solve",
           "optsched.formulations.infermax.flow_objectives", "optsched.solving.pipeline")


class Counts:
    """``simulate`` calls per policy and ``evaluate`` calls per simulated schedule."""

    def __init__(self) -> None:
        self.sims: Counter[str] = Counter()
        self.replays: Counter[str] = Counter()
        self.evaluations = 0
        self._by_id: dict[int, tuple[str, object]] = {}
        self._eval, self._sim = E.evaluate, P.simulate

    def install(self) -> None:
        for name in MODULES:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        for mod in [m for k, m in list(sys.modules.items()) if k.startswith("optsched") and m]:
            if getattr(mod, "evaluate", None) is self._eval:
                mod.evaluate = self.evaluate  # type: ignore[attr-defined]
            if getattr(mod, "simulate", None) is self._sim:
                mod.simulate = self.simulate  # type: ignore[attr-defined]

    def evaluate(self, inst, s):
        self.evaluations += 1
        hit = self._by_id.get(id(s))
        if hit is not None and hit[1] is s:
            self.replays[hit[0]] += 1
        return self._eval(inst, s)

    def simulate(self, inst, policy, *a, **k):
        s = self._sim(inst, policy, *a, **k)
        self.sims[str(policy)] += 1
        self._by_id[id(s)] = (str(policy), s)
        return s

    def reset(self) -> None:
        self.sims.clear()
        self.replays.clear()
        self.evaluations = 0
        self._by_id.clear()


def instances(n: int, seeds: list[int]) -> list[Instance]:
    out = [load_instance("tiny"), load_instance("demo")]
    from optsched.workloads.traces import read_trace, seeded_window, trace_to_instance

    for trace in ("conv", "code"):
        path = TRACES / f"AzureLLMInferenceTrace_{trace}.csv"
        if not path.exists():
            print(f"# {path} absent: no trace windows", file=sys.stderr)
            continue
        raw = read_trace(path, format="azure")
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(trace_to_instance(seeded_window(raw, n, seed),
                                             Limits(kv_capacity=30_000, max_batch_tokens=8192),
                                             preset("infermax-llama2-7b-a100"),
                                             name=f"{trace}-w{seed}", too_long="drop"))
    return out


def run_solve(inst: Instance, limit: float, tmp: Path) -> tuple[str, str | None]:
    path = tmp / f"{inst.name}.json"
    inst.save(path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["solve", str(path), "--time-limit", str(limit), "--json", "--quiet"])
    d = json.loads(out.getvalue())
    return d["status"], (d.get("warm_start") or {}).get("policy")


def run_compare(inst: Instance, limit: float, tmp: Path) -> tuple[str, str | None]:
    with contextlib.redirect_stderr(io.StringIO()):
        cmp = compare(inst, "vllm", optimal=True, time_limit=limit)
    return (cmp.optimum.status if cmp.optimum else "-"), "vllm"


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    print("# load:", os.popen("uptime").read().strip())
    counts = Counts()
    counts.install()
    print(f"{'entry':8} {'instance':18} {'n':>3} {'status':12} {'warm start':11} {'sims':>4} "
          f"{'ws replays':>10} {'evaluate':>8} {'cpu s':>6} {'wall s':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for inst in instances(args.requests, args.seeds):
            for entry, fn in (("solve", run_solve), ("compare", run_compare)):
                counts.reset()
                c0, w0 = time.process_time(), time.perf_counter()
                status, policy = fn(inst, args.time_limit, Path(tmp))
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                replays = counts.replays.get(policy or "", 0)
                print(f"{entry:8} {inst.name:18} {inst.n:3d} {status:12.12} {policy or '-':11} "
                      f"{sum(counts.sims.values()):4d} {replays:10d} {counts.evaluations:8d} "
                      f"{cpu:6.2f} {wall:6.2f}", flush=True)


if __name__ == "__main__":
    main_()
