"""Large-neighbourhood search: improve a feasible schedule by re-solving windows exactly.

Starting from a feasible schedule (a policy's, or a file), repeatedly pick a *window* -- a
span of consecutive batches ``[j0, j1)`` touching at most ``max_requests`` requests -- and
re-solve it exactly with the exhaustive search
(:func:`optsched.formulations.exhaustive.search_between`) while every other batch stays as it is:

* the replay (docs/semantics.md section 3) gives each touched request's state ``(g, m)``
  before batch ``j0`` and after batch ``j1 - 1``;
* the subproblem is the touched requests with arrivals shifted by the previous batch's end
  ``t`` (``max(0, a - t)``), the KV capacity lowered by the footprint of every *untouched*
  resident request (it holds its ``m`` tokens throughout the window), and the task "go from
  the start states to exactly the end states at least cost" -- reaching the *same* states
  means every later batch sees the state it saw before, so it stays valid;
* the window's batches are replaced by the solution, every start is left to "as early as
  possible" (semantics section 4), and the whole schedule is replayed by
  :func:`optsched.evaluate`; it is kept only if feasible and strictly better.

A second family works at trace scale, where nearly every batch is crowded: **priority
search**. A schedule is decoded from a priority key (one number per request, smallest first)
by the simulator (:mod:`optsched.search.lns_decode`): MC-SF's admission rule (keep the running
requests, admit waiting ones smallest key first while KV stays <= M at every future
completion, true output lengths; never evicts) or, for mean TTFT first, TTFT-first (prefill
every arrival at once in key order, evicting the largest key). The seed keys
(:func:`seed_keys`) are remaining work (each request's fluid work under the sharing rules of
``formulations/bounds.md`` B7, the quantity the ``srpt``/``mbt`` bounds schedule, and its
entry costs alone), memory volume (F3), MC-SF's rule (output length) and arrival; each is
decoded with the objective's first decoder, the best one with the other. Then random moves
around the best key, each naming its ``method``:

* ``block``: the keys of a block of consecutive arrivals multiplied by random factors;
* ``crowded batch``: the same for the requests of one of the 10% most crowded batches of the
  best schedule, freeing them to be re-inserted elsewhere;
* ``key mix``: a random convex combination of the seed keys' ranks;
* ``time window``: the best schedule's batches before a random handover point (no (re)fill
  under way) are kept, the requests touched in the next stretch of time (``priority_block``
  of the span) have their keys perturbed, and the decoder resumes from the replayed state --
  so a schedule no key produced (a policy's, an exact window's) is improved locally.

For mean TTFT, first of all, the prefill-first SRPT decoder (:mod:`optsched.search.prefill_srpt`:
chunks cut to end at the arrival that overtakes) runs over its (margin, pack) grid for at most
a quarter of the time limit (method ``prefill-srpt (margin M, pack P)``).

Before these Python decoders, on instances of at least ``kernel_min_requests`` requests, the
**key search** of :mod:`optsched.search.keysearch` gets ``kernel_share`` of the time: the same kind
of keys decoded by the compiled MC-SF and ranking kernels (~20 ms a 1,200-request window
instead of ~0.5 s) or, for mean TTFT, as prefill-first schedules
(:mod:`optsched.search.prefill_phase`), with local moves on the key; its result (method
``keysearch ...``) is where the Python priority phase starts.

Every decoded schedule is judged by :func:`optsched.evaluate` and kept only if
strictly better; the window phase then continues from the best schedule. By default the
priority search gets the share of the start schedule's batches too crowded for an exact
window (at least half the time, at most 95%).

The subproblem is exact for its own cost (the objective's path cost inside the window,
``optsched/formulations/exhaustive/search.py``), which for makespan is the window's duration; the
global objective is judged by ``evaluate`` alone, so the result is never worse than the
start. Seeded (one ``random.Random(seed)``); honours a time limit.
"""

from __future__ import annotations

import bisect
import math
import random
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import OptschedError
from ..evaluation import Evaluation, evaluate
from ..formulations.exhaustive import SearchOptions, search_between
from ..instance import Instance, Request
from ..policies.registry import SimulationTimeout
from ..schedule import Batch, Schedule
from ..solve_types import MODELLED, Objective, Status
from .decoder import default_decoders
from .keysearch import KeySearchError, key_search, seed_keys, ttft_objective
from .lns_decode import decode, in_instance_order
from .prefill_phase import PrefillPhaseError
from .prefill_srpt import GRID, GRID_MIN_CHUNK, prefill_srpt_schedule

