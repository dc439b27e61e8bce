"""``optsched generate``, ``optsched info``, ``optsched fit``, ``optsched kv-capacity``.

* ``generate KIND [options] -o FILE`` -- a registered generator (``optsched.workloads.generators``) or a
  trace conversion (``azure``, ``vidur``, ``arxiv``; ``optsched.workloads.traces``; ``mooncake``,
  JSON lines with prefix hash ids, ``optsched.workloads.mooncake``); ``--list`` lists kinds.
* ``info INSTANCE`` -- descriptive statistics of an instance.
* ``fit --profiling DIR`` -- least-squares cost-model fit (``optsched.workloads.fit``).
* ``kv-capacity`` -- KV capacity from model size and GPU memory (``optsched.workloads.capacity``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from ..cost import UnitCost, cost_model_arg, preset
from ..errors import InstanceError
from ..instance import Instance, Limits
from . import EXIT_INPUT, EXIT_OK
from ._common import fmt, load_instance, output_file, print_json, seed_arg, table

TRACE_KINDS = {"azure": "azure", "vidur": "vidur", "arxiv": "arxiv", "mooncake": "mooncake"}


def register(sub) -> None:
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..workloads.generators import GENERATORS

    kinds = ", ".join(sorted(GENERATORS) + sorted(TRACE_KINDS))
    p = sub.add_parser("generate", help="generate an instance (synthetic family or trace)",
                       description=f"Generate an instance. Kinds: {kinds}.")
    p.add_argument("kind", nargs="?", help="generator kind (see --list)")
    p.add_argument("--list", action="store_true", help="list the kinds and their parameters")
    p.add_argument("-o", "--output-file", dest="out", help="instance JSON to write")
    p.add_argument("--name", help="instance name")
    g = p.add_argument_group("generator parameters (which apply depends on KIND)")
    g.add_argument("--n", "-n", type=int, help="number of requests (B)")
    g.add_argument("--prompt", type=int, help="prompt tokens I (fixed)")
    g.add_argument("--output", type=int, help="output tokens O (fixed)")
    g.add_argument("--mix", help="SISO, SILO, LISO or LILO (mix)")
    g.add_argument("--dataset", help="sharegpt, lmsys or sharegpt-ecoserve (chat-like)")
    g.add_argument("--seed", type=seed_arg, help="random seed (default 0)")
    g.add_argument("--rate", type=float, help="arrival rate (req/s; per round for online-paper)")
    g.add_argument("--arrival", choices=("offline", "poisson"), help="online-paper arrivals")
    g.add_argument("--horizon", type=int, help="rounds with arrivals (online-paper-horizon)")
    g.add_argument("--be-batch", type=int, help="BE requests per batch (bros)")
    g.add_argument("--ttft-slo", type=float, help="TTFT SLO in seconds: bros's RT SLO (default "
                   "0.4); for other kinds a default written into every request")
    g.add_argument("--tpot-slo", type=float, help="TPOT SLO in seconds: bros's RT SLO (default "
                   "0.2); for other kinds a default written into every request")
    g.add_argument("--replace", action="store_true", default=None,
                   help="poisson-trace: draw the (prompt, output) pairs with replacement")
    s = p.add_argument_group("shared prefixes (system-prompts, multi-turn, few-shot; block "
                             "size 16 unless --block-size)")
    s.add_argument("--prompts", type=int, help="system-prompts: number of system prompts")
    s.add_argument("--zipf", type=float, help="system-prompts, few-shot: Zipf exponent of the "
                   "popularity")
    s.add_argument("--system", type=int, help="system-prompts, multi-turn: system prompt tokens")
    s.add_argument("--turns", type=float, help="multi-turn: mean turns per conversation")
    s.add_argument("--think", type=float, help="multi-turn: mean seconds between turns")
    s.add_argument("--templates", type=int, help="few-shot: number of example sets")
    s.add_argument("--header", type=int, help="few-shot: shared instruction tokens")
    s.add_argument("--examples", type=int, help="few-shot: example-set tokens")
    t = p.add_argument_group("trace options (azure, vidur, arxiv, mooncake; --trace for "
                             "poisson-trace)")
    t.add_argument("--trace", help="trace file (CSV; JSON lines for mooncake)")
    t.add_argument("--limit", type=int, help="first N requests")
    t.add_argument("--sample", type=int, help="seeded random sample of N requests")
    t.add_argument("--consecutive", type=int, metavar="N",
                   help="N consecutive requests from a row drawn by --seed, arrivals re-based "
                        "to 0 (the benches' seeded windows)")
    t.add_argument("--window", help="time window START:END in seconds (either may be empty)")
    t.add_argument("--rate-scale", type=float, default=1.0,
                   help="divide arrivals by this factor (2 = twice the rate)")
    t.add_argument("--zero-tokens", choices=("drop", "clamp", "error"),
                   help="rows with 0 prompt/output tokens (default drop, with a count)")
    t.add_argument("--too-long", choices=("error", "drop", "clip"),
                   help="requests with I + O - 1 > M (default error)")
    lim = p.add_argument_group("limits and cost model")
    lim.add_argument("--kv-capacity", type=int, help="M in tokens (default 100000; mooncake: "
                     "the trace file's longest request in whole blocks, 126976 for the "
                     "conversation trace)")
    lim.add_argument("--max-batch-tokens", type=int, help="C (default 4096)")
    lim.add_argument("--max-prefill-tokens", type=int, help="P (default none)")
    lim.add_argument("--block-size", type=int,
                     help="KV block size in tokens (default 1; mooncake: 512, and it must "
                     "divide 512; docs/semantics.md sections 2 and 6)")
    lim.add_argument("--host-capacity", type=int,
                     help="host tokens for swapped KV (enables swapping; bros default 4 M)")
    lim.add_argument("--cost-model", help="preset name, 'unit', or a cost-model JSON file "
                     "(as written by 'optsched fit -o'; default: the InferMax Llama-2-7B preset)")
    p.set_defaults(func=run_generate)

    p = sub.add_parser("info", help="descriptive statistics of an instance")
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run_info)

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

    p = sub.add_parser("kv-capacity", help="KV capacity (tokens) from model size and GPU memory")
    p.add_argument("--params", type=float, required=True, help="parameters, e.g. 70e9")
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--dtype-bytes", type=float, default=2)
    p.add_argument("--gpu-mem-gb", type=float, required=True)
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--n-heads", type=int, help="attention heads (for GQA with --kv-heads)")
    p.add_argument("--kv-heads", type=int, help="KV heads (GQA)")
    p.add_argument("--head-dim", type=int, help="head dimension (default hidden / n-heads)")
    p.add_argument("--gib", action="store_true", help="GPU memory in GiB (2^30) instead of GB")
    p.add_argument("--reserved-gb", type=float, default=0.0, help="memory reserved for other use")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_kv_capacity)


# -- generate -----------------------------------------------------------------------------
def _print_list() -> None:
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..workloads.generators import GENERATORS, REQUIRED

    rows = []
    for name in sorted(GENERATORS):
        k = GENERATORS[name]
        ps = ", ".join(
            f"--{p.name}" + ("" if p.default is REQUIRED else f"={p.default}")
            + (f" {{{'|'.join(p.choices)}}}" if p.choices else "")
            for p in k.params
        )
        rows.append((name, k.summary, ps + ("" if k.takes_limits else " (own limits)")))
    for name in sorted(TRACE_KINDS):
        what = (f"{name} trace JSON lines (prefix hash ids) -> instance with block ids"
                if name == "mooncake" else f"{name} trace CSV -> instance")
        rows.append((name, what,
                     "--trace, --limit|--sample|--consecutive, --seed, --window, --rate-scale"
                     + (", --rate" if name == "arxiv" else "")
                     + (", --block-size (divides 512)" if name == "mooncake" else "")))
    print(table(["kind", "what", "parameters"], rows))


def _limits(args) -> Limits:
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..workloads.generators import DEFAULT_KV_CAPACITY, DEFAULT_MAX_BATCH_TOKENS

    return Limits(
        kv_capacity=args.kv_capacity if args.kv_capacity is not None else DEFAULT_KV_CAPACITY,
        max_batch_tokens=(args.max_batch_tokens if args.max_batch_tokens is not None
                          else DEFAULT_MAX_BATCH_TOKENS),
        max_prefill_tokens=args.max_prefill_tokens,
        host_capacity=args.host_capacity,
        block_size=args.block_size if args.block_size is not None else 1,
    )


def _cost(name: str | None):
    if name is None:
        return None
    return cost_model_arg(name)


def _window(s: str | None) -> tuple[float | None, float | None]:
    if s is None:
        return None, None
    a, sep, b = s.partition(":")
    if not sep:
        raise InstanceError(f"--window must be START:END (seconds), got {s!r}")
    try:
        return (float(a) if a.strip() else None), (float(b) if b.strip() else None)
    except ValueError:
        raise InstanceError(f"--window must be START:END (seconds), got {s!r}") from None


_GEN_FLAGS = ("n", "prompt", "output", "mix", "dataset", "seed", "rate", "arrival", "horizon", "trace",
              "be_batch", "ttft_slo", "tpot_slo", "replace", "prompts", "zipf", "system", "turns",
              "think", "templates", "header", "examples")
#: with a kind that does not set SLOs itself: a default for every request (semantics sec. 4)
_SLO_FLAGS = ("ttft_slo", "tpot_slo")
_TRACE_FLAGS = ("limit", "sample", "consecutive", "window", "zero_tokens", "too_long")


def _given(args, names) -> list[str]:
    return [n for n in names if getattr(args, n) is not None]


def run_generate(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..workloads.generators import GENERATORS

    if args.list:
        _print_list()
        return EXIT_OK
    if not args.kind:
        raise InstanceError("give a KIND (see optsched generate --list)")
    if not args.out:
        raise InstanceError("give the output file with -o FILE")
    kind = args.kind
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if kind in TRACE_KINDS:
            inst = _generate_trace(args, kind)
        elif kind in GENERATORS:
            inst = _generate_family(args, GENERATORS[kind])
        else:
            raise InstanceError(
                f"unknown kind {kind!r}; known: {', '.join(sorted(GENERATORS) + sorted(TRACE_KINDS))}"
            )
    for w in caught:
        print(f"optsched generate: warning: {w.message}", file=sys.stderr)
    if inst.n == 0:
        raise InstanceError(f"kind {kind!r}: no request left to write (the trace, --window, "
                            f"--limit/--sample or the dropped rows selected none); "
                            f"{args.out} not written")
    try:
        inst.save(args.out)
    except OSError as e:
        # lazy: each subcommand imports what it runs (start-up time, issue 31)
        from ..errors import InputFileError

        raise InputFileError(f"{args.out}: cannot write: {e.strerror or e}") from None
    print(f"wrote {args.out}: {inst.n} requests, M={inst.limits.kv_capacity}, "
          f"C={inst.limits.max_batch_tokens}, cost model {_cost_name(inst)}")
    return EXIT_OK


def _generate_family(args, g) -> Instance:
    accepted = {p.name for p in g.params}
    bad = [n for n in _given(args, _GEN_FLAGS) if n not in accepted and n not in _SLO_FLAGS]
    bad += [n for n in _given(args, _TRACE_FLAGS)]
    if args.rate_scale != 1.0:
        bad.append("rate_scale")
    if bad:
        raise InstanceError(
            f"kind {g.name!r} does not take --{', --'.join(b.replace('_', '-') for b in bad)}; "
            f"it takes --{', --'.join(sorted(accepted))}"
        )
    params = {n: getattr(args, n) for n in accepted if getattr(args, n) is not None}
    limits: Limits | None
    if g.takes_limits:
        limits, cost = _limits(args), _cost(args.cost_model)
        if g.block_size is not None and args.block_size is None:  # the kind's own default
            limits = dataclasses.replace(limits, block_size=g.block_size)
    else:
        given = _given(args, ("kv_capacity", "max_batch_tokens", "max_prefill_tokens", "cost_model",
                              "host_capacity", "block_size"))
        if given:
            raise InstanceError(f"kind {g.name!r} fixes its own limits and cost model; "
                                f"drop --{', --'.join(x.replace('_', '-') for x in given)}")
        limits = cost = None
    inst = g.call(limits=limits, cost_model=cost, name=args.name, **params)
    if "ttft_slo" in accepted:  # the generator sets its own SLOs (bros: RT requests only)
        return inst
    return inst.with_default_slos(args.ttft_slo, args.tpot_slo)


def _generate_trace(args, kind: str) -> Instance:
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..workloads.traces import load_trace_instance

    if args.trace is None:
        raise InstanceError(f"kind {kind!r} needs --trace FILE")
    bad = _given(args, ("n", "prompt", "output", "mix", "dataset", "arrival", "horizon", "be_batch",
                        "replace"))
    if args.rate is not None and kind != "arxiv":
        bad.append("rate")
    if bad:
        raise InstanceError(f"kind {kind!r} does not take --{', --'.join(bad)}")
    start, end = _window(args.window)
    if kind == "mooncake":
        return _generate_mooncake(args, start, end)
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..cost import DEFAULT_PRESET

    cost = _cost(args.cost_model) or preset(DEFAULT_PRESET)
    inst = load_trace_instance(
        args.trace, _limits(args), cost, name=args.name, too_long=args.too_long or "error",
        format=kind, limit=args.limit, sample=args.sample, consecutive=args.consecutive,
        seed=args.seed if args.seed is not None else 0, start=start, end=end,
        rate_scale=args.rate_scale, zero_tokens=args.zero_tokens or "drop", rate=args.rate,
    )
    return inst.with_default_slos(args.ttft_slo, args.tpot_slo)


def _generate_mooncake(args, start: float | None, end: float | None) -> Instance:
    """``generate mooncake``: :func:`optsched.workloads.mooncake.mooncake_instance` with the
    options of the other traces; ``M`` defaults to the file's longest request."""
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..cost import DEFAULT_PRESET
    from ..workloads.generators import DEFAULT_MAX_BATCH_TOKENS
    from ..workloads.mooncake import DEFAULT_BLOCK_SIZE, default_kv_capacity, read_mooncake

    b = args.block_size if args.block_size is not None else DEFAULT_BLOCK_SIZE
    M = args.kv_capacity
    if M is None:
        M = default_kv_capacity(read_mooncake(args.trace, block_size=b,
                                              zero_tokens=args.zero_tokens or "drop"), b)
    limits = Limits(kv_capacity=M, max_batch_tokens=(args.max_batch_tokens if
                    args.max_batch_tokens is not None else DEFAULT_MAX_BATCH_TOKENS),
                    max_prefill_tokens=args.max_prefill_tokens, block_size=b)
    if args.host_capacity is not None:
        raise InstanceError("kind 'mooncake' does not take --host-capacity (prefix reuse is not "
                            "modelled with swap preemption)")
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..workloads.mooncake import mooncake_instance

    inst = mooncake_instance(
        args.trace, limits, _cost(args.cost_model) or preset(DEFAULT_PRESET), name=args.name,
        too_long=args.too_long or "error", zero_tokens=args.zero_tokens or "drop",
        limit=args.limit, sample=args.sample, consecutive=args.consecutive,
        seed=args.seed if args.seed is not None else 0, start=start, end=end,
        rate_scale=args.rate_scale)
    return inst.with_default_slos(args.ttft_slo, args.tpot_slo)


