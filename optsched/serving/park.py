"""The offline *park* construction: an upper-side diagnostic for the capacity ceiling, **not**
a policy (``formulations/bounds.md`` B12, "What it leaves out"; the ``slo-park`` policy,
``optsched/policies/slo_park.py``, is its online form). It schedules a whole instance knowing
every arrival; ``studies/serving/goodput_park.py`` measures its sustainable rate. It targets
the OLD per-request P99 reading of the TBT SLO (``ttft_p99tbt_attainment``); under the
longest-gap rule (docs/semantics.md section 4, ``max_tbt``) parking fails the SLO.

Under a P99 TBT SLO (nearest rank) a request with 100 or more gaps between its tokens may have
one gap in a hundred longer than the SLO. The construction:

* **arrivals**: each prompt is prefilled as soon as the server is free (whole prompts packed
  up to ``C`` tokens per batch, the head of the queue chunked when it does not fit); a request
  whose first token can no longer come within its TTFT SLO is set aside (it misses anyway) and
  served at the end;
* **short requests** (``O <= 100``: fewer than 100 gaps, every gap must meet the SLO) stay
  resident and decode in every batch from their first token to their last;
* **long requests** (``O > 100``) are evicted in the batch after their first token (one long
  gap, then no other), and after the last arrival is served they are refilled in groups whose
  peak KV fits ``M`` and decoded in every batch of their group until done.

A prompt is admitted only while the reservations fit in ``M`` (KV blocks, no hidden cache): a
short request reserves its peak ``fp(I + O - 1)``, a long one its prompt until its eviction.
The schedule is for the evaluator to judge (``optsched.evaluate``); this module never scores it.
"""

from __future__ import annotations

from collections import deque

from ..instance import Instance
from ..schedule import Schedule

#: a request with at most this many output tokens has fewer than 100 gaps: every gap must meet
#: a P99 TBT SLO, so it is never parked
SHORT_OUTPUT = 100
#: the arrival queue's orders
ORDERS = ("arrival", "prompt")


