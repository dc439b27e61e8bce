"""Upper-side diagnostic for the capacity ceiling under the OLD per-request P99 reading of the
TBT SLO (not a policy; kept to reproduce ``bench/results/goodput-park.txt``): a schedule that
parks long requests, on notebook 08's setting. SLOs are now judged on every gap
(docs/semantics.md section 4, ``max_tbt``), under which parking fails the SLO: this script
scores ``ttft_p99tbt_attainment``, the old reading, whose loophole it exploits.

Under a P99 TBT SLO (nearest rank) a request with 100 or more gaps between its tokens may have
one gap in a hundred longer than the SLO. The construction:

* **arrivals** (FIFO): each prompt is prefilled as soon as the server is free (whole prompts
  packed up to ``C`` tokens per batch, the head of the queue chunked when it does not fit);
  a request whose first token can no longer come within its TTFT SLO is set aside (it misses
  anyway) and served at the end;
* **short requests** (``O <= 100``: fewer than 100 gaps, every gap must meet the SLO) stay
  resident and decode in every batch from their first token to their last;
* **long requests** (``O > 100``) are evicted in the batch after their first token (one long
  gap, then no other), and after the last arrival is served they are refilled in groups
  whose peak KV fits ``M`` and decoded in every batch of their group until done.

A prompt is admitted only while the reservations fit in ``M`` (KV blocks, no hidden cache): a
short request reserves its peak ``fp(I + O - 1)``, a long one its prompt until its eviction.
Every schedule is replayed by ``optsched.evaluate`` and scored by ``serving_metrics``
(``ttft_p99tbt_attainment``); an infeasible one is an error, never a rate.

    OPTSCHED_DATA=... .venv/bin/python bench/goodput_park.py [--rates 4,8,12,16,20]
        [--order arrival,prompt] [--budgets 4096] [--admit]
    OPTSCHED_TRACES=... .venv/bin/python bench/goodput_park.py --seeds 1,2,3   (rates)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from optsched.evaluate import evaluate  # noqa: E402
from optsched.instance import Instance  # noqa: E402
from optsched.metrics.serving import serving_metrics  # noqa: E402
from optsched.schedule import Schedule  # noqa: E402
from optsched.serving.rate_search import at_rate  # noqa: E402

TTFT, TBT, SHORT = 1.0, 1.0, 100


class Park:
    """The construction of the module docstring on one instance."""

    def __init__(self, inst: Instance, order: str = "arrival", budget: int | None = None,
                 admit: bool = False):
        self.order, self.budget, self.admit = order, budget, admit
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
        return all(end <= self.a[i] + TTFT for i, c in entries
                   if self.g[i] == 0 and self.m[i] + c == self.I[i])

    def reserve(self, i: int) -> int:
        """KV ``i`` may hold in the arrival phase: its peak if short, else its prompt."""
        return self.fp(self.I[i] + self.O[i] - 1) if self.O[i] <= SHORT else self.fp(self.I[i])

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
            for i in [i for i in queue if self.m[i] == 0 and self.t >= self.a[i] + TTFT]:
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
                    if self.O[i] <= SHORT:
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


def attainment(inst: Instance, rate: float, order: str, budget: int | None = None) -> float:
    """The construction's ``ttft_p99tbt_attainment`` at ``rate`` (seed-0 Poisson draw)."""
    i = at_rate(inst, rate, 0)
    s = Park(i, order, budget).run()
    ev = evaluate(i, s)
    if not ev.feasible:
        raise RuntimeError(f"park construction infeasible at {rate}: {ev.violations[:2]}")
    return float(serving_metrics(i, ev, schedule=s, ttft_slo=TTFT, tbt_slo=TBT)
                 ["ttft_p99tbt_attainment"])


def sustainable(inst: Instance, order: str, lo: float = 2.0, hi: float = 64.0,
                probes: int = 10, target: float = 0.9) -> float | None:
    """Highest probed rate where the construction reaches ``target`` (geometric bisection,
    as ``rate_search.search``); None if not even ``lo``."""
    if attainment(inst, lo, order) < target:
        return None
    good, bad = lo, hi
    if attainment(inst, hi, order) >= target:
        return hi
    for _ in range(probes - 2):
        mid = (good * bad) ** 0.5
        if attainment(inst, mid, order) >= target:
            good = mid
        else:
            bad = mid
    return good


def windows(seeds: list[int], n: int) -> None:
    """The construction's sustainable rate on seeded conversation windows (the instances of
    ``bench_ceiling_b12e.py``)."""
    from bench_ceiling_b12e import instances

    print(f"{'instance':34} {'n':>4} {'park (prompt order) req/s':>26}")
    for label, inst in instances(seeds, n):
        r = sustainable(inst, "prompt")
        print(f"{label:34} {inst.n:>4} {'-' if r is None else f'{r:.2f}':>26}", flush=True)


def main() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from bench_ceiling import load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="4,6.58,8,10,12,14,16,20")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--admit", action="store_true",
                    help="admit a prompt to a batch only if every prompt it completes meets "
                         "its TTFT SLO (the others wait or are set aside)")
    ap.add_argument("--budgets", default="4096",
                    help="prefill tokens per arrival-phase batch to try (at most C)")
    ap.add_argument("--order", default="arrival,prompt",
                    help="queue orders to try: arrival (FIFO), prompt (shortest first)")
    ap.add_argument("--seeds", help="instead: the sustainable rate (10 probes) on the first "
                    "400 requests and on seeded --n-request windows (bench_ceiling_b12e.py's)")
    args = ap.parse_args()
    if args.seeds:
        windows([int(x) for x in args.seeds.split(",")], args.n)
        return
    inst = load(args.n)
    print(f"# bench/goodput_park.py --rates {args.rates} --n {args.n}; notebook 08's setting, "
          f"{inst.n} requests, {sum(o > SHORT for o in inst.output.tolist())} with O > {SHORT}; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'order':8} {'budget':>6} {'rate':>6} {'attainment':>10} {'ttft ok':>8} "
          f"{'feasible':>8} {'cpu s':>6}")
    for order, budget in ((o, int(b)) for o in args.order.split(",")
                          for b in args.budgets.split(",")):
        for rate in (float(r) for r in args.rates.split(",")):
            t0 = time.process_time()
            i = at_rate(inst, rate, 0)
            s = Park(i, order, budget, args.admit).run()
            ev = evaluate(i, s)
            m = serving_metrics(i, ev, schedule=s, ttft_slo=TTFT, tbt_slo=TBT)
            ok = float((ev.ttft <= TTFT + 1e-12).mean())
            print(f"{order:8} {budget:>6} {rate:>6g} {m['ttft_p99tbt_attainment']:>10.4f} {ok:>8.4f} "
                  f"{str(ev.feasible):>8} {time.process_time() - t0:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
