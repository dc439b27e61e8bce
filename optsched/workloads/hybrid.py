"""Hybrid real-time / best-effort workloads (BROS, paper 003 section 7.1) and their metrics.

* :func:`bros_workload` -- the paper's workload shape: real-time (``cls="rt"``) requests
  arriving as a Poisson process over (prompt, output) pairs drawn from a trace, each with
  per-token SLOs (TTFT 0.4 s, TPOT 0.2 s by default, section 7.1); best-effort
  (``cls="be"``) requests submitted in batches, prompt ~ U(512, 1024), output ~ U(32, 128).
* :func:`hybrid_metrics` -- the paper's metrics per class from one :class:`Evaluation`.
* :func:`closed_loop_be` -- the paper's submission rule itself, per policy: each BE batch
  submitted when the previous one completes under the policy measured.

**How "a BE batch is submitted when the previous one completes" becomes an offline
instance.** An instance fixes every arrival before any policy runs, while the paper's BE
batches depend on the schedule. We fix the submission times from an estimate: BE batch
``k + 1`` is submitted when batch ``k`` would complete if the engine served it alone --
its prompts prefilled in chunks of ``C`` tokens, then one decode batch per output position,
each priced by the instance's cost model (:func:`be_batch_service_time`). We prefer this to
letting the simulator release BE batches dynamically because then every policy (and any
solver) sees the same instance, and the evaluator can judge the schedule without knowing
the release rule. Its consequence: with RT traffic a BE batch takes longer than alone, so
BE batches arrive at least as fast as the engine can finish them and BE work can queue up;
the BE throughput we report is requests finished per second of makespan, which a policy
can only raise by finishing BE work, as in the paper.

:func:`closed_loop_be` applies the rule itself for one policy (a run per BE batch): the
re-timed instance differs per policy, so compare policies on their own closed-loop runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..cost import CostModel
from ..errors import InstanceError
from ..evaluation import evaluate
from ..instance import Instance, Limits, Request
from ..metrics.serving import normalized_latency
from .defaults import check_int, check_rate, default_cost, default_limits
from .traces import poisson_arrivals, read_trace

#: the paper's SLOs (section 7.1): TTFT 0.4 s, TPOT 0.2 s
TTFT_SLO = 0.4
TPOT_SLO = 0.2
#: BE lengths (section 7.1, FlexGen's synthetic batch workload): U(512, 1024) and U(32, 128)
BE_PROMPT = (512, 1024)
BE_OUTPUT = (32, 128)


def be_batch_service_time(prompt: np.ndarray, output: np.ndarray, cost: CostModel,
                          max_batch_tokens: int) -> float:
    """Seconds to serve one BE batch alone: prompts prefilled in order in chunks filling
    ``C`` tokens per batch, then decode batches while any request still generates (request
    ``i`` decodes ``O_i - 1`` times, holding ``I_i + t`` cached tokens at its ``t``-th decode)."""
    total = 0.0
    tok: list[int] = []
    cached: list[int] = []
    room = max_batch_tokens
    for p in prompt.tolist():
        done = 0
        while done < p:
            c = min(p - done, room)
            tok.append(c)
            cached.append(done)
            done += c
            room -= c
            if room == 0:
                total += cost.batch_time(tok, cached, [False] * len(tok))
                tok, cached, room = [], [], max_batch_tokens
    if tok:
        total += cost.batch_time(tok, cached, [False] * len(tok))
    for t in range(1, int(output.max(initial=1))):
        live = output > t
        if live.any():
            total += cost.batch_time(np.ones(int(live.sum()), np.int64), prompt[live] + t - 1,
                                     np.ones(int(live.sum()), bool))
    return total


def _trace_pairs(trace: str | Path | Instance) -> tuple[str, np.ndarray, np.ndarray]:
    if isinstance(trace, Instance):
        return trace.name, trace.prompt, trace.output
    if str(trace).endswith(".json"):
        t = Instance.load(trace)
        return t.name, t.prompt, t.output
    rt = read_trace(trace)
    return Path(rt.path).stem, rt.prompt, rt.output


def bros_workload(
    trace: str | Path | Instance,
    n: int,
    rate: float,
    seed: int = 0,
    *,
    be_batch: int = 16,
    ttft_slo: float = TTFT_SLO,
    tpot_slo: float = TPOT_SLO,
    limits: Limits | None = None,
    cost_model: CostModel | None = None,
    name: str | None = None,
) -> Instance:
    """``n`` RT requests (Poisson at ``rate`` per second over ``trace``'s pairs that fit
    ``M``, drawn with replacement) and BE batches of ``be_batch`` requests submitted from
    ``t = 0`` while the RT requests are still arriving, each batch when the previous one
    would finish alone (module docstring). RT requests carry ``ttft_slo`` and ``tpot_slo``.
    Limits default to M = 100,000, C = 4,096, block size 1 and host memory for swapped KV
    of 4 M tokens (``host_capacity``) unless ``limits`` states one. Seeded."""
    n, rate = check_int("n", n), check_rate(rate)
    be_batch = check_int("be_batch", be_batch)
    for key, v in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise InstanceError(f"generator 'bros': {key} must be a number > 0, got {v!r}")
    lim = default_limits(limits)
    if lim.host_capacity is None:
        lim = Limits(**{**lim.to_dict(), "host_capacity": 4 * lim.kv_capacity})
    cost = default_cost(cost_model)
    src, P, O = _trace_pairs(trace)
    fits = lim.kv_footprint(P + O - 1) <= lim.kv_capacity
    P, O = P[fits], O[fits]
    if P.size == 0:
        raise InstanceError(f"generator 'bros': no (prompt, output) pair of {src} fits "
                            f"M = {lim.kv_capacity}")
    if lim.kv_footprint(BE_PROMPT[1] + BE_OUTPUT[1] - 1) > lim.kv_capacity:
        raise InstanceError(f"generator 'bros': a BE request may hold "
                            f"{BE_PROMPT[1] + BE_OUTPUT[1] - 1} tokens > M = {lim.kv_capacity}")
    rng = np.random.default_rng(seed)
    pick = rng.choice(P.size, size=n, replace=True)
    rt_arrival = poisson_arrivals(n, rate, rng)
    reqs = [Request(f"rt{k}", float(a), int(P[i]), int(O[i]), cls="rt", ttft_slo=float(ttft_slo),
                    tpot_slo=float(tpot_slo))
            for k, (a, i) in enumerate(zip(rt_arrival.tolist(), pick.tolist()))]
    horizon = float(rt_arrival[-1])
    t, k = 0.0, 0
    while t <= horizon:
        bp = rng.integers(BE_PROMPT[0], BE_PROMPT[1] + 1, size=be_batch)
        bo = rng.integers(BE_OUTPUT[0], BE_OUTPUT[1] + 1, size=be_batch)
        reqs += [Request(f"be{k}-{j}", t, int(p), int(o), cls="be")
                 for j, (p, o) in enumerate(zip(bp.tolist(), bo.tolist()))]
        t += max(be_batch_service_time(bp, bo, cost, lim.max_batch_tokens), 1e-9)
        k += 1
    reqs.sort(key=lambda r: r.arrival)
    return Instance(name or f"bros-{src}-n{n}-r{rate:g}-b{be_batch}-s{seed}", lim, cost,
                    tuple(reqs))


@dataclass(frozen=True)
class ClosedLoopRun:
    """The outcome of :func:`closed_loop_be`: the re-timed instance, the policy's schedule of
    it and its evaluation; ``batches`` BE batches were submitted, ``simulations`` runs made."""

    instance: Instance
    schedule: Any
    evaluation: Any
    batches: int
    simulations: int

    def __post_init__(self):
        if self.batches < 1 or self.simulations < self.batches:
            raise InstanceError("closed-loop run: needs batches >= 1 and one run per batch")


def _be_batches(instance: Instance) -> list[list[Request]]:
    """The BE requests grouped by batch (ids ``be<k>-<j>``, :func:`bros_workload`'s), by k."""
    groups: dict[int, list[Request]] = {}
    for r in instance.requests:
        if r.cls == "be":
            head = r.id.split("-", 1)[0]
            if not (head.startswith("be") and head[2:].isdigit()):
                raise InstanceError(f"closed-loop BE: request {r.id!r} is not named be<k>-<j>")
            groups.setdefault(int(head[2:]), []).append(r)
    if not groups:
        raise InstanceError(f"closed-loop BE: instance {instance.name!r} has no BE request")
    return [groups[k] for k in sorted(groups)]


def closed_loop_be(instance: Instance, make_policy: Callable[[], Any]) -> ClosedLoopRun:
    """BROS section 7.1's BE submission, closed-loop: BE batch ``k + 1`` is submitted when
    batch ``k``'s last request completes *under the policy being measured*, from ``t = 0``
    while RT requests still arrive (the last submission is the first completion after the
    last RT arrival). ``instance`` supplies the RT requests and the BE batches' lengths (a
    :func:`bros_workload`; batches it has beyond need are left out).

    A policy only sees requests that have arrived, so its schedule before batch ``k + 1``'s
    submission does not depend on it: we simulate with batches ``0..k``, read batch ``k``'s
    completion, submit batch ``k + 1`` then and simulate again (one run per batch). The
    returned instance is an ordinary one -- the evaluator judges its schedule as any other
    -- and every batch's arrival equals the previous batch's completion in that schedule
    (``tests/workloads/test_hybrid.py`` checks it)."""
    from ..policies import simulate  # lazy: start-up time of `optsched generate`

    rt = [r for r in instance.requests if r.cls != "be"]
    horizon = max((r.arrival for r in rt), default=0.0)
    batches, submitted = _be_batches(instance), []
    t, runs = 0.0, 0
    for k, batch in enumerate(batches):
        submitted += [replace(r, arrival=t) for r in batch]
        inst = Instance(f"{instance.name}-closed", instance.limits, instance.cost_model,
                        tuple(sorted(rt + submitted, key=lambda r: r.arrival)))
        sched = simulate(inst, make_policy())
        ev = evaluate(inst, sched)
        runs += 1
        idx = [i for i, r in enumerate(inst.requests) if r.id.startswith(f"be{k}-")]
        t = float(np.max(ev.completion[idx]))
        if not math.isfinite(t) or t > horizon:
            break
    return ClosedLoopRun(inst, sched, ev, k + 1, runs)


def hybrid_metrics(instance: Instance, evaluation: Any, schedule: Any = None) -> dict[str, Any]:
    """The paper's metrics (section 7.1) from one evaluation, per class: RT normalised
    latency (mean of latency / output tokens), TTFT and TPOT SLO attainment (share of RT
    requests meeting each, TPOT from the request's mean; a request that never finishes meets
    neither), BE throughput (BE requests finished per second of makespan) and swap volume
    (tokens swapped out). Two more readings do not hide what the first ones
    average away: ``be_throughput_coserving``, BE requests finished while an RT request is
    in the system per second of that time (BE starvation during co-serving), and, with the
    ``schedule``, ``rt_tpot_token_attainment``, the share of RT inter-token gaps (every
    generated token after the first, refill tokens included) within the TPOT SLO -- the
    paper's "fine-grained" per-token SLO; the per-request mean meets it for every policy."""
    cls = np.array([r.cls or "" for r in instance.requests])
    rt, be = cls == "rt", cls == "be"
    out: dict[str, Any] = {"rt_requests": int(rt.sum()), "be_requests": int(be.sum())}
    done = np.isfinite(evaluation.completion)
    if rt.any():
        out["rt_normalised_latency"] = normalized_latency(evaluation.latency[rt], instance.output[rt],
                                                          all_finished=True)
        ttft_slo = np.array([r.ttft_slo or math.inf for r in instance.requests])[rt]
        tpot_slo = np.array([r.tpot_slo or math.inf for r in instance.requests])[rt]
        ttft = evaluation.ttft[rt]
        tpot = np.where(instance.output[rt] > 1, evaluation.tpot[rt], 0.0)
        out["rt_ttft_attainment"] = float(np.mean(np.isfinite(ttft) & (ttft <= ttft_slo + 1e-12)))
        out["rt_tpot_attainment"] = float(np.mean(done[rt] & (tpot <= tpot_slo + 1e-12)))
        if schedule is not None:
            out["rt_tpot_token_attainment"] = _token_attainment(instance, evaluation, schedule,
                                                                rt)
    makespan = evaluation.metrics["makespan"]
    out["be_throughput"] = float(done[be].sum()) / makespan if makespan > 0 else None
    if rt.any() and be.any():
        out["be_throughput_coserving"] = _coserving_throughput(instance, evaluation, rt, be)
    out["swap_out_tokens"] = int(evaluation.metrics.get("swap_out_tokens", 0))
    return out


def _coserving_throughput(instance: Instance, evaluation: Any, rt: np.ndarray,
                          be: np.ndarray) -> float | None:
    """BE requests finished inside the union of the RT requests' ``[arrival, completion]``
    intervals, per second of that union (None when it is empty)."""
    end = np.where(np.isfinite(evaluation.completion), evaluation.completion,
                   evaluation.metrics["makespan"])
    iv = sorted(zip(instance.arrival[rt].tolist(), end[rt].tolist(), strict=True))
    merged: list[list[float]] = []
    for a, b in iv:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    span = sum(b - a for a, b in merged)
    if span <= 0:
        return None
    fin = evaluation.completion[be]
    fin = fin[np.isfinite(fin)]
    inside = sum(int(((fin >= a) & (fin <= b)).sum()) for a, b in merged)
    return inside / span


def _token_attainment(instance: Instance, evaluation: Any, schedule: Any,
                      rt: np.ndarray) -> float | None:
    """Share of RT inter-token gaps within the request's TPOT SLO (every entry that
    generated a token: :attr:`~optsched.evaluation.Evaluation.entry_generates`)."""
    gen = evaluation.entry_generates
    req = schedule.entry_req[gen]
    t = evaluation.batch_end[schedule.batch_of_entry[gen]]
    keep = rt[req]
    req, t = req[keep], t[keep]
    order = np.lexsort((t, req))
    req, t = req[order], t[order]
    same = req[1:] == req[:-1]
    if not same.any():
        return None
    slo = np.array([r.tpot_slo or math.inf for r in instance.requests])
    gaps = np.diff(t)[same]
    return float(np.mean(gaps <= slo[req[1:][same]] + 1e-12))


__all__ = ["bros_workload", "closed_loop_be", "ClosedLoopRun", "hybrid_metrics",
           "be_batch_service_time", "TTFT_SLO", "TPOT_SLO",
           "BE_PROMPT", "BE_OUTPUT"]
