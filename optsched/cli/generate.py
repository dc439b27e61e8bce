"""``optsched generate KIND [options] -o FILE``: an instance from a registered generator
(``optsched.workloads.generators``) or a trace conversion (``azure``, ``vidur``, ``arxiv``;
``optsched.workloads.traces``; ``mooncake``, JSON lines with prefix hash ids,
``optsched.workloads.mooncake``); ``--list`` lists the kinds."""

from __future__ import annotations

import dataclasses
import sys
import warnings

import numpy as np

from ..cost import cost_model_arg, preset
from ..errors import InstanceError
from ..instance import Instance, Limits
from . import EXIT_OK
from ._common import cost_name, seed_arg, table, warn_units

TRACE_KINDS = {"azure": "azure", "vidur": "vidur", "arxiv": "arxiv", "mooncake": "mooncake"}


def register(sub) -> None:
    # lazy: each subcommand imports what it runs (start-up time)
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
    g.add_argument("--load", type=float, metavar="RHO",
                   help="target offered load (0.7 = 70%%: arrivals stretched, or the generator's "
                   "rate chosen, so that the load against the best reference schedule of the "
                   "queued mix is RHO; docs/semantics.md section 4). Traces and every kind "
                   "with arrivals; not with --rate-scale or --rate")
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
    c = p.add_argument_group("cluster (docs/semantics.md section 6, 'Clusters'; every kind "
                             "without block ids)")
    c.add_argument("--replicas", type=int, metavar="R",
                   help="serve on R identical engines of role both (ids 0..R-1); --load is "
                   "then the load per replica (one engine's load R x RHO)")
    c.add_argument("--prefill-replicas", type=int, metavar="P",
                   help="with --decode-replicas: P prefill engines (p0..) and D decode engines "
                   "(d0..) linked by the transfer link; --load is then per GPU of the P + D "
                   "(one engine's load (P + D) x RHO)")
    c.add_argument("--decode-replicas", type=int, metavar="D", help="see --prefill-replicas")
    c.add_argument("--transfer-bandwidth", type=float, metavar="BYTES_PER_S",
                   help="link bandwidth in bytes per second (default 25e9: PCIe 4.0 x16)")
    c.add_argument("--transfer-fixed", type=float, metavar="SECONDS",
                   help="fixed time of every transfer (default 0)")
    c.add_argument("--transfer-bytes-per-token", type=float, metavar="BYTES",
                   help="KV bytes per token (default: the cost preset's model in fp16, "
                   "524288 for Llama-2-7B; required with another cost model)")
    p.set_defaults(func=run_generate)



# -- generate -----------------------------------------------------------------------------
def _print_list() -> None:
    # lazy: each subcommand imports what it runs (start-up time)
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
                     "--trace, --limit|--sample|--consecutive, --seed, --window, --rate-scale|--load"
                     + (", --rate" if name == "arxiv" else "")
                     + (", --block-size (divides 512)" if name == "mooncake" else "")))
    print(table(["kind", "what", "parameters"], rows))


def _limits(args) -> Limits:
    # lazy: each subcommand imports what it runs (start-up time)
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
    # lazy: each subcommand imports what it runs (start-up time)
    from ..workloads.generators import GENERATORS

    if args.list:
        _print_list()
        return EXIT_OK
    if not args.kind:
        raise InstanceError("give a KIND (see optsched generate --list)")
    if not args.out:
        raise InstanceError("give the output file with -o FILE")
    kind = args.kind
    _check_load_args(args)
    engines = _cluster_size(args)
    if args.load is not None and engines > 1:
        args.load *= engines  # the one-engine load of RHO per replica (per GPU)
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
    warn_units(inst)
    if inst.n == 0:
        raise InstanceError(f"kind {kind!r}: no request left to write (the trace, --window, "
                            f"--limit/--sample or the dropped rows selected none); "
                            f"{args.out} not written")
    plain, inst = inst, _clustered(args, inst)
    try:
        inst.save(args.out)
    except OSError as e:
        # lazy: each subcommand imports what it runs (start-up time)
        from ..errors import InputFileError

        raise InputFileError(f"{args.out}: cannot write: {e.strerror or e}") from None
    # lazy: the load runs reference policies (start-up time)
    from ..serving.load import offered_load

    load = offered_load(plain)
    said, warning = (load.describe(), load.warning()) if inst.cluster is None \
        else _cluster_load(inst, load)
    print(f"wrote {args.out}: {inst.n} requests, M={inst.limits.kv_capacity}, "
          f"C={inst.limits.max_batch_tokens}, cost model {cost_name(inst)}"
          + _cluster_line(inst) + "; " + said)
    if warning:
        print(f"optsched generate: warning: {warning}", file=sys.stderr)
    return EXIT_OK


