"""Priority-key search on the compiled simulator kernels.

A schedule is decoded from a *key* (one number per request, smallest first: ties by arrival,
then instance order, as the policies rank) by one of the compiled kernels of
:mod:`optsched.policies.fast`, which already take the policy's ranking as an array
(``rank_of`` / ``idx_of_rank``), so any key vector is expressible without a new kernel:

* ``mcsf``: MC-SF's admission rule (equation (1) of :mod:`optsched.policies.mcsf`) admitting
  waiting requests in key order, true output lengths; it never evicts;
* ``rank``: InferMax's ranking scheduler (section 4.6, the ``rank-*`` policies of
  :mod:`optsched.policies.unified`): one group over running and waiting requests in key
  order, hybrid chunked batches with ``P = 512``, a waiting request evicts the running
  requests ranked after it -- a memory-aware *preemptive* key-first scheduler;
* ``rank-pc``: the same with ``P = C`` (whole prompts per batch);
* ``rank-ef``: the same reserving ``I + O - 1`` at admission (eviction-free);
* ``rank-cap4`` / ``rank-cap8``: ``rank`` with at most 4 / 8 requests holding KV (vLLM's
  ``max_num_seqs``): shorter decode batches (code seed 1 at 0.3 of its arrival rate: the
  ``rank-i`` policy 2,296 s uncapped, 1,984 s capped at 4, 2,135 s at 8);
* for mean TTFT, ``prefill-first`` / ``prefill-pack2`` / ``prefill-packed``
  (:mod:`optsched.search.prefill_phase`, Python): every first token in key order as the arrivals
  come, 1, 2 or any number of prompts per batch, then the remaining tokens in groups; and
  ``prefill-chunkK``: the same, preemptive, one chunk of at most ``K`` prompt tokens a batch
  (conv seed 0, entry-cost key: K = 2048 0.1794 s, 1024 0.1850, 512 0.1961, 256 0.2473,
  against 0.1928 unchunked; code seed 0: 4096 2.795 against pack2's 2.75);
* for total latency, ``one-prompt`` / ``one-prompt512`` / ``one-prompt1024``
  (:mod:`optsched.search.one_prompt`, Python, not a default): one prompt a batch, decoding
  requests first, at most 768 / 512 / 1,024 prompt tokens a batch while some request decodes.

(A prefill-first configuration whose waiting requests evict, meant for mean TTFT, thrashed:
mean TTFT 6,879 s against MC-SF's 6.0 s on the conversation window of seed 0; not kept.)

Each kernel decode of a 1,200-request trace window takes ~20 ms (MC-SF's: ~0.1-0.7 s), so a
minute holds thousands of candidates. The search (:func:`key_search`) decodes every seed key
(:func:`seed_keys`) with every decoder of the objective, then does local search
around the best (key, decoder) with accept-if-strictly-better moves, each named:

* ``shift``: one request moved just before (or after) another request arriving near it (its
  key set to that request's key, nudged by one ulp): "serve this one earlier/later";
* ``swap``: the keys of two requests arriving near each other exchanged;
* ``re-key window``: the requests arriving in a random time window get their own key values
  re-assigned in the order of another seed key (or a random mix of them);
* ``block``: the keys of a block of consecutive arrivals multiplied by random factors;
* ``decoder``: the best key decoded by another decoder.

Every candidate is judged by :func:`optsched.evaluate` (the one evaluator), so the
objective the search compares is the evaluator's; the kernel's schedules are those of the
Python path batch for batch (``tests/search/test_keysearch.py``). Seeded (one
``numpy.random.Generator``); with ``max_iterations`` a run is reproducible whatever the
machine's speed; it stops at ``deadline``.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..bounds.floors import Floors
from ..bounds.srpt import job_works
from ..evaluation import evaluate
from ..instance import Instance
from ..objectives import OBJECTIVES
from ..policies.fast import HAVE_NUMBA, fast_config, simulate_fast
from ..policies.mcsf import MCSF
from ..policies.simulator import SimView, _Sim, known_outputs
from ..policies.unified import UnifiedScheduler
from ..schedule import Schedule
from ..solve_types import Objective
from .decoder import Decoder, DecoderError, get_decoder, register_decoder
from .decoder import default_decoders as default_decoders
from .lns_decode import PolicyDecoder
from .prefill_phase import PrefillPhaseError, prefill_first_schedule

_RANK = dict(order="single", hybrid=True, chunked=True, waiting_evicts=True)
#: the kernel configurations a key is decoded with (module docstring); ``None``: MC-SF
CONFIGS: dict[str, dict | None] = {
    "mcsf": None,
    "rank": {**_RANK, "P": 512},
    "rank-pc": {**_RANK, "P": 0},
    "rank-ef": {**_RANK, "P": 512, "reserve": "full"},
    # residency caps (vLLM's max_num_seqs): at most this many requests hold KV, so decode
    # batches stay short; on the code windows at light load they cut total latency (B15's
    # study, docs/results/bounds.md "Stable loads")
    "rank-cap4": {**_RANK, "P": 512, "max_num_seqs": 4},
    "rank-cap8": {**_RANK, "P": 512, "max_num_seqs": 8},
}
#: the prefill-first decoders (:mod:`optsched.search.prefill_phase`): (prompts packed per batch,
#: preemptive chunk size or 0)
PREFILL_PACK = {"prefill-first": (1, 0), "prefill-chunk2048": (1, 2048),
                "prefill-chunk1024": (1, 1024), "prefill-pack2": (2, 0),
                "prefill-packed": (1 << 30, 0)}


class KeySearchError(DecoderError):
    """The kernels cannot decode this instance (no numba, another cost model, ...)."""


def key_ranks(key: np.ndarray, arrival: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rank_of, idx_of_rank)`` of ``key``: smallest first, ties by arrival then index
    (the ranking of :class:`MCSF` and :class:`UnifiedScheduler`)."""
    idx = np.arange(key.size)
    idx_of_rank = np.lexsort((idx, arrival, key))
    rank_of = np.empty(key.size, np.int64)
    rank_of[idx_of_rank] = idx
    return rank_of, idx_of_rank