State = tuple[int, int]  # (g, m): generated tokens, cached tokens (semantics section 3)
#: the key search is skipped when its share of the time is shorter: a process's first kernel
#: call loads numba and the cached kernels (~1-2 s, optsched/cli/warm.py), which no deadline stops
KERNEL_MIN_SECONDS = 2.0


class LNSError(OptschedError):
    """The start schedule cannot be improved (infeasible, swaps, bad options)."""


@dataclass(frozen=True)
class LNSOptions:
    """Knobs of :func:`improve`."""

    time_limit: float = 10.0
    seed: int = 0
    max_window: int = 4  # batches per window
    max_requests: int = 4  # requests touched by a window
    window_time: float = 1.0  # seconds per exact sub-search at most
    max_states: int = 20_000
    #: stop after this many windows (with it, a run is reproducible whatever the machine's speed)
    max_iterations: int | None = None
    progress: bool = True
    #: share of the time for priority re-ordering moves before the window phase (0: none);
    #: None: the share of the start schedule's batches too crowded for an exact window,
    #: clipped to [0.5, 0.95] (at trace scale nearly every batch is)
    priority_share: float | None = None
    #: a perturbation multiplies the keys of this share of the requests (a consecutive block)
    priority_block: float = 0.1
    #: share of the time for the key search (optsched/search/keysearch.py: compiled kernels, and
    #: prefill-first schedules for mean TTFT) before the priority phase, on instances of at
    #: least ``kernel_min_requests`` requests; 0: none
    kernel_share: float = 0.6
    kernel_min_requests: int = 100

    def __post_init__(self):
        if not self.time_limit > 0:
            raise LNSError(f"lns: time limit must be > 0 seconds, got {self.time_limit:g}")
        for name in ("max_window", "max_requests", "max_states"):
            if getattr(self, name) < 1:
                raise LNSError(f"lns: {name} must be >= 1, got {getattr(self, name)}")
        for name in ("priority_share", "priority_block", "kernel_share"):
            if getattr(self, name) is not None and not 0.0 <= getattr(self, name) <= 1.0:
                raise LNSError(f"lns: {name} must be in [0, 1], got {getattr(self, name)}")


@dataclass(frozen=True)
class LNSResult:
    """Outcome of :func:`improve`: the best schedule found and how the search went."""

    schedule: Schedule
    objective: float
    start_objective: float
    objective_kind: str
    iterations: int
    windows_solved: int
    improvements: int
    runtime: float
    seed: int
    history: list[tuple[float, float]] = field(default_factory=list)  # (seconds, objective)
    #: priority re-orderings decoded, and the key of the best one ("" if none was kept)
    priority_decodes: int = 0
    priority_key: str = ""
    #: the neighbourhood that found the result: "start" (nothing better was found), "priority
    #: key NAME (DECODER)", "block", "crowded batch", "key mix", "time window", "exact window"
    method: str = "start"

    def to_dict(self) -> dict:
        return {"objective": self.objective, "start_objective": self.start_objective,
                "objective_kind": self.objective_kind, "iterations": self.iterations,
                "windows_solved": self.windows_solved, "improvements": self.improvements,
                "priority_decodes": self.priority_decodes, "priority_key": self.priority_key,
                "method": self.method,
                "runtime": self.runtime, "seed": self.seed,
                "improvement": self.start_objective - self.objective}


class _Replay:
    """Per-request states around every batch that touches it (semantics section 3: a batch
    first evicts, then processes ``c`` tokens; ``m = S`` generates a token, ``g = O`` frees)."""

    def __init__(self, inst: Instance, s: Schedule):
        I = [r.prompt for r in inst.requests]
        O = [r.output for r in inst.requests]
        state: list[State] = [(0, 0)] * inst.n
        self.batches: list[list[int]] = [[] for _ in range(inst.n)]  # batches touching r
        self.after: list[list[State]] = [[] for _ in range(inst.n)]
        for j in range(s.n_batches):
            ea, eb = s.evict_ptr[j], s.evict_ptr[j + 1]
            touched = {}
            for r in s.evict_req[ea:eb].tolist():
                state[r] = (state[r][0], 0)
                touched[r] = True
            a, b = s.batch_ptr[j], s.batch_ptr[j + 1]
            for r, c in zip(s.entry_req[a:b].tolist(), s.entry_tokens[a:b].tolist()):
                g, m = state[r]
                m += c
                if m == I[r] + g:
                    g += 1
                    m = 0 if g == O[r] else m
                state[r] = (g, m)
                touched[r] = True
            for r in touched:
                self.batches[r].append(j)
                self.after[r].append(state[r])

    def state_before(self, r: int, j: int) -> State:
        """Request ``r``'s state before batch ``j``."""
        k = bisect.bisect_left(self.batches[r], j)
        return (0, 0) if k == 0 else self.after[r][k - 1]


