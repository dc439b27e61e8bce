"""The certified capacity ceiling (formulations/bounds.md B12, ``optsched.serving.ceiling``) on
notebook 08's setting under the longest-gap TBT rule: the rates at which the goodput upper
bound still allows 90% of the 400 requests within TTFT 1 s and every gap within 1 s (the
draw ``optsched capacity --ceiling`` uses), beside the certified saturated rate of the mix
(no rate above it is sustainable on a longer trace, docs/semantics.md section 4).

    OPTSCHED_DATA=/path/to/shared/data .venv/bin/python -m studies.goodput.ceiling_nb08
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

from optsched.cost import preset
from optsched.instance import Limits
from optsched.serving.ceiling import ceiling
from optsched.serving.load import offered_load
from optsched.workloads.traces import load_trace_instance

DATA = Path(os.environ.get("OPTSCHED_DATA", Path(__file__).resolve().parents[3] / "shared"
                           / "data"))


def main() -> None:
    lim = Limits(kv_capacity=10_000, max_batch_tokens=4096, block_size=16, hidden_cache=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inst = load_trace_instance(DATA / "traces" / "AzureLLMInferenceTrace_conv.csv", lim,
                                   preset("infermax-llama2-7b-a100"), limit=400)
    load = offered_load(inst)
    print(f"mix: {inst.n} requests, saturated rate {load.achievable_rate:.3f} req/s "
          f"({load.reference}) .. {load.certified_rate:.3f} (certified)")
    c0 = time.process_time()
    c = ceiling(inst, 0.9, 0.25, 32.0, probes=12, ttft_slo=1.0, tbt_slo=1.0)
    for p in c.probes:
        print(f"rate {p.rate:.4f} share {p.value:.4f} {'allows' if p.allows else 'rules out'} "
              f"ttft {p.bound.ttft} both {p.bound.both} {p.seconds:.1f} s")
    print(f"allowed {c.allowed_rate:.4f} ruled out {c.ruled_out_rate:.4f}; "
          f"cpu {time.process_time() - c0:.1f} s, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
