"""The schedule side at stable load, exactly, at small scale (feeds docs/results/bounds.md,
"Stable loads"): the coarsened small windows of ``studies/bounds/gap_attribution.py`` (part
``small``: ``n`` consecutive requests of a seeded row, one unit = ``q`` tokens, the preset
rescaled, ``M`` holding as many average requests as at scale) with their arrivals scaled to a
stated load instead of the 1,200-request window's: ``rho`` = least busy time over the arrival
span (the bench's definition, the certified side of ``optsched.serving.load``). Per window:
the best registered policy (eviction-free schedules, as the bench), ``ropt`` = the exact
optimum over eviction-free schedules with whole prompts (A*, proven within
``--exact-seconds``), and, for reference only, the bounds before (``combinatorial``,
``spread``, ``coupled``, ``dual``) and ``stretch``: on a coarsened instance an evict-and-refill
generates ``q`` tokens at prefill price, so ``bound / ropt`` is not the bounds' tightness on
the real problem (the bench's caveat). ``best policy / ropt`` is the schedule side, exactly.

    .venv/bin/python -m studies.bounds_load.small [--traces conv,code] [--loads 0.3,0.5,0.7,0.9]
        [--seeds 0,1,2] [--n 5] [--out studies/bounds_load/small.txt]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
Q = {"conv": 50, "code": 10}


def _bench():
    from studies.bounds import gap_attribution

    return gap_attribution


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--loads", default="0.3,0.5,0.7,0.9")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--exact-seconds", type=float, default=20.0)
    ap.add_argument("--out", default=str(HERE / "small"))
    a = ap.parse_args()
    from optsched.bounds import Budget, Floors
    from optsched.bounds.stretch import dual_bound
    from optsched.solving import lower_bound

    b = _bench()
    rows = []
    for trace in a.traces.split(","):
        for seed in map(int, a.seeds.split(",")):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prof = b.profile(trace, seed)
            for load in map(float, a.loads.split(",")):
                t = time.process_time()
                p = b.Profile(load, prof.resident, prof.in_system)
                inst = b.small_window(trace, seed, a.n, Q[trace], p)
                old = max(lower_bound(inst, b.OBJ, m, time_limit=30).value for m in b.RUNGS)
                st = dual_bound(Floors.of(inst), Budget.seconds(None), 200).value * (1 - 1e-9)
                pv, pname, _ = b.best_policy(inst)
                ropt = b.exact(inst, None, a.exact_seconds, restricted=True)
                r = dict(trace=trace, seed=seed, load=load, n=a.n, rho=b.rho(inst), before=old,
                         stretch=st, policy=pv, pname=pname, ropt=ropt,
                         cpu=time.process_time() - t)
                rows.append(r)
                print(json.dumps(r), flush=True)
    Path(a.out + ".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = ["| trace | load | windows (ropt proven) | best policy / ropt mean (max) | "
             "bound before / ropt | stretch / ropt |", "|---|---:|---|---|---:|---:|"]
    for trace in a.traces.split(","):
        for load in map(float, a.loads.split(",")):
            sel = [r for r in rows if r["trace"] == trace and r["load"] == load]
            ok = [r for r in sel if r["ropt"]]
            if not ok:
                continue
            ratio = [r["policy"] / r["ropt"] for r in ok]
            lines.append(f"| {trace} | {load} | {len(sel)} ({len(ok)}) | "
                         f"{sum(ratio) / len(ok):.3f} ({max(ratio):.3f}) | "
                         f"{sum(r['before'] / r['ropt'] for r in ok) / len(ok):.3f} | "
                         f"{sum(r['stretch'] / r['ropt'] for r in ok) / len(ok):.3f} |")
    Path(a.out + ".txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