def _touched(s: Schedule, j0: int, j1: int) -> list[int]:
    a, b = s.batch_ptr[j0], s.batch_ptr[j1]
    ea, eb = s.evict_ptr[j0], s.evict_ptr[j1]
    return sorted(set(s.entry_req[a:b].tolist()) | set(s.evict_req[ea:eb].tolist()))


def _held_kv(inst: Instance, rep: _Replay, j0: int, skip: set[int]) -> int:
    """KV footprint held through the window by resident requests it does not touch."""
    fp = inst.limits.kv_footprint
    return sum(fp(m) for r in range(inst.n) if r not in skip
               for g, m in [rep.state_before(r, j0)] if m > 0)


def _subproblem(inst: Instance, rep: _Replay, touched: list[int], j0: int, j1: int,
                t_prev: float) -> tuple[Instance, list[State], list[State]] | None:
    """The window's touched requests as an instance of their own (module docstring)."""
    M = inst.limits.kv_capacity - _held_kv(inst, rep, j0, set(touched))
    if M < 1:
        return None
    goal = [rep.state_before(r, j1) for r in touched]
    reqs = tuple(_windowed(inst.requests[r], g, t_prev) for r, (g, _) in zip(touched, goal))
    try:
        sub = inst.replace(requests=reqs, limits=replace(inst.limits, kv_capacity=M))
    except OptschedError:  # some touched request's peak no longer fits: nothing to gain
        return None
    start = [rep.state_before(r, j0) for r in touched]
    return sub, start, goal


def _windowed(r: Request, g_goal: int, t_prev: float) -> Request:
    """``r`` as seen by a window ending with ``g_goal`` tokens generated: arrival shifted by
    ``t_prev``; if it does not finish in the window, output ``g_goal + 1`` (it never holds more
    than ``I + g_goal`` tokens there, and the instance checks that peak, not the real one)."""
    out = r.output if g_goal >= r.output else g_goal + 1
    return Request(r.id, max(0.0, r.arrival - t_prev), r.prompt, out)


def _splice(ids: tuple[str, ...], s: Schedule, j0: int, j1: int, window: Schedule
            ) -> Schedule:
    """``s`` with batches ``[j0, j1)`` replaced by ``window``'s, every start left free, listing
    the requests in the instance's order ``ids``."""
    def free(b: Batch) -> Batch:
        return Batch(b.entries, b.evict, None)
    batches = [free(b) for b in s]
    return _free_starts(Schedule.from_batches(batches[:j0] + [free(b) for b in window]
                                              + batches[j1:]), ids)


def _free_starts(s: Schedule, ids: tuple[str, ...]) -> Schedule:
    """Semantics section 4: a batch without a stated start runs as early as possible; for a
    fixed batch sequence this never delays any end (exhaustive.py, R5). The result lists the
    requests in the instance's order ``ids``: a schedule's request index is a position in its
    own ``ids`` (first use, for one built from batches), and the replay (:class:`_Replay`)
    and the decoders read indices as instance positions."""
    return in_instance_order(s, ids).without_starts()


def priority_schedule(inst: Instance, key: np.ndarray, decoder: str = "mcsf",
                      deadline: float | None = None) -> Schedule:
    """The schedule the ``decoder`` (optsched/search/lns_decode.py) builds when it ranks requests by
    ``key`` (stopped with ``SimulationTimeout`` past ``deadline``, a ``time.perf_counter()``
    value)."""
    return decode(inst, decoder, key, deadline=deadline)


def _ranks(key: np.ndarray) -> np.ndarray:
    """``key`` as ranks in [0, 1) (a scale-free form to mix keys of different units)."""
    r = np.empty(key.size)
    r[np.argsort(key, kind="stable")] = np.arange(key.size)
    return r / max(1, key.size)


