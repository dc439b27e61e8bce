"""The cluster MILP (``formulations/cluster.md``): requests assigned to engines (eq. K1) plus
one copy of InferMax's tight batch model per engine (``formulations/infermax.md`` sections
2-3) in which a request exists only where it is assigned (eqs. K2-K4), the engines' symmetry
broken (eq. K5) and the cluster objective over all engines (eq. K6).

Each engine's rows are built by :class:`_EngineBuilder`, the single-engine builder of
:mod:`optsched.formulations.infermax.model` on the engine's limits and cost model
(:meth:`optsched.instance.Instance.for_engine`), writing into one shared model under the
prefix ``e<k>_``; the rows that say "request ``i`` is served" become "served when assigned"
(eq. K3). :func:`build` returns a :class:`ClusterModel`; :meth:`ClusterModel.decode` turns a
solution vector into one cluster schedule (every batch naming its engine).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ... import milp
from ...instance import Instance
from ...placement import PlacementBuilder
from ...schedule import Schedule, ScheduleBuilder
from ...solve_types import Objective
from ..base import FormulationError, Hypotheses
from ..infermax.horizon import batch_overhead_lower_bound, request_work_lower_bound
from ..infermax.model import _Data, _elem, _InfermaxBuilder, _model_data, _Rows

#: request rows of the single-engine model that say "request i is served" (eqs. 17, 18, 25):
#: their constant side is multiplied by the assignment ``a[i, e]`` (eq. K3)
_SERVED_ROWS = ("n_entries", "tokens_total", "n_dec", "n_pre", "ce_count")


class _Prefixed:
    """The shared model seen by one engine's builder: block and row-group names get the
    engine's prefix; everything else is the shared :class:`optsched.milp.Model`."""

    def __init__(self, model: milp.Model, prefix: str):
        self._model, self._prefix = model, prefix

    def add_vars(self, name: str, *args: Any, **kw: Any) -> milp.VarBlock:
        return self._model.add_vars(self._prefix + name, *args, **kw)

    def add_constraints(self, *args: Any, name: str | None = None, **kw: Any) -> Any:
        return self._model.add_constraints(*args, name=None if name is None else
                                           self._prefix + name, **kw)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._model, attr)


class _EngineBuilder(_InfermaxBuilder):
    """One engine's copy of the tight single-engine model in which request ``i`` exists only
    when ``a[i]`` (the column of its assignment to this engine) is 1 (eqs. K2-K4)."""

    def __init__(self, d: _Data, shared: milp.Model, prefix: str, assign: np.ndarray):
        # the parent's __init__, on the shared model under this engine's prefix
        self.assign = assign  # column ids a[i, e], one per request
        self.d = d
        self.md = _Prefixed(shared, prefix)  # type: ignore[assignment]
        self.rows = _Rows(self.md)
        self.v = {}
        self.cell = _elem(d.shape)
        self.n_cells = d.n * d.J
        self.batch_sum = np.arange(d.J)[None, :]
        self.request_sum = np.arange(d.n)[:, None]
        self.batch_row = np.arange(d.J)
        self.s = self.state_variables()
        self.bits = 0
        self.telescope = False

    def state_variables(self):
        """(eq. K2) eq. 1's termination ``g = O``, ``fin = ftk = 1`` after the last slot hold
        for an assigned request only: ``g[i, J] = O_i a_i``, ``fin = ftk = a_i``; an entry
        only where assigned, ``x[i, j] <= a_i``."""
        s = super().state_variables()
        d, v, J = self.d, self.v, self.d.J
        last = lambda blk: blk.ids[:, J]  # noqa: E731
        self.md.set_bounds(last(v["g"]), lb=0.0)
        self.md.set_bounds(last(v["fin"]), lb=0.0)
        self.md.set_bounds(last(v["ftk"]), lb=0.0)
        req = np.arange(d.n)
        self.add("K2_g", d.n, [(req, last(v["g"]), 1.0), (req, self.assign, -d.O)], 0, 0)
        self.add("K2_fin", d.n, [(req, last(v["fin"]), 1.0), (req, self.assign, -1.0)], 0, 0)
        self.add("K2_ftk", d.n, [(req, last(v["ftk"]), 1.0), (req, self.assign, -1.0)], 0, 0)
        self.add_cells("K2_x", [(s.entry, 1.0), (np.broadcast_to(self.assign[:, None], d.shape),
                                                  -1.0)], hi=0)
        return s

    def add(self, name: str, nrows: int, terms: list, lo: Any = None, hi: Any = None) -> None:
        """(eq. K3) a served row ``lo_i <= sum ... <= hi_i`` of eqs. 17, 18, 25 becomes
        ``lo_i a_i <= sum ... <= hi_i a_i``; (eq. K4) the busy-time row of eq. 21 counts the
        work of the assigned requests only."""
        if name in _SERVED_ROWS:
            given = lo if lo is not None else hi
            coef = np.broadcast_to(np.asarray(given, float), (nrows,))
            req = np.arange(nrows)
            terms = [*terms, (req, self.assign, -coef)]
            lo = None if lo is None else 0.0
            hi = None if hi is None else 0.0
        elif name == "busy_lb":
            work = request_work_lower_bound(self.d.inst) * self.d.scale
            terms = [*terms, (np.zeros(self.d.n, np.int64), self.assign, -work)]
            lo = 0.0
        super().add(name, nrows, terms, lo, hi)

    def objective(self):
        """The cluster sets the objective (eq. K6); an engine sets none."""
        return np.zeros(0, np.int64), np.zeros(0), 0.0

    def hypotheses(self, objective: Any) -> None:
        """The cluster states ``at_most`` on its own objective (eq. K6)."""


