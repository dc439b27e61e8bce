"""Why "slo-park sustains 20.7 req/s" (the README before) was an artefact of the per-request
P99 TBT reading and of a 400-request draw (feeds docs/results/serving.md, "Capacity ceiling").

Notebook 08's setting (the first 400 conversation requests, ``M = 10,000`` in blocks of 16,
``C = 4,096``, hidden cache, the Llama-2-7B preset), Poisson arrivals of seed 0 at a rate:
for each policy and rate, the arrival span and the run's end, the share of requests that
finish after the last arrival, the completion rate, the share with a gap over 1 s, the mean
longest gap, the attainment of TTFT 1 s and TBT 1 s under both readings (longest gap, the
rule; per-request P99, the old one), the offered load, and the same on the trace repeated
4x and 10x at that rate (attainment and mean latency).

    OPTSCHED_DATA=/path/to/shared/data .venv/bin/python -m studies.goodput.slo_park_artefact

(from the repository root). CPU seconds per row and the load average are printed.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import numpy as np

from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.instance import Limits
from optsched.metrics.serving import serving_metrics
from optsched.policies import get_policy, simulate
from optsched.serving.load import offered_load
from optsched.serving.rate_search import at_rate, repeat_trace
from optsched.workloads.traces import load_trace_instance

DATA = Path(os.environ.get("OPTSCHED_DATA", Path(__file__).resolve().parents[3] / "shared"
                           / "data"))
TTFT = TBT = 1.0
#: (label, policy, parameters, rate): slo-park as it was (the P99 allowance) at its published
#: 20.67 req/s, vLLM beside it, and the longest-gap rule's policies at rates from
#: studies/goodput/capacity-nb08.json
ROWS = (
    ("slo-park, tbt_rule=p99 (before)", "slo-park", {"tbt_rule": "p99"}, 20.67),
    ("vllm", "vllm", {}, 20.67),
    ("slo-park, tbt_rule=p99 (before)", "slo-park", {"tbt_rule": "p99"}, 2.8),
    ("slo-park (longest gap)", "slo-park", {}, 2.8),
    ("vllm", "vllm", {}, 2.8),
)


def base():
    lim = Limits(kv_capacity=10_000, max_batch_tokens=4096, block_size=16, hidden_cache=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_trace_instance(DATA / "traces" / "AzureLLMInferenceTrace_conv.csv", lim,
                                   preset("infermax-llama2-7b-a100"), limit=400)


def run(inst, policy, params, rate):
    i = at_rate(inst, rate, 0)
    s = simulate(i, get_policy(policy, **params))
    ev = evaluate(i, s)
    assert ev.feasible
    m = serving_metrics(i, ev, schedule=s, ttft_slo=TTFT, tbt_slo=TBT)
    last = float(i.arrival.max())
    return i, ev, m, last


def main() -> None:
    inst = base()
    load = offered_load(inst)
    print(f"mix: {inst.n} requests; saturated rate {load.achievable_rate:.3f} req/s "
          f"({load.reference}, achievable) .. {load.certified_rate:.3f} (certified)")
    print("policy                            rate   load  last arr  end (s)  after last  "
          "completed/s  gap>1s  mean max gap  att(max)  att(p99)  | x4 att(p99) mean lat "
          "| x10 att(p99) mean lat | cpu s")
    for label, policy, params, rate in ROWS:
        c0 = time.process_time()
        i, ev, m, last = run(inst, policy, params, rate)
        after = float(np.mean(ev.completion > last))
        gap = float(np.mean(ev.max_tbt > TBT))
        rep = []
        for k in (4, 10):
            _, evk, mk, _ = run(repeat_trace(inst, k), policy, params, rate)
            rep.append(f"{mk['ttft_p99tbt_attainment']:.3f} {evk.metrics['mean_latency']:7.1f}")
        print(f"{label:32} {rate:5.2f} {rate / load.achievable_rate:5.2f} {last:9.1f} "
              f"{ev.metrics['makespan']:8.1f} {after:10.1%} {m['completion_rate']:12.2f} "
              f"{gap:7.1%} {m['mean_max_tbt']:13.2f} {m['ttft_tbt_attainment']:9.3f} "
              f"{m['ttft_p99tbt_attainment']:9.3f} | {rep[0]} | {rep[1]} | "
              f"{time.process_time() - c0:.1f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