def _handover_points(inst: Instance, s: Schedule) -> np.ndarray:
    """Batches ``j0`` where a decoder may take over (:mod:`optsched.search.lns_decode`): no request
    is in the middle of a (re)fill before batch ``j0`` (MC-SF's decoder runs every resident
    one token per batch)."""
    I, O = inst.prompt.tolist(), inst.output.tolist()
    g, m = [0] * inst.n, [0] * inst.n
    partial: set[int] = set()  # (re)fill under way: 0 < m, and m < S - 1 or no token yet
    ok = []
    for j in range(s.n_batches):
        if not partial and j > 0:
            ok.append(j)
        for r in s.evict_req[s.evict_ptr[j]:s.evict_ptr[j + 1]].tolist():
            m[r] = 0
            partial.discard(r)
        a, b = s.batch_ptr[j], s.batch_ptr[j + 1]
        for r, c in zip(s.entry_req[a:b].tolist(), s.entry_tokens[a:b].tolist()):
            m[r] += c
            if m[r] == I[r] + g[r]:
                g[r] += 1
                m[r] = 0 if g[r] == O[r] else m[r]
            if 0 < m[r] and (g[r] == 0 or m[r] < I[r] + g[r] - 1):
                partial.add(r)
            else:
                partial.discard(r)
    return np.asarray(ok, np.int64)