# -- info ---------------------------------------------------------------------------------
def _cost_name(inst: Instance) -> str:
    cm = inst.cost_model
    if isinstance(cm, UnitCost):
        return "unit"
    return getattr(cm, "preset", None) or cm.to_dict().get("kind", "?")


def instance_info(inst: Instance) -> dict:
    """Descriptive statistics of an instance (what ``optsched info`` prints)."""
    def stats(a: np.ndarray) -> dict:
        if a.size == 0:
            return {"min": None, "mean": None, "max": None, "total": 0}
        return {"min": a.min().item(), "mean": float(a.mean()), "max": a.max().item(),
                "total": a.sum().item()}

    arr = inst.arrival
    peak = inst.prompt + inst.output - 1
    span = float(arr.max() - arr.min()) if arr.size else 0.0
    return {
        "name": inst.name,
        "requests": inst.n,
        "limits": inst.limits.to_dict(),
        "cost_model": inst.cost_model.to_dict(),
        "mode": "offline" if arr.size == 0 or np.all(arr == arr[0]) else "online",
        "prompt": stats(inst.prompt),
        "output": stats(inst.output),
        "peak_kv": stats(peak),
        "arrival": {**stats(arr), "span": span,
                    "rate": (inst.n - 1) / span if span > 0 else None},
        "total_tokens": int(inst.prompt.sum() + inst.output.sum()),
        **({"prefix_reuse": _reuse_info(inst)} if inst.has_prefix else {}),
    }


