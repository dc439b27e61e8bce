"""BROS's per-iteration problem (paper 003, section 4.1, equations 1-8) as an integer program
on the MILP layer, to measure how far the greedy's batch (``bros``, Algorithm 1) is from the
best batch of one iteration.

Our reading of equations 1-8 (their symbols are lost in our copy of the paper): one binary
``z_e`` per candidate entry ``e`` -- every waiting request's next entry, and for a BE prefill
also its halved chunks ``c/2, c/4, ...`` (the chunks ``bros`` may use), at most one option per
request (a multiple-choice constraint):

* (1) maximise the BE entries in the batch (BE tokens generated per iteration, at the time
  bound below), ties broken towards more BE tokens processed;
* (2)-(5) iteration time ``T = k0 + sum_e z_e w_e + kpb P + kdb D + kswap sum_e z_e h_e`` with
  ``w_e`` the linear cost model's per-entry terms, ``P >= z_e`` for prefill entries, ``D >= z_e``
  for decode entries, ``h_e`` the checkpointed tokens a BE entry swaps in;
* (6) every selected RT entry meets its residual time: ``T <= R_e + B (1 - z_e)``; the most
  urgent RT request is always selected (as in Algorithm 1);
* (7) ``sum z_e <= cap`` (the adaptive batch size); also ``sum c_e z_e <= C``;
* (8) the slots taken (``c_e + h_e``) fit the free slots.

It does not model RT overwriting BE slots (lazy checkpointing), so it compares the greedy
with the best batch that needs no checkpoint; :func:`compare_iteration` reports both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .cost import LinearCost
from .milp import Model, SolveOptions, solve


@dataclass(frozen=True)
class Entry:
    """One candidate entry of one iteration."""

    req: int
    rt: bool
    tokens: int
    cached: int
    decode: bool
    residual: float
    swap_in: int = 0


def _weight(cost: LinearCost, e: Entry) -> float:
    c, m = float(e.tokens), float(e.cached)
    if e.decode:
        return cost.k1 * c + cost.kdm * m + cost.kdr
    return cost.k1 * c + cost.kpq * c * c + cost.kpm * c * m + cost.kpl * m + cost.kpr


def best_batch(entries: list[Entry], cost: LinearCost, *, cap: int, max_tokens: int,
               free_slots: int, time_limit: float = 10.0) -> tuple[list[int], str]:
    """Indices of the entries of the best batch (equations 1-8 as above) and the status."""
    n = len(entries)
    m = Model("bros-iteration")
    z = m.add_vars("z", n, vtype="B")
    pd = m.add_vars("phase", 2, vtype="B")  # [has prefill, has decode]
    w = np.array([_weight(cost, e) for e in entries])
    h = np.array([e.swap_in for e in entries], float)
    tok = np.array([e.tokens for e in entries], float)
    coef_t = w + cost.kswap * h
    big = cost.k0 + cost.kpb + cost.kdb + float(coef_t.sum())
    rt = [k for k, e in enumerate(entries) if e.rt]
    for k in rt:  # (6): k0 + kpb P + kdb D + sum w z <= R_k + big (1 - z_k)
        cols = np.concatenate([z.ids, pd.ids])
        coefs = np.concatenate([coef_t, [cost.kpb, cost.kdb]])
        coefs[k] += big
        m.add_constraint(cols, coefs, sense="<=", rhs=entries[k].residual + big - cost.k0,
                         name=f"deadline{k}")
    for k, e in enumerate(entries):  # P >= z (prefill), D >= z (decode)
        m.add_constraint([pd[1 if e.decode else 0], z[k]], [1.0, -1.0], sense=">=", rhs=0.0,
                         name=f"phase{k}")
    m.add_constraint(z.ids, np.ones(n), sense="<=", rhs=cap, name="cap")  # (7)
    m.add_constraint(z.ids, tok, sense="<=", rhs=max_tokens, name="tokens")
    m.add_constraint(z.ids, tok + h, sense="<=", rhs=free_slots, name="slots")  # (8)
    for r in {e.req for e in entries}:  # one option per request
        ks = [k for k, e in enumerate(entries) if e.req == r]
        m.add_constraint(z[ks], np.ones(len(ks)), sense="<=", rhs=1.0, name=f"one{r}")
    if rt:
        urgent = min(rt, key=lambda k: entries[k].residual)
        m.add_constraint([z[urgent]], [1.0], sense="==", rhs=1.0, name="urgent")
    be = [k for k, e in enumerate(entries) if not e.rt]
    # BE entries, ties broken towards more BE tokens (the tie terms sum to less than 1)
    m.set_objective(z[be] if be else [], 1.0 + tok[be] / (max_tokens * (n + 1)), sense="max")
    res = solve(m, "highs", SolveOptions(time_limit=time_limit, threads=1, seed=0))
    if res.values is None:
        return [], str(res.status)
    chosen = np.flatnonzero(np.rint(m.value(z, res.values)) == 1).tolist()
    return chosen, str(res.status)


def iteration_entries(policy) -> tuple[list[Entry], int]:
    """The candidate entries of a bound ``bros`` policy's next iteration, and the free slots."""
    v = policy.view
    C, P = v.limits.max_batch_tokens, v.limits.prefill_budget
    out = []
    for i in policy.waiting:
        dec = policy._decoding(i)
        c = 1 if dec else min(int(v.S[i] - v.m[i]), C, P)
        rt = bool(policy.is_rt[i])
        while c >= 1:
            out.append(Entry(i, rt, c, int(v.m[i]), dec, policy.residual(i) if rt else math.inf,
                             0 if rt else int(v.h[i])))
            if rt or dec:
                break
            c //= 2
    t = policy.table
    free = t.free_total()
    return out, free


def sample_iterations(instance, every: int = 50, limit: int = 10, time_limit: float = 10.0,
                      **params) -> list[dict]:
    """Run ``bros`` on ``instance`` and, at every ``every``-th iteration (at most ``limit``),
    solve the per-iteration IP on the state the greedy saw: BE entries and RT entries of both
    batches, and the IP's status. The greedy's batch is one feasible point of the IP only when
    it overwrites no BE slot and every RT entry meets its residual; rows say whether it does."""
    from .policies import simulate
    from .policies.bros import Bros

    rows: list[dict] = []

    class Sampling(Bros):
        def next_batch(self):
            k = self.view.batch_index
            if k % every or len(rows) >= limit:
                return super().next_batch()
            entries, free = iteration_entries(self)
            cap = self.cap
            plan = super().next_batch()
            if plan is None or not entries:
                return plan
            chosen, status = best_batch(entries, self.view.cost_model, cap=cap,
                                        max_tokens=self.view.limits.max_batch_tokens,
                                        free_slots=free, time_limit=time_limit)
            rows.append({
                "iteration": k, "candidates": len(entries),
                "greedy_be": sum(1 for i in plan.req if not self.is_rt[int(i)]),
                "greedy_rt": sum(1 for i in plan.req if self.is_rt[int(i)]),
                "greedy_checkpoints": len(plan.swap_out),
                "ip_be": sum(1 for j in chosen if not entries[j].rt),
                "ip_rt": sum(1 for j in chosen if entries[j].rt), "ip_status": status})
            return plan

    policy = Sampling(**params)
    policy.name = "bros"
    simulate(instance, policy)
    return rows


__all__ = ["Entry", "best_batch", "iteration_entries", "sample_iterations"]
