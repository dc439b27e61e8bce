"""Where the rest of the total-latency gap at stable load sits (feeds docs/results/bounds.md,
"Stable loads"): the ``stretch`` rung (B15) is a Lagrangian of a fluid relaxation; a feasible
schedule of that relaxation bounds its optimum from above, so

    stretch <= (the relaxation's optimum) <= fluid schedule,    stretch <= OPT <= best schedule.

The fluid schedule here gives every request in the system an equal share ``1 / N`` of the
machine (eq. B15a with each step's own entry floor, prefill first): a request advances at
rate ``x / (e + h x)``. ``fluid - stretch`` is what the Lagrangian loses against its own
relaxation (at most: the fluid schedule need not be the relaxation's optimum); ``best - fluid``
is what separates the relaxation from real batches, or the schedules from the optimum.

    OPTSCHED_DATA=/work/shared/data .venv/bin/python -m studies.bounds_load.fluid \\
        [--results studies/bounds_load/results.jsonl] [--out studies/bounds_load/fluid.txt]

It reads the windows (and their best schedule and bounds) from the main study's results.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from numba import njit

HERE = Path(__file__).resolve().parent


def _study():
    from studies.bounds_load import study

    return study


@njit(cache=True)
def equal_share(a, p, e0, de, nsteps, hp, hd, dt):
    """Time-stepped fluid: every present request takes ``1 / N`` of the machine; the prefill
    pass (floor ``p``) first, then steps ``g = 1..nsteps`` of floor ``e0 + de (g - 1)``."""
    n = a.size
    order = np.argsort(a)
    pre = np.ones(n)
    done_steps = np.zeros(n)
    comp = np.full(n, -1.0)
    t = a[order[0]]
    k = 0
    present = np.zeros(n, np.bool_)
    left = n
    while left > 0:
        while k < n and a[order[k]] <= t + 1e-12:
            present[order[k]] = True
            k += 1
        N = present.sum()
        if N == 0:
            t = a[order[k]]
            continue
        x = 1.0 / N
        for i in range(n):
            if not present[i]:
                continue
            if pre[i] > 0.0:
                pre[i] -= dt * x / (p[i] + hp * x)
                if pre[i] <= 0.0:
                    pre[i] = 0.0
                    if nsteps[i] == 0:
                        comp[i] = t + dt
                        present[i] = False
                        left -= 1
            else:
                e = e0[i] + de[i] * np.floor(done_steps[i])
                done_steps[i] += dt * x / (e + hd * x)
                if done_steps[i] >= nsteps[i]:
                    comp[i] = t + dt
                    present[i] = False
                    left -= 1
        t += dt
    return comp


def fluid_value(inst, dt: float = 2e-4) -> float:
    from optsched.bounds.floors import Floors
    from optsched.bounds.stretch import step_floor

    f = Floors.of(inst)
    k = f.k
    steps = (inst.output - 1).astype(np.float64)
    e0 = step_floor(f, np.ones(inst.n))
    de = np.where(steps > 1, (step_floor(f, np.maximum(steps, 1.0)) - e0) / np.maximum(steps - 1, 1), 0.0)
    a = inst.arrival.astype(np.float64)
    comp = equal_share(a, np.maximum(f.prefill_entry_cost, 0.0), e0, de, steps,
                       k["k0"] + k["kpb"], k["k0"] + min(k["kdb"], k["kpb"]), dt)
    return float((comp - a).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(HERE / "results.jsonl"))
    ap.add_argument("--out", default=str(HERE / "fluid.txt"))
    ap.add_argument("--loads", default="0.3,0.5,0.7,0.9")
    a = ap.parse_args()
    study = _study()
    rows = [json.loads(x) for x in Path(a.results).read_text().splitlines() if x.strip()]
    loads = set(a.loads.split(","))
    lines = ["| window | stretch | fluid (equal shares) | best schedule [which] | "
             "stretch / fluid | fluid / best | CPU s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r["trace"], str(r["load"]), r["seed"])):
        if str(r["load"]) not in loads:
            continue
        inst = study.instance(r["trace"], int(r["seed"]), int(r["size"]), str(r["load"]))
        t = time.process_time()
        fl = fluid_value(inst)
        sch = {k: v for k, v in r["schedules"].items() if v["feasible"]}
        bk = min(sch, key=lambda k: sch[k]["total-latency"])
        best, st = sch[bk]["total-latency"], r["bounds"]["stretch"]
        lines.append(f"| {r['trace']} s{r['seed']} @{r['load']} | {st:,.0f} | {fl:,.0f} | "
                     f"{best:,.0f} [{bk}] | {st / fl:.2f} | {fl / best:.2f} | "
                     f"{time.process_time() - t:.0f} |")
        print(lines[-1], flush=True)
    Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