def _reuse_info(inst: Instance) -> dict:
    """The reuse potential (docs/semantics.md section 6, "Prefix reuse"): distinct and listed
    blocks, and the hit tokens of an unbounded cache serving in arrival order."""
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..prefix import reuse_potential

    ix = inst.prefix_index
    assert ix is not None
    pot = reuse_potential(ix, inst.arrival, inst.prompt)
    return {**pot, "block_size": ix.block_size,
            "distinct_kv_tokens": ix.n_blocks * ix.block_size,
            "requests_with_ids": int((ix.listed > 0).sum())}


def run_info(args) -> int:
    inst = load_instance(args.instance)
    d = instance_info(inst)
    if args.json:
        print_json(d)
        return EXIT_OK
    lim = inst.limits
    print(f"{d['name']}: {d['requests']} requests, {d['mode']}")
    print(f"limits: M={lim.kv_capacity} C={lim.max_batch_tokens} P={fmt(lim.max_prefill_tokens)} "
          f"max_batch_size={fmt(lim.max_batch_size)} block_size={lim.block_size}")
    print(f"cost model: {_cost_name(inst)}")
    rows = [(k, d[k]["min"], d[k]["mean"], d[k]["max"], d[k]["total"])
            for k in ("prompt", "output", "peak_kv")]
    a = d["arrival"]
    rows.append(("arrival", a["min"], a["mean"], a["max"], None))
    print(table(["", "min", "mean", "max", "total"], rows))
    rate = a["rate"]
    print(f"total tokens (prompt + output): {d['total_tokens']}; arrival span {fmt(a['span'])}"
          + (f", mean rate {fmt(rate)} per time unit" if rate else ""))
    if "prefix_reuse" in d:
        r = d["prefix_reuse"]
        print(f"prefix reuse: {r['requests_with_ids']} requests list {r['listed_blocks']} block "
              f"ids, {r['distinct_blocks']} distinct ({r['distinct_kv_tokens']} KV tokens, "
              f"b = {r['block_size']}); an unbounded cache in arrival order hits "
              f"{r['hit_tokens']} of {r['prompt_tokens']} prompt tokens "
              f"({100 * r['hit_share']:.1f}%)")
    return EXIT_OK


# -- fit ----------------------------------------------------------------------------------
def run_fit(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
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


# -- kv-capacity --------------------------------------------------------------------------
def run_kv_capacity(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time, issue 31)
    from ..workloads.capacity import GB, GIB, kv_capacity

    c = kv_capacity(args.params, args.layers, args.hidden, args.dtype_bytes, args.gpu_mem_gb,
                    args.gpus, n_heads=args.n_heads, kv_heads=args.kv_heads,
                    head_dim=args.head_dim, gb_bytes=GIB if args.gib else GB,
                    reserved_gb=args.reserved_gb)
    if args.json:
        print_json(c.to_dict())
    else:
        print(f"{c.tokens} tokens  ({c.free_bytes / 1e9:.4g} GB free after "
              f"{c.weight_bytes / 1e9:.4g} GB of weights; {c.bytes_per_token} bytes per token)")
    return EXIT_OK


__all__ = ["register", "instance_info", "EXIT_INPUT"]
