"""An exact search of first-token schedules for tiny instances (a test oracle).

The first-token times depend only on the batches that complete prompts, and a schedule
without anything after a request's first token (the request evicted then, which takes no
time) has no later first token (docs/results/bounds.md, "Mean TTFT: which side"; bounds.md
B14): the optimum of any objective that is non-decreasing in every TTFT is that of the
*prefill-only* problem, whose batches hold prompt chunks and whose requests leave at their
first token. This depth-first search enumerates that problem's schedules directly from the
rules of docs/semantics.md sections 3-5: at each moment either a batch starts (any chunks of
the arrived prompts within ``C``, ``P``, the batch size and, after it, ``M`` in blocks;
evictions of partly prefilled prompts before it) or the engine idles to the next arrival.
To keep it finite a request is evicted at most :data:`MAX_EVICTIONS` times, so the value is
the optimum over that class: at least the true optimum, which every lower bound must be below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import product

import numpy as np

from optsched.cost import LinearCost, UnitCost
from optsched.instance import Instance

MAX_EVICTIONS = 2


def _duration(inst: Instance, chunks: list[tuple[int, int]]) -> float:
    """Batch time of prefill entries ``(c, m_before)`` (semantics section 5)."""
    if not chunks:
        return 0.0
    cm = inst.cost_model
    if isinstance(cm, UnitCost):
        return 1.0
    assert isinstance(cm, LinearCost)
    k = cm.coefficients
    t = k["k0"] + k["kpb"]
    for c, m in chunks:
        t += k["k1"] * c + k["kpq"] * c * c + k["kpm"] * c * m + k["kpl"] * m + k["kpr"]
    return t


def best_first_tokens(inst: Instance, objective: Callable[[np.ndarray], float],
                      max_nodes: int = 400_000) -> float | None:
    """The least ``objective(ttft)`` over prefill-only schedules with at most
    :data:`MAX_EVICTIONS` evictions per request; None when the search exceeds ``max_nodes``."""
    n = inst.n
    a = inst.arrival.astype(float)
    I = [int(x) for x in inst.prompt]
    lim = inst.limits
    b = lim.block_size
    fp = lambda m: -(-m // b) * b  # noqa: E731
    C, P = lim.max_batch_tokens, lim.prefill_budget
    B = lim.max_batch_size or 10**9
    best = [math.inf]
    nodes = [0]
    # least time a request still needs: its remaining prompt in one batch alone
    def floor_left(i: int, m: int) -> float:
        return _duration(inst, [(I[i] - m, m)]) if I[i] > m else 0.0

    def dfs(t: float, m: tuple, done: tuple, ev: tuple):
        nodes[0] += 1
        if nodes[0] > max_nodes:
            raise TimeoutError
        lb = np.array([done[i] - a[i] if done[i] is not None else
                       max(t, a[i]) + floor_left(i, m[i]) - a[i] for i in range(n)])
        if objective(lb) >= best[0] - 1e-12:
            return
        if all(d is not None for d in done):
            best[0] = objective(lb)
            return
        live = [i for i in range(n) if done[i] is None and a[i] <= t + 1e-12]
        later = [a[i] for i in range(n) if done[i] is None and a[i] > t + 1e-12]
        if later:  # idle to the next arrival
            dfs(min(later), m, done, ev)
        resident = [i for i in live if m[i] > 0]
        for evict in product([False, True], repeat=len(resident)):
            m1, ev1 = list(m), list(ev)
            gone = set()
            ok = True
            for i, e in zip(resident, evict):
                if e:
                    if ev1[i] >= MAX_EVICTIONS:
                        ok = False
                        break
                    m1[i], ev1[i] = 0, ev1[i] + 1
                    gone.add(i)
            if not ok:
                continue
            cand = [i for i in live if i not in gone]
            for cs in product(*[range(I[i] - m1[i] + 1) for i in cand]):
                if sum(cs) == 0 or sum(cs) > min(C, P) or sum(1 for c in cs if c) > B:
                    continue
                m2 = list(m1)
                for i, c in zip(cand, cs):
                    m2[i] += c
                if sum(fp(m2[i]) for i in range(n) if done[i] is None) > lim.kv_capacity:
                    continue
                dur = _duration(inst, [(c, m1[i]) for i, c in zip(cand, cs) if c])
                end = t + dur
                done2 = list(done)
                for i, c in zip(cand, cs):
                    if c and m2[i] == I[i]:
                        done2[i], m2[i] = end, 0
                dfs(end, tuple(m2), tuple(done2), tuple(ev1))

    try:
        dfs(float(a.min()), (0,) * n, (None,) * n, (0,) * n)
    except TimeoutError:
        return None
    return best[0]


def p99(ttft: np.ndarray) -> float:
    """The evaluator's P99 (numpy's linear percentile, semantics section 4), computed in plain
    Python: the search calls it at every node on a handful of values, where ``np.percentile``
    costs twenty times more. Equal to numpy's up to rounding (tests/bounds/test_tail.py)."""
    x = sorted(float(v) for v in ttft)
    pos = 0.99 * (len(x) - 1)
    k = int(pos)
    return x[k] if k + 1 >= len(x) else x[k] + (pos - k) * (x[k + 1] - x[k])