def _policy(kind: str) -> MCSF | UnifiedScheduler:
    if kind not in CONFIGS:
        raise KeySearchError(f"unknown key decoder {kind!r}; choose one of {', '.join(CONFIGS)}")
    cfg = CONFIGS[kind]
    p: MCSF | UnifiedScheduler
    p = MCSF() if cfg is None else UnifiedScheduler(**cfg)
    p.name, p.hypothetical = f"key-{kind}", True
    return p


class KeyedRank(UnifiedScheduler):
    """The Python reference of a ``rank*``/``prefill`` decoder: the configuration of
    :data:`CONFIGS` ranking by ``key`` (a subclass, so it always runs the Python path)."""

    hypothetical = True

    def __init__(self, kind: str, key: np.ndarray):
        cfg = CONFIGS[kind]
        if not isinstance(cfg, dict):
            raise KeySearchError("KeyedRank: the mcsf decoders are lns_decode.KeyedMCSF")
        super().__init__(**cfg)
        self._key = np.asarray(key, np.float64)

    def bind(self, view: SimView) -> None:
        super().bind(view)
        self.rank_of, self.idx_of_rank = key_ranks(self._key, np.asarray(view.arrival))
        self.rank_list = self.rank_of.tolist()


class KernelDecoder:
    """One compiled decoder bound to ``inst`` (module docstring): :meth:`decode` turns a key
    into the schedule the kernel builds with that ranking."""

    def __init__(self, inst: Instance, kind: str):
        self.inst, self.kind = inst, kind
        self.policy = _policy(kind)
        self.known = known_outputs(inst, True, True)
        self.policy.bind(SimView(_Sim(inst), self.known))
        if not HAVE_NUMBA or fast_config(inst, self.policy) is None:
            raise KeySearchError(f"key decoder {kind}: no compiled kernel for this instance "
                                 "(numba missing, or a cost model or limit it does not cover)")
        self.limit = 50 * (int(inst.output.sum()) + int(inst.prompt.sum())) + 1000
        self.arrival = np.asarray(inst.arrival, np.float64)

    def decode(self, key: np.ndarray) -> Schedule | None:
        """The schedule of ``key``, or None when the kernel gives up (a stall, a livelock)."""
        p = self.policy
        p.rank_of, p.idx_of_rank = key_ranks(np.asarray(key, np.float64), self.arrival)
        return simulate_fast(self.inst, p, self.known, self.limit)


