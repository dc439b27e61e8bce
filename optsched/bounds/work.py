"""Bound ``work``: the server's busy time (``formulations/bounds.md`` B4-B6).

Batches run one at a time, so the time spent on the batches holding a set ``S`` of
requests is their summed durations. Each such batch costs ``k0`` plus its entries' terms
plus ``kpb``/``kdb`` when it has a prefill/decode entry, and their number ``N(S)`` is at
least every batch-count floor at once (B4): the requests' own batches, ``C`` tokens per
batch, ``M`` KV per batch (the *KV-area bound*, F3), ``max_batch_size`` entries per batch.

* makespan (B5): for the requests arriving at or after ``t`` (sorted by arrival, every
  suffix), ``makespan >= t + busy(suffix)``;
* total latency / mean TTFT (B6): the ``k``-th completion (first token) closes a set of
  ``k`` requests, so it is at least ``a_min + busy(k smallest)``, where each floor is
  summed over its own ``k`` smallest values (any ``k`` requests have at least those sums),
  and at least the ``k``-th smallest own floor ``a_i + chain_i`` (B3).
"""

from __future__ import annotations

import numpy as np

from ..solve_types import Objective
from .base import BoundResult, Budget, register_bound
from .floors import Floors
from .request import request_floors


def _ceil_div(x, d: int):
    return -(-np.asarray(x, dtype=np.int64) // d)


def busy_floor(f: Floors, own_max, tokens, area, own_sum, prefill_max, prompt_sum,
               prefill_sum, entry_sum):
    """Least summed duration of the batches holding a set of requests, from its
    aggregates (arrays, one per set): B4."""
    lim, k = f.instance.limits, f.k
    n = np.maximum.reduce([own_max, _ceil_div(tokens, lim.max_batch_tokens),
                           _ceil_div(area, lim.kv_capacity), _ceil_div(own_sum, f.max_entries)])
    # batches with a prefill entry: each request's first prefill needs kmin of them
    p0 = np.maximum.reduce([prefill_max, _ceil_div(prompt_sum, lim.prefill_budget),
                            _ceil_div(prefill_sum, f.max_entries)])
    n = np.maximum(n, p0).astype(np.float64)
    p0 = p0.astype(np.float64)
    if k["kdb"] <= k["kpb"]:  # as few prefill batches as possible, the rest decode-only
        flags = k["kpb"] * p0 + k["kdb"] * (n - p0)
    else:  # every batch could carry a prefill entry
        flags = k["kpb"] * n
    return k["k0"] * n + flags + entry_sum


def prefill_busy_floor(f: Floors, prefill_max, prompt_sum, prefill_sum, fp_sum, entry_sum):
    """Least summed duration of the batches holding the prefills of a set (B4 for first
    tokens): each has a prefill entry, so costs ``k0 + kpb`` beyond its entries."""
    lim, k = f.instance.limits, f.k
    n = np.maximum.reduce([prefill_max, _ceil_div(prompt_sum, lim.prefill_budget),
                           _ceil_div(prefill_sum, f.max_entries),
                           _ceil_div(fp_sum, lim.kv_capacity)]).astype(np.float64)
    return (k["k0"] + k["kpb"]) * n + entry_sum


def _suffix(x, op=np.add):
    return op.accumulate(x[::-1])[::-1]


def makespan_floor(instance, floors: Floors | None = None, shared_tokens=None) -> float:
    """B5: ``max_t t + busy(requests arriving at or after t)``. B19 passes its reuse
    ``floors`` (the prompt tokens a request computes itself) and ``shared_tokens``: per
    arrival suffix (a function of the instance and the arrival order), the tokens of the
    blocks the suffix computes once (defaults: B5 as is)."""
    f = Floors.of(instance) if floors is None else floors
    order = np.argsort(instance.arrival, kind="stable")
    a = instance.arrival[order]
    extra = 0.0 if shared_tokens is None else shared_tokens(instance, order)

    def s(x, op=np.add):
        return _suffix(np.asarray(x)[order], op)

    busy = busy_floor(f, s(f.own_batches, np.maximum), s(f.tokens) + extra, s(f.area),
                      s(f.own_batches), s(f.kmin, np.maximum), s(f.computed_prompt) + extra,
                      s(f.kmin), s(f.entry_cost))
    return float((a + busy).max())


def order_statistic_floor(instance, objective: str, floors: Floors | None = None,
                          shared_tokens=None, own=None) -> float:
    """B6: sum over k of a floor on the k-th completion (first token), minus arrivals. B19
    passes its reuse ``floors``, each request's ``shared_tokens`` (its share of the blocks it
    hits, computed by someone) and its ``own`` completion floors (default: B6 as is)."""
    f = Floors.of(instance) if floors is None else floors
    a_min = float(instance.arrival.min())
    share = 0.0 if shared_tokens is None else shared_tokens
    prompt = f.computed_prompt + share

    def p(x, op=np.add):
        return op.accumulate(np.sort(np.asarray(x)))

    if objective == Objective.MEAN_TTFT:
        busy = prefill_busy_floor(f, np.sort(f.kmin), p(prompt), p(f.kmin),
                                  p(f.prefill_area), p(f.prefill_entry_cost))
    else:
        busy = busy_floor(f, np.sort(f.own_batches), p(f.tokens + share), p(f.area),
                          p(f.own_batches), np.sort(f.kmin), p(prompt), p(f.kmin),
                          p(f.entry_cost))
    own = np.sort(request_floors(instance, objective) if own is None else own)
    total = float(np.maximum(own, a_min + busy).sum() - instance.arrival.sum())
    return total / instance.n if objective == Objective.MEAN_TTFT else total


@register_bound("work", "busy time of the server: batch counts (tokens, KV area, batch size) "
                "and entry costs, per arrival suffix or order statistic (B4-B6), O(n log n)",
                rank=20, cheap=True)
def work_bound(instance, objective: str, budget: Budget) -> BoundResult:
    v = makespan_floor(instance) if objective == Objective.MAKESPAN else \
        order_statistic_floor(instance, objective)
    return BoundResult(v, "work", objective)
