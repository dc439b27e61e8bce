"""Apt-Serve's per-iteration scheduling problem (Gao et al., *Apt-Serve*, section 5,
Definition 1, equations 7-9) and its greedy, held up against the exact optimum.

The problem at iteration ``e`` (superscript dropped): choose ``alpha_i`` (schedule request
``i``) and ``beta_i`` (hidden cache instead of KV cache) to

    max  sum_i g_i alpha_i                                            (7)
    s.t. sum_i (1 - beta_i / 2) m_i alpha_i <= M
    g_i = p_i - beta_i (|W| + |R|) rho m_i                             (8)
    alpha_i, beta_i in {0, 1}                                         (9)

with ``p_i`` the pending time, ``m_i`` the maximum (KV) memory requirement and ``rho`` the
linear extra-cost coefficient of eq. 6 (hidden cache: half the memory, a value penalty of
``K m_i`` with ``K = (|W| + |R|) rho``). Each request offers *two* mutually exclusive
items -- KV ``(weight m, value p)`` and hidden ``(weight m/2, value p - K m)`` -- so this is a
**multiple-choice knapsack** (MCKP) with two nested choices per class, not a 0-1 knapsack;
0-1 knapsack is the special case ``beta = 0`` (the paper's NP-hardness argument).

The greedy (section 5, "Greedy-based Solution"; the algorithm and proof are in an online
appendix we do not have, so it is reconstructed from the text): marginal gains per unit of
memory ``theta``. Hidden cache is used only when its gain ``(p - K m) / (m/2)`` is not smaller
than the direct KV gain ``p / m`` (i.e. ``p >= 2 K m``); then the request gives two
incremental items, hidden ``(2p/m - 2K, m/2)`` and the upgrade to KV ``(2K, m/2)``; otherwise
one item, KV ``(p/m, m)``. Items are taken in decreasing ``theta`` while they fit; the first
item that does not fit is compared *alone* with what was taken (the classic 2-approximation
for knapsack). ``compare=False`` drops that comparison (known to be arbitrarily bad for 0-1
knapsack).

What the paper's condition really is: for a two-choice class the test ``p >= 2 K m`` is
exactly the LP-dominance (upper convex hull) filter of MCKP, so the incremental items solve
the LP relaxation greedily and ``prefix + critical item >= LP >= OPT`` -- the 2-approximation
survives the multiple-choice structure **provided every choice kept fits in M on its own**.
It fails when a request's KV cache does not fit (``m > M``) but its hidden cache does and is
LP-dominated (``K m < p < 2 K m``): the filter discards the only feasible choice (e.g. one
request ``p = 10, m = 10, K = 0.6, M = 6``: greedy 0, optimum 4 -- ratio 0). That is a
counterexample to the claimed ratio 2 as the algorithm is described (``M^e = M~ - sum_R m``
for prefill iterations makes ``m > M^e`` ordinary). ``repaired=True`` first drops choices that
cannot fit alone and recomputes the filter; then the ratio-2 proof applies.

**One greedy.** :func:`greedy` is the batch choice of the ``aptserve`` policies
(:mod:`optsched.policies.aptserve`) as well as the function ``check-claim aptserve-2approx``
checks: the policy builds an :class:`AptProblem` per iteration and calls it (repaired by
default, as described with ``repaired=False``). Two generalisations serve the policy and leave
the paper's problem unchanged when unused: ``hidden_memory`` states each request's
hidden-cache memory (the simulator counts whole blocks, ``b * ceil(m / 2b)`` instead of
``m / 2``; the marginal gains become ``(p - K m) / h`` for the hidden item and ``K m / (m - h)``
for the upgrade, and the filter keeps hidden cache when ``(p - K m) / h >= p / m``, which is
``p >= 2 K m`` for ``h = m / 2`` and, as there, exactly the upper-convex-hull test; ``h >= m``
leaves KV only), and ``allow_hidden=False`` is the KV-only problem (0-1 knapsack).

**The authors' implementation** (github.com/eddiegaoo/Apt-Serve,
``additional_designs/core/aptserve_scheduler.py``, read for comparison, nothing copied)
differs from this function in ways we do not follow, each for a stated reason:

* the memory unit is the cache block; hidden cache takes ``ceil(n / 2)`` of a request's ``n``
  KV blocks and the upgrade ``floor(n / 2)`` -- the same as ``hidden_memory`` above with the
  simulator's block rounding (we agree);
* the hull filter is ``p - K m >= p / 2`` per request -- the paper's ``p >= 2 K m`` (we agree),
  and a one-block request is KV only (ours: ``h >= m``, the same);
* the critical-item comparison exists only for prefill iterations, compares the critical
  item's *incremental* value (an upgrade's ``K m``, not the request's whole value) with the
  prefix, and then stores the item tuple where request positions are expected, so the
  request is never actually scheduled alone and the batch comes out empty; decode iterations
  have no comparison at all. We compare the critical request alone, at its whole value, in
  every iteration (``compare=True``), which is what the ratio-2 argument needs;
* the scaling factor ``|W| + |R|`` is reduced by the number of requests already past their
  SLO (the paper: ``|W| + |R|``); the policy follows the paper and documents it;
* there is no ``repaired`` filter: a request whose KV cache does not fit in ``M^e`` while its
  hidden cache would still loses its hidden item when the filter drops it (the failure
  above).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from typing import Any

NONE, HIDDEN, KV = 0, 1, 2
_CHOICE_NAMES = {NONE: "none", HIDDEN: "hidden", KV: "kv"}


@dataclass(frozen=True)
class AptProblem:
    """Definition 1 at one iteration: pending times ``p``, KV memory ``m``, ``K = (|W|+|R|) rho``,
    memory budget ``M`` (eq. 7)."""

    pending: tuple[float, ...]
    memory: tuple[float, ...]
    scale: float
    capacity: float
    #: hidden-cache memory per request (default ``m_i / 2``, eq. 7); see the module docstring
    hidden_memory: tuple[float, ...] | None = None
    #: False: the KV-only problem (every ``beta_i = 0``)
    allow_hidden: bool = True

    def __post_init__(self):
        if len(self.pending) != len(self.memory):
            raise ValueError("pending and memory differ in length")
        if any(m <= 0 for m in self.memory) or self.scale < 0 or self.capacity < 0:
            raise ValueError("need m_i > 0, K >= 0, M >= 0")
        if self.hidden_memory is not None and (
                len(self.hidden_memory) != len(self.memory)
                or any(not 0 < h for h in self.hidden_memory)):
            raise ValueError("hidden_memory: one positive value per request")

    @property
    def n(self) -> int:
        return len(self.pending)

    def value(self, i: int, choice: int) -> float:
        """``g_i alpha_i`` of eq. 8."""
        if choice == NONE:
            return 0.0
        return self.pending[i] - (self.scale * self.memory[i] if choice == HIDDEN else 0.0)

    def weight(self, i: int, choice: int) -> float:
        """``(1 - beta_i/2) m_i alpha_i`` of eq. 7 (``hidden_memory[i]`` for hidden cache when
        given)."""
        if choice == NONE:
            return 0.0
        if choice == KV:
            return self.memory[i]
        return self.memory[i] * 0.5 if self.hidden_memory is None else self.hidden_memory[i]

    @property
    def choices(self) -> tuple[int, ...]:
        return (NONE, HIDDEN, KV) if self.allow_hidden else (NONE, KV)

    def evaluate(self, choice: tuple[int, ...]) -> tuple[float, float]:
        return (sum(self.value(i, c) for i, c in enumerate(choice)),
                sum(self.weight(i, c) for i, c in enumerate(choice)))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pending": list(self.pending), "memory": list(self.memory),
                             "K": self.scale, "M": self.capacity}
        if self.hidden_memory is not None:
            d["hidden_memory"] = list(self.hidden_memory)
        if not self.allow_hidden:
            d["allow_hidden"] = False
        return d


@dataclass(frozen=True)
class AptSelection:
    """A choice per request (``none``/``hidden``/``kv``) with its value and memory."""

    choice: tuple[int, ...]
    value: float
    weight: float
    how: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"choice": [_CHOICE_NAMES[c] for c in self.choice], "value": self.value,
                "memory": self.weight, "how": self.how}


def _selection(prob: AptProblem, choice, how: str) -> AptSelection:
    v, w = prob.evaluate(tuple(choice))
    return AptSelection(tuple(choice), v, w, how)


def exact_bruteforce(prob: AptProblem) -> AptSelection:
    """Exact optimum by enumerating all ``3^n`` choices (small ``n``)."""
    if prob.n > 13:
        raise ValueError("exact_bruteforce: n > 13; use exact_ip")
    best, best_c = -math.inf, None
    eps = 1e-9 * max(1.0, prob.capacity)
    for ch in itertools.product(prob.choices, repeat=prob.n):
        v, w = prob.evaluate(ch)
        if w <= prob.capacity + eps and v > best + 1e-12:
            best, best_c = v, ch
    return _selection(prob, best_c, "exact (enumeration)")


def exact_ip(prob: AptProblem, solver: str = "highs", time_limit: float | None = 60.0) -> AptSelection:
    """Exact optimum of eqs. 7-9 as an integer program through :mod:`optsched.milp`:
    binaries ``x_kv[i] = alpha_i (1 - beta_i)`` and ``x_h[i] = alpha_i beta_i`` (a linearisation
    of the products), ``x_kv + x_h <= 1``, ``sum m x_kv + m/2 x_h <= M``."""
    import numpy as np

    from .. import milp

    n = prob.n
    m = np.asarray(prob.memory, float)
    p = np.asarray(prob.pending, float)
    h = np.array([prob.weight(i, HIDDEN) for i in range(n)], float)
    model = milp.Model("aptserve")
    xk = model.add_vars("x_kv", n, vtype="B")
    xh = model.add_vars("x_h", n, vtype="B", ub=1.0 if prob.allow_hidden else 0.0)
    if n:
        model.add_constraints(rows=np.repeat(np.arange(n), 2),
                              cols=np.stack([xk.ids, xh.ids], axis=1).ravel(), coefs=1.0,
                              hi=1.0, name="one_choice", nrows=n)
        model.add_constraint(np.concatenate([xk.ids, xh.ids]), np.concatenate([m, h]),
                             hi=prob.capacity, name="memory")
    model.set_objective(np.concatenate([xk.ids, xh.ids]),
                        np.concatenate([p, p - prob.scale * m]), sense="max")
    res = milp.solve(model, solver, milp.SolveOptions(time_limit=time_limit, rel_gap=1e-9,
                                                      abs_gap=1e-9))
    if res.status != milp.Status.OPTIMAL:
        raise RuntimeError(f"aptserve IP: solver status {res.status}: {res.message}")
    vk = np.asarray(model.value(xk, res.values))
    vh = np.asarray(model.value(xh, res.values))
    choice = tuple(KV if vk[i] > 0.5 else HIDDEN if vh[i] > 0.5 else NONE for i in range(n))
    return _selection(prob, choice, f"exact (IP, {solver})")


@dataclass(frozen=True)
class _Item:
    theta: float
    req: int
    dm: float
    kind: int  # HIDDEN (first half), KV (direct, or the upgrade after hidden)
    upgrade: bool = False


def greedy_items(prob: AptProblem, repaired: bool = False) -> list[_Item]:
    """The candidate schedule set Upsilon (eq. 10) with the refined marginal gains, sorted by
    decreasing theta (a request's hidden item before its upgrade)."""
    K, M = prob.scale, prob.capacity
    items: list[tuple[float, int, int, _Item]] = []
    for i, (p, m) in enumerate(zip(prob.pending, prob.memory)):
        h = prob.weight(i, HIDDEN)
        th_kv = p / m
        if not prob.allow_hidden:
            if m <= M or not repaired:
                items.append((-th_kv, i, 0, _Item(th_kv, i, m, KV)))
            continue
        kv_fits = m <= M or not repaired
        hidden_fits = h <= M or not repaired
        if prob.hidden_memory is None:  # the paper's h = m/2 (the formulas as printed)
            th_h, th_up = 2 * p / m - 2 * K, 2 * K
        else:
            th_h = (p - K * m) / h
            th_up = K * m / (m - h) if h < m else -math.inf
        # th_kv is a weighted mean of th_h and th_up, so th_h >= th_kv implies th_up <= th_h:
        # clamping only undoes rounding (p = 15, m = 20, h = 12, K = 0.3 gives th_up one ulp
        # above th_h), which would put the upgrade before its hidden item and take a KV cache
        # whose first 12 units were never counted
        th_up = min(th_up, th_h)
        if repaired and not kv_fits:
            if hidden_fits and p - K * m > 0:
                items.append((-th_h, i, 0, _Item(th_h, i, h, HIDDEN)))
            continue
        if h < m and th_h >= th_kv and hidden_fits:
            items.append((-th_h, i, 0, _Item(th_h, i, h, HIDDEN)))
            items.append((-th_up, i, 1, _Item(th_up, i, m - h, KV, upgrade=True)))
        else:
            items.append((-th_kv, i, 0, _Item(th_kv, i, m, KV)))
    items.sort(key=lambda t: (t[0], t[1], t[2]))
    return [t[3] for t in items]


def greedy(prob: AptProblem, compare: bool = True, repaired: bool = False) -> AptSelection:
    """Apt-Serve's greedy (module docstring): take items by decreasing marginal gain per unit
    memory while they fit; stop at the first that does not and, if ``compare``, return that
    item's request scheduled alone (its cache type after the item) when that is better."""
    M = prob.capacity
    eps = 1e-9 * max(1.0, M)
    choice = [NONE] * prob.n
    used = 0.0
    critical = None
    for it in greedy_items(prob, repaired):
        if used + it.dm <= M + eps:
            used += it.dm
            choice[it.req] = it.kind
        else:
            critical = it
            break
    taken = _selection(prob, choice, "greedy prefix")
    if not compare or critical is None:
        return taken
    alone = [NONE] * prob.n
    alone[critical.req] = critical.kind
    alone_sel = _selection(prob, alone, "critical item alone")
    if alone_sel.weight <= M + eps and alone_sel.value > taken.value:
        return alone_sel
    return taken


VARIANTS = {
    "paper": dict(compare=True, repaired=False),
    "no-comparison": dict(compare=False, repaired=False),
    "repaired": dict(compare=True, repaired=True),
    "repaired-no-comparison": dict(compare=False, repaired=True),
}


def random_problem(rng: random.Random, max_requests: int) -> AptProblem:
    """A random instance: n in [1, max_requests], m_i in 1..20, p_i in 0..20 (integers),
    K in {0, 0.05, ..., 1}, M in 1..sum m."""
    n = rng.randint(1, max_requests)
    m = tuple(float(rng.randint(1, 20)) for _ in range(n))
    p = tuple(float(rng.randint(0, 20)) for _ in range(n))
    K = rng.randint(0, 20) / 20
    M = float(rng.randint(1, int(sum(m))))
    return AptProblem(p, m, K, M)


def ratio(prob: AptProblem, sel: AptSelection, opt: AptSelection) -> float:
    return 1.0 if opt.value <= 1e-12 else sel.value / opt.value


def _violates(prob: AptProblem, variant: str) -> bool:
    opt = exact_bruteforce(prob)
    return greedy(prob, **VARIANTS[variant]).value < opt.value / 2 - 1e-9


def shrink(prob: AptProblem, variant: str) -> AptProblem:
    """A minimal violating problem: drop requests, then lower integers, while it still violates."""
    cur = prob
    changed = True
    while changed:
        changed = False
        for i in range(cur.n):
            if cur.n == 1:
                break
            cand = AptProblem(cur.pending[:i] + cur.pending[i + 1:], cur.memory[:i] + cur.memory[i + 1:],
                              cur.scale, min(cur.capacity, sum(cur.memory) - cur.memory[i]))
            if cand.capacity >= 0 and _violates(cand, variant):
                cur, changed = cand, True
                break
        if changed:
            continue
        for field_name in ("memory", "pending", "capacity"):
            vals = list(getattr(cur, field_name)) if field_name != "capacity" else [cur.capacity]
            for i in range(len(vals)):
                for smaller in range(0, int(vals[i])):
                    if field_name == "memory" and smaller < 1:
                        continue
                    new = list(vals)
                    new[i] = float(smaller)
                    kw: dict[str, Any] = {"pending": cur.pending, "memory": cur.memory, "scale": cur.scale,
                          "capacity": cur.capacity}
                    kw[field_name] = tuple(new) if field_name != "capacity" else new[0]
                    cand = AptProblem(**kw)
                    if _violates(cand, variant):
                        cur, changed = cand, True
                        break
                if changed:
                    break
            if changed:
                break
    return cur


@dataclass
class VariantStats:
    violations: int = 0
    worst_ratio: float = 1.0
    worst: AptProblem | None = None
    first_violation: AptProblem | None = field(default=None, repr=False)


def check_2approx(trials: int = 1000, seed: int = 0, max_requests: int = 6) -> dict[str, VariantStats]:
    """Greedy value >= optimum / 2 on random problems, per variant (worst ratio = min greedy/opt)."""
    rng = random.Random(seed)
    stats = {v: VariantStats() for v in VARIANTS}
    for _ in range(trials):
        prob = random_problem(rng, max_requests)
        opt = exact_bruteforce(prob)
        for name, kw in VARIANTS.items():
            sel = greedy(prob, **kw)
            r = ratio(prob, sel, opt)
            st = stats[name]
            if r < st.worst_ratio - 1e-12:
                st.worst_ratio, st.worst = r, prob
            if sel.value < opt.value / 2 - 1e-9:
                st.violations += 1
                if st.first_violation is None or prob.n < st.first_violation.n:
                    st.first_violation = prob
    return stats
