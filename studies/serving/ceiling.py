"""Certified capacity ceiling (goodput upper bound, ``formulations/bounds.md`` B12) against
the policies' sustainable rates on notebook 08's setting (Apt-Serve): the Azure conversation
trace (``$OPTSCHED_DATA/traces``, :mod:`studies.settings`), first N requests (prompts
longer than C dropped, as the notebook does), M = 10,000 in blocks of 16, C = 4,096, hidden
cache on, Llama-2-7B preset (``infermax-llama2-7b-a100``), TTFT 1 s and P99 TBT 1 s, target
attainment 0.9 (``ttft-tbt-attainment``), Poisson arrivals of seed 0 over ``--rates``.

Per size: each policy's sustainable rate (``rate_search.search``, ``--probes`` probes),
the ceiling (``ceiling.ceiling``: the lowest probed rate the bound rules out and the highest
it allows), the ratio best policy / ceiling, and the times; then the bound's value at a few
fixed rates (what part of it binds: TTFT counting, own floors, completion windows).

    .venv/bin/python -m studies.serving.ceiling [--sizes 80,400] [--policies vllm,aptserve]
"""

from __future__ import annotations

import argparse
import time

from optsched.serving.ceiling import bound_share, ceiling
from optsched.serving.rate_search import at_rate, search
from studies.settings import TARGET, TBT, TTFT, aptserve_instance


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="80,400")
    ap.add_argument("--policies", default="vllm,sarathi,aptserve-kv-only,aptserve,ttft-first")
    ap.add_argument("--rates", default="2:64")
    ap.add_argument("--probes", type=int, default=7)
    args = ap.parse_args()
    lo, hi = (float(x) for x in args.rates.split(":"))
    for n in (int(s) for s in args.sizes.split(",")):
        inst = aptserve_instance(n)
        t0 = time.perf_counter()
        c = ceiling(inst, TARGET, lo, hi, probes=12, ttft_slo=TTFT, tbt_slo=TBT)
        tc = time.perf_counter() - t0
        print(f"\n{inst.n} requests: ceiling ruled out at {c.ruled_out_rate} req/s, allowed "
              f"at {c.allowed_rate} ({len(c.probes)} probes, {tc:.1f} s)")
        print(f"{'policy':<18}{'sustainable':>12}{'fails at':>10}{'/ceiling':>10}{'s':>8}")
        best = 0.0
        for p in args.policies.split(","):
            t0 = time.perf_counter()
            r = search(inst, p, "ttft-tbt-attainment", TARGET, lo, hi, probes=args.probes,
                       progress=False, settings={"ttft_slo": TTFT, "tbt_slo": TBT})
            rate = r.sustainable_rate or 0.0
            best = max(best, rate)
            ratio = rate / c.ruled_out_rate if c.ruled_out_rate else float("nan")
            print(f"{p:<18}{rate:>12.3f}{r.lowest_failing_rate or float('nan'):>10.3f}"
                  f"{ratio:>10.2f}{time.perf_counter() - t0:>8.1f}")
        if c.ruled_out_rate:
            print(f"best policy {best:.3f} req/s = {best / c.ruled_out_rate:.0%} of the "
                  "ceiling")
        print(f"{'rate':>6}{'bound share':>12}{'ttft own':>10}{'ttft':>6}{'both':>6}")
        for rate in (4, 8, 16, 24, 32, 64):
            v, gb = bound_share(at_rate(inst, rate, 0), TTFT, TBT)
            print(f"{rate:>6}{v:>12.3f}{gb.ttft_own:>10}{gb.ttft:>6}{gb.both:>6}")


if __name__ == "__main__":
    main()
