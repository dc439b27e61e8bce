"""The fluid relaxation R of the total-latency rungs, and its exact fluid schedules: a
diagnostic, **not** a bound and not a registered rung (``formulations/bounds.md``, "What did not
help": memory concurrency; ``studies/bounds/fluid_ceiling.py`` and ``fluid_follow.py`` use it).

Every total-latency rung since B9 (``mbt``, ``coupled``, ``dual``, ``spread``) is a lower bound
on the following fluid relaxation R at the memory-full batching (``u = M / S``, the batching at
which ``spread``'s optimistic version is least on every seeded window, B13): one machine of rate
1; request ``i`` is released at ``a_i`` and receives, in order, its prefill work ``x_0`` and then
one piece per output step ``g = 1..O-1`` of work ``x_g = ent_g + h S / M``, each piece (step 0
included) at a rate ``<= x_g / dur_g``, with ``dur_g = c_g + kappa (M - S)`` the step's
memory-full duration (B10/B13). A schedule of R is at least R's optimum, so no bound proven from
R's inequalities can exceed its value: :func:`fluid_completions` builds such schedules exactly
(event-driven, no time grid), optionally with a memory row (``R + memory``: a request is admitted
only while the admitted, unfinished requests reserve at most ``cap_mem`` tokens, ``I + O - 1``
each, never evicted).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .coupled import _steps, other_entry_rate
from .floors import Floors


def relaxation(inst) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flat per-step works ``x`` and least durations ``dur`` at ``u = M / S`` (step 0 of a
    request: its prefill pass), each request's first step index and the tokens it reserves
    (``I + O - 1``)."""
    f = Floors.of(inst)
    Mf = float(inst.limits.kv_capacity)
    S, ent, c, first = _steps(f, False)
    umax = np.maximum(Mf / S, 1.0)
    x = ent + f.batch_overhead / umax
    dur = c + other_entry_rate(f.k) * S * (umax - 1.0)
    reserve = (inst.prompt + inst.output - 1).astype(np.float64)
    return x, dur, first.astype(np.int64), reserve


def _fluid_srpt(a, x, dur, first, reserve, cap_mem, dur_weight=0.0):  # pragma: no cover
    """Exact event-driven fluid schedule of R (priority: least remaining work plus
    ``dur_weight`` times the remaining memory-full duration; per-step rate caps; admission
    while the reservations fit in ``cap_mem``, ``inf`` = no memory row). Returns the
    completion times."""
    n = a.size
    last = np.empty(n, np.int64)
    for i in range(n):
        last[i] = first[i + 1] if i + 1 < n else x.size
    suffix = np.zeros(x.size + 1)  # priority of a request at step k: its work (and
    for i in range(n):  # weighted duration) from step k on
        acc = 0.0
        for k in range(last[i] - 1, first[i] - 1, -1):
            acc += x[k] + dur_weight * dur[k]
            suffix[k] = acc
    order = np.argsort(a, kind="mergesort")
    step = first.copy()
    # remaining work of the current step; a step of no work (x = 0, e.g. a cost model whose
    # only terms are per block) is a timer instead: it takes its duration and no capacity
    rem = np.empty(n)
    for i in range(n):
        rem[i] = x[first[i]] if x[first[i]] > 0.0 else max(dur[first[i]], 0.0)
    done = np.full(n, np.nan)
    admitted = np.zeros(n, np.bool_)
    waiting = np.empty(n, np.int64)  # released, not admitted
    active = np.empty(n, np.int64)  # admitted, unfinished
    nw, na, nxt, used, t = 0, 0, 0, 0.0, 0.0
    rate = np.zeros(n)
    finished = 0
    while finished < n:
        while nxt < n and a[order[nxt]] <= t:
            waiting[nw] = order[nxt]
            nw += 1
            nxt += 1
        # admit in order of least remaining work while the reservations fit
        if nw > 0:
            key = np.empty(nw)
            for q in range(nw):
                key[q] = suffix[step[waiting[q]]]
            perm = np.argsort(key, kind="mergesort")
            keep = np.empty(nw, np.int64)
            nk = 0
            for q in perm:
                j = waiting[q]
                if used + reserve[j] <= cap_mem or na == 0:
                    used += reserve[j]
                    admitted[j] = True
                    active[na] = j
                    na += 1
                else:
                    keep[nk] = j
                    nk += 1
            for q in range(nk):
                waiting[q] = keep[q]
            nw = nk
        if na == 0:
            t = a[order[nxt]]
            continue
        key = np.empty(na)
        for q in range(na):
            j = active[q]
            k = step[j]
            part = rem[j] * (1.0 + dur_weight * dur[k] / x[k]) if x[k] > 0 else 0.0
            key[q] = part + suffix[k + 1] if k + 1 < last[j] else part
        perm = np.argsort(key, kind="mergesort")
        left = 1.0
        dt = np.inf
        for q in perm:
            j = active[q]
            k = step[j]
            if x[k] <= 0.0:  # a timer: no capacity, done after its duration
                rate[j] = 0.0
                dt = min(dt, rem[j])
                continue
            r = 1.0 if dur[k] <= 0.0 else min(1.0, x[k] / dur[k])
            r = min(r, left)
            rate[j] = r
            left -= r
            if r > 0.0:
                dt = min(dt, rem[j] / r)
        if nxt < n:
            dt = min(dt, a[order[nxt]] - t)
        t += dt
        q = 0
        while q < na:
            j = active[q]
            timer = x[step[j]] <= 0.0
            if rate[j] > 0.0 or timer:
                rem[j] -= dt if timer else rate[j] * dt
                if rem[j] <= 1e-12 * max(1.0, dur[step[j]] if timer else x[step[j]]):
                    step[j] += 1
                    if step[j] == last[j]:
                        done[j] = t
                        finished += 1
                        used -= reserve[j]
                        rate[j] = 0.0
                        active[q] = active[na - 1]
                        na -= 1
                        continue
                    k = step[j]
                    rem[j] = x[k] if x[k] > 0.0 else max(dur[k], 0.0)
            rate[j] = 0.0
            q += 1
    return done


#: the compiled :func:`_fluid_srpt`, made on first use (numba is imported only then: this
#: module is loaded with the bound rungs, which must not pay for it)
_KERNEL: Any = None


def fluid_completions(a: np.ndarray, x: np.ndarray, dur: np.ndarray, first: np.ndarray,
                      reserve: np.ndarray, cap_mem: float, dur_weight: float = 0.0) -> np.ndarray:
    """The completion times of the exact fluid schedule of R (:func:`relaxation`'s arrays;
    priority: least remaining work plus ``dur_weight`` times the remaining memory-full
    duration; ``cap_mem = inf``: no memory row). Compiled by numba (cached on disk) when numba
    is there, else run in Python."""
    global _KERNEL
    if _KERNEL is None:
        try:
            from numba import njit  # lazy: numba's import is paid only by a fluid schedule
        except ImportError:  # pragma: no cover - numba is a dependency
            _KERNEL = _fluid_srpt
        else:
            _KERNEL = njit(cache=True)(_fluid_srpt)
    return _KERNEL(a, x, dur, first, reserve, cap_mem, dur_weight)


__all__ = ["relaxation", "fluid_completions"]
