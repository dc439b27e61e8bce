"""The ``slo-park`` policy's sustainable rate against the certified ceiling and the offline
park construction, on notebook 08's setting and seeded conversation windows (the "Goodput"
target of ``docs/results/serving.md``; ``ceiling_b12e.py``'s instances: 400 requests,
M = 10,000 in blocks of 16, C = 4,096, hidden cache allowed, TTFT 1 s and P99 TBT 1 s, target 90%,
Poisson arrivals of seed 0 on 2-64 req/s).

Per instance: ``slo-park``'s sustainable rate (``rate_search.search``, the function
``optsched capacity`` runs, ``--probes``), the offline construction's
(``studies/serving/goodput_park.py``, prompt order, 10 probes), and a diagnostic: ``slo-park`` on the
same instance with every output set to 1 token (first tokens only: no decode work, no KV
beyond the prompts, nothing to park). If that rate is close to the full one, decodes and
memory cost little and the gap to the ceiling lies in the first-token problem itself (the
prefill order or the bound's counting, B12b); if it is close to the ceiling, the decode side
of the schedule holds the gap. ``--ceiling`` recomputes the ceilings (12 probes, ~60 s CPU
each); else ``studies/serving/results/ceiling-b12e.txt``'s are printed.

    OPTSCHED_DATA=... .venv/bin/python -m studies.serving.slo_park [--seeds 1,2,3] [--probes 12]
        [--params headroom=0.4] [--ceiling] [--no-park] [--no-first-only]
"""

from __future__ import annotations

import argparse
import os
import time

from optsched.serving.ceiling import ceiling
from optsched.serving.rate_search import search
from studies.serving.goodput_park import sustainable
from studies.settings import HI, LO, TARGET, TBT, TTFT, aptserve_windows

#: studies/serving/results/ceiling-b12e.txt ("after": the finer counting grid), by instance label prefix
CEILINGS = {"first 400": 25.58, "window seed 1": 14.58, "window seed 2": 21.89, "window seed 3": 19.64}


def first_only(inst):
    """The instance with every output cut to one token (the diagnostic of the docstring)."""
    return inst.replace(requests=tuple(r.__class__(**{**r.to_dict(), "output": 1}) for r in inst.requests))


def rate(inst, probes: int, params: dict) -> tuple[float | None, float]:
    c0 = time.process_time()
    r = search(
        inst,
        "slo-park",
        "ttft-tbt-attainment",
        TARGET,
        LO,
        HI,
        probes=probes,
        params=params,
        progress=False,
        settings={"ttft_slo": TTFT, "tbt_slo": TBT},
    )
    return r.sustainable_rate, time.process_time() - c0


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--probes", type=int, default=12)
    ap.add_argument("--params", default="", help="slo-park parameters, key=value,...")
    ap.add_argument("--ceiling", action="store_true", help="recompute the ceilings")
    ap.add_argument("--no-park", action="store_true", help="skip the offline construction")
    ap.add_argument("--no-first-only", action="store_true", help="skip the diagnostic")
    args = ap.parse_args()
    params = dict(kv.split("=", 1) for kv in args.params.split(",") if kv)
    print(
        f"# studies/serving/slo_park.py --seeds {args.seeds} --probes {args.probes} "
        f"--params {args.params or '(defaults)'}{' --ceiling' if args.ceiling else ''}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'instance':28} {'ceiling':>8} {'slo-park':>8} {'ceil/pol':>8} {'cpu s':>6} "
        f"{'offline park':>12} {'first tokens only':>17} {'cpu s':>6}"
    )
    for label, inst in aptserve_windows([int(s) for s in args.seeds.split(",")], 400):
        if args.ceiling:
            ceil = ceiling(inst, TARGET, LO, HI, probes=12, ttft_slo=TTFT, tbt_slo=TBT).ruled_out_rate
        else:
            ceil = next(v for k, v in CEILINGS.items() if label.startswith(k))
        pol, cpu = rate(inst, args.probes, params)
        park = None
        if not args.no_park:
            park = sustainable(inst, "prompt")
        one, cpu1 = (None, 0.0) if args.no_first_only else rate(first_only(inst), args.probes, params)
        ratio = f"{ceil / pol:.2f}" if ceil and pol else "-"
        print(
            f"{label:28} {fmt(ceil):>8} {fmt(pol):>8} {ratio:>8} {cpu:>6.1f} {fmt(park):>12} "
            f"{fmt(one):>17} {cpu1:>6.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
