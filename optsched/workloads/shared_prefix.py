"""Synthetic workloads with shared prompt prefixes (docs/semantics.md section 6, "Prefix
reuse"): a few system prompts of Zipf popularity, multi-turn conversations whose turn ``k+1``
extends turn ``k``, and few-shot templates under one shared instruction.

Every prompt is a concatenation of **segments** (a shared system prompt, a conversation's
history, a template, a user's own message). Two requests share KV block ``p`` exactly when
their segment sequences agree on every token of blocks ``0..p`` (:func:`block_ids`), so the
ids form the forest the semantics asks for by construction. Only prompt tokens carry ids: a
turn's answer is part of the next turn's prompt (a new segment there), not a cached block.
User messages and answers have the synthetic ShareGPT-like lengths of
:mod:`optsched.workloads.chat_lengths`; arrivals are Poisson; everything is seeded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..cost import CostModel
from ..errors import InstanceError
from ..instance import Instance, Limits, Request
from .chat_lengths import chat_lengths
from .defaults import check_int, check_rate, default_cost, default_limits
from .traces import poisson_arrivals

#: one segment of a prompt: (segment id, tokens); equal ids mean equal tokens
Segment = tuple[int, int]
#: the default block size of these generators (vLLM's)
BLOCK_SIZE = 16


def block_ids(prompts: Sequence[Sequence[Segment]], block_size: int) -> list[tuple[int, ...]]:
    """The ids of each prompt's full blocks: block ``p`` is named by the segments covering
    tokens ``0 .. (p+1)*b - 1`` (the last one cut where the block ends), numbered in order of
    first appearance."""
    table: dict[tuple, int] = {}
    out = []
    for segs in prompts:
        ids = []
        key: tuple = ()
        done = 0  # tokens of ``key``'s complete segments
        k = 0
        total = sum(n for _, n in segs)
        for p in range(total // block_size):
            end = (p + 1) * block_size
            while k < len(segs) and done + segs[k][1] <= end:
                key += (segs[k],)
                done += segs[k][1]
                k += 1
            full = key + ((segs[k][0], end - done),) if done < end else key
            ids.append(table.setdefault(full, len(table)))
        out.append(tuple(ids))
    return out


def _zipf(n_items: int, s: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of item ``0..n_items-1`` with probability proportional to ``1/(k+1)^s``."""
    w = 1.0 / np.arange(1, n_items + 1) ** s
    return rng.choice(n_items, size=size, p=w / w.sum())


def _build(name: str, limits: Limits, cost: CostModel, arrival, segs, output) -> Instance:
    prompts = [sum(n for _, n in s) for s in segs]
    ids = block_ids(segs, limits.block_size)
    reqs = tuple(Request(f"r{k}", float(a), int(i), int(o), prefix=x)
                 for k, (a, i, o, x) in enumerate(zip(arrival, prompts, output, ids)))
    return Instance(name, limits, cost, reqs)


def _limits(limits: Limits | None) -> Limits:
    lim = default_limits(limits)
    if limits is None:
        lim = Limits(lim.kv_capacity, lim.max_batch_tokens, block_size=BLOCK_SIZE)
    return lim


def system_prompts(n: int, rate: float, seed: int = 0, *, prompts: int = 4, zipf: float = 1.1,
                   system: int = 1024, dataset: str = "sharegpt", limits: Limits | None = None,
                   cost_model: CostModel | None = None, name: str | None = None) -> Instance:
    """``n`` requests (Poisson, ``rate`` per second), each a system prompt of ``system``
    tokens -- one of ``prompts``, picked with Zipf(``zipf``) popularity -- followed by the
    user's own message; message and answer lengths ShareGPT-like."""
    n, rate = check_int("n", n), check_rate(rate)
    prompts, system = check_int("prompts", prompts), check_int("system", system)
    lim, rng = _limits(limits), np.random.default_rng(seed)
    user, out = chat_lengths(dataset, n, rng, max_tokens=lim.kv_capacity - system)
    pick = _zipf(prompts, float(zipf), n, rng)
    segs = [[(int(s), system), (-(k + 1), int(u))] for k, (s, u) in enumerate(zip(pick, user))]
    return _build(name or f"system-prompts-n{n}-r{rate:g}-s{seed}", lim,
                  default_cost(cost_model), poisson_arrivals(n, rate, rng), segs, out)


