"""The replay the flow and fill ``encode`` share (``formulations/infermax.md`` sections 9 and
11; semantics section 3): a feasible schedule's batches with entries, eviction-only batches
folded into the next one, as each request's move in each batch.

An eviction-only batch takes no time (no entries), so the flow models have no layer for it:
its evictions take effect at the start of the next batch with entries, as that batch's own
evictions do (a request processed there is an evict-refill from ``m = 0``). Each model turns
the moves into its own arcs; this module only walks the states ``(g, m)`` (generated and
cached tokens) as the evaluator does: processing ``c`` tokens from ``m0`` (0 after an
eviction) reaches ``m0 + c``, and reaching ``S = I + g`` generates a token.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from ...instance import Instance
from ...schedule import Schedule
from ..base import FormulationError


class Move(NamedTuple):
    """One request in one batch with entries: its state before the batch and what it does."""

    rid: str
    g: int  #: generated tokens before the batch
    m: int  #: cached tokens before the batch (before any eviction)
    tokens: int  #: tokens processed in the batch (0: not processed)
    evicted: bool  #: evicted at the batch's start (its own or a folded batch's eviction)
    g1: int  #: generated tokens after the batch
    m1: int  #: cached tokens after the batch


def folded_batches(inst: Instance, s: Schedule, J: int, who: str) -> Iterator[list[Move]]:
    """The moves of every request (instance order) in each batch with entries of ``s``,
    eviction-only batches folded into the next; ``s`` must be feasible. Raises
    :class:`FormulationError` (``who`` names the model) past ``J`` such batches."""
    prompt = {r.id: r.prompt for r in inst.requests}
    # each request's move when it stays idle: reused while its state does not change (most
    # requests in most batches; the encodes are O(n J))
    idle = {rid: Move(rid, 0, 0, 0, False, 0, 0) for rid in inst.ids}
    pending: set[str] = set()
    j = 0
    for bt in s:
        if not bt.entries:
            pending |= set(bt.evict)
            continue
        if j >= J:
            raise FormulationError(f"{who} encode: more than J = {J} batches with entries")
        proc = dict(bt.entries)
        evicted = pending | set(bt.evict)
        moves = []
        for rid in inst.ids:
            mv = idle[rid]
            if rid in proc or rid in evicted:
                g1, m1 = _after(mv.g, mv.m, proc.get(rid, 0), rid in evicted, prompt[rid])
                mv = Move(rid, mv.g, mv.m, proc.get(rid, 0), rid in evicted, g1, m1)
                idle[rid] = Move(rid, g1, m1, 0, False, g1, m1)
            moves.append(mv)
        yield moves
        pending = set()
        j += 1


def _after(g: int, m: int, tokens: int, evicted: bool, prompt: int) -> tuple[int, int]:
    """``(g, m)`` after a batch (module docstring)."""
    if tokens:
        top = (0 if evicted else m) + tokens
        return (g + 1, top) if top == prompt + g else (g, top)
    return (g, 0) if evicted else (g, m)


__all__ = ["Move", "folded_batches"]
