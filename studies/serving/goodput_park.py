"""The offline park construction (:class:`optsched.serving.park.Park`: an upper-side diagnostic
for the capacity ceiling, not a policy; ``formulations/bounds.md`` B12, "What it leaves out") on
notebook 08's setting (:mod:`studies.settings`) under the OLD per-request P99 reading of the
TBT SLO (kept to reproduce ``goodput-park.txt``): its ``ttft_p99tbt_attainment`` at given
rates, and its sustainable rate on seeded conversation windows. SLOs are now judged on every
gap (docs/semantics.md section 4, ``max_tbt``), under which parking fails the SLO; this script
scores the old reading, whose loophole the construction exploits. Every schedule is replayed by
``optsched.evaluate`` and scored by ``serving_metrics``; an infeasible one is an error, never a
rate.

    OPTSCHED_DATA=... .venv/bin/python -m studies.serving.goodput_park [--rates 4,8,12,16,20]
        [--order arrival,prompt] [--budgets 4096] [--admit]
    OPTSCHED_DATA=... .venv/bin/python -m studies.serving.goodput_park --seeds 1,2,3   (rates)
"""

from __future__ import annotations

import argparse
import os
import time

from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.metrics.serving import serving_metrics
from optsched.serving.park import SHORT_OUTPUT, Park
from optsched.serving.rate_search import at_rate
from studies.settings import HI, LO, TARGET, TBT, TTFT, aptserve_instance, aptserve_windows


def attainment(inst: Instance, rate: float, order: str, budget: int | None = None) -> float:
    """The construction's ``ttft_p99tbt_attainment`` at ``rate`` (seed-0 Poisson draw)."""
    i = at_rate(inst, rate, 0)
    s = Park(i, order, budget, ttft_slo=TTFT).run()
    ev = evaluate(i, s)
    if not ev.feasible:
        raise RuntimeError(f"park construction infeasible at {rate}: {ev.violations[:2]}")
    return float(serving_metrics(i, ev, schedule=s, ttft_slo=TTFT, tbt_slo=TBT)
                 ["ttft_p99tbt_attainment"])


def sustainable(inst: Instance, order: str, lo: float = LO, hi: float = HI,
                probes: int = 10, target: float = TARGET) -> float | None:
    """Highest probed rate where the construction reaches ``target`` (geometric bisection,
    as ``rate_search.search``); None if not even ``lo``."""
    if attainment(inst, lo, order) < target:
        return None
    good, bad = lo, hi
    if attainment(inst, hi, order) >= target:
        return hi
    for _ in range(probes - 2):
        mid = (good * bad) ** 0.5
        if attainment(inst, mid, order) >= target:
            good = mid
        else:
            bad = mid
    return good


def windows(seeds: list[int], n: int) -> None:
    """The construction's sustainable rate on seeded conversation windows (the instances of
    ``studies/serving/ceiling_b12e.py``)."""
    print(f"{'instance':34} {'n':>4} {'park (prompt order) req/s':>26}")
    for label, inst in aptserve_windows(seeds, n):
        r = sustainable(inst, "prompt")
        print(f"{label:34} {inst.n:>4} {'-' if r is None else f'{r:.2f}':>26}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="4,6.58,8,10,12,14,16,20")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--admit", action="store_true",
                    help="admit a prompt to a batch only if every prompt it completes meets "
                         "its TTFT SLO (the others wait or are set aside)")
    ap.add_argument("--budgets", default="4096",
                    help="prefill tokens per arrival-phase batch to try (at most C)")
    ap.add_argument("--order", default="arrival,prompt",
                    help="queue orders to try: arrival (FIFO), prompt (shortest first)")
    ap.add_argument("--seeds", help="instead: the sustainable rate (10 probes) on the first "
                    "400 requests and on seeded --n-request windows (studies/serving/ceiling_b12e.py's)")
    args = ap.parse_args()
    if args.seeds:
        windows([int(x) for x in args.seeds.split(",")], args.n)
        return
    inst = aptserve_instance(args.n)
    print(f"# studies.serving.goodput_park --rates {args.rates} --n {args.n}; notebook 08's setting, "
          f"{inst.n} requests, {sum(o > SHORT_OUTPUT for o in inst.output.tolist())} with "
          f"O > {SHORT_OUTPUT}; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'order':8} {'budget':>6} {'rate':>6} {'attainment':>10} {'ttft ok':>8} "
          f"{'feasible':>8} {'cpu s':>6}")
    for order, budget in ((o, int(b)) for o in args.order.split(",")
                          for b in args.budgets.split(",")):
        for rate in (float(r) for r in args.rates.split(",")):
            t0 = time.process_time()
            i = at_rate(inst, rate, 0)
            s = Park(i, order, budget, args.admit, ttft_slo=TTFT).run()
            ev = evaluate(i, s)
            m = serving_metrics(i, ev, schedule=s, ttft_slo=TTFT, tbt_slo=TBT)
            ok = float((ev.ttft <= TTFT + 1e-12).mean())
            print(f"{order:8} {budget:>6} {rate:>6g} {m['ttft_p99tbt_attainment']:>10.4f} {ok:>8.4f} "
                  f"{str(ev.feasible):>8} {time.process_time() - t0:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
