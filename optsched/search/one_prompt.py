"""The ``one-prompt`` key decoders: one prompt a batch, short batches while requests decode.

The gap attribution (``docs/results/bounds.md``, "Which side holds the gap") found
on the code trace (2,000-token prompts, ~30-token outputs) that the exact eviction-free
optimum of small windows prefills *one prompt a batch*, smallest first, and lets a request's
decode steps run in short batches as soon as it has its first token, while the registered
policies pack several prompts into one batch (every member then waits for the whole batch:
the prefill cost is linear in tokens, so packing buys ~2 ms a batch and costs each member
the others' prompts). This decoder is that shape at trace scale:

* the ranking configuration of the ``rank`` decoders with ``order="decode-first"``
  (:class:`~optsched.policies.unified.UnifiedScheduler`: every decoding request first, then
  the running prefills and the waiting requests in key order, hybrid chunked batches, no
  evictions by waiting requests);
* at most **one prefill entry** a batch;
* a prefill budget of ``C`` tokens (or the instance's ``P``) while no request is decoding
  (a whole prompt in one batch) and of ``lo`` tokens while some are (their steps stay
  short).

Keys are the key search's (:func:`optsched.search.keysearch.seed_keys`, smallest first).
It runs on the Python simulator (~0.6 s a 1,200-request window), so it is not among the
default decoders; name it in ``key_search(..., decoders=("one-prompt", ...))``.

Measured on the code windows of ``studies/bounds/gap_attribution.py`` (entry-cost key, seeds
0 / 1 / 2): 6,349 / 11,312 / 6,292 s total latency at ``lo = 768`` against the best known
6,440 / 10,665 / 6,361.
"""

from __future__ import annotations

import numpy as np

from ..instance import Instance
from ..policies.simulator import simulate_policy
from ..policies.unified import UnifiedScheduler
from ..schedule import Schedule
from .decoder import register_decoder

#: decoder name -> prefill budget ``lo`` while some request decodes
ONE_PROMPT = {"one-prompt": 768, "one-prompt512": 512, "one-prompt1024": 1024}


class OnePromptRank(UnifiedScheduler):
    """The decoder's policy (module docstring) ranking by ``key``, smallest first (ties by
    arrival, then instance order, as :func:`optsched.search.keysearch.key_ranks`)."""

    hypothetical = True

    def __init__(self, key: np.ndarray, lo: int):
        super().__init__(order="decode-first", hybrid=True, chunked=True, P=0)
        if lo < 1:
            raise ValueError(f"one-prompt: lo must be >= 1 prompt token, got {lo!r}")
        self.name = f"key-one-prompt{lo}"
        self._key = np.asarray(key, np.float64)
        self.lo = int(lo)

    def bind(self, view) -> None:
        super().bind(view)
        self.pmax = self.Pb  # C, or the instance's prefill budget when it sets one
        if self._key.shape != (view.n,):
            raise ValueError(f"one-prompt: key of {self._key.size} numbers for {view.n} requests")
        # the ranking of keysearch.key_ranks (not imported: keysearch imports this module)
        idx = np.arange(view.n)
        self.idx_of_rank = np.lexsort((idx, np.asarray(view.arrival), self._key))
        self.rank_of = np.empty(view.n, np.int64)
        self.rank_of[self.idx_of_rank] = idx
        self.rank_list = self.rank_of.tolist()

    def next_batch(self):
        v, run = self.view, self.run_idx
        decoding = bool(run.size) and bool(np.any((v.g[run] >= 1) & (v.m[run] == v.S[run] - 1)))
        self.Pb = min(self.pmax, self.lo) if decoding else self.pmax
        return super().next_batch()

    def _prefill_tokens(self, need: int) -> int:
        if self.pre_entries:  # one prefill entry a batch
            return 0
        return super()._prefill_tokens(need)


class OnePromptDecoder:
    """A ``one-prompt`` decoder bound to ``inst`` (a
    :class:`~optsched.search.decoder.Decoder`)."""

    def __init__(self, inst: Instance, kind: str):
        if kind not in ONE_PROMPT:
            raise ValueError(f"unknown one-prompt decoder {kind!r}; choose one of {', '.join(ONE_PROMPT)}")
        self.inst, self.kind, self.lo = inst, kind, ONE_PROMPT[kind]
        self.arrival = np.asarray(inst.arrival, np.float64)

    def decode(self, key: np.ndarray) -> Schedule | None:
        return simulate_policy(self.inst, OnePromptRank(key, self.lo), fast=False)


for _rank, _kind in enumerate(ONE_PROMPT, start=30):
    register_decoder(_kind, f"one prompt a batch, decoding requests first, at most "
                     f"{ONE_PROMPT[_kind]} prompt tokens a batch while some decode (Python)",
                     rank=_rank)(OnePromptDecoder)
