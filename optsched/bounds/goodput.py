"""A certified UPPER bound on SLO goodput: how many requests any schedule can serve within
their TTFT SLO, then within both their TTFT and their TPOT / TBT SLOs
(``formulations/bounds.md`` B12). A TBT SLO bounds every gap between a request's tokens
(its longest, ``max_tbt``, docs/semantics.md section 4).

**The interface** (not a rung of the lower-bound ladder: it bounds a *count* from above). A
goodput upper bound is a :class:`GoodputUpperBound`: a function ``(instance, ttft=None,
tpot=None, tbt=None) -> GoodputBound``, the SLO arguments being defaults for requests that do
not set their own (:class:`Slos`), whose counts no feasible schedule of the instance beats:
``ttft`` >= the requests any schedule serves within their TTFT SLO, ``both`` >= those within
all their SLOs (``GoodputBound.attainment`` and ``.share`` the same as shares). The capacity
ceiling (:func:`optsched.serving.ceiling.ceiling`, ``optsched capacity --ceiling``) takes any
such function (``upper=``); :func:`goodput_bound` (B12, below) is the one built in, and the
one ``compare``'s goodput gap reads. Its validity tests (``tests/test_goodput_bound.py``,
``tests/test_goodput_memory.py``) hold the counts above every policy's and above the best
order found by search on small instances; a new goodput bound is checked the same way.

* **Own floor** (B12a): request ``i`` meets its TTFT SLO ``s_i`` only if its first-token
  chain floor (F5, ``Floors.prefill_chain``) is at most ``s_i``; its TPOT SLO only if its
  token-chain floor over ``O - 1`` steps is at most ``tpot_i``; a TBT SLO only if the
  cheapest possible generating step after its first token (``tbt_floor``) is at most it.
* **Counting** (B12b): under B7's sharing rule request ``i`` receives at least ``w_i`` time
  (``srpt.job_works``, TTFT) in disjoint pieces of one server between ``a_i`` and its first
  token. The requests meeting their TTFT SLO therefore form a feasible preemptive
  one-machine schedule with windows ``[a_i, a_i + s_i]``, so for every interval
  ``[t1, t2]`` the work of those whose window lies inside it is at most ``t2 - t1``
  (Horn 1974). At least ``k(t1, t2)`` of the contained requests miss, ``k`` the fewest
  (largest-work first) to drop to fit; contained sets of disjoint intervals are disjoint, so
  misses add up over a family of disjoint intervals; the best family on a grid of endpoints
  is a weighted interval DP (:func:`counting_misses`).

* **With prefix reuse** (B12r): B12a-c on B19's reuse floors (:func:`reuse_floors`): a
  request's first-token chain computes only its tokens after the leading blocks it shares
  with some other request (every such block taken as a hit, and at least its last token),
  its generating steps refill only after its shareable blocks, and its B7 works charge its
  own computed tokens and, of each resident block it holds, ``b / n_x``. B12d (B10's
  frontier) has no reuse version and is skipped. Valid whatever the cache holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..instance import Instance
from .floors import Floors
from .srpt import MIXES

#: endpoints of the counting grid: None = every release and deadline, or as many quantiles
#: of them as the DP's budget allows (``goodput_dp.grid_points``, always containing the 96
#: quantiles used before the DP was vectorised); any grid is valid, a finer one is tighter
GRID: int | None = None


class GoodputError(ValueError):
    """A bad SLO setting for the goodput bound."""


@dataclass(frozen=True)
class Slos:
    """Per-request SLOs (``inf`` = none); instance fields first, the defaults where absent
    (docs/semantics.md section 4). ``tbt`` is the TBT SLO of Apt-Serve (not a field), on the
    longest gap between tokens."""

    ttft: np.ndarray
    tpot: np.ndarray
    tbt: np.ndarray
    has: np.ndarray  # the request has at least one SLO

    def __post_init__(self) -> None:
        for name in ("ttft", "tpot", "tbt"):
            v = getattr(self, name)
            if np.any(np.isnan(v)) or np.any(v <= 0):
                raise GoodputError(f"goodput bound: {name} SLOs must be > 0")

    @classmethod
    def of(cls, instance: Instance, ttft: float | None = None, tpot: float | None = None,
           tbt: float | None = None) -> Slos:
        for name, v in (("ttft", ttft), ("tpot", tpot), ("tbt", tbt)):
            if v is not None and not (math.isfinite(v) and v > 0):
                raise GoodputError(f"--{name}-slo must be a finite number > 0, got {v!r}")

        def field(name: str, default: float | None) -> np.ndarray:
            vals = [getattr(r, name) for r in instance.requests]
            return np.array([v if v is not None else (default if default is not None
                                                      else math.inf) for v in vals], float)

        t, p = field("ttft_slo", ttft), field("tpot_slo", tpot)
        b = np.full(instance.n, math.inf if tbt is None else float(tbt))
        deadline = np.array([r.deadline is not None for r in instance.requests], bool)
        has = np.isfinite(t) | np.isfinite(p) | np.isfinite(b) | deadline
        return cls(t, p, b, has.reshape(-1))


@dataclass(frozen=True)
class GoodputBound:
    """Upper bounds on counts of requests (``ttft_own`` >= ``ttft`` >= ``both``)."""

    n: int
    with_slo: int
    ttft_own: int  # B12a on TTFT alone
    ttft: int  # B12a + B12b on TTFT
    both: int  # ... and the TPOT / TBT floors

    def __post_init__(self) -> None:
        if not (0 <= self.both <= self.ttft <= self.ttft_own <= self.n):
            raise GoodputError(f"goodput bound: inconsistent counts {self}")

    @property
    def attainment(self) -> float | None:
        """Upper bound on the share of requests with an SLO that meet all of theirs."""
        return self.both / self.with_slo if self.with_slo else None

    @property
    def share(self) -> float | None:
        """Upper bound on the share of *all* requests meeting them (Apt-Serve's
        ``ttft_tbt_attainment`` counts over every request)."""
        return self.both / self.n if self.n else None

    def to_dict(self) -> dict[str, float | int | None]:
        return {"n": self.n, "with_slo": self.with_slo, "ttft_own": self.ttft_own,
                "ttft": self.ttft, "both": self.both, "attainment": self.attainment,
                "share": self.share}


class GoodputUpperBound(Protocol):
    """A certified upper bound on SLO goodput (module docstring, "The interface"): counts of
    requests within their SLOs that no feasible schedule of ``instance`` exceeds."""

    def __call__(self, instance: Instance, ttft: float | None = None, tpot: float | None = None,
                 tbt: float | None = None) -> GoodputBound: ...


def tbt_floor(f: Floors) -> np.ndarray:
    """Least duration of a batch generating token ``g + 1 >= 2`` of ``i`` (B12a): its entry
    of ``i`` is a decode over ``m >= I`` cached tokens or a refill of ``S >= I + 1`` tokens
    (B2), both non-decreasing in the length, plus ``k0`` and the cheaper per-batch term.
    With prefix reuse (B12r, :class:`.reuse_floors.ReuseFloors`) the refill may hit up to
    ``L`` (``f.refill_offset``) of its own cached tokens and computes ``S - L`` after them,
    each seeing at least ``L`` (B19's refill floor); ``L = 0`` without block ids. A gap
    between tokens contains that batch, so every gap (the longest too) is at least this."""
    k = f.k
    I = f.instance.prompt.astype(np.float64)
    dec = k["k1"] + k["kdr"] + k["kdm"] * I
    L = f.refill_offset.astype(np.float64)
    S = I + 1 - L  # computed tokens of the refill
    a = k["kpq"] - k["kpm"] / 2
    Q = S if a >= 0 else S * np.minimum(S, f.prefill_cap)
    ref = k["kpr"] + k["k1"] * S + k["kpm"] * L * S + k["kpm"] * S * S / 2 + a * Q
    return np.maximum(np.minimum(dec, ref), 0.0) + k["k0"] + min(k["kdb"], k["kpb"])


def own_feasible(f: Floors, slos: Slos) -> tuple[np.ndarray, np.ndarray]:
    """B12a: (can meet TTFT, can meet every SLO) per request. A request with a deadline must
    also have ``a_i + chain_i <= deadline`` (F5)."""
    inst = f.instance
    eps = 1e-9
    ttft_ok = f.prefill_chain <= slos.ttft * (1 + eps)
    steps = inst.output - 1
    step_chain = f.chain - f.prefill_chain
    tpot_ok = (steps == 0) | (step_chain <= slos.tpot * np.maximum(steps, 1) * (1 + eps))
    tbt_ok = (steps == 0) | (tbt_floor(f) <= slos.tbt * (1 + eps))
    dl = np.array([math.inf if r.deadline is None else r.deadline for r in inst.requests])
    dl_ok = inst.arrival + f.chain <= dl * (1 + eps) + eps
    return ttft_ok, ttft_ok & tpot_ok & tbt_ok & dl_ok


def interval_misses(r: np.ndarray, d: np.ndarray, w: np.ndarray, t1: float, t2: float) -> int:
    """Fewest requests with window inside ``[t1, t2]`` to drop so the rest's work fits in
    ``t2 - t1`` (drop the largest first: no fewer drops can remove as much work)."""
    inside = w[(r >= t1) & (d <= t2)]
    excess = float(inside.sum()) - (t2 - t1) * (1 + 1e-12)
    if excess <= 0:
        return 0
    big = np.cumsum(np.sort(inside)[::-1])
    return int(np.searchsorted(big, excess, side="left")) + 1


def counting_misses(r: np.ndarray, d: np.ndarray, w: np.ndarray,
                    grid: int | None = GRID) -> int:
    """B12b: the most misses forced by a family of disjoint intervals with endpoints on a
    grid (every release and deadline, or quantiles of them, :func:`.goodput_dp.grid_points`):
    ``best[b] =
    max(best[b-1], max_a best[a] + k(g_a, g_b))`` (:func:`.goodput_dp.interval_dp`). Two
    intervals sharing an endpoint contain disjoint requests because every window has
    positive length (callers drop the others first)."""
    from .goodput_dp import grid_points, interval_dp

    if r.size == 0:
        return 0
    return interval_dp(r, d, w, grid_points(r, d, grid))


def sharing_rules(instance: Instance) -> tuple[tuple[float, float, float], ...]:
    """B7's sharing rules B12 uses: the KV, token and count shares. With a hidden cache
    (semantics section 6) the KV and count shares price the smaller of the KV and the hidden
    charge (B12e, :mod:`optsched.bounds.goodput_memory`)."""
    return tuple(MIXES[:3])


def completion_windows(instance: Instance, slos: Slos) -> np.ndarray:
    """B12c: per request, the latest completion of a schedule meeting all its SLOs (inf when
    none follows). Its ``O - 1`` gaps run from its first token (``<= a_i + s_i``) to its
    completion: TPOT ``<= tpot_i`` gives ``C_i <= F_i + (O - 1) tpot_i``; a TBT SLO bounds
    every gap (the longest, ``max_tbt``), giving ``C_i <= F_i + (O - 1) b_i`` for every
    request (under the per-request P99 reading only requests with fewer than 100 gaps had
    one); a deadline caps it."""
    gaps = (instance.output - 1).astype(np.float64)
    per_gap = np.minimum(slos.tpot, slos.tbt)
    with np.errstate(invalid="ignore"):
        tail = np.where(gaps == 0, 0.0, gaps * per_gap)
    dl = np.array([math.inf if r.deadline is None else r.deadline for r in instance.requests])
    return np.minimum(instance.arrival + slos.ttft + tail, dl)


def coupled_misses(f: Floors, slos: Slos, ok: np.ndarray, grid: int | None = GRID) -> int:
    """B12d: B10's first-token frontier (batch term shared by tokens, compute only) prices
    a request whose first token comes within ``s_i`` of arrival at ``W_i(s_i)``, received in
    ``[a_i, a_i + s_i]``; B12b's count on those works."""
    from .coupled import frontier

    sel = ok & np.isfinite(slos.ttft)
    if not sel.any():
        return 0
    w = frontier(f, ttft=True).least_work(slos.ttft)
    sel &= np.isfinite(w)  # B12a already dropped these; kept out of the count
    a = f.instance.arrival[sel]
    return counting_misses(a, a + slos.ttft[sel], w[sel], grid)


def reuse_floors(instance: Instance) -> Floors:
    """B12r: the floors B12 runs on with prefix block ids, B19's
    :class:`~.reuse_floors.ReuseFloors` (a request's own first-token chain charging only the
    tokens after the blocks it shares with another request, B7's works with the resident
    blocks counted once); valid whatever the cache holds."""
    from .reuse_floors import ReuseFloors

    return ReuseFloors.of(instance)


def goodput_bound(instance: Instance, ttft: float | None = None, tpot: float | None = None,
                  tbt: float | None = None, grid: int | None = GRID) -> GoodputBound:
    """Upper bounds on how many requests any schedule of ``instance`` serves within their
    SLOs (module docstring, B12); ``ttft``, ``tpot``, ``tbt`` are defaults for requests
    without the field (``tbt``: the TBT SLO on every gap, for every request). On an
    instance with prefix block ids it is B12r (module docstring): B12a-c on
    :func:`reuse_floors`, without B12d."""
    slos = Slos.of(instance, ttft, tpot, tbt)
    f = reuse_floors(instance) if instance.has_prefix else Floors.of(instance)
    ttft_ok, all_ok = own_feasible(f, slos)
    from .goodput_memory import rule_works

    works = rule_works(instance, f)  # B7's sharing rules (B12e: hidden charges)
    a = instance.arrival
    first_by = a + slos.ttft
    done_by = completion_windows(instance, slos)
    use_full = np.isfinite(done_by)

    def forced(ok: np.ndarray, full: bool) -> int:
        """B12b/c misses among the requests in ``ok`` with a finite window: every sharing
        rule is a valid relaxation, so the most misses any of them forces. With ``full``, a
        request with a completion window brings its whole work (B7, total latency) in it,
        the others their first-token work in ``[a_i, a_i + s_i]``."""
        most = 0
        for w_first, w_all in works:
            w, d = w_first, first_by
            if full:
                w = np.where(use_full, w_all, w_first)
                d = np.where(use_full, done_by, first_by)
            sel = ok & np.isfinite(d)
            if sel.any():
                most = max(most, counting_misses(a[sel], d[sel], w[sel], grid))
        return most

    own = int(ttft_ok.sum())
    # B10's frontier has no reuse version (B19 "what they leave out"): B12d only without ids
    coupled = 0 if instance.has_prefix else coupled_misses(f, slos, ttft_ok, grid)
    ttft_count = own - max(forced(ttft_ok, False), coupled)
    both = min(ttft_count, int(all_ok.sum()) - forced(all_ok, True))
    return GoodputBound(n=instance.n, with_slo=int(slos.has.sum()), ttft_own=own,
                        ttft=ttft_count, both=both)


__all__ = ["GoodputBound", "GoodputError", "GoodputUpperBound", "Slos", "counting_misses", "goodput_bound",
           "completion_windows", "interval_misses", "own_feasible", "sharing_rules",
           "tbt_floor"]