_LINK_FLAGS = ("transfer_bandwidth", "transfer_fixed", "transfer_bytes_per_token")


def _cluster_size(args) -> int:
    """The engines the cluster flags ask for (1 without them), after checking they go
    together; one-line errors."""
    P, D, R = args.prefill_replicas, args.decode_replicas, args.replicas
    if R is not None and (P is not None or D is not None):
        raise InstanceError("give --replicas (identical engines) or --prefill-replicas with "
                            "--decode-replicas (disaggregated), not both")
    if (P is None) != (D is None):
        raise InstanceError("--prefill-replicas and --decode-replicas go together")
    given = _given(args, _LINK_FLAGS)
    if given and P is None:
        raise InstanceError(f"--{given[0].replace('_', '-')} applies with --prefill-replicas "
                            "and --decode-replicas (replicas move no KV)")
    for name, v in (("replicas", R), ("prefill-replicas", P), ("decode-replicas", D)):
        if v is not None and not 1 <= v <= 4096:
            raise InstanceError(f"--{name} must be an integer in 1..4096, got {v}")
    if R is not None:
        return R
    return P + D if P is not None else 1


def _clustered(args, inst: Instance) -> Instance:
    """``inst`` on the engines the cluster flags ask for (unchanged without them)."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cluster import DEFAULT_BANDWIDTH, default_link, disaggregate, replicate

    if args.replicas is not None:
        return replicate(inst, args.replicas)
    if args.prefill_replicas is None:
        return inst
    link = default_link(
        inst, bytes_per_token=args.transfer_bytes_per_token,
        bandwidth=args.transfer_bandwidth if args.transfer_bandwidth is not None
        else DEFAULT_BANDWIDTH,
        fixed=args.transfer_fixed if args.transfer_fixed is not None else 0.0)
    return disaggregate(inst, args.prefill_replicas, args.decode_replicas, link)


def _cluster_line(inst: Instance) -> str:
    c = inst.cluster
    if c is None:
        return ""
    roles = [e.role for e in c.engines]
    if set(roles) == {"both"}:
        return f", {c.n} identical engines"
    t = c.transfer
    assert t is not None  # roles other than both need a link (Cluster)
    return (f", {roles.count('prefill')} prefill + {roles.count('decode')} decode engines "
            f"(link {t.bandwidth:g} B/s, {t.bytes_per_token:g} B/token, fixed {t.fixed:g})")


def _cluster_load(inst: Instance, load) -> tuple[str, str | None]:
    """What generate says of the load of a cluster instance (line, warning): per replica for
    identical engines, one engine's otherwise (docs/semantics.md section 6, "Load per
    replica")."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cluster import identical_replicas, replica_load

    R = identical_replicas(inst)
    if R is not None:
        _, line, warning = replica_load(load, R)
        return f"{line}; on one engine: {load.describe()}", warning
    n = inst.n_engines
    per = f"{load.point / n:.3g}" if load.point is not None else "none"
    return (f"load per GPU if the {n} engines were replicas: {per} (a prefill/decode "
            f"cluster's own load is not modelled); on one engine: {load.describe()}", None)


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
    if args.load is not None:
        inst = _family_at_load(g, args.load, limits, cost, args.name, params)
    else:
        inst = g.call(limits=limits, cost_model=cost, name=args.name, **params)
    if "ttft_slo" in accepted:  # the generator sets its own SLOs (bros: RT requests only)
        return inst
    return inst.with_default_slos(args.ttft_slo, args.tpot_slo)


def _check_load_args(args) -> None:
    if args.load is None:
        return
    if not (args.load > 0 and np.isfinite(args.load)):
        raise InstanceError(f"--load must be a finite number > 0, got {args.load!r}")
    if args.rate_scale != 1.0:
        raise InstanceError("--load sets the arrival rate; drop --rate-scale")
    if args.rate is not None and args.kind not in TRACE_KINDS:
        raise InstanceError("--load chooses the generator's --rate; drop --rate")


#: rounds of the rate search of :func:`_family_at_load` and the tolerance it stops at
#: (and the miss beyond which the load reached is said in a warning)
LOAD_ROUNDS, LOAD_TOL, LOAD_MISS = 8, 0.005, 0.02


