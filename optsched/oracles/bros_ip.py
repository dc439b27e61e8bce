"""BROS's per-iteration problem (paper 003, section 4.1, equations 1-8) as an integer program
on the MILP layer, to measure how far the greedy's batch (``bros``, Algorithm 1) is from the
best batch of one iteration.

Our reading of equations 1-8 (their symbols are lost in our copy of the paper): one binary
``z_e`` per candidate entry ``e`` -- every waiting request's next entry, and for a BE prefill
also its halved chunks ``c/2, c/4, ...`` (the chunks ``bros`` may use), at most one option per
request (a multiple-choice constraint):

* (1) maximise the BE entries in the batch (BE tokens generated per iteration, at the time
  bound below), ties broken towards more BE tokens processed;
* (2)-(5) iteration time ``T = k0 + sum_e z_e w_e + kpb P + kdb D + kswap (sum_e z_e h_e +
  sum_j y_j)`` with ``w_e`` the linear cost model's per-entry terms, ``P >= z_e`` for prefill
  entries, ``D >= z_e`` for decode entries, ``h_e`` the checkpointed tokens a BE entry swaps
  in (the paper's checkpointed blocks of the scheduled requests, eq. 5) and ``y_j`` below;
* (6) every selected RT entry meets its residual time: ``T <= R_e + B (1 - z_e)``; the most
  urgent RT request is always selected (as in Algorithm 1);
* (7) ``sum z_e <= cap`` (the adaptive batch size); also ``sum c_e z_e <= C``;
* (8) the slots taken (``c_e + h_e``) fit the free slots plus the BE slots RT entries
  overwrite: ``sum_e (c_e + h_e) z_e <= F + sum_j y_j``.

**Lazy checkpointing (section 5.2) in the IP.** The paper's equations count only empty
blocks in (8) and swap-*in* time in (5); its RT requests get more memory from FindPreemptBlock,
outside the problem. We add it so that the IP can choose every batch the greedy can:
``y_j`` (integer, ``0 <= y_j <= G_j u_j``) BE slots of request ``j`` overwritten by RT
entries, with ``u_j`` binary, ``G_j`` the slots ``j`` holds on the GPU; ``sum_j y_j <= sum
of the selected RT entries' c_e`` (only RT entries overwrite); a checkpointed request is not
in the batch (``u_j + sum_{e of j} z_e <= 1``, Algorithm 1 protects batch members); the
checkpointed tokens cost ``kswap`` each in ``T`` (our evaluator charges swap-outs, semantics
section 6; the greedy's estimate does too); and the host reservation of ``bros``
(``optsched.policies.bros_blocks``): ``sum_j r_j u_j <= host room``, ``r_j`` being ``j``'s
whole KV unless it already holds a checkpoint (then 0).

**What the IP abstracts, and why the comparison is fair.** Memory is aggregated: (8) counts
slots, not which block they are in, and a BE request's slots are all overwritable. Our
``bros`` has stricter geometry (a BE request cannot use free slots in a block another BE
request or an RT request's left side holds; RT overwrites only blocks without another RT
owner). So the IP's memory constraint is a *relaxation* of the greedy's: every batch the
greedy builds with chunk sizes among the IP's options and RT entries meeting their
residual is a feasible point of the IP, and the IP's optimum is an upper bound on the BE
entries the greedy could have had at that iteration. A greedy batch with fewer BE entries
than the IP's optimum is behind the best batch of equations 1-8 *under the relaxed memory*;
the gap is not necessarily reachable with BROS's block layout. The greedy's chunks are
derived from the room left, so some are not among the IP's options (halvings of the whole
remaining prefill): :func:`sample_iterations` says per row whether the greedy's batch is
an IP point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..cost import LinearCost
from ..milp import Model, SolveOptions, solve
from ..policies import simulate
from ..policies.bros import Bros
from ..solve_types import Status


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


class BatchChoice(NamedTuple):
    """The IP's batch: indices of the chosen entries, the solver status, and the BE slots
    RT entries overwrite per BE request (lazy checkpoints)."""

    chosen: list[int]
    status: Status
    checkpoints: dict[int, int]


@dataclass(frozen=True)
class Overwritable:
    """A BE request ``req`` not yet in the batch whose ``gpu_slots`` RT entries may overwrite;
    its first checkpoint reserves ``host_cost`` host tokens (its whole KV; 0 when it already
    holds a checkpoint)."""

    req: int
    gpu_slots: int
    host_cost: int


def best_batch(entries: list[Entry], cost: LinearCost, *, cap: int, max_tokens: int,
               free_slots: int, overwritable: tuple[Overwritable, ...] = (),
               host_free: int = 0, time_limit: float = 10.0) -> BatchChoice:
    """The best batch of equations 1-8 as read in the module docstring, lazy checkpoints of
    ``overwritable`` BE requests included (none by default)."""
    n = len(entries)
    m = Model("bros-iteration")
    z = m.add_vars("z", n, vtype="B")
    pd = m.add_vars("phase", 2, vtype="B")  # [has prefill, has decode]
    nw = len(overwritable)
    gpu = np.array([o.gpu_slots for o in overwritable], float)
    y = m.add_vars("overwritten", nw, ub=gpu, vtype="I")
    u = m.add_vars("checkpointed", nw, vtype="B")
    w = np.array([_weight(cost, e) for e in entries])
    h = np.array([e.swap_in for e in entries], float)
    tok = np.array([e.tokens for e in entries], float)
    coef_t = np.concatenate([w + cost.kswap * h, np.full(nw, cost.kswap), [cost.kpb, cost.kdb]])
    cols_t = np.concatenate([z.ids, y.ids, pd.ids])
    big = cost.k0 + cost.kpb + cost.kdb + float(coef_t.sum() - cost.kpb - cost.kdb)
    big += cost.kswap * float(gpu.sum())
    rt = [k for k, e in enumerate(entries) if e.rt]
    for k in rt:  # (6): T <= R_k + big (1 - z_k)
        coefs = coef_t.copy()
        coefs[k] += big
        m.add_constraint(cols_t, coefs, sense="<=", rhs=entries[k].residual + big - cost.k0,
                         name=f"deadline{k}")
    for k, e in enumerate(entries):  # P >= z (prefill), D >= z (decode)
        m.add_constraint([pd[1 if e.decode else 0], z[k]], [1.0, -1.0], sense=">=", rhs=0.0,
                         name=f"phase{k}")
    m.add_constraint(z.ids, np.ones(n), sense="<=", rhs=cap, name="cap")  # (7)
    m.add_constraint(z.ids, tok, sense="<=", rhs=max_tokens, name="tokens")
    m.add_constraint(np.concatenate([z.ids, y.ids]), np.concatenate([tok + h, -np.ones(nw)]),
                     sense="<=", rhs=free_slots, name="slots")  # (8), overwrites included
    _checkpoint_rows(m, entries, overwritable, z, y, u, tok, host_free)
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
        return BatchChoice([], res.status, {})
    chosen = np.flatnonzero(np.rint(m.value(z, res.values)) == 1).tolist()
    yv = np.rint(np.atleast_1d(m.value(y, res.values))).astype(int) if nw else []
    ckpt = {o.req: int(t) for o, t in zip(overwritable, yv) if t > 0}
    return BatchChoice(chosen, res.status, ckpt)


def _checkpoint_rows(m: Model, entries, overwritable, z, y, u, tok, host_free: int) -> None:
    """The lazy-checkpoint rows of the module docstring: ``y_j <= G_j u_j``, only RT entries
    overwrite, a checkpointed request is not in the batch, the host reservation."""
    if not overwritable:
        return
    rt = [k for k, e in enumerate(entries) if e.rt]
    for q, o in enumerate(overwritable):
        m.add_constraint([y[q], u[q]], [1.0, -float(o.gpu_slots)], sense="<=", rhs=0.0,
                         name=f"ckpt{o.req}")
        ks = [k for k, e in enumerate(entries) if e.req == o.req]
        m.add_constraint([u[q], *z[ks].tolist()], np.ones(1 + len(ks)), sense="<=", rhs=1.0,
                         name=f"out{o.req}")
    m.add_constraint(np.concatenate([y.ids, z[rt]]), np.concatenate(
        [np.ones(len(overwritable)), -tok[rt]]), sense="<=", rhs=0.0, name="rt_overwrites")
    m.add_constraint(u.ids, np.array([o.host_cost for o in overwritable], float), sense="<=",
                     rhs=host_free, name="host")


def iteration_entries(policy) -> tuple[list[Entry], int]:
    """The candidate entries of a bound ``bros`` policy's next iteration, and the free slots.

    RT entries: the whole remaining prefill, or one decode token. BE entries: a decode token,
    or prefill chunks -- the halvings ``c, c/2, ...`` of the whole remaining prefill and of
    the largest chunk the request's own room allows (``bros`` starts from the latter). A BE
    option whose tokens plus swap-in exceed the request's room at the start of the
    iteration (free slots in blocks whose BE side is free or its own) is left out: the
    greedy can never take it, and the room only shrinks within an iteration."""
    v, t = policy.view, policy.table
    C, P = v.limits.max_batch_tokens, v.limits.prefill_budget
    out = []
    for i in policy.waiting:
        dec = policy._decoding(i)
        full = 1 if dec else min(int(v.S[i] - v.m[i]), C, P)
        rt = bool(policy.is_rt[i])
        m, h = int(v.m[i]), int(v.h[i])  # h > 0: checkpointed BE, or a dropped RT request
        if rt or dec:
            options = [full]
        else:
            room = t.room(i, False) - h
            options = sorted(_halvings(full) | _halvings(min(full, room)), reverse=True)
        for c in options:
            if not rt and c + h > t.room(i, False):  # an RT request may overwrite BE slots
                continue
            out.append(Entry(i, rt, c, m, dec, policy.residual(i) if rt else math.inf, h))
    return out, t.free_total()


def _halvings(c: int) -> set[int]:
    out = set()
    while c >= 1:
        out.add(c)
        c //= 2
    return out


def iteration_overwritable(policy) -> tuple[tuple[Overwritable, ...], int]:
    """The BE requests RT entries may overwrite at a bound ``bros`` policy's next iteration
    (holding GPU slots in a shared table), and the unreserved host room."""
    v, t = policy.view, policy.table
    policy._reserve_host()
    if not t.shared:
        return (), t.host_free
    out = tuple(Overwritable(j, t.held(j), 0 if v.h[j] > 0 else int(v.m[j]))
                for j in policy.waiting if not policy.is_rt[j] and t.held(j) > 0)
    return out, t.host_free


def greedy_is_point(policy, entries: list[Entry], plan, *, cap: int, free_slots: int,
                    overwritable: tuple[Overwritable, ...], host_free: int) -> bool:
    """Whether ``bros``'s batch ``plan`` (built on the state ``entries`` describe) is a
    feasible point of :func:`best_batch`: its chunks are IP options, it meets (6)-(8) and
    the checkpoint rows, and it holds the most urgent RT entry."""
    opts = {(e.req, e.tokens): k for k, e in enumerate(entries)}
    ks = [opts.get((int(i), int(c))) for i, c in zip(plan.req, plan.tokens)]
    if not ks or None in ks or len(ks) > cap:
        return False
    chosen = [entries[k] for k in ks if k is not None]
    ckpt = {int(j): int(t) for j, t in zip(plan.swap_out, plan.swap_out_tokens)}
    by_req = {o.req: o for o in overwritable}
    if any(j not in by_req or t > by_req[j].gpu_slots for j, t in ckpt.items()):
        return False
    overwritten = sum(ckpt.values())
    rt = [e for e in chosen if e.rt]
    slots = sum(e.tokens + e.swap_in for e in chosen)
    if (sum(e.tokens for e in chosen) > policy.view.limits.max_batch_tokens
            or slots > free_slots + overwritten
            or overwritten > sum(e.tokens for e in rt)
            or sum(by_req[j].host_cost for j in ckpt) > host_free):
        return False
    all_rt = [e for e in entries if e.rt]
    if all_rt and min(all_rt, key=lambda e: e.residual).req not in {e.req for e in rt}:
        return False
    t = policy.estimate([e.req for e in chosen], [e.tokens for e in chosen],
                        sum(e.swap_in for e in chosen) + overwritten)
    return all(t <= e.residual + 1e-12 for e in rt)


def sample_iterations(instance, every: int = 50, limit: int = 10, time_limit: float = 10.0,
                      **params) -> list[dict]:
    """Run ``bros`` on ``instance`` and, at every ``every``-th iteration (at most ``limit``;
    iterations in drain mode are skipped), solve the per-iteration IP on the state the greedy
    saw. A row: BE and RT entries and checkpointed tokens of both batches, the IP's status,
    and whether the greedy's batch is a feasible point of the IP (:func:`greedy_is_point`)."""

    rows: list[dict] = []

    class Sampling(Bros):
        def next_batch(self):
            k = self.view.batch_index
            if k % every or len(rows) >= limit or self.target is not None:
                return super().next_batch()
            entries, free = iteration_entries(self)
            over, host_free = iteration_overwritable(self)
            cap = min(self.cap, self.view.limits.max_batch_size or self.cap)
            plan = super().next_batch()
            if plan is None or not entries or self.target is not None:
                return plan
            ip = best_batch(entries, self.view.cost_model, cap=cap,
                            max_tokens=self.view.limits.max_batch_tokens, free_slots=free,
                            overwritable=over, host_free=host_free, time_limit=time_limit)
            rows.append({
                "iteration": k, "candidates": len(entries),
                "greedy_be": sum(1 for i in plan.req if not self.is_rt[int(i)]),
                "greedy_rt": sum(1 for i in plan.req if self.is_rt[int(i)]),
                "greedy_checkpointed": int(sum(plan.swap_out_tokens)) if len(plan.req) else 0,
                "greedy_is_ip_point": greedy_is_point(self, entries, plan, cap=cap,
                                                      free_slots=free, overwritable=over,
                                                      host_free=host_free),
                "ip_be": sum(1 for j in ip.chosen if not entries[j].rt),
                "ip_rt": sum(1 for j in ip.chosen if entries[j].rt),
                "ip_checkpointed": sum(ip.checkpoints.values()), "ip_status": str(ip.status)})
            return plan

    policy = Sampling(**params)
    policy.name = "bros"
    simulate(instance, policy)
    return rows


__all__ = ["BatchChoice", "Entry", "Overwritable", "best_batch", "greedy_is_point",
           "iteration_entries", "iteration_overwritable", "sample_iterations"]