class Park:
    """The construction of the module docstring on one instance: ``Park(inst, ...).run()``.

    ``order``: the arrival queue's order, ``"arrival"`` (FIFO) or ``"prompt"`` (shortest prompt
    first, a chunked head stays first); ``budget``: prefill tokens per arrival-phase batch (at
    most ``C``; ``None``: ``C``); ``admit``: admit a prompt to a batch only if every prompt it
    completes meets its TTFT SLO; ``ttft_slo``: that SLO (seconds, every request)."""

    def __init__(self, inst: Instance, order: str = "arrival", budget: int | None = None,
                 admit: bool = False, ttft_slo: float = 1.0):
        if order not in ORDERS:
            raise ValueError(f"Park: order must be one of {', '.join(ORDERS)}, got {order!r}")
        self.order, self.budget, self.admit, self.ttft = order, budget, admit, ttft_slo
        self.inst, self.cost, lim = inst, inst.cost_model, inst.limits
        self.M, self.C = lim.kv_capacity, lim.max_batch_tokens
        self.I, self.O = inst.prompt.tolist(), inst.output.tolist()
        self.a = inst.arrival.tolist()
        self.ids = [r.id for r in inst.requests]
        self.fp = lim.kv_footprint
        self.m = [0] * inst.n  # cached tokens
        self.g = [0] * inst.n  # generated tokens
        self.batches: list = []
        self.t = 0.0

    def run(self) -> Schedule:
        order = sorted(range(self.inst.n), key=lambda i: self.a[i])
        self.arrivals(deque(order))
        self.finish_rest()
        return Schedule.from_batches(self.batches)

    def emit(self, entries: list[tuple[int, int]], evict: list[int]) -> None:
        """Append a batch, advance the clock by its cost and apply it."""
        tok = [c for _, c in entries]
        cached = [self.m[i] for i, _ in entries]
        dec = [self.g[i] >= 1 and self.m[i] == self.I[i] + self.g[i] - 1 for i, _ in entries]
        start = max([self.t] + [self.a[i] for i, _ in entries])
        self.t = start + self.cost.batch_time(tok, cached, dec)
        self.batches.append(([(self.ids[i], c) for i, c in entries], [self.ids[i] for i in evict]))
        for i in evict:
            self.m[i] = 0
        for i, c in entries:
            self.m[i] += c
            if self.m[i] == self.I[i] + self.g[i]:
                self.g[i] += 1

    def in_time(self, entries: list[tuple[int, int]]) -> bool:
        """Whether every prompt the batch completes gets its first token within the SLO."""
        tok = [c for _, c in entries]
        cached = [self.m[i] for i, _ in entries]
        dec = [self.g[i] >= 1 for i, _ in entries]
        start = max([self.t] + [self.a[i] for i, _ in entries])
        end = start + self.cost.batch_time(tok, cached, dec)
        return all(end <= self.a[i] + self.ttft for i, c in entries
                   if self.g[i] == 0 and self.m[i] + c == self.I[i])

    def reserve(self, i: int) -> int:
        """KV ``i`` may hold in the arrival phase: its peak if short, else its prompt."""
        return self.fp(self.I[i] + self.O[i] - 1) if self.O[i] <= SHORT_OUTPUT else self.fp(self.I[i])

    def arrivals(self, todo: deque) -> None:
        self.late: list[int] = []
        self.parked: list[int] = []
        live: list[int] = []  # short requests decoding
        queue: deque = deque()
        evict: list[int] = []
        while todo or queue or live or evict:
            if not queue and not live and not evict and todo:
                self.t = max(self.t, self.a[todo[0]])
            while todo and self.a[todo[0]] <= self.t:
                queue.append(todo.popleft())
            if self.order == "prompt":  # shortest prompt first, a chunked head stays first
                queue = deque(sorted(queue, key=lambda i: (self.m[i] == 0, self.I[i], i)))
            for i in [i for i in queue if self.m[i] == 0 and self.t >= self.a[i] + self.ttft]:
                queue.remove(i)  # its first token would miss the SLO
                self.late.append(i)
            entries = [(i, 1) for i in live]
            # reservations: a short request its peak from its first chunk to its end, a long
            # one its prompt until the eviction after its first token
            used = sum(self.reserve(i) for i in live) \
                + sum(self.reserve(i) for i in queue if self.m[i] > 0)
            room = min(self.C - len(entries), self.budget or self.C)
            for i in list(queue):
                c = min(self.I[i] - self.m[i], room)
                grow = self.reserve(i) if self.m[i] == 0 else 0
                if c <= 0 or used + grow > self.M:
                    break
                if self.admit and self.m[i] + c == self.I[i] and \
                        not self.in_time(entries + [(i, c)]):
                    continue  # it, or a prompt already in the batch, would miss its TTFT
                entries.append((i, c))
                used += grow
                room -= c
                if self.m[i] + c < self.I[i]:
                    break  # the head is chunked: the rest waits
            if not entries and not evict:
                if not todo:  # nothing fits and nothing will arrive: serve the rest at the end
                    self.late += list(queue)
                    queue.clear()
                    continue
                self.t = max(self.t, self.a[todo[0]])
                continue
            self.emit(entries, evict)
            evict = []
            for i, _ in entries:
                done = self.g[i] == self.O[i]
                if i in queue and self.g[i] == 1:
                    queue.remove(i)
                    if done:
                        continue
                    if self.O[i] <= SHORT_OUTPUT:
                        live.append(i)
                    else:
                        evict.append(i)
                        self.parked.append(i)
                elif done and i in live:
                    live.remove(i)

    def finish_rest(self) -> None:
        """Parked and late requests, shortest remaining first, in groups whose peak fits."""
        rest = sorted(self.parked + self.late, key=lambda i: self.O[i] - self.g[i])
        held = [i for i in rest if self.m[i] > 0]  # a chunked prompt set aside at the end
        if held:
            self.emit([], held)
        while rest:
            group, peak = [], 0
            while rest and peak + self.fp(self.I[rest[0]] + self.O[rest[0]] - 1) <= self.M:
                peak += self.fp(self.I[rest[0]] + self.O[rest[0]] - 1)
                group.append(rest.pop(0))
            if not group:
                raise RuntimeError("a request's peak exceeds M")  # loading refuses these
            while any(self.g[i] < self.O[i] for i in group):
                entries, room = [], self.C
                for i in group:
                    if self.g[i] == self.O[i] or room <= 0:
                        continue
                    c = min(self.I[i] + self.g[i] - self.m[i], room)
                    entries.append((i, c))
                    room -= c
                self.emit(entries, [])


__all__ = ["ORDERS", "Park", "SHORT_OUTPUT"]