def multi_turn(n: int, rate: float, seed: int = 0, *, turns: float = 4.0, think: float = 30.0,
               system: int = 256, dataset: str = "sharegpt", limits: Limits | None = None,
               cost_model: CostModel | None = None, name: str | None = None) -> Instance:
    """``n`` requests from conversations starting as a Poisson process (``rate`` per
    second), each with a geometric number of turns (mean ``turns``) spaced by exponential
    think times (mean ``think`` seconds); turn ``k+1``'s prompt is turn ``k``'s prompt, its
    answer and a new message, after one shared system prompt of ``system`` tokens. A
    conversation whose next turn would not fit ``M`` ends."""
    n, rate = check_int("n", n), check_rate(rate)
    if not turns >= 1 or not think >= 0:
        raise InstanceError(f"multi-turn: turns must be >= 1 and think >= 0, got {turns!r}, "
                            f"{think!r}")
    lim, rng = _limits(limits), np.random.default_rng(seed)
    user, out = chat_lengths(dataset, n, rng, max_tokens=max(1, lim.kv_capacity // 8))
    starts = poisson_arrivals(n, rate, rng)
    rows: list[tuple[float, list[Segment], int]] = []
    seg = 0
    conv = 0
    while len(rows) < n:
        if conv == n:
            raise InstanceError(f"multi-turn: a first turn (system prompt {system} tokens and "
                                f"a message) does not fit kv_capacity M = {lim.kv_capacity}")
        t, history = float(starts[conv]), [(0, system)]
        conv += 1
        for _ in range(int(rng.geometric(1.0 / turns))):
            k = len(rows)
            if k == n:
                break
            seg += 1
            prompt = history + [(seg, int(user[k]))]
            if sum(x for _, x in prompt) + int(out[k]) - 1 > lim.kv_capacity:
                break
            rows.append((t, prompt, int(out[k])))
            seg += 1
            history = prompt + [(seg, int(out[k]))]  # the answer, as next turn's prompt
            t += float(rng.exponential(think)) if think else 0.0
    order = sorted(range(n), key=lambda k: rows[k][0])
    return _build(name or f"multi-turn-n{n}-r{rate:g}-s{seed}", lim, default_cost(cost_model),
                  [rows[k][0] for k in order], [rows[k][1] for k in order],
                  [rows[k][2] for k in order])


def few_shot(n: int, rate: float, seed: int = 0, *, templates: int = 8, zipf: float = 1.0,
             header: int = 512, examples: int = 2048, dataset: str = "sharegpt",
             limits: Limits | None = None, cost_model: CostModel | None = None,
             name: str | None = None) -> Instance:
    """``n`` requests (Poisson, ``rate`` per second): one instruction of ``header`` tokens
    shared by all, then one of ``templates`` few-shot example sets of ``examples`` tokens
    (Zipf(``zipf``) popularity), then the query; a two-level prefix tree."""
    n, rate = check_int("n", n), check_rate(rate)
    templates, header = check_int("templates", templates), check_int("header", header)
    examples = check_int("examples", examples)
    lim, rng = _limits(limits), np.random.default_rng(seed)
    user, out = chat_lengths(dataset, n, rng, max_tokens=lim.kv_capacity - header - examples)
    pick = _zipf(templates, float(zipf), n, rng)
    segs = [[(0, header), (int(t) + 1, examples), (-(k + 1), int(u))]
            for k, (t, u) in enumerate(zip(pick, user))]
    return _build(name or f"few-shot-n{n}-r{rate:g}-s{seed}", lim, default_cost(cost_model),
                  poisson_arrivals(n, rate, rng), segs, out)


__all__ = ["BLOCK_SIZE", "block_ids", "few_shot", "multi_turn", "system_prompts"]
