"""The ``vidur-llama2-7b-a100`` cost preset (optsched.cost.PRESETS), derived here from the
shared profiling tables, and what it changes against the InferMax preset (cost-model
sensitivity, ``docs/results/claims.md``).

Source: ``shared/data/profiling/mlp_a100_Llama-2-7b-hf.csv`` (Vidur's per-layer timings of
every non-attention operator, TP 1) and ``attention_samples_a100_Llama-2-7b-hf.csv`` (76
measured attention rows), fitted by :func:`optsched.workloads.fit.fit_linear_cost` (non-negative least
squares, relative weighting; the same as ``optsched fit --profiling <dir> --model
Llama-2-7b-hf --gpu a100 --tp 1``). ``kswap`` is the default (Llama-2-7B over PCIe 4) and
``rho`` is :func:`optsched.workloads.fit.fit_rho`'s, as in the InferMax preset.

Prints the coefficients (six significant digits, pasted into ``optsched/cost.py``) and, side
by side for both presets, the time of a few decode batches (n entries of ``m`` cached tokens
each) and of a 4,096-token prefill chunk. ``tests/workloads/test_fit.py`` checks that the preset equals
this fit whenever the shared data is present::

    .venv/bin/python -m studies.claims.cost_preset
"""

from __future__ import annotations

import sys

from optsched.cost import PRESETS
from optsched.workloads.fit import fit_linear_cost
from studies.settings import PROFILING


def main() -> int:
    prof = PROFILING
    if not prof.is_dir():
        print(f"skipped: {prof} not found (set OPTSCHED_DATA)", file=sys.stderr)
        return 0
    fit = fit_linear_cost(prof, "Llama-2-7b-hf", "a100", 1)
    print("# coefficients (seconds, whole model) for optsched/cost.py")
    for k, v in fit.cost.coefficients.items():
        print(f"{k}={v:.6g},")
    print(f"rho={fit.cost.rho:.6g}")
    im, vd = PRESETS["infermax-llama2-7b-a100"], PRESETS.get("vidur-llama2-7b-a100", fit.cost)
    print(f"\n{'batch':34} {'infermax ms':>12} {'vidur ms':>9} {'ratio':>6}")
    for n, m in ((1, 500), (8, 500), (8, 1000), (32, 1000), (128, 1000)):
        a = 1000 * im.batch_time([1] * n, [m] * n, [True] * n)
        b = 1000 * vd.batch_time([1] * n, [m] * n, [True] * n)
        print(f"{f'decode n={n}, m={m}':34} {a:>12.3f} {b:>9.3f} {b / a:>6.2f}")
    for c, m in ((512, 0), (4096, 0), (512, 2000)):
        a = 1000 * im.batch_time([c], [m], [False])
        b = 1000 * vd.batch_time([c], [m], [False])
        print(f"{f'prefill chunk c={c}, m={m}':34} {a:>12.3f} {b:>9.3f} {b / a:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
