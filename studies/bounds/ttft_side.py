"""Which side holds the conversation windows' mean-TTFT gap ("Mean TTFT: which side").

Mean TTFT depends only on when each prompt's last chunk runs; a request may be evicted after
its first token and finished later, and batches without decode entries are allowed
(docs/semantics.md sections 3-5), so the mean-TTFT optimum of a window is the optimum of its
*prefill-only* problem (docs/results/bounds.md, "Mean TTFT: which side", states the
reduction). Per seeded window (``optsched.workloads.traces.window_instance``: ``--size``
consecutive requests from a row drawn by the seed, own arrivals, M = 30,000, C = 8,192,
Llama-2-7B preset) this prints:

* the certified bounds (rungs ``srpt``, B7, and ``events``, B14) and their CPU time;
* ``prefill-first`` chunked 2048 with the prompt length as key (``prefill_phase.py``; the key
  search of ``studies/bounds/upper.py`` found 0.1778 / 0.5912 / 0.1800 from it on conv 0 / 1 / 2);
* ``prefill-srpt`` (``optsched/search/prefill_srpt.py``) over a grid of ``margin`` x ``pack``
  (``min_chunk`` 32), the best one and its parameters; every schedule replayed by
  ``optsched.evaluate``;
* two *indicative* values of the prefill-only problem that are **not** bounds
  (:func:`optsched.bounds.srpt.prefill_indicative`): preemptive SRPT with each prompt's work
  floor (``prefill_entry_cost``) and no batch fixed time (what ``srpt`` sees, minus its shared
  fixed time), and with one whole fixed time ``k0 + kpb`` per prompt (a schedule that batches
  every prompt alone and preempts for free);
* the gap ``(best - bound) / best``.

    .venv/bin/python -m studies.bounds.ttft_side [--seeds 0,1,2] [--traces conv]
        [--size 1200]

The machine is shared (2 cores): CPU seconds (``process_time``) are printed beside wall.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from optsched.bounds import lower_bound
from optsched.bounds.srpt import prefill_indicative
from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.search.prefill_phase import prefill_first_schedule
from optsched.search.prefill_srpt import prefill_srpt_schedule
from studies.settings import KINDS, TRACES, load_line, window

MARGINS = (0, 200, 1000, 2000, 3000)
PACKS = (0.0, 1.0, 2.0, 4.0)
MIN_CHUNK = 32


def mean_ttft(inst: Instance, schedule) -> float:
    ev = evaluate(inst, schedule)
    if not ev.feasible:
        raise SystemExit(f"infeasible schedule on {inst.name}: {ev.violations[:3]}")
    return ev.objective("mean-ttft")


def run(trace: str, seed: int, size: int) -> None:
    inst = window(trace, seed, size)
    bounds = {}
    for rung in ("srpt", "events"):
        c0, w0 = time.process_time(), time.perf_counter()
        bounds[rung] = lower_bound(inst, "mean-ttft", rung).value
        print(
            f"{inst.name}: n={inst.n} {rung} bound {bounds[rung]:.4f} s "
            f"({time.process_time() - c0:.2f} s CPU, {time.perf_counter() - w0:.2f} s wall)"
        )
    bound = max(bounds.values())
    c0 = time.process_time()
    base = mean_ttft(inst, prefill_first_schedule(inst, inst.prompt.astype(float), 1, 2048))
    print(f"  prefill-first chunk 2048, key = prompt: {base:.4f} ({time.process_time() - c0:.2f} s CPU)")
    best, arg = np.inf, None
    c0, w0 = time.process_time(), time.perf_counter()
    for margin in MARGINS:
        row = []
        for pack in PACKS:
            v = mean_ttft(inst, prefill_srpt_schedule(inst, margin, MIN_CHUNK, pack))
            row.append(f"{v:.4f}")
            if v < best:
                best, arg = v, (margin, pack)
        print(f"  prefill-srpt margin {margin:5d}, pack {PACKS}: {' '.join(row)}")
    print(
        f"  grid of {len(MARGINS) * len(PACKS)} decodes: {time.process_time() - c0:.1f} s CPU, "
        f"{time.perf_counter() - w0:.1f} s wall"
    )
    lo, hi = prefill_indicative(inst)
    print(
        f"  indicative (not bounds): preemptive SRPT, work floors {lo:.4f}, "
        f"+ one fixed time a prompt {hi:.4f}"
    )
    print(
        f"  best prefill-srpt {best:.4f} (margin {arg[0]}, pack {arg[1]}), "
        f"gap {(best - bound) / best:.1%} against the larger bound "
        f"(prefill-first chunk 2048: {(base - bound) / base:.1%})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--traces", default="conv")
    ap.add_argument("--size", type=int, default=1200)
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        print(f"--seeds: comma-separated integers expected, got {args.seeds!r}", file=sys.stderr)
        return 2
    traces = args.traces.split(",")
    bad = [t for t in traces if t not in KINDS]
    if bad or args.size < 1:
        print(
            f"--traces must be conv and/or code, --size >= 1; got {args.traces!r}, {args.size}",
            file=sys.stderr,
        )
        return 2
    if not TRACES.is_dir():
        print(f"traces not found at {TRACES} (set OPTSCHED_DATA)", file=sys.stderr)
        return 2
    print(load_line())
    for trace in traces:
        for seed in seeds:
            run(trace, seed, args.size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