@dataclass(frozen=True, eq=False)
class EngineBlock:
    """One engine's part of the built model: its position, the sub-instance it was built on
    (the engine's limits and cost model), its batch slots and variable blocks."""

    position: int
    instance: Instance
    J: int
    v: dict[str, milp.VarBlock]
    online: bool


@dataclass(frozen=True, eq=False)
class ClusterModel:
    """The built cluster MILP; ``assign`` is the ``(n, R)`` block of eq. K1."""

    instance: Instance
    objective: str
    scale: float
    model: milp.Model
    assign: milp.VarBlock
    engines: tuple[EngineBlock, ...]
    objective_cols: np.ndarray
    objective_coefs: np.ndarray
    objective_const: float

    def assignment(self, values: np.ndarray) -> np.ndarray:
        """Engine position of every request in a solution."""
        return np.argmax(self.model.value(self.assign, values), axis=1)

    def objective_value(self, values: np.ndarray) -> float:
        """The solution's objective in seconds (time units under unit time)."""
        return float(values[self.objective_cols] @ self.objective_coefs
                     + self.objective_const) / self.scale

    def decode(self, values: np.ndarray) -> Schedule:
        """The cluster schedule of a solution: per engine, its used slots in order (entries
        ``x, c``, evictions ``e``) at the earliest starts the semantics allows (no stated
        starts: in this model idling never lowers an objective, so the replay is at least as
        good as the model's point, and equal at an optimum)."""
        per_engine = []
        for eb in self.engines:
            x = np.rint(self.model.value(eb.v["x"], values)).astype(int)
            c = np.rint(self.model.value(eb.v["c"], values)).astype(int)
            ev = np.rint(self.model.value(eb.v["e"], values)).astype(int)
            batches = []
            for j in range(eb.J):
                req = np.flatnonzero(x[:, j] > 0).tolist()
                out = np.flatnonzero(ev[:, j] > 0).tolist()
                if req or out:
                    batches.append(EngineBatch(req, [int(c[i, j]) for i in req], out))
            per_engine.append(batches)
        return cluster_schedule(self.instance, per_engine)


    def partial_start(self, schedule: Schedule) -> dict[str, np.ndarray] | None:
        """A partial MIP start from a cluster schedule in which every request stays on one
        engine: the assignment (identical engines relabelled in the order of their first
        request, eq. K5) and every engine's ``x, c, e`` slot by slot; the solver completes the
        rest. None when the schedule does not fit the model's slots or moves a request."""
        per = engine_batches(self.instance, schedule)
        if per is None:
            return None
        order = list(range(len(per)))
        for group in identical_groups(self.instance):
            first = sorted(group, key=lambda k: min((i for b in per[k] for i in b.req),
                                                    default=self.instance.n))
            for pos, k in zip(group, first):
                order[pos] = k
        n = self.instance.n
        start: dict[str, np.ndarray] = {}
        a = np.zeros((n, len(per)))
        for eb in self.engines:
            batches = per[order[eb.position]]
            if len(batches) > eb.J:
                return None
            x, c, e = (np.zeros((n, eb.J)) for _ in range(3))
            for j, b in enumerate(batches):
                for i, tok in zip(b.req, b.tokens):
                    x[i, j], c[i, j] = 1, tok
                    a[i, eb.position] = 1
                for i in b.evict:
                    e[i, j] = 1
            for name, val in (("x", x), ("c", c), ("e", e)):
                start[eb.v[name].name] = val
        if not np.all(a.sum(axis=1) == 1):
            return None
        start[self.assign.name] = a
        return start


