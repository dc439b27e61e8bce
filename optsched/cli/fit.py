"""``optsched fit --profiling DIR``: least-squares cost-model fit (``optsched.workloads.fit``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import EXIT_OK
from ._common import output_file, print_json, table


def register(sub) -> None:
    p = sub.add_parser("fit", help="fit the linear cost model on profiling CSVs")
    p.add_argument("--profiling", required=True, help="profiling directory (shared/data/profiling)")
    p.add_argument("--model", default="Llama-2-7b-hf")
    p.add_argument("--gpu", default="a100")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree of the MLP rows")
    p.add_argument("--layers", type=int, help="layer count (default from the model name)")
    p.add_argument("--attention", help="attention samples CSV (default: the model's)")
    p.add_argument("--weighting", choices=("relative", "absolute"), default="relative")
    p.add_argument("--unconstrained", action="store_true", help="plain lstsq (may go negative)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the fitted cost model as JSON (use it with --cost-model FILE)")
    p.set_defaults(func=run_fit)


def run_fit(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cost import PRESETS
    from ..workloads.fit import fit_linear_cost

    out = output_file(args.output)
    r = fit_linear_cost(args.profiling, args.model, args.gpu, args.tp, layers=args.layers,
                        nonneg=not args.unconstrained, weighting=args.weighting,
                        attention=args.attention)
    if out is not None:  # the cost_model object of an instance: --cost-model FILE reads it
        Path(out).write_text(json.dumps(r.cost.to_dict(), indent=1) + "\n")
        print(f"cost model written to {out}", file=sys.stderr)
    if args.json:
        print_json(r.to_dict())
        return EXIT_OK
    ref = PRESETS.get("infermax-llama2-7b-a100") if args.model == "Llama-2-7b-hf" else None
    print(f"linear cost model fit: {r.model} on {r.gpu}, TP{r.tp}, {r.layers} layers "
          f"({r.weighting} weighting{', non-negative' if r.nonneg else ''}); seconds per batch")
    rows = [(k, v, ref.coefficients[k] if ref else None) for k, v in r.cost.coefficients.items()]
    print(table(["coef", "fit", "InferMax ref" if ref else "-"], rows))
    print()
    print(table(["group", "terms", "rows", "RMSE ms/layer", "max rel err", "mean rel err"],
                [(g.name, ",".join(g.terms), g.n_rows, g.rmse_ms, g.max_rel_error,
                  g.mean_rel_error) for g in r.groups]))
    for n in r.notes:
        print(f"note: {n}")
    return EXIT_OK