class PrefillDecoder:
    """A prefill-first decoder (:func:`optsched.search.prefill_phase.prefill_first_schedule`, in
    Python: ~0.2 s a 1,200-request window), with :class:`KernelDecoder`'s interface."""

    def __init__(self, inst: Instance, kind: str):
        self.inst, self.kind = inst, kind
        self.pack, self.chunk = PREFILL_PACK[kind]
        self.arrival = np.asarray(inst.arrival, np.float64)

    def decode(self, key: np.ndarray) -> Schedule | None:
        try:
            return prefill_first_schedule(self.inst, key, self.pack, self.chunk)
        except PrefillPhaseError:
            return None


# The decoders of this module, registered (optsched/search/decoder.py) with the objectives the
# key search (and LNS) try them for by default, in rank order: the seed keys with each in
# turn. For mean and P99 TTFT the prefill-first shape first (every first token before the
# other tokens), then MC-SF; for the other objectives MC-SF and the ranking kernels, with and
# without a residency cap (``rank-cap4``, ``rank-cap8``). ``rank-pc`` is
# tried only when named: on the bench's trace windows it was 1.3-1.7x worse than ``rank`` on
# total latency. ``mcsf`` resumes by the Python path (lns_decode.PolicyDecoder, batch for
# batch the kernel's schedules): LNS's decoder for every objective.
_TTFT = (Objective.MEAN_TTFT.value, Objective.P99_TTFT.value)
_NOT_TTFT = tuple(o for o in OBJECTIVES if o not in _TTFT)
for _rank, _kind in enumerate(PREFILL_PACK, start=10):
    register_decoder(_kind, f"prefill-first in key order, (pack, chunk) = {PREFILL_PACK[_kind]} "
                     "(optsched.search.prefill_phase)", rank=_rank, key_search=_TTFT)(PrefillDecoder)
register_decoder("mcsf", "MC-SF's admission rule in key order, true output lengths (compiled; "
                 "resumes by the Python path)", rank=20, key_search=OBJECTIVES, lns=OBJECTIVES,
                 resumable=PolicyDecoder)(KernelDecoder)
register_decoder("rank", "InferMax's ranking scheduler in key order, P = 512 (compiled)",
                 rank=21, key_search=_NOT_TTFT)(KernelDecoder)
register_decoder("rank-ef", "the rank decoder reserving I + O - 1 at admission (compiled)",
                 rank=22, key_search=_NOT_TTFT)(KernelDecoder)
register_decoder("rank-pc", "the rank decoder with whole prompts per batch, P = C (compiled)",
                 rank=23)(KernelDecoder)
for _rank, _cap in enumerate((4, 8), start=24):
    register_decoder(f"rank-cap{_cap}", f"the rank decoder with at most {_cap} requests holding "
                     "KV (compiled)", rank=_rank, key_search=_NOT_TTFT)(KernelDecoder)


def make_decoder(inst: Instance, kind: str) -> Decoder:
    """The registered decoder named ``kind`` (:data:`optsched.search.decoder.DECODERS`) bound
    to ``inst``."""
    return get_decoder(kind).make(inst, kind)


@dataclass(frozen=True)
class KeySearchResult:
    """The best schedule found, its evaluator objective, the (key, decoder) that built it and
    the move that found it (``keysearch key NAME (DECODER)`` for an unperturbed seed key,
    ``keysearch MOVE (DECODER)`` for a move)."""

    schedule: Schedule
    objective: float
    key: np.ndarray
    decoder: str
    method: str
    decodes: int
    improvements: int
    seconds: float
    history: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.key.shape != (len(self.schedule.ids),):
            raise KeySearchError(f"key search: key of {self.key.size} numbers for "
                                 f"{len(self.schedule.ids)} requests")
        if not self.decodes >= 0 or math.isnan(self.objective):
            raise KeySearchError("key search: a result needs an objective and decodes >= 0")


