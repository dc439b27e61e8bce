"""Serving metrics of the EcoServe and Apt-Serve evaluations, computed from the one
evaluator's replay (:class:`~optsched.evaluation.Evaluation`) -- never from a policy's own
bookkeeping -- plus the policy's decision time measured by the simulator
(:class:`~optsched.policies.SimStats`).

* **JCT** of a request = completion - arrival (the evaluator's ``latency``).
* **Normalised latency** = mean over requests of JCT / output length (EcoServe section 4,
  after ORCA and vLLM).
* **JCT SLO** (EcoServe section 4): ``scale * (t_p + t_g * l_g)`` with ``l_g`` the request's
  output length, ``t_p`` the average prompt-processing latency and ``t_g`` the average
  token-generation latency *measured on the workload* (:meth:`JctSlo.measure`: the mean
  duration of the batch that produced each request's first token, and the mean time per
  output token, of a reference run -- by default ``vllm`` on the trace at its own arrival
  times). Scale 2 by default.
* **TTFT / TBT SLOs** (Apt-Serve's effective throughput): a request meets them when its
  TTFT is at most ``ttft_slo`` and its **longest** gap between consecutive tokens
  (:attr:`~optsched.evaluation.Evaluation.max_tbt`, semantics section 4) is at most
  ``tbt_slo`` (``ttft_tbt_attainment``). Token times are the batch ends of *every* entry
  that generated a token: the first token, every decode, and the token a refill produces
  after an eviction (semantics section 3, step 2), so a preemption shows as the gap before
  the refill's token. The run's ``p99_tbt`` (over every gap) and ``max_tbt`` come with it.
* **The per-request P99 reading** (``ttft_p99tbt_attainment``, :func:`p99_tbt`: the 99th
  percentile, nearest rank, of a request's own gaps) is kept for comparison only: it lets a
  request with more than 100 tokens have one gap of any length, so a schedule that evicts
  long requests after their first token and finishes them after the trace passes it.
* **Completion rate** ``completion_rate``: finished requests / makespan; every attainment
  figure is reported with it (a short trace can "meet" an SLO at an arrival rate far above
  what it completes).
* **Allocation failures**: requests evicted at least once (every eviction in our semantics
  is a KV allocation failure of a running request); **preemptions**: all evictions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import OptschedError
from ..evaluation import Evaluation
from ..instance import Instance
from ..schedule import Schedule


class MetricError(OptschedError, ValueError):
    """A bad SLO setting or a metric that cannot be computed."""


@dataclass(frozen=True)
class JctSlo:
    """EcoServe's JCT SLO: a request meets it when JCT <= scale * (t_p + t_g * output)."""

    t_p: float
    t_g: float
    scale: float = 2.0

    def __post_init__(self):
        for name in ("t_p", "t_g", "scale"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0 or (name == "scale" and v == 0):
                raise MetricError(f"JCT SLO: {name} must be a finite number >= 0 (scale > 0), "
                                  f"got {v!r}")
            object.__setattr__(self, name, float(v))

    def limits(self, instance: Instance) -> np.ndarray:
        """Per-request JCT limit."""
        return self.scale * (self.t_p + self.t_g * instance.output.astype(np.float64))

    @classmethod
    def measure(cls, instance: Instance, evaluation: Evaluation, scale: float = 2.0) -> JctSlo:
        """``t_p`` and ``t_g`` measured on a run (module docstring)."""
        ft = evaluation.first_token
        ok = np.isfinite(ft)
        if not ok.any():
            raise MetricError("JCT SLO: the reference run finished no request")
        j = np.searchsorted(evaluation.batch_end, ft[ok], side="left")
        j = np.minimum(j, evaluation.batch_end.size - 1)
        t_p = float(evaluation.batch_duration[j].mean())
        tp = evaluation.tpot[np.isfinite(evaluation.tpot)]
        t_g = float(tp.mean()) if tp.size else 0.0
        return cls(t_p, t_g, scale)

    def to_dict(self) -> dict[str, float]:
        return {"t_p": self.t_p, "t_g": self.t_g, "scale": self.scale}


def p99_tbt(schedule: Schedule, evaluation: Evaluation, n: int) -> np.ndarray:
    """Per request: 99th percentile (nearest rank) of the time between its generated tokens
    (every entry that generated one, module docstring); 0 for a request with fewer than two
    tokens, NaN for an unfinished one. The per-request P99 reading, kept for comparison:
    SLOs are judged by :attr:`~optsched.evaluation.Evaluation.max_tbt`."""
    gen = evaluation.entry_generates
    req = schedule.entry_req[gen]
    t = evaluation.batch_end[schedule.batch_of_entry[gen]]
    keep = np.isfinite(t)
    req, t = req[keep], t[keep]
    order = np.lexsort((t, req))
    req, t = req[order], t[order]
    same = req[1:] == req[:-1]
    gap_req = req[1:][same]
    gap = np.diff(t)[same]
    order = np.lexsort((gap, gap_req))
    gap_req, gap = gap_req[order], gap[order]
    count = np.bincount(gap_req, minlength=n)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    out = np.zeros(n)
    has = count > 0
    rank = np.ceil(0.99 * count[has]).astype(np.int64) - 1
    out[has] = gap[start[has] + rank]
    out[~np.isfinite(evaluation.completion)] = np.nan
    return out


def normalized_latency(latency: np.ndarray, output: np.ndarray, *,
                       all_finished: bool = False) -> float | None:
    """Normalised latency: the mean over finished requests of latency / output tokens
    (EcoServe section 4; the hybrid paper's RT metric, section 7.1). None when no request
    finished or, with ``all_finished``, when one did not (its latency is unbounded)."""
    done = np.isfinite(latency)
    if not done.any() or (all_finished and not done.all()):
        return None
    return float((latency[done] / output[done]).mean())


def serving_metrics(instance: Instance, evaluation: Evaluation, *,
                    slo: JctSlo | None = None, stats: Any = None,
                    schedule: Schedule | None = None, ttft_slo: float | None = None,
                    tbt_slo: float | None = None) -> dict[str, Any]:
    """The EcoServe / Apt-Serve metrics of one run (module docstring); SLO metrics only
    when their settings are given, decision time only with the simulator's ``stats``."""
    ev = evaluation
    n = instance.n
    lat = ev.latency
    done = np.isfinite(lat)
    m = ev.metrics
    makespan = m["makespan"]
    out: dict[str, Any] = {
        "requests": n,
        "finished": int(done.sum()),
        "mean_jct": float(lat[done].mean()) if done.any() else None,
        "p99_jct": float(np.percentile(lat[done], 99)) if done.any() else None,
        "normalized_latency": normalized_latency(lat, instance.output),
        "mean_ttft": m.get("mean_ttft"),
        "throughput_rps": n / makespan if makespan > 0 else None,
        "completion_rate": m.get("completion_rate"),
        "max_tbt": m.get("max_tbt"),
        "mean_max_tbt": m.get("mean_max_tbt"),
        "p99_tbt": m.get("p99_tbt"),
        "tokens_per_second": m.get("tokens_per_second"),
        "kv_utilisation": m.get("kv_utilisation"),
        "preemptions": int(ev.evictions.sum()),
        "allocation_failures": int((ev.evictions > 0).sum()),
        "recomputed_tokens": int(ev.recomputed_tokens.sum()),
        "makespan": makespan,
    }
    if slo is not None:
        met = done & (lat <= slo.limits(instance) * (1 + 1e-12))
        out["slo_attainment"] = float(met.mean()) if n else None
        out["slo"] = slo.to_dict()
    if ttft_slo is not None or tbt_slo is not None:
        met = done.copy()
        if ttft_slo is not None:
            met &= ev.ttft <= ttft_slo * (1 + 1e-12)
        legacy = met.copy()
        if tbt_slo is not None:
            met &= ev.max_tbt <= tbt_slo * (1 + 1e-12)
            if schedule is not None:
                legacy &= p99_tbt(schedule, ev, n) <= tbt_slo * (1 + 1e-12)
        out["ttft_tbt_attainment"] = float(met.mean()) if n else None
        out["effective_throughput_rps"] = float(met.sum()) / makespan if makespan > 0 else None
        if tbt_slo is None or schedule is not None:
            out["ttft_p99tbt_attainment"] = float(legacy.mean()) if n else None
    if stats is not None:
        out["decision_seconds"] = stats.decision_seconds
        out["decision_us_per_batch"] = (1e6 * stats.decision_seconds / stats.batches
                                        if stats.batches else None)
        out["batches"] = stats.batches
    return out


def mechanism_stats(instance: Instance, schedule: Schedule, evaluation: Evaluation,
                    policy: Any = None) -> dict[str, Any]:
    """Whether a policy's mechanisms acted, from the one evaluator's
    replay: mean entries per batch, the share of batches holding one entry, mean KV in use as
    a share of ``M`` (over batches with entries), the share of entries on hidden cache; then
    the policy's own :meth:`~optsched.policies.simulator.Policy.mechanisms`."""
    boe = schedule.batch_of_entry
    nb = evaluation.batch_end.size
    per = np.bincount(boe, minlength=nb)
    busy = per > 0
    out: dict[str, Any] = {
        "mean_entries_per_batch": float(per[busy].mean()) if busy.any() else 0.0,
        "one_entry_batch_share": float((per[busy] == 1).mean()) if busy.any() else 0.0,
        "mean_kv_utilisation": float(evaluation.batch_kv[busy].mean()
                                     / instance.limits.kv_capacity) if busy.any() else 0.0,
        "hidden_entry_share": float(schedule.entry_hidden.mean()) if boe.size else 0.0,
    }
    if policy is not None and hasattr(policy, "mechanisms"):
        out.update(policy.mechanisms())
    return out


__all__ = ["JctSlo", "MetricError", "mechanism_stats", "p99_tbt", "serving_metrics"]