class _LNS:
    def __init__(self, inst: Instance, objective: str, opts: LNSOptions):
        self.inst, self.obj, self.opts = inst, objective, opts
        self.rng = random.Random(opts.seed)
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + opts.time_limit
        self._small: np.ndarray | None = None  # batches a window may start at (per schedule)
        self.solved, self.decodes, self.key_name = 0, 0, ""
        #: the neighbourhood that found the best schedule so far ("start": none improved it)
        self.method = "start"
        self.order = np.argsort(inst.arrival, kind="stable")
        # a decode of the whole instance is not started unless this much time is left (the
        # measured time of the last decode replaces the guess after the first one)
        self.decode_seconds: float = 1e-3 * inst.n

    def _log(self, msg: str) -> None:
        if self.opts.progress:
            print(f"lns: {msg}", file=sys.stderr, flush=True)

    def _window(self, s: Schedule) -> tuple[int, int, list[int]] | None:
        """A random span of batches touching at most ``max_requests`` requests, starting at a
        batch that touches at most that many (a request is processed or evicted at most once
        per batch, semantics section 3, so entries + evictions count the requests)."""
        small = self._small_batches(s)
        if not small.size:
            return None
        j0 = int(small[self.rng.randrange(small.size)])
        j1 = min(s.n_batches, j0 + self.rng.randint(1, self.opts.max_window))
        while j1 > j0:
            touched = _touched(s, j0, j1)
            if len(touched) <= self.opts.max_requests:
                return j0, j1, touched
            j1 -= 1
        return None

    def _small_batches(self, s: Schedule) -> np.ndarray:
        if self._small is None:
            count = np.diff(s.batch_ptr) + np.diff(s.evict_ptr)
            self._small = np.flatnonzero(count <= self.opts.max_requests)
        return self._small

    def _try(self, s: Schedule, ev, rep: _Replay):
        """Re-solve one window; the spliced schedule and its evaluation, or None."""
        win = self._window(s)
        if win is None:
            return None
        j0, j1, touched = win
        t_prev = float(ev.batch_end[j0 - 1]) if j0 else 0.0
        sp = _subproblem(self.inst, rep, touched, j0, j1, t_prev)
        left = self.deadline - time.perf_counter()
        if sp is None or left <= 0:
            return None
        sub, start, goal = sp
        # a percentile is no sum the exact search prices: its windows minimise mean TTFT and the
        # splice is kept only when the evaluator's objective improves
        res = search_between(sub, self.obj if self.obj in MODELLED else Objective.MEAN_TTFT,
                             start, goal, SearchOptions(
            max_states=self.opts.max_states, time_limit=min(self.opts.window_time, left)))
        if res.status != Status.OPTIMAL or res.schedule is None:
            return None
        self.solved += 1
        cand = _splice(self.inst.ids, s, j0, j1, res.schedule)
        cev = evaluate(self.inst, cand)
        return (cand, cev) if cev.feasible else None

    def _decode(self, dec: str, key: np.ndarray, best: float, prefix: Schedule | None = None,
                j0: int = 0):
        """Decode ``key`` with decoder ``dec`` (after ``prefix``'s first ``j0`` batches) if the
        time left allows one more decode; (schedule, evaluation) when it is feasible and
        strictly better than ``best``, else None."""
        left = self.deadline - time.perf_counter()
        if left <= 0 or left < self.decode_seconds:
            return None
        t = time.perf_counter()
        try:
            cand = _free_starts(decode(self.inst, dec, key, prefix, j0, self.deadline),
                                self.inst.ids)
        except SimulationTimeout:  # the time limit came first
            self.decode_seconds = math.inf
            return None
        except OptschedError as e:  # the decoder cannot run this instance: no such moves
            if prefix is not None:  # only this resumed candidate is lost
                self._log(f"time window from batch {j0}: {e}")
                return None
            self._log(f"priority decoder {dec} stopped: {e}")
            self.decode_seconds = math.inf
            return None
        self.decode_seconds = time.perf_counter() - t
        self.decodes += 1
        cev = evaluate(self.inst, cand)
        if cev.feasible and cev.objective(self.obj) < best - 1e-9 * max(1.0, abs(best)):
            return cand, cev
        return None

    def _prefill_srpt_phase(self, best: float, cap: int | None):
        """TTFT objectives only: the prefill-first SRPT decoder (:mod:`optsched.search.prefill_srpt`)
        over its (margin, pack) grid, for at most a quarter of the time limit: (schedule,
        evaluation, objective, decodes) when one beats ``best``, else None."""
        if not ttft_objective(self.obj):
            return None
        until, last, n_dec = self.t0 + 0.25 * self.opts.time_limit, 0.0, 0
        got = None
        for margin, pack in GRID:
            if time.perf_counter() + last > until or (cap is not None and n_dec >= cap):
                break
            t = time.perf_counter()
            try:
                cand = _free_starts(prefill_srpt_schedule(self.inst, margin, GRID_MIN_CHUNK, pack),
                                    self.inst.ids)
            except PrefillPhaseError as e:
                self._log(f"no prefill-srpt: {e}")
                return None
            n_dec += 1
            cev = evaluate(self.inst, cand)
            last = time.perf_counter() - t
            if cev.feasible and cev.objective(self.obj) < best - 1e-9 * max(1.0, abs(best)):
                best = cev.objective(self.obj)
                got = (cand, cev, best)
                self.method = f"prefill-srpt (margin {margin}, pack {pack:g})"
        self.decodes += n_dec
        if got is None:
            return None
        self._log(f"{self.method}: {got[2]:.6g}")
        return (*got, n_dec)

    def _kernel_phase(self, best: float, cap: int | None):
        """The compiled key search (:mod:`optsched.search.keysearch`) for its share of the time:
        (schedule, evaluation, objective, decodes) when it beats ``best``, else None."""

        share = self.opts.kernel_share
        if share <= 0 or self.inst.n < self.opts.kernel_min_requests:
            return None
        if share * self.opts.time_limit < KERNEL_MIN_SECONDS:
            self._log(f"no compiled key search: {share * self.opts.time_limit:.1f} s is less "
                      f"than loading the kernels may take ({KERNEL_MIN_SECONDS:g} s)")
            return None
        try:
            res = key_search(self.inst, self.obj, seed=self.opts.seed,
                             deadline=self.t0 + share * self.opts.time_limit,
                             max_iterations=cap, progress=self.opts.progress)
        except KeySearchError as e:
            self._log(f"no compiled key search: {e}")
            return None
        if res is None:
            return None
        self.decodes += res.decodes
        if not res.objective < best - 1e-9 * max(1.0, abs(best)):
            return None
        s = _free_starts(res.schedule, self.inst.ids)
        ev = evaluate(self.inst, s)
        if not ev.feasible or ev.objective(self.obj) > res.objective:
            return None  # freeing the starts never delays an end (R5): not expected
        self.method = res.method  # key_name stays the Python phase's (a seed key name)
        self._log(f"{res.method}: {ev.objective(self.obj):.6g}")
        return s, ev, ev.objective(self.obj), res.decodes

    def _priority_share(self, s: Schedule) -> float:
        """The option, or by default the share of batches too crowded for a window."""
        if self.opts.priority_share is not None:
            return self.opts.priority_share
        crowded = 1.0 - self._small_batches(s).size / max(1, s.n_batches)
        self._small = None
        return min(0.95, max(0.5, crowded))

    def _decoders(self) -> tuple[str, ...]:
        """The registered decoders LNS tries for the objective, in rank order
        (:func:`optsched.search.decoder.default_decoders`): TTFT-first's, which evicts for
        arrivals, first for mean and P99 TTFT only, then MC-SF's."""
        return default_decoders(self.obj, "lns")

    def _move(self, s: Schedule, nprng, key: np.ndarray, seeds: dict[str, np.ndarray],
              handover: np.ndarray, ev):
        """One random neighbour of the best key: (method, key, prefix, j0) (module docstring).
        ``block``: a block of consecutive arrivals re-weighted; ``crowded batch``: the
        requests of one of the most crowded batches re-weighted; ``key mix``: a random convex
        combination of the seed keys' ranks; ``time window``: the batches before a random
        handover point kept, the requests touched in the next stretch of time re-weighted."""
        n = self.inst.n
        kinds = ["block", "crowded batch", "key mix"] + (["time window"] if handover.size else [])
        kind = kinds[int(nprng.integers(len(kinds)))]
        key = key.copy()
        if kind == "key mix":
            w = nprng.dirichlet(np.ones(len(seeds)))
            return kind, sum(wi * _ranks(k) for wi, k in zip(w, seeds.values())), None, 0
        if kind == "block":
            block = max(2, int(round(self.opts.priority_block * n)))
            lo = int(nprng.integers(0, max(1, n - block + 1)))
            idx = self.order[lo:lo + block]
        elif kind == "crowded batch":
            size = np.diff(s.batch_ptr)
            top = np.flatnonzero(size >= np.quantile(size, 0.9))
            j = int(top[nprng.integers(top.size)])
            idx = s.entry_req[s.batch_ptr[j]:s.batch_ptr[j + 1]]
        else:
            j0 = int(handover[nprng.integers(handover.size)])
            t0 = float(ev.batch_start[j0])
            span = float(ev.batch_end[-1] - t0) * self.opts.priority_block
            j1 = int(np.searchsorted(ev.batch_start, t0 + span, side="right"))
            idx = np.unique(s.entry_req[s.batch_ptr[j0]:s.batch_ptr[max(j1, j0 + 1)]])
            key[idx] *= np.exp(0.5 * nprng.standard_normal(idx.size))
            return kind, key, s, j0
        key[idx] *= np.exp(0.5 * nprng.standard_normal(len(idx)))
        return kind, key, None, 0

    def _priority_phase(self, s: Schedule, ev, best: float, history, it: int, cap):
        """Seed keys with each decoder, then random moves around the best key (module
        docstring)."""
        stop = self.t0 + self.share * self.opts.time_limit
        nprng = np.random.default_rng(self.rng.randrange(2**32))
        self.order = np.argsort(self.inst.arrival, kind="stable")
        seeds = seed_keys(self.inst, self.obj)
        best_key: np.ndarray | None = None
        best_dec = self._decoders()[0]
        imp = 0

        def more() -> bool:  # time for one more decode (not a spin until the deadline)
            now = time.perf_counter()
            return (now < stop and (cap is None or it < cap)
                    and now + self.decode_seconds <= self.deadline)

        # every seed key with the first decoder, then the best key with the others
        tries = [(d, k) for d in self._decoders()[:1] for k in seeds] + [
            (d, "") for d in self._decoders()[1:]]
        for dec, name in tries:
            if not more():
                break
            it += 1
            name = name or self.key_name.split(" (")[0] or next(iter(seeds))
            key = seeds[name]
            got = self._decode(dec, key, best)
            if best_key is None:
                best_key = key
            if got is not None:
                s, ev = got
                best, best_key, best_dec = ev.objective(self.obj), key, dec
                self.key_name, self.method = f"{name} ({dec})", f"priority key {name} ({dec})"
                imp += 1
                history.append((time.perf_counter() - self.t0, best))
                self._log(f"priority key {name} ({dec}): {best:.6g}")
        handover = _handover_points(self.inst, s)
        while best_key is not None and self.inst.n > 1 and more():
            it += 1
            kind, key, prefix, j0 = self._move(s, nprng, best_key, seeds, handover, ev)
            got = self._decode(best_dec, key, best, prefix, j0)
            if got is None:
                continue
            s, ev = got
            best, best_key, self.method = ev.objective(self.obj), key, kind
            self.key_name = self.key_name.removesuffix(" perturbed") + " perturbed"
            handover = _handover_points(self.inst, s)
            imp += 1
            history.append((time.perf_counter() - self.t0, best))
            self._log(f"iteration {it}: {kind} improved to {best:.6g}")
        return s, ev, best, it, imp

    def run(self, schedule: Schedule, start_obj: float) -> LNSResult:
        """Search from ``schedule``, whose objective (replayed by the caller) is ``start_obj``."""
        s = _free_starts(schedule, self.inst.ids)
        ev = evaluate(self.inst, s)
        best = ev.objective(self.obj)
        it, self.solved, imp, last_log = 0, 0, 0, self.t0
        history = [(0.0, best)]
        cap = self.opts.max_iterations
        self.share = self._priority_share(s)
        for phase in (self._prefill_srpt_phase, self._kernel_phase):
            got = phase(best, cap)
            if got is not None:
                s, ev, best, n_dec = got
                it += n_dec
                imp += 1
                history.append((time.perf_counter() - self.t0, best))
        if self.share > 0:
            s, ev, best, it, imp0 = self._priority_phase(s, ev, best, history, it, cap)
            imp += imp0
        rep = _Replay(self.inst, s)
        if not self._small_batches(s).size:
            self._log(f"no batch touches <= {self.opts.max_requests} requests: nothing to re-solve")
        while (time.perf_counter() < self.deadline and self._small_batches(s).size
               and (cap is None or it < cap)):
            it += 1
            got = self._try(s, ev, rep)
            if got is not None and got[1].objective(self.obj) < best - 1e-9 * max(1.0, abs(best)):
                s, ev = got
                best = ev.objective(self.obj)
                rep = _Replay(self.inst, s)
                self._small = None
                self.method = "exact window"
                imp += 1
                history.append((time.perf_counter() - self.t0, best))
                self._log(f"iteration {it}: improved to {best:.6g} ({s.n_batches} batches)")
            if time.perf_counter() - last_log > 5:
                last_log = time.perf_counter()
                self._log(f"{it} iterations, {self.solved} windows solved, {imp} improvements, "
                          f"objective {best:.6g}")
        if best > start_obj:  # freeing the starts can only help (R5); keep the original if not
            s, best, self.method = schedule, start_obj, "start"
        self._log(f"done: {it} iterations, {self.solved} windows solved, {self.decodes} "
                  f"priority decodes, {imp} improvements, objective {start_obj:.6g} -> "
                  f"{best:.6g}")
        return LNSResult(s, best, start_obj, self.obj, it, self.solved, imp,
                         time.perf_counter() - self.t0, self.opts.seed, history,
                         self.decodes, self.key_name, self.method)