class _Search:
    def __init__(self, inst: Instance, objective: str, seed: int, deadline: float,
                 max_iterations: int | None, decoders: tuple[str, ...], progress: bool):
        self.inst, self.obj, self.deadline = inst, objective, deadline
        self.cap, self.progress = max_iterations, progress
        self.rng = np.random.default_rng(seed)
        self.dec: dict[str, Decoder] = {}
        why = f"no key decoder for {objective}"
        for k in decoders:
            try:
                self.dec[k] = make_decoder(inst, k)
            except DecoderError as e:
                why = str(e)
        if not self.dec:
            raise KeySearchError(why)
        self.order = np.argsort(inst.arrival, kind="stable")
        self.pos = np.empty(inst.n, np.int64)  # position of each request in arrival order
        self.pos[self.order] = np.arange(inst.n)
        self.decodes = 0
        self.t0 = time.perf_counter()
        self.last = 0.0  # seconds of the last decode + evaluation

    def _log(self, msg: str) -> None:
        if self.progress:
            print(f"keysearch: {msg}", file=sys.stderr, flush=True)

    def more(self) -> bool:
        """Time (and iterations) for one more candidate."""
        return (time.perf_counter() + self.last < self.deadline
                and (self.cap is None or self.decodes < self.cap))

    def value(self, kind: str, key: np.ndarray) -> tuple[float, Schedule | None]:
        """The evaluator's objective of ``key`` decoded by ``kind`` (inf if none)."""
        t = time.perf_counter()
        s = self.dec[kind].decode(key)
        self.decodes += 1
        if s is None:
            self.last = time.perf_counter() - t
            return math.inf, None
        ev = evaluate(self.inst, s)
        self.last = time.perf_counter() - t
        return (ev.objective(self.obj), s) if ev.feasible else (math.inf, None)

    def near(self, i: int, width: int) -> int:
        """A request arriving within ``width`` positions of ``i`` in arrival order."""
        n = self.inst.n
        p = int(self.pos[i]) + int(self.rng.integers(-width, width + 1))
        return int(self.order[min(n - 1, max(0, p))])

    def move(self, key: np.ndarray, seeds: list[np.ndarray]) -> tuple[str, np.ndarray]:
        """One random neighbour of ``key`` (module docstring)."""
        n, rng = self.inst.n, self.rng
        key = key.copy()
        kind = ("shift", "shift", "swap", "re-key window", "block")[int(rng.integers(5))]
        width = int(rng.choice((4, 16, 64)))
        if kind in ("shift", "swap"):
            i = int(rng.integers(n))
            j = self.near(i, width)
            if kind == "swap":
                key[i], key[j] = key[j], key[i]
            else:
                key[i] = np.nextafter(key[j], -math.inf if rng.random() < 0.5 else math.inf)
            return kind, key
        size = max(2, int(rng.integers(2, max(3, n // 10))))
        lo = int(rng.integers(0, max(1, n - size + 1)))
        idx = self.order[lo:lo + size]
        if kind == "block":
            key[idx] *= np.exp(0.5 * rng.standard_normal(idx.size))
            return kind, key
        w = rng.dirichlet(np.ones(len(seeds)))
        other = sum(wi * _ranks(s[idx]) for wi, s in zip(w, seeds))
        vals = np.sort(key[idx])
        key[idx[np.argsort(other, kind="stable")]] = vals
        return kind, key


def _distinct(keys: dict[str, np.ndarray], arrival: np.ndarray) -> dict[str, np.ndarray]:
    """``keys`` without those ranking the requests as an earlier one does (same schedule)."""
    out: dict[str, np.ndarray] = {}
    seen: list[np.ndarray] = []
    for name, k in keys.items():
        r = key_ranks(np.asarray(k, np.float64), arrival)[0]
        if not any(np.array_equal(r, q) for q in seen):
            seen.append(r)
            out[name] = k
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    r = np.empty(x.size)
    r[np.argsort(x, kind="stable")] = np.arange(x.size)
    return r / max(1, x.size)


def key_search(inst: Instance, objective: str, *, deadline: float, seed: int = 0,
               max_iterations: int | None = None, decoders: tuple[str, ...] | None = None,
               extra_keys: dict[str, np.ndarray] | None = None,
               progress: bool = False) -> KeySearchResult | None:
    """Seed keys x decoders, then local search around the best (module docstring) until
    ``deadline`` (a ``time.perf_counter()`` value) or ``max_iterations`` decodes. None when
    no candidate decoded in time. Raises :class:`KeySearchError` when no kernel applies."""

    se = _Search(inst, objective, seed, deadline, max_iterations,
                 decoders or default_decoders(objective, "key"), progress)
    decs = tuple(se.dec)
    arrival = np.asarray(inst.arrival, np.float64)
    keys = _distinct({**seed_keys(inst, objective), "prompt": inst.prompt.astype(np.float64),
                      **(extra_keys or {})}, arrival)
    best, best_s, best_key, best_dec, method = math.inf, None, None, decs[0], ""
    history: list[tuple[float, float]] = []
    imp = 0
    for dec in decs:
        for name, k in keys.items():
            if not se.more():
                break
            v, s = se.value(dec, k)
            if v < best:
                best, best_s, best_key, best_dec = v, s, k, dec
                method = f"keysearch key {name} ({dec})"
                history.append((time.perf_counter() - se.t0, best))
    if best_key is None or best_s is None:
        return None
    se._log(f"{method}: {best:.6g} after {se.decodes} decodes")
    seeds = list(keys.values())
    # rank form (the kernel's own order, ties included): shifts and swaps act on positions
    key = key_ranks(np.asarray(best_key, np.float64), arrival)[0].astype(np.float64)
    while se.more():
        if se.rng.random() < 0.02 and len(decs) > 1:
            kind, dec, cand = "decoder", decs[int(se.rng.integers(len(decs)))], key
        else:
            (kind, cand), dec = se.move(key, seeds), best_dec
        v, s = se.value(dec, cand)
        if s is not None and v < best - 1e-12 * max(1.0, abs(best)):
            best, best_s, key, best_dec = v, s, cand, dec
            method, imp = f"keysearch {kind} ({dec})", imp + 1
            history.append((time.perf_counter() - se.t0, best))
    se._log(f"done: {se.decodes} decodes, {imp} improvements, {method}: {best:.6g}")
    return KeySearchResult(best_s, best, key, best_dec, method, se.decodes, imp,
                           time.perf_counter() - se.t0, history)


__all__ = ["CONFIGS", "KernelDecoder", "KeySearchError", "KeySearchResult", "KeyedRank",
           "PREFILL_PACK", "PrefillDecoder", "default_decoders", "key_ranks", "key_search",
           "make_decoder"]


def ttft_objective(objective: str) -> bool:
    """Mean and P99 TTFT depend only on the batches that complete prompts: the prefill-first
    decoders and the prompts' works serve both."""
    return objective in (Objective.MEAN_TTFT, Objective.P99_TTFT)


def seed_keys(inst: Instance, objective: str) -> dict[str, np.ndarray]:
    """The first priority keys tried (smallest first): remaining work -- each request's fluid
    work under three sharing rules (bounds.md B7; prefill work only for mean TTFT) and its
    entry costs alone --, its memory volume (KV held x batches, F3; the prompt's for mean
    TTFT), MC-SF's rule (output length) and arrival (FCFS)."""

    f = Floors.of(inst)
    kind = "mean-ttft" if ttft_objective(objective) else "total-latency"
    keys = {f"work{mix}": job_works(f, kind, mix)
            for mix in ((1.0, 0.0, 0.0), (0.5, 0.0, 0.5), (0.0, 0.0, 1.0))}
    keys["entry"] = f.prefill_entry_cost if kind == Objective.MEAN_TTFT else f.entry_cost
    keys["memory-volume"] = np.asarray(f.prefill_area if kind == Objective.MEAN_TTFT else f.area,
                                       dtype=np.float64)
    keys["output"] = inst.output.astype(np.float64)
    keys["arrival"] = inst.arrival.astype(np.float64)
    return {k: np.asarray(v, dtype=np.float64) for k, v in keys.items()}
