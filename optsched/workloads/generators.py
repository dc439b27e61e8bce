"""Seeded instance generators (semantics sections 2 and 7) and their registry.

* :func:`infermax_fixed` -- InferMax's fixed offline workloads: ``n`` requests of prompt
  ``I`` and output ``O``, all at ``t = 0``.
* :func:`infermax_mix` -- InferMax's SISO / SILO / LISO / LILO mixes: each request's input
  length is drawn uniformly from S = {8, 16} or L = {512, 1024} (first letter of the mix
  name) and its output length from S or L (third letter).
* :func:`poisson_trace` -- Poisson arrivals at ``rate`` per second over (prompt, output)
  pairs drawn from a trace (a CSV path or an :class:`~optsched.instance.Instance`).
* :func:`chat_like` -- Poisson arrivals with synthetic ShareGPT / LMSYS-like lengths
  (:mod:`optsched.workloads.chat_lengths`: the papers' reported means and spreads).
* :func:`online_paper_random` -- the random family of the online-scheduling paper
  (Jaillet, Jiang, Podimata, Zhou), converted to our semantics (see its docstring);
  :func:`online_paper_horizon` -- its online setting over a fixed horizon of rounds.

Every generator is deterministic per ``seed`` (``numpy.random.default_rng``) and returns a
validated :class:`~optsched.instance.Instance`. :data:`GENERATORS` maps a kind name to a
:class:`GeneratorKind` (function, summary, documented parameters) for the CLI.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..cost import CostModel, UnitCost
from ..errors import InstanceError
from ..instance import Instance, Limits, Request
from .chat_lengths import chat_lengths
from .defaults import (
    DEFAULT_KV_CAPACITY,
    DEFAULT_MAX_BATCH_TOKENS,
    check_int,
    check_rate,
    default_cost,
    default_limits,
)
from .hybrid import bros_workload
from .shared_prefix import BLOCK_SIZE as SHARED_BLOCK_SIZE
from .shared_prefix import few_shot, multi_turn, system_prompts
from .traces import TraceWarning, poisson_arrivals, read_trace

SHORT = (8, 16)
LONG = (512, 1024)
MIXES = ("SISO", "SILO", "LISO", "LILO")


def _instance(name, limits, cost_model, arrival, prompt, output) -> Instance:
    reqs = tuple(
        Request(id=f"r{k}", arrival=a, prompt=i, output=o)
        for k, (a, i, o) in enumerate(zip(np.asarray(arrival, float).tolist(),
                                          np.asarray(prompt).tolist(),
                                          np.asarray(output).tolist()))
    )
    return Instance(name=name, limits=limits, cost_model=cost_model, requests=reqs)


# -- InferMax workloads ------------------------------------------------------------------
def infermax_fixed(
    n: int,
    prompt: int,
    output: int,
    *,
    limits: Limits | None = None,
    cost_model: CostModel | None = None,
    name: str | None = None,
) -> Instance:
    """``n`` identical requests (prompt ``I``, output ``O``) at t = 0 (InferMax section 6's
    fixed offline workloads). Default limits M = 100K, C = 4096; default cost model the
    InferMax Llama-2-7B/A100 preset."""
    n, prompt, output = check_int("n", n), check_int("prompt", prompt), check_int("output", output)
    return _instance(
        name or f"fixed-n{n}-i{prompt}-o{output}", default_limits(limits),
        default_cost(cost_model), np.zeros(n), np.full(n, prompt), np.full(n, output),
    )


def eviction_family(
    prompt: int,
    *,
    n: int = 4,
    output: int = 4,
    max_batch_tokens: int = 4096,
    cost_model: CostModel | None = None,
    name: str | None = None,
) -> Instance:
    """InferMax's eviction experiment (section 5.1): :func:`infermax_fixed` with the KV capacity
    ``M = max(2I, I + O - 1)`` (two prompts fit, a third only after an eviction), ``n = 4``
    requests of ``O = 4`` output tokens by default, named ``evict-family-I<I>``. The family of
    ``optsched demo`` (``I = 16``), notebook 02 and ``studies/offline_optima/``."""
    prompt, output = check_int("prompt", prompt), check_int("output", output)
    return infermax_fixed(
        n, prompt, output,
        limits=Limits(kv_capacity=max(2 * prompt, prompt + output - 1), max_batch_tokens=max_batch_tokens),
        cost_model=cost_model, name=name or f"evict-family-I{prompt}",
    )


def infermax_mix(
    mix: str,
    n: int,
    seed: int = 0,
    *,
    limits: Limits | None = None,
    cost_model: CostModel | None = None,
    name: str | None = None,
) -> Instance:
    """InferMax's SISO/SILO/LISO/LILO mixes: ``n`` requests at t = 0 whose prompt is drawn
    uniformly from S = {8, 16} or L = {512, 1024} (``mix[0:2]``: SI or LI) and output from
    S or L (``mix[2:4]``: SO or LO). Seeded."""
    m = str(mix).upper()
    if m not in MIXES:
        raise InstanceError(f"generator: unknown mix {mix!r}; expected one of {', '.join(MIXES)}")
    n = check_int("n", n)
    rng = np.random.default_rng(seed)
    ins = SHORT if m[0] == "S" else LONG
    outs = SHORT if m[2] == "S" else LONG
    prompt = rng.choice(ins, size=n)
    output = rng.choice(outs, size=n)
    return _instance(name or f"{m.lower()}-n{n}-s{seed}", default_limits(limits),
                     default_cost(cost_model), np.zeros(n), prompt, output)


# -- Poisson over a trace's lengths ------------------------------------------------------
def poisson_trace(
    trace: str | Path | Instance,
    n: int,
    rate: float,
    seed: int = 0,
    *,
    replace: bool = False,
    limits: Limits | None = None,
    cost_model: CostModel | None = None,
    name: str | None = None,
) -> Instance:
    """``n`` requests arriving as a Poisson process of ``rate`` per second (first at 0,
    exponential gaps), with (prompt, output) pairs drawn uniformly from ``trace`` (a trace
    CSV read by :func:`optsched.workloads.traces.read_trace`, or an instance), without replacement
    unless ``replace``. Pairs that could never fit (``I + O - 1 > M``) are removed from the
    pool first, with a warning giving the count. Seeded."""
    n, rate = check_int("n", n), check_rate(rate)
    lim = default_limits(limits)
    if not isinstance(trace, Instance) and str(trace).endswith(".json"):
        trace = Instance.load(trace)
    if isinstance(trace, Instance):
        src, P, O = trace.name, trace.prompt, trace.output
    else:
        t = read_trace(trace)
        src, P, O = Path(t.path).stem, t.prompt, t.output
    fits = lim.kv_footprint(P + O - 1) <= lim.kv_capacity
    if not fits.all():
        warnings.warn(
            f"poisson_trace: removed {int((~fits).sum())} of {P.size} (prompt, output) pairs "
            f"from the pool of {src} with prompt + output - 1 > M = {lim.kv_capacity}",
            TraceWarning, stacklevel=2,
        )
        P, O = P[fits], O[fits]
    if P.size == 0:
        raise InstanceError(f"generator: no (prompt, output) pair of {src} fits M = {lim.kv_capacity}")
    if not replace and n > P.size:
        raise InstanceError(
            f"generator: cannot draw {n} pairs without replacement from {P.size}; ask for at "
            f"most {P.size} requests or draw with replacement (--replace; replace=True in Python)"
        )
    rng = np.random.default_rng(seed)
    idx = rng.choice(P.size, size=n, replace=replace)
    arrival = poisson_arrivals(n, rate, rng)
    return _instance(name or f"poisson-{src}-n{n}-r{rate:g}-s{seed}", lim,
                     default_cost(cost_model), arrival, P[idx], O[idx])


# -- ShareGPT / LMSYS-like lengths (synthetic, optsched.workloads.chat_lengths) --------------------
def chat_like(
    n: int,
    rate: float,
    seed: int = 0,
    *,
    dataset: str = "sharegpt",
    limits: Limits | None = None,
    cost_model: CostModel | None = None,
    name: str | None = None,
) -> Instance:
    """``n`` requests arriving as a Poisson process of ``rate`` per second (first at 0) with
    **synthetic** (prompt, output) lengths matching the mean and spread EcoServe / BROS
    report for ShareGPT or LMSYS-Chat-1M (:mod:`optsched.workloads.chat_lengths` cites each number).
    Pairs whose KV could not fit ``M`` are redrawn. Seeded."""
    n, rate = check_int("n", n), check_rate(rate)
    lim = default_limits(limits)
    rng = np.random.default_rng(seed)
    b = lim.block_size
    P, O = chat_lengths(dataset, n, rng, max_tokens=(lim.kv_capacity // b) * b)
    arrival = poisson_arrivals(n, rate, rng)
    return _instance(name or f"chat-{dataset}-n{n}-r{rate:g}-s{seed}", lim,
                     default_cost(cost_model), arrival, P, O)


# -- the online-scheduling paper's random family -----------------------------------------
def online_paper_random(
    n: int,
    seed: int = 0,
    *,
    arrival: str = "offline",
    rate: float | None = None,
    name: str | None = None,
) -> Instance:
    """Random instance of the online-scheduling paper (Jaillet, Jiang, Podimata, Zhou,
    "Online Scheduling for LLM Inference with KV Cache Constraints"), in our semantics.

    The paper's synthetic comparison with the hindsight optimum (its later arXiv version,
    arXiv:2502.07115; our early-version copy ``papers/001_*.txt`` lost that passage) draws,
    integer-uniform and inclusive: memory ``M ~ U[30, 50]`` once per instance, and per
    request a prompt size ``s ~ U[1, 5]`` and an output length ``o ~ U[1, M - s]``; ``n``
    requests arrive all at t = 0 (``arrival="offline"``) or online, where the number of
    arrivals in each unit-time round is ``Poisson(rate)`` (the stochastic arrival model of
    the paper's section 3, arrival rate lambda; rounds are integers 0, 1, 2, ...).

    Conversion (semantics section 7): the paper holds ``s + j`` KV tokens while generating
    token ``j`` (peak ``s + o``); ours holds ``I + g`` and peaks at ``I + O - 1``. So
    ``I = s + 1`` and ``O = o`` (peak ``I + O - 1 = s + o <= M``, every request fits).
    Unit-time cost model (every batch takes 1 round); ``C = M``, which never binds because
    a batch's tokens never exceed the KV it leaves cached (``sum c <= sum m <= M``).
    """
    n = check_int("n", n)
    if arrival not in ("offline", "poisson"):
        raise InstanceError(f"generator: arrival must be 'offline' or 'poisson', got {arrival!r}")
    rng = np.random.default_rng(seed)
    M = int(rng.integers(30, 51))
    s = rng.integers(1, 6, size=n)
    o = rng.integers(1, M - s + 1)  # per-request upper bound M - s, inclusive
    if arrival == "offline":
        if rate is not None:
            raise InstanceError("generator: rate is only used with arrival='poisson'")
        arr = np.zeros(n)
    else:
        if rate is None:
            raise InstanceError("generator: arrival='poisson' needs a rate (arrivals per round)")
        lam = check_rate(rate)
        arr = np.empty(n)
        k, t = 0, 0
        while k < n:
            a = min(int(rng.poisson(lam)), n - k)
            arr[k:k + a] = t
            k += a
            t += 1
    return _instance(
        name or f"online-paper-n{n}-s{seed}" + ("" if arrival == "offline" else f"-r{rate:g}"),
        Limits(kv_capacity=M, max_batch_tokens=M), UnitCost(), arr, s + 1, o,
    )


def online_paper_horizon(rate: float, horizon: int, seed: int = 0, *, name: str | None = None
                         ) -> Instance:
    """The online paper's online setting with a fixed horizon: in each unit round
    ``0 .. horizon - 1`` the number of arrivals is ``Poisson(rate)``, so ``n`` is random; each
    request gets the family's draws of :func:`online_paper_random` (one ``M ~ U[30, 50]``, then
    ``s ~ U[1, 5]``, ``o ~ U[1, M - s]``, ``I = s + 1``, ``O = o``).

    The parameters of the paper's experiment in its later version
    (arXiv:2502.07115): rate 0.5-1.5, horizons of 40-60 rounds. ``online_paper_random`` with
    ``arrival="poisson"`` instead fixes ``n`` and runs rounds until ``n`` requests arrived. A draw
    with no arrival at all keeps one request at round 0 (an empty instance compares nothing).
    """
    lam, T = check_rate(rate), check_int("horizon", horizon)
    rng = np.random.default_rng(seed)
    M = int(rng.integers(30, 51))
    arr = np.repeat(np.arange(T), rng.poisson(lam, size=T))
    if arr.size == 0:
        arr = np.zeros(1, np.int64)
    s = rng.integers(1, 6, size=arr.size)
    o = rng.integers(1, M - s + 1)
    return _instance(name or f"online-paper-T{T}-r{lam:g}-s{seed}",
                     Limits(kv_capacity=M, max_batch_tokens=M), UnitCost(), arr, s + 1, o)


# -- registry --------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One documented generator parameter (``default`` is ``REQUIRED`` when mandatory)."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


REQUIRED = object()


@dataclass(frozen=True)
class GeneratorKind:
    """A registered generator: ``func(**params, limits=..., cost_model=..., name=...)``.

    ``takes_limits`` is False for families that fix their own limits and cost model."""

    name: str
    func: Callable[..., Instance]
    summary: str
    params: tuple[Param, ...]
    takes_limits: bool = True
    #: the KV block size the command line uses when ``--block-size`` is not given (None: 1)
    block_size: int | None = None

    def call(self, *, limits: Limits | None = None, cost_model: CostModel | None = None,
             name: str | None = None, **params) -> Instance:
        known = {p.name for p in self.params}
        extra = set(params) - known
        if extra:
            raise InstanceError(
                f"generator {self.name!r}: unknown parameter(s) {sorted(extra)}; "
                f"takes {', '.join(sorted(known))}"
            )
        kwargs: dict[str, Any] = {}
        for p in self.params:
            if p.name in params and params[p.name] is not None:
                kwargs[p.name] = params[p.name]
            elif p.default is REQUIRED:
                raise InstanceError(f"generator {self.name!r}: missing parameter {p.name!r}")
        if self.takes_limits:
            kwargs.update(limits=limits, cost_model=cost_model)
        elif limits is not None or cost_model is not None:
            raise InstanceError(
                f"generator {self.name!r} fixes its own limits and cost model; do not pass them"
            )
        return self.func(name=name, **kwargs)


GENERATORS: dict[str, GeneratorKind] = {
    "fixed": GeneratorKind(
        "fixed", infermax_fixed,
        "InferMax fixed workload: n requests of prompt I and output O at t=0",
        (Param("n", int, REQUIRED, "number of requests B"),
         Param("prompt", int, REQUIRED, "prompt tokens I"),
         Param("output", int, REQUIRED, "output tokens O")),
    ),
    "mix": GeneratorKind(
        "mix", infermax_mix,
        "InferMax SISO/SILO/LISO/LILO mix at t=0 (S={8,16}, L={512,1024})",
        (Param("mix", str, REQUIRED, "mix name", MIXES),
         Param("n", int, REQUIRED, "number of requests B"),
         Param("seed", int, 0, "random seed")),
    ),
    "poisson-trace": GeneratorKind(
        "poisson-trace", poisson_trace,
        "Poisson arrivals at a rate (req/s) over (prompt, output) pairs drawn from a trace",
        (Param("trace", str, REQUIRED, "trace CSV (azure/vidur/arxiv) or instance JSON"),
         Param("n", int, REQUIRED, "number of requests"),
         Param("rate", float, REQUIRED, "arrival rate, requests per second"),
         Param("seed", int, 0, "random seed"),
         Param("replace", bool, False, "draw the pairs with replacement")),
    ),
    "chat-like": GeneratorKind(
        "chat-like", chat_like,
        "SYNTHETIC ShareGPT/LMSYS-like lengths (log-normal, the papers' reported mean/std/range; "
        "optsched.workloads.chat_lengths) with Poisson arrivals",
        (Param("n", int, REQUIRED, "number of requests"),
         Param("rate", float, REQUIRED, "arrival rate, requests per second"),
         Param("seed", int, 0, "random seed"),
         Param("dataset", str, "sharegpt", "length statistics to match",
               ("sharegpt", "lmsys", "sharegpt-ecoserve"))),
    ),
    "online-paper": GeneratorKind(
        "online-paper", online_paper_random,
        "online-scheduling paper's random family: M~U[30,50], s~U[1,5], o~U[1,M-s]; "
        "unit cost, I=s+1, O=o",
        (Param("n", int, REQUIRED, "number of requests"),
         Param("seed", int, 0, "random seed"),
         Param("arrival", str, "offline", "all at t=0 or Poisson per round", ("offline", "poisson")),
         Param("rate", float, None, "Poisson arrivals per round (arrival=poisson)")),
        takes_limits=False,
    ),
    "online-paper-horizon": GeneratorKind(
        "online-paper-horizon", online_paper_horizon,
        "online-scheduling paper's online setting: Poisson(rate) arrivals in each of `horizon` "
        "rounds (n random), the online-paper family's M, s, o draws",
        (Param("rate", float, REQUIRED, "Poisson arrivals per round"),
         Param("horizon", int, REQUIRED, "number of rounds with arrivals"),
         Param("seed", int, 0, "random seed")),
        takes_limits=False,
    ),
    "bros": GeneratorKind(
        "bros", lambda **kw: _bros(**kw),
        "BROS hybrid workload: RT Poisson over a trace with TTFT/TPOT SLOs, BE batches of "
        "U(512,1024)/U(32,128) submitted when the previous would finish alone (optsched.workloads.hybrid)",
        (Param("trace", str, REQUIRED, "trace CSV (azure/vidur/arxiv) or instance JSON for RT"),
         Param("n", int, REQUIRED, "number of RT requests"),
         Param("rate", float, REQUIRED, "RT arrival rate, requests per second"),
         Param("seed", int, 0, "random seed"),
         Param("be_batch", int, 16, "BE requests per batch"),
         Param("ttft_slo", float, 0.4, "RT time-to-first-token SLO, seconds"),
         Param("tpot_slo", float, 0.2, "RT time-per-output-token SLO, seconds")),
    ),
}


_SHARED_COMMON = (Param("n", int, REQUIRED, "number of requests"),
                  Param("rate", float, REQUIRED, "arrival rate, requests (or conversations) "
                        "per second"),
                  Param("seed", int, 0, "random seed"),
                  Param("dataset", str, "sharegpt", "message/answer length statistics",
                        ("sharegpt", "lmsys", "sharegpt-ecoserve")))
GENERATORS.update({
    "system-prompts": GeneratorKind(
        "system-prompts", system_prompts,
        "shared prefixes: a few system prompts (Zipf popularity) + the user's message; block "
        "ids (optsched.workloads.shared_prefix)",
        _SHARED_COMMON + (Param("prompts", int, 4, "number of system prompts"),
                          Param("zipf", float, 1.1, "Zipf exponent of their popularity"),
                          Param("system", int, 1024, "system prompt tokens")),
        block_size=SHARED_BLOCK_SIZE),
    "multi-turn": GeneratorKind(
        "multi-turn", multi_turn,
        "shared prefixes: conversations whose turn k+1 extends turn k (its prompt, answer and "
        "a new message); block ids",
        _SHARED_COMMON + (Param("turns", float, 4.0, "mean turns per conversation (geometric)"),
                          Param("think", float, 30.0, "mean seconds between turns"),
                          Param("system", int, 256, "shared system prompt tokens")),
        block_size=SHARED_BLOCK_SIZE),
    "few-shot": GeneratorKind(
        "few-shot", few_shot,
        "shared prefixes: one instruction, one of a few few-shot example sets (Zipf), the "
        "query; block ids",
        _SHARED_COMMON + (Param("templates", int, 8, "number of example sets"),
                          Param("zipf", float, 1.0, "Zipf exponent of their popularity"),
                          Param("header", int, 512, "shared instruction tokens"),
                          Param("examples", int, 2048, "example-set tokens")),
        block_size=SHARED_BLOCK_SIZE),
})


def _bros(**kw) -> Instance:
    return bros_workload(**kw)


def generate(kind: str, **kwargs) -> Instance:
    """Call the registered generator ``kind`` (see :data:`GENERATORS`)."""
    try:
        g = GENERATORS[kind]
    except KeyError:
        raise InstanceError(
            f"unknown generator {kind!r}; known: {', '.join(sorted(GENERATORS))}"
        ) from None
    return g.call(**kwargs)


__all__ = [
    "infermax_fixed", "eviction_family", "infermax_mix", "poisson_trace", "chat_like", "online_paper_random",
    "online_paper_horizon",
    "GENERATORS", "GeneratorKind", "Param", "REQUIRED", "generate", "MIXES", "SHORT", "LONG",
    "DEFAULT_KV_CAPACITY", "DEFAULT_MAX_BATCH_TOKENS",
]