def _family_at_load(g, target: float, limits, cost, name, params) -> Instance:
    """A generator's instance at offered load ``target``: its ``rate`` chosen so. The load is
    linear in the rate when the mix does not depend on it (a Poisson draw scaled), which one
    round reaches; a generator whose mix moves with the rate (a horizon of rounds, BE
    batches that follow the RT work) gets up to :data:`LOAD_ROUNDS` rounds, and the load it
    reached is printed either way."""
    # lazy: the load runs reference policies (start-up time)
    from ..serving.load import LoadError, offered_load

    accepted = {p.name for p in g.params}
    if "rate" not in accepted or params.get("arrival") == "offline" or \
            ("arrival" in accepted and params.get("arrival") is None):
        raise InstanceError(f"kind {g.name!r} has no arrival rate to set: --load needs arrivals "
                            "spread in time" + (" (give --arrival poisson)"
                                                if "arrival" in accepted else ""))
    rate, best = 1.0, None
    for _ in range(LOAD_ROUNDS):
        inst = g.call(limits=limits, cost_model=cost, name=name, **{**params, "rate": rate})
        load = offered_load(inst)
        if load.point is None:
            raise LoadError(f"kind {g.name!r} at rate {rate:g}: no load (every request at once, "
                            "or no reference ran)")
        miss = abs(load.point - target) / target
        if best is None or miss < best[0]:
            best = (miss, inst, rate)
        if miss <= LOAD_TOL:
            break
        rate *= target / load.point
    assert best is not None  # LOAD_ROUNDS >= 1
    if best[0] > LOAD_MISS:
        warnings.warn(f"--load {target:g}: kind {g.name!r} redraws its arrivals with the rate, "
                      f"so the load reached is {offered_load(best[1]).point:.3g} (rate "
                      f"{best[2]:.4g}); give --rate to choose it yourself", stacklevel=2)
    return best[1]


def _generate_trace(args, kind: str) -> Instance:
    # lazy: each subcommand imports what it runs (start-up time)
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
    # lazy: each subcommand imports what it runs (start-up time)
    from ..cost import DEFAULT_PRESET

    cost = _cost(args.cost_model) or preset(DEFAULT_PRESET)
    if args.load is not None and args.rate is not None:
        raise InstanceError("--load sets the arrival rate; drop --rate")
    if kind == "mooncake":
        inst = _generate_mooncake(args, start, end, cost)
    else:
        inst = load_trace_instance(
            args.trace, _limits(args), cost, name=args.name, too_long=args.too_long or "error",
            format=kind, limit=args.limit, sample=args.sample, consecutive=args.consecutive,
            seed=args.seed if args.seed is not None else 0, start=start, end=end,
            rate_scale=args.rate_scale, zero_tokens=args.zero_tokens or "drop", rate=args.rate,
        )
    if args.load is not None and inst.n:
        # lazy: the load runs reference policies (start-up time)
        from ..serving.load import scale_to_load

        inst = scale_to_load(inst, args.load)
    return inst.with_default_slos(args.ttft_slo, args.tpot_slo)



def _generate_mooncake(args, start: float | None, end: float | None, cost) -> Instance:
    """``generate mooncake``: :func:`optsched.workloads.mooncake.mooncake_instance` with the
    options of the other traces; ``M`` defaults to the file's longest request."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..workloads.generators import DEFAULT_MAX_BATCH_TOKENS
    from ..workloads.mooncake import (
        DEFAULT_BLOCK_SIZE,
        default_kv_capacity,
        mooncake_instance,
        read_mooncake,
    )

    if args.host_capacity is not None:
        raise InstanceError("kind 'mooncake' does not take --host-capacity (prefix reuse is not "
                            "modelled with swap preemption)")
    b = args.block_size if args.block_size is not None else DEFAULT_BLOCK_SIZE
    M = args.kv_capacity
    if M is None:
        M = default_kv_capacity(read_mooncake(args.trace, block_size=b,
                                              zero_tokens=args.zero_tokens or "drop"), b)
    limits = Limits(kv_capacity=M, max_batch_tokens=(args.max_batch_tokens if
                    args.max_batch_tokens is not None else DEFAULT_MAX_BATCH_TOKENS),
                    max_prefill_tokens=args.max_prefill_tokens, block_size=b)
    return mooncake_instance(
        args.trace, limits, cost, name=args.name,
        too_long=args.too_long or "error", zero_tokens=args.zero_tokens or "drop",
        limit=args.limit, sample=args.sample, consecutive=args.consecutive,
        seed=args.seed if args.seed is not None else 0, start=start, end=end,
        rate_scale=args.rate_scale)


__all__ = ["register"]
