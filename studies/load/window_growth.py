"""What a window's offered load does to the serving multiples (docs/semantics.md section 4,
offered load; feeds docs/results/load.md).

For seeded windows of both Azure traces (``optsched generate azure --consecutive N --seed S``:
the same start row, 600 / 1,200 / 2,400 requests), ``M = 30,000``, ``C = 8,192``, the
Llama-2-7B preset: the window's offered load (both sides) at its own arrival rate and
stretched to loads 0.5, 0.7, 0.9 (``scale_to_load``), the load of its busiest tenth (the
tenth of its requests, consecutive, that arrive fastest), and vLLM's total latency and mean
latency against the certified lower bound: the larger of the ``combinatorial`` and
``spread`` rungs (``formulations/bounds.md``; deterministic, unlike ``best`` within a time
limit). At a load above 1 the latency grows with the window's length; at a stable load it
does not.

    OPTSCHED_DATA=/path/to/shared/data .venv/bin/python -m studies.load.window_growth \\
        [--traces conv,code] [--seed 1] [--out studies/load/window-growth]

(run from the repository root). Writes ``OUT.json`` and ``OUT.txt``. CPU seconds
(``time.process_time``) per window; the machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.instance import Limits
from optsched.policies import simulate
from optsched.serving.load import offered_load, scale_to_load
from optsched.solving import lower_bound
from optsched.workloads.traces import load_trace_instance

DATA = Path(os.environ.get("OPTSCHED_DATA", Path(__file__).resolve().parents[3] / "shared"
                           / "data"))
FILES = {"conv": "AzureLLMInferenceTrace_conv.csv", "code": "AzureLLMInferenceTrace_code.csv"}
SIZES = (600, 1200, 2400)
LOADS = (None, 0.5, 0.7, 0.9)  # None: the window's own arrivals


def row(trace: str, seed: int, size: int, target: float | None) -> dict:
    inst = load_trace_instance(DATA / "traces" / FILES[trace],
                               Limits(kv_capacity=30_000, max_batch_tokens=8192),
                               preset("infermax-llama2-7b-a100"), consecutive=size, seed=seed)
    if target is not None:
        inst = scale_to_load(inst, target)
    c0 = time.process_time()
    load = offered_load(inst)
    ev = evaluate(inst, simulate(inst, "vllm"))
    # the larger of two deterministic rungs (no time limit decides which rungs ran)
    lb = max((lower_bound(inst, "total-latency", m) for m in ("combinatorial", "spread")),
             key=lambda b: b.value)
    return {"trace": trace, "seed": seed, "requests": size,
            "setting": "own arrivals" if target is None else f"load {target:g}",
            "load": load.to_dict(), "vllm_total_latency": ev.metrics["total_latency"],
            "vllm_mean_latency": ev.metrics["mean_latency"], "bound": lb.value,
            "rung": lb.method, "multiple": ev.metrics["total_latency"] / lb.value,
            "cpu_seconds": time.process_time() - c0, "loadavg": os.getloadavg()[0]}


def text(rows: list[dict]) -> str:
    out = ["trace seed  setting       requests  load (lower-upper)  busiest tenth  status     "
           "            vLLM mean lat (s)  bound (rung)        vLLM/bound  cpu s  loadavg"]
    for r in rows:
        ld = r["load"]
        out.append(f"{r['trace']:5} {r['seed']:4}  {r['setting']:12}  {r['requests']:8}  "
                   f"{ld['point']:5.3f} ({ld['lower']:.3f}-{ld['upper']:.3f})  "
                   f"{ld['peak']:13.2f}  "
                   f"{ld['status']:21}  {r['vllm_mean_latency']:17.2f}  "
                   f"{r['bound']:10.1f} ({r['rung']:6})  {r['multiple']:10.2f}  "
                   f"{r['cpu_seconds']:5.1f}  {r['loadavg']:5.1f}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).parent / "window-growth"))
    args = ap.parse_args()
    if not (DATA / "traces").is_dir():
        raise SystemExit(f"window_growth: {DATA / 'traces'} is missing (set OPTSCHED_DATA)")
    rows = []
    for trace in args.traces.split(","):
        for target in LOADS:
            for size in SIZES:
                rows.append(row(trace, args.seed, size, target))
                print(text(rows[-1:]).splitlines()[-1], flush=True)
    Path(args.out + ".json").write_text(json.dumps(rows, indent=1))
    Path(args.out + ".txt").write_text(text(rows) + "\n")


if __name__ == "__main__":
    main()