def engine_batches(instance: Instance, schedule: Schedule) -> list[list[EngineBatch]] | None:
    """Each engine's batches of ``schedule`` in order (None when a request has entries on two
    engines: the model cannot represent it)."""
    pl = schedule.placement
    pos = {e: k for k, e in enumerate(instance.engine_ids)}
    index = [instance.index[r] for r in schedule.ids]
    per: list[list[EngineBatch]] = [[] for _ in range(instance.n_engines)]
    home: dict[int, int] = {}
    for j in range(schedule.n_batches):
        b = -1 if pl is None else int(pl.batch_engine[j])
        k = 0 if b < 0 else pos[pl.engines[b]]  # type: ignore[union-attr]
        lo, hi = schedule.batch_ptr[j], schedule.batch_ptr[j + 1]
        req = [index[r] for r in schedule.entry_req[lo:hi].tolist()]
        out = [index[r] for r in schedule.evict_req[schedule.evict_ptr[j]:
                                                     schedule.evict_ptr[j + 1]].tolist()]
        for i in req:
            if home.setdefault(i, k) != k:
                return None
        if req or out:
            per[k].append(EngineBatch(req, schedule.entry_tokens[lo:hi].tolist(), out))
    return per


@dataclass(frozen=True)
class EngineBatch:
    """One batch of one engine: entries (instance indices and tokens), evictions, and a
    stated start (None: the earliest the semantics allows)."""

    req: list[int]
    tokens: list[int]
    evict: list[int]
    start: float | None = None


def cluster_schedule(instance: Instance, per_engine: list[list[EngineBatch]]) -> Schedule:
    """One cluster schedule: engine 0's batches, then engine 1's, ..., each naming its engine.
    Without transfers and with every request on one engine no batch waits for another
    engine's (docs/semantics.md section 6, "Time"), so listing engine by engine is exact."""
    sb = ScheduleBuilder(ids=instance.ids)
    pb = PlacementBuilder(instance.engine_ids)
    for k, batches in enumerate(per_engine):
        for b in batches:
            sb.add_indexed(b.req, b.tokens, b.evict, b.start)
            pb.add_indexed(k)
    sched = sb.build()
    placement, ids = pb.build(sched.ids)
    return sched.with_placement(placement, ids)


def identical_groups(instance: Instance) -> list[list[int]]:
    """Engine positions grouped by equal (role, limits, cost model), in position order."""
    groups: dict[tuple, list[int]] = {}
    for k in range(instance.n_engines):
        e = instance.engine(k)
        groups.setdefault((e.role, e.limits, e.cost_model), []).append(k)
    return list(groups.values())


def fits(instance: Instance) -> np.ndarray:
    """``(n, R)`` booleans: engine ``k`` holds request ``i``'s KV peak (section 2)."""
    peak = instance.prompt + instance.output - 1
    out = np.zeros((instance.n, instance.n_engines), bool)
    for k in range(instance.n_engines):
        lim = instance.engine(k).limits
        assert lim is not None
        out[:, k] = np.asarray(lim.kv_footprint(peak)) <= lim.kv_capacity
    return out


def build(instance: Instance, objective: str, hyp: Hypotheses, J: list[int], *,
          ub: float | None = None) -> ClusterModel:
    """The cluster MILP with ``J[k]`` batch slots on engine ``k`` (``formulations/cluster.md``
    eqs. K1-K6). ``ub`` (seconds): a known objective upper bound (the warm start's), stated as
    a cut (eq. K6) and inside each engine's busy-time row (eq. 23)."""
    n, R = instance.n, instance.n_engines
    if len(J) != R:
        raise FormulationError(f"cluster: {len(J)} horizons for {R} engines")
    md = milp.Model("cluster")
    fit = fits(instance)
    assign = md.add_vars("assign", (n, R), ub=fit.astype(float), vtype="B")
    md.add_constraints(np.repeat(np.arange(n), R), assign.ids.ravel(), 1.0, lo=1.0, hi=1.0,
                       name="K1_assign", nrows=n)
    _symmetry(md, instance, assign)
    scale = None
    engines = []
    for k in range(R):
        sub = instance.for_engine(k)
        d = _model_data(sub, objective, replace(hyp, at_most=None), int(J[k]), "tight")
        if scale is None:
            scale = d.scale
        # one time unit for the whole cluster: engine 0's (eq. K6 compares engines' clocks)
        d = replace(d, scale=scale, ks={name: val * scale for name, val in d.k.items()},
                    symmetry=[])
        b = _EngineBuilder(d, md, f"e{k}_", assign.ids[:, k])
        b.paper_families()
        b.dominance()
        b.contiguity()
        b.entry_counts()
        b.memory_floors()
        b.memory_cliques()
        b.phase_indicators()
        b.busy_time(ub if objective == Objective.MAKESPAN else None)
        engines.append((b, EngineBlock(k, sub, int(J[k]), b.v, d.online)))
    assert scale is not None
    cols, coefs, const = _objective(md, instance, objective, [b for b, _ in engines], scale)
    md.set_objective(cols, coefs, constant=const)
    limit = min([v for v in (ub, hyp.at_most) if v is not None], default=None)
    if limit is not None:
        md.add_constraints(np.zeros(len(cols), np.int64), cols, coefs,
                           hi=limit * scale * (1 + 1e-9) - const, name="K6_cut", nrows=1)
    return ClusterModel(instance, objective, scale, md, assign,
                        tuple(eb for _, eb in engines), cols, coefs, const)