def improve(instance: Instance, schedule: Schedule, objective: str = "makespan",
            options: LNSOptions | None = None, *, evaluation: Evaluation | None = None
            ) -> LNSResult:
    """Large-neighbourhood search from ``schedule`` (module docstring); the result is
    replayed by :func:`optsched.evaluate` and never worse than ``schedule``.
    ``evaluation``: the schedule's replay when the caller has it (the solve pipeline's
    warm start), so that it is not replayed again."""
    if schedule.has_swaps or instance.limits.swapping:
        raise LNSError("lns: schedules with swap preemption are not supported")
    instance.require_one_engine("lns (large-neighbourhood search)")  # section 6, clusters
    if schedule.has_hidden or instance.limits.hidden_cache:
        raise LNSError("lns: hidden cache is not supported (its windows are solved by the "
                       "KV-only exhaustive search)")
    ev = evaluation if evaluation is not None else evaluate(instance, schedule)
    if not ev.feasible:
        raise LNSError(f"lns: the start schedule is infeasible: {ev.violations[0]}")
    if math.isnan(ev.objective(objective)):
        raise LNSError(f"lns: the start schedule has no {objective} value")
    return _LNS(instance, objective, options or LNSOptions()).run(schedule,
                                                                  ev.objective(objective))


__all__ = ["LNSError", "LNSOptions", "LNSResult", "improve"]
