"""Upper-side diagnostic (not a policy; ``formulations/bounds.md``, "What did not help": the
ceiling of the fluid family): a discrete schedule that follows the R + memory fluid schedule
of ``studies/bounds/fluid_ceiling.py``, replayed by ``evaluate``.

Per batch:

* **admission**: the released requests not yet admitted, in order of least remaining work
  (the works of the relaxation R, ``x_g = ent_g + h S / M``), are admitted while the
  admitted, unfinished requests reserve at most ``M`` tokens (``I + O - 1`` each): never an
  eviction;
* **decodes**: every admitted request that has its first token decodes one token (its KV is
  reserved, and an entry in a memory-full batch costs little next to the batch term);
* **prefills**: admitted requests still prefilling, in order of least remaining work, get
  chunks up to ``--prefill-budget`` prompt tokens in all (and ``C`` tokens in the batch);
  with ``--strict`` only while no decode of a request with less remaining work is in the
  batch (SRPT's order kept strictly; it starves the prompts, bounds.md).

Batch durations come from the instance's cost model; the schedule is replayed by
``optsched.evaluate`` (an infeasible one is an error) and its total latency printed beside
the recorded best schedule and the ``spread`` bound.

    OPTSCHED_DATA=... python -m studies.bounds.fluid_follow [--traces conv,code]
        [--window-seeds 0,1,2] [--prefill-budget 512,1024,2048,4096,8192]
"""

from __future__ import annotations

import argparse
import heapq
import time

import numpy as np

from optsched.bounds import lower_bound
from optsched.bounds.fluid import relaxation
from optsched.evaluation import evaluate
from optsched.schedule import Schedule
from studies.bounds.fluid_ceiling import RECORDED_BEST
from studies.settings import window


def follow(inst, prefill_budget: int, strict: bool = False) -> Schedule:
    """The construction of the module docstring (``strict``: a prefill chunk joins a batch
    only while no decode of a request with less remaining work is in it)."""
    lim, cm = inst.limits, inst.cost_model
    M, C = lim.kv_capacity, lim.max_batch_tokens
    budget = min(prefill_budget, lim.prefill_budget, C)
    x, _dur, first, _reserve = relaxation(inst)
    I, O = inst.prompt.tolist(), inst.output.tolist()
    a = inst.arrival.tolist()
    ids = [r.id for r in inst.requests]
    n = inst.n
    # remaining least work of request i at step g: suffix sums of x within the request
    suffix = np.zeros(x.size + 1)
    last = np.append(first[1:], x.size)
    for i in range(n):
        suffix[first[i] : last[i]] = np.cumsum(x[first[i] : last[i]][::-1])[::-1]
    reserve = [I[i] + O[i] - 1 for i in range(n)]
    order = sorted(range(n), key=lambda i: a[i])
    m = [0] * n  # cached tokens
    g = [0] * n  # generated tokens
    waiting: list[tuple[float, int]] = []  # (remaining work, request): released, not admitted
    admitted: set[int] = set()
    used, nxt, t, done = 0, 0, 0.0, 0
    batches = []

    def remaining(i: int) -> float:
        k = first[i] + g[i]
        if g[i] == 0:  # part of the prefill pass left
            later = suffix[k + 1] if k + 1 < last[i] else 0.0
            return float(x[k] * (I[i] - m[i]) / I[i] + later)
        return float(suffix[k])

    while done < n:
        while nxt < n and a[order[nxt]] <= t:
            heapq.heappush(waiting, (remaining(order[nxt]), order[nxt]))
            nxt += 1
        skipped = []
        while waiting:
            w, i = heapq.heappop(waiting)
            if used + reserve[i] <= M or not admitted:
                admitted.add(i)
                used += reserve[i]
            else:
                skipped.append((w, i))
        for item in skipped:
            heapq.heappush(waiting, item)
        if not admitted:
            t = max(t, a[order[nxt]])
            continue
        entries, who, tok, cached, dec = [], [], [], [], []
        tokens_left, prefill_left = C, budget
        for i in sorted(admitted, key=remaining):
            if g[i] >= 1:  # caught up: a decode entry
                c = 1
            elif strict and any(dec):  # a decode with less remaining work would wait
                continue
            else:
                c = min(I[i] - m[i], prefill_left, tokens_left)
                prefill_left -= c
            if c <= 0 or tokens_left < c:
                continue
            tokens_left -= c
            entries.append((ids[i], c))
            who.append(i)
            tok.append(c)
            cached.append(m[i])
            dec.append(g[i] >= 1)
        if not entries:
            raise RuntimeError("no entry fits a batch (C below one token per decode?)")
        t += cm.batch_time(tok, cached, dec)
        batches.append((entries, []))
        for i, c, is_dec in zip(who, tok, dec, strict=True):
            m[i] += c
            if is_dec or m[i] == I[i]:
                g[i] += 1
            if g[i] == O[i]:
                admitted.discard(i)
                used -= reserve[i]
                done += 1
    return Schedule.from_batches(batches)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--window-seeds", default="0,1,2")
    ap.add_argument("--window", type=int, default=1200)
    ap.add_argument("--prefill-budget", default="512,1024,2048,4096,8192")
    ap.add_argument(
        "--strict",
        action="store_true",
        help="no prefill chunk in a batch with a decode of less remaining work",
    )
    args = ap.parse_args(argv)
    for trace in args.traces.split(","):
        for seed in (int(s) for s in args.window_seeds.split(",")):
            inst = window(trace, seed, args.window)
            sp = lower_bound(inst, "total-latency", "spread").value
            best = RECORDED_BEST.get((trace, seed), float("nan"))
            for b in (int(v) for v in args.prefill_budget.split(",")):
                t0 = time.process_time()
                ev = evaluate(inst, follow(inst, b, args.strict))
                if not ev.feasible:
                    raise RuntimeError(f"{trace} {seed} budget {b}: infeasible schedule")
                v = ev.objective("total-latency")
                print(
                    f"{trace:5} {seed:>4} budget {b:>5} total latency {v:>9.0f} "
                    f"(best recorded {best:>7.0f}, spread {sp:>7.0f}, gap {(v - sp) / v:.1%}) "
                    f"cpu {time.process_time() - t0:.1f} s",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