def _symmetry(md: milp.Model, instance: Instance, assign: milp.VarBlock) -> None:
    """(eq. K5) among identical engines ``k_0 < k_1 < ...`` (same role, limits and cost
    model), engine ``k_{q+1}`` serves a request only after ``k_q`` serves an earlier one:
    ``a[i, k_{q+1}] <= sum_{i' < i} a[i', k_q]`` (engines ordered by their first request)."""
    n = instance.n
    for group in identical_groups(instance):
        for lo, hi in zip(group[:-1], group[1:]):
            rows, cols, vals = [], [], []
            for i in range(n):
                rows += [i] * (i + 1)
                cols += [int(assign.ids[i, hi])] + [int(assign.ids[p, lo]) for p in range(i)]
                vals += [1.0] + [-1.0] * i
            md.add_constraints(np.array(rows), np.array(cols), np.array(vals), hi=0.0,
                               name=f"K5_sym_{lo}_{hi}", nrows=n)


def _objective(md: milp.Model, instance: Instance, objective: str, builders: list,
               scale: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(eq. K6) makespan ``Z >= `` every engine's last batch end (offline: its busy time);
    total latency / mean TTFT through ``comp_i`` / ``first_i >=`` the end of the batch of
    engine ``e`` in which ``fin`` / ``ftk`` turns on, for every engine."""
    n = instance.n
    if objective == Objective.MAKESPAN:
        z = md.add_vars("makespan", 1, lb=float((instance.arrival + min_latency(instance)).max())
                        * scale)
        _suffix_rows(md, instance, z.ids[0], builders, scale)
        for k, b in enumerate(builders):
            if "end" in b.v:
                cols, vals = [z.ids[0], b.v["end"].ids[b.d.J - 1]], [1.0, -1.0]
            else:
                cols = [z.ids[0], *b.v["t"].ids.tolist()]
                vals = [1.0] + [-1.0] * b.d.J
            md.add_constraints(np.zeros(len(cols), np.int64), np.array(cols), np.array(vals),
                               lo=0.0, name=f"K6_makespan_{k}", nrows=1)
        return z.ids, np.ones(1), 0.0
    which = "comp" if objective == Objective.TOTAL_LATENCY else "first"
    arrival = instance.arrival * scale
    top = max(float(b.latest_end[-1]) for b in builders)
    lb = arrival + min_latency(instance, which == "first") * scale
    tv = md.add_vars(which, n, lb=lb, ub=np.maximum(top, lb))  # lb > top: too few slots
    for k, b in enumerate(builders):
        ind = b.v["fin" if which == "comp" else "ftk"].ids
        bt = b.latest_end
        shape = (n, b.d.J)
        rows = np.arange(n * b.d.J).reshape(shape)
        terms = [(rows, np.broadcast_to(tv.ids[:, None], shape), 1.0),
                 (rows, np.broadcast_to(b.v["end"].ids[None, :], shape), -1.0),
                 (rows, ind[:, 1:], -bt[None, :]), (rows, ind[:, :-1], bt[None, :])]
        R_, C_, V_ = [], [], []
        for r, c, v in terms:
            r2, c2, v2 = np.broadcast_arrays(r, c, np.asarray(v, float))
            R_.append(r2.ravel())
            C_.append(c2.ravel())
            V_.append(v2.ravel())
        md.add_constraints(np.concatenate(R_), np.concatenate(C_), np.concatenate(V_),
                           lo=np.broadcast_to(-bt[None, :], shape).ravel(),
                           name=f"K6_{which}_{k}", nrows=n * b.d.J)
    div = 1.0 if which == "comp" else float(n)
    return tv.ids, np.full(n, 1.0 / div), -float(arrival.sum()) / div


def _suffix_rows(md: milp.Model, instance: Instance, z: int, builders: list,
                 scale: float) -> None:
    """(eq. K9) per engine ``e`` and arrival time ``t``: the requests arriving at ``t`` or later
    that ``e`` serves run in batches that start at ``t`` or later, at least ``sum_i U_i a_ie /
    C_e`` of them (tokens, eq. 8) and at least ``sum_i A_i a_ie / M_e`` (each request holds
    ``A_i = sum_{g<O_i} (I_i + g)`` tokens of KV summed over the batches that generate its
    tokens, at most ``M_e`` per batch); each costs ``w0_e`` plus the entries' work ``W_i`` (eq.
    21): ``Z >= t + w0_e max(tokens, area) + sum_i W_i a_ie`` (one row for each measure)."""
    I, O, arr = instance.prompt.astype(float), instance.output.astype(float), instance.arrival
    U = I + O - 1
    area = O * I + O * (O - 1) / 2
    for k, b in enumerate(builders):
        sub = b.d.inst
        w0 = batch_overhead_lower_bound(sub) * scale
        work = request_work_lower_bound(sub) * scale
        lim = sub.limits
        for q, t in enumerate(np.unique(arr)):
            late = np.flatnonzero(arr >= t)
            for name, per in (("tok", U / lim.max_batch_tokens), ("kv", area / lim.kv_capacity)):
                cols = np.concatenate([[z], b.assign[late]])
                vals = np.concatenate([[1.0], -(w0 * per[late] + work[late])])
                md.add_constraints(np.zeros(cols.size, np.int64), cols, vals,
                                   lo=float(t) * scale, name=f"K9_{name}_{k}_{q}", nrows=1)


def min_latency(instance: Instance, first_token: bool = False) -> np.ndarray:
    """(eq. K8) per request, a floor on its latency (TTFT with ``first_token``) on any engine:
    each of its ``O`` tokens (1) needs its own batch, each batch costs at least the engine's
    overhead ``ovh`` (eq. 21) and the request's own entries cost at least ``W_i`` (eq. 21);
    the smallest over the engines."""
    out = []
    for k in range(instance.n_engines):
        sub = instance.for_engine(k)
        count = np.ones(instance.n) if first_token else instance.output.astype(float)
        out.append(count * batch_overhead_lower_bound(sub)
                   + request_work_lower_bound(sub, first_token=first_token))
    return np.minimum.reduce(out)


def horizon(instance: Instance, objective: str, ub: float | None, base: list[int],
            slack: int = 2) -> tuple[list[int], bool]:
    """Batch slots per engine (``formulations/cluster.md`` section 3) and whether they may cut
    off the optimum: the proven count ``Jmax_e`` when it is at most ``2 base + 4``, else the
    warm start's busiest engine's batches plus ``slack`` (a restriction)."""
    jmax = [entry_batches_bound(instance, k, objective, ub) for k in range(instance.n_engines)]
    top = max(base, default=1)
    out, restricted = [], False
    for jm in jmax:
        J = top + slack
        if jm is not None and jm <= 2 * top + 4:
            J = jm
        elif jm is None or jm > J:
            restricted = True
        out.append(max(J, 1))
    return out, restricted


def entry_batches_bound(instance: Instance, k: int, objective: str,
                        ub: float | None) -> int | None:
    """(section 3) the most batches with entries engine ``k`` runs in a schedule of objective
    ``<= ub``: makespan, its busy time ``<= ub``; total latency, eq. K7; mean TTFT: none."""
    if ub is None or not np.isfinite(ub):
        return None
    sub = instance.for_engine(k)
    ovh = batch_overhead_lower_bound(sub)
    if ovh <= 0:
        return None
    if objective == Objective.MAKESPAN:
        return int(np.floor(ub / ovh + 1e-9))
    if objective != Objective.TOTAL_LATENCY:
        return None
    # eq. K7: the request i that finishes last on k completes no earlier than b ovh (its
    # batches run one after the other from 0), every other request j takes at least L_j
    L = min_latency(instance)
    last = float((L + instance.arrival).max())
    return max(0, int(np.floor((ub - float(L.sum()) + last) / ovh + 1e-9)))
