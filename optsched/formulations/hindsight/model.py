"""The ``hindsight`` model (``formulations/hindsight.md``, (H1)-(H20)): its knobs
(:class:`HindsightParams`), :class:`HindsightModel` with ``encode``/``decode``, and
:func:`build`, one function per equation group, each citing its numbers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import milp
from ...instance import Instance, Limits
from ...plugins import ParamSpec, parse_params
from ...schedule import Schedule
from ...solve_types import Objective
from ..base import BuiltModel, FormulationError, Hypotheses
from .deadline import deadline_rows
from .floors import area_lower_bounds, earliest_slots, footprint, separation_cover
from .heuristics import greedy_starts
from .starts import (
    NotRepresentable,
    check_instance,
    objective_of_starts,
    schedule_from_starts,
    starts_from_schedule,
)

VARIANTS = ("tight", "plain")
MEMORY_FORMS = ("auto", "dense", "flow")
#: ``memory=auto`` takes the flow form (H16) above this many dense memory-row nonzeros: HiGHS
#: 1.16's presolve does not check the time limit on large dense rows (127 s for a 60 s limit
#: at 288,649 nonzeros, formulations/hindsight.md), and ``--time-limit`` is a whole-command budget
DENSE_MEMORY_MAX_NONZEROS = 100_000


# ----------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class HindsightParams:
    """Formulation knobs (``--param key=value``).

    ``variant`` plain|tight; ``memory`` dense (H4) | flow (H16) | auto (dense up to
    :data:`DENSE_MEMORY_MAX_NONZEROS`, else flow); ``aggregate`` identical
    requests into integer counts (H10); ``symmetry`` order identical requests (H11);
    ``bucket`` late-start bucket (H12); ``horizon`` overrides the cut ``T`` (H12) / ``T`` (H9);
    ``max_rounds`` horizon doublings when the bucket is used at the optimum; ``cliques`` levels
    K of the dual-feasible-function rows (H19) per slot (0 = none); ``separation`` the
    completion-separation rows (H20), tight variant only; ``search`` seconds of local search
    (H21) for the upper bound and warm start (default ``min(0.2 * time limit, n / 4)`` from
    ``n = 8`` up, none below; 0 = off); ``deadline`` seconds for the deadline-cardinality
    floors and rows (H22, :mod:`.deadline`; total latency only; 0 = off).
    """

    variant: str = "tight"
    memory: str = "auto"
    aggregate: bool = True
    symmetry: bool = True
    bucket: bool = True
    horizon: int | None = None
    max_rounds: int = 4
    cliques: int = 0
    separation: bool = True
    search: float | None = None
    deadline: float = 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HindsightParams:
        """The knobs from ``--param`` strings or typed values, checked by :data:`PARAMS`."""
        return cls(**parse_params(PARAMS, d, "formulation 'hindsight'", FormulationError))


#: the ``--param`` knobs (:class:`HindsightParams` says what each one does)
PARAMS = (
    ParamSpec("variant", str, "tight", "plain or tight model", choices=VARIANTS),
    ParamSpec("memory", str, "auto", "dense (H4) or flow (H16) memory rows; auto: dense "
              f"up to {DENSE_MEMORY_MAX_NONZEROS:,} nonzeros, else flow", choices=MEMORY_FORMS),
    ParamSpec("aggregate", bool, True, "identical requests as integer counts (H10)"),
    ParamSpec("symmetry", bool, True, "order identical requests (H11)"),
    ParamSpec("bucket", bool, True, "late-start bucket (H12)"),
    ParamSpec("horizon", int, None, "the cut T (H12) / T (H9); default: from the upper bound",
              lo=1),
    ParamSpec("max_rounds", int, 4, "horizon doublings when the bucket is used at the optimum",
              lo=0),
    ParamSpec("cliques", int, 0, "levels K of the dual-feasible-function rows (H19); 0 = none",
              lo=0),
    ParamSpec("separation", bool, True, "completion-separation rows (H20), tight variant only"),
    ParamSpec("search", float, None, "seconds of local search (H21); 0 = off", lo=0),
    ParamSpec("deadline", float, 0.0, "seconds for the deadline-cardinality floors and rows "
              "(H22), total latency only; 0 = off", lo=0),
)



# ----------------------------------------------------------------------------- the model
@dataclass
class HindsightModel:
    """A built model with its column maps; ``encode``/``decode`` go between schedules and vectors."""

    instance: Instance
    objective: str
    params: HindsightParams
    model: milp.Model
    unit_members: list[np.ndarray]  # unit -> request positions (identical requests, id order)
    col_unit: np.ndarray  # x column -> unit
    col_t: np.ndarray  # x column -> start slot
    x: milp.VarBlock
    late: milp.VarBlock | None
    late_units: np.ndarray
    cut: int  # starts >= cut are in the late bucket (H12); the plain variant: T - min O + 1
    horizon: int  # rows cover slots 0..horizon-1
    y: milp.VarBlock | None = None
    z: milp.VarBlock | None = None  # makespan
    extra: dict[str, milp.VarBlock] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: groups of identical requests whose starts are put in id order (H10, H11)
    canon_groups: list[np.ndarray] = field(default_factory=list)
    #: per unit, the latest start of a schedule at most as costly as the upper bound (H8)
    latest: np.ndarray | None = None

    # -- the BuiltModel protocol ---------------------------------------------------------
    @property
    def variables(self) -> Mapping[str, milp.VarBlock]:
        return self.model.blocks

    @property
    def scale(self) -> float:
        """Model time units per second: one slot is one time unit."""
        return 1.0

    @property
    def restricted(self) -> bool:
        """Always: unit time, no preemption, no chunking restrict docs/semantics.md."""
        return True

    @property
    def sizes(self) -> dict[str, int]:
        a = self.model.arrays()
        return {"variables": a.num_vars, "integer": int(a.is_int.sum()), "constraints": a.num_rows,
                "nonzeros": a.nnz, "horizon": self.horizon, "cut": self.cut}

    # -- vectors <-> starts ----------------------------------------------------------------
    def _col_index(self) -> dict[tuple[int, int], int]:
        if not hasattr(self, "_cidx"):
            self._cidx = {(int(u), int(t)): k for k, (u, t) in enumerate(zip(self.col_unit, self.col_t))}
        return self._cidx

    def encode_starts(self, starts: np.ndarray) -> np.ndarray:
        """A full column vector for start slots (identical requests relabelled in id order)."""
        starts = np.asarray(starts, dtype=np.int64).copy()
        for g in self.canon_groups:  # canonical: the first id of identical requests starts first
            starts[g] = np.sort(starts[g])
        vals = np.zeros(self.model.num_vars)
        cidx = self._col_index()
        for u, mem in enumerate(self.unit_members):
            s = np.sort(starts[mem])
            for t in s:
                k = cidx.get((u, int(t)))
                if k is None:
                    raise NotRepresentable(
                        f"start slot {t} of request {self.instance.ids[mem[0]]!r} is outside its "
                        f"window in this model (horizon cut {self.cut})")
                vals[self.x[k]] += 1
        if self.y is not None:  # (H3) running status
            for i in range(self.instance.n):
                t0 = starts[i]
                vals[self.y[i, t0:t0 + self.instance.output[i]]] = 1
        if self.z is not None:
            vals[self.z] = objective_of_starts(self.instance, "makespan", starts)
        self._fill_flow(vals, starts)
        return vals

    def _fill_flow(self, vals: np.ndarray, starts: np.ndarray) -> None:
        if "mem" not in self.extra:
            return
        inst = self.instance
        H = self.horizon
        mem = np.zeros(H)
        act = np.zeros(H)
        for i in range(inst.n):
            t0, o = int(starts[i]), int(inst.output[i])
            mem[t0:t0 + o] += inst.prompt[i] + np.arange(o)
            act[t0:t0 + o] += 1
        vals[self.extra["mem"].ids] = mem
        vals[self.extra["act"].ids] = act

    def encode(self, schedule: Schedule) -> np.ndarray:
        """Warm start of a representable schedule (passes ``model.check``)."""
        return self.encode_starts(starts_from_schedule(self.instance, schedule))

    def starts_of(self, values: np.ndarray) -> tuple[np.ndarray, int]:
        """Start slots from a solution vector, and how many requests sit in the late bucket."""
        v = np.rint(np.asarray(values)[self.x.ids]).astype(np.int64)
        n = self.instance.n
        starts = np.full(n, -1, np.int64)
        late = 0
        if self.late is not None:
            late = int(np.rint(np.asarray(values)[self.late.ids]).sum())
        nz = np.flatnonzero(v > 0)
        per_unit: dict[int, list[int]] = {}
        for k in nz:
            per_unit.setdefault(int(self.col_unit[k]), []).extend([int(self.col_t[k])] * int(v[k]))
        for u, mem in enumerate(self.unit_members):
            ts = sorted(per_unit.get(u, []))
            starts[mem[:len(ts)]] = ts[:len(mem)]
        return starts, late

    def decode(self, values: np.ndarray) -> Schedule:
        """The schedule of a solution vector (H0); raises if a request is in the late bucket."""
        starts, late = self.starts_of(values)
        if late or np.any(starts < 0):
            raise NotRepresentable("the solution leaves requests in the late-start bucket (H12)")
        return schedule_from_starts(self.instance, starts)


def _units(instance: Instance, aggregate: bool, pinned: set[int]) -> list[np.ndarray]:
    """Groups of identical requests (same arrival, prompt, output), ids in instance order (H10)."""
    if not aggregate:
        groups: dict[tuple, list[int]] = {}
        for i in range(instance.n):
            groups.setdefault((i,), []).append(i)
        return [np.array(g) for g in groups.values()]
    groups = {}
    for i, r in enumerate(instance.requests):
        key = ("pin", i) if i in pinned else (r.arrival, r.prompt, r.output)
        groups.setdefault(key, []).append(i)
    return [np.array(g, dtype=np.int64) for g in groups.values()]


# ----------------------------------------------------------------------------- the builder
@dataclass(frozen=True, eq=False)
class _Units:
    """The model's units (H10): a group of identical requests when aggregated, else one
    request; every array holds one entry per unit (its representative's data)."""

    members: list[np.ndarray]  # unit -> request positions, id order
    count: np.ndarray  # requests in the unit (the upper bound of its start counts)
    prompt: np.ndarray
    output: np.ndarray
    earliest: np.ndarray  # e_u = ceil(a_u) (H7)
    arrival: np.ndarray
    pinned: set[int]  # requests a hypothesis names: never aggregated
    aggregated: bool

    @property
    def size(self) -> int:
        return len(self.members)


@dataclass(frozen=True, eq=False)
class _Windows:
    """Start windows ``[e_u, last_u]`` of the units (H8, H9, H12)."""

    cut: int  # starts >= cut are in the late bucket (H12); plain: the horizon T (H9)
    latest: np.ndarray  # latest useful start per unit from the objective bound (H8)
    last: np.ndarray  # latest start inside the model
    bucket: bool  # the late-start bucket is in the model (H12)


@dataclass(frozen=True, eq=False)
class _Columns:
    """The start columns ``x[u, t]`` (H1) and what each column occupies (H0): column ``k``
    holds unit ``unit[k]`` from slot ``start[k]`` for ``O_u`` slots. ``occ_*`` list one
    entry per (column, occupied slot), ``occ_age`` slots since the start (0 = prefill)."""

    unit: np.ndarray
    start: np.ndarray
    occ_column: np.ndarray
    occ_slot: np.ndarray
    occ_age: np.ndarray
    occ_kv: np.ndarray  # KV footprint held in that slot (whole blocks)

    @property
    def size(self) -> int:
        return int(self.unit.size)


def build(instance: Instance, objective: str, hypotheses: Hypotheses | None = None,
          params: HindsightParams | None = None, ub_starts: np.ndarray | None = None,
          cut: int | None = None, ub_valid: bool = True,
          floors: np.ndarray | None = None) -> HindsightModel:
    """Build the model (H1)-(H20) for ``objective``; ``ub_starts`` is a feasible schedule's starts
    (the horizon and windows come from it; default: :func:`greedy_starts`). ``ub_valid=False``
    when that schedule breaks a hypothesis: its objective is then no bound, only its length is
    used for the cut, and every request may start late (H12). ``floors``: lower bounds on the
    k-th smallest completion (H22b); they tighten (H8) and add the rows (H22c)."""
    check_instance(instance)
    p = params or HindsightParams()
    hyp = hypotheses or Hypotheses()
    plain = p.variant == "plain"
    if ub_starts is None:
        ub_starts = greedy_starts(instance)
    notes: list[str] = []
    bound, ub_makespan = _upper_bound(instance, objective, hyp, np.asarray(ub_starts, np.int64),
                                      ub_valid, notes)
    units = _make_units(instance, p, objective, hyp)
    completion_floors = area_lower_bounds(instance)
    if floors is not None:  # both are lower bounds on the k-th smallest completion
        completion_floors = np.maximum(completion_floors, floors)
    latest = _latest_starts(instance, objective, bound, units, completion_floors)
    if plain:
        windows = _plain_windows(p, units, latest, bound, ub_makespan)
    else:
        windows = _tight_windows(p, units, latest, objective, hyp, ub_makespan, cut, notes)
    cols = _start_columns(instance, units, windows)
    m = milp.Model("hindsight_" + p.variant)
    x, late, late_units = _start_variables(m, units, windows, cols)
    horizon = windows.cut if plain else (
        int((cols.start + units.output[cols.unit]).max()) if cols.size else 1)
    _start_once_rows(m, units, x, cols, late, late_units)
    y = _running_rows(m, instance, x, cols, horizon) if plain else None
    extra = _memory_rows(m, instance, p, units, windows, x, cols, horizon, notes)
    if not plain and p.separation and cols.size:
        _separation_rows(m, x, cols, units, instance.limits.kv_capacity, notes)
    _batch_limit_rows(m, instance.limits, units, x, cols, horizon)
    if p.symmetry and not units.aggregated and not plain:
        _symmetry_rows(m, instance, x, cols, units)
    if floors is not None and cols.size:
        added = deadline_rows(m, x, cols.start + units.output[cols.unit], floors)
        notes.append(f"(H22) {added} deadline-cardinality rows from the completion floors "
                     f"(sum {int(np.sum(floors))})")
    z, objective_row = _objective(m, instance, objective, units, x, cols, late, windows.cut,
                                  horizon, completion_floors)
    if hyp.at_most is not None:
        _at_most_row(m, hyp.at_most, objective_row)
    canon = []
    if not plain and (units.aggregated or p.symmetry):
        canon = [g for g in _units(instance, True, units.pinned) if g.size > 1]
    hm = HindsightModel(instance, objective, p, m, units.members, cols.unit, cols.start, x, late,
                        late_units, windows.cut, horizon, y=y, z=z, extra=extra, notes=notes,
                        canon_groups=canon, latest=windows.latest)
    _hypothesis_rows(hm, hyp)
    return hm


def _upper_bound(instance: Instance, objective: str, hyp: Hypotheses, ub_starts: np.ndarray,
                 ub_valid: bool, notes: list[str]) -> tuple[float, int]:
    """``UB`` for the windows (H8), and the length of the schedule it comes from (the default
    cut, H12). Without a valid bound the length grows by ``sum O`` (a generous cut, certified by
    the bucket)."""
    n, O = instance.n, instance.output
    bound = objective_of_starts(instance, objective, ub_starts) if ub_valid else math.inf
    if hyp.at_most is not None:
        bound = min(bound, hyp.at_most)
    length = int(objective_of_starts(instance, "makespan", ub_starts)) if n else 0
    if not math.isfinite(bound):
        length += int(O.sum()) + max((j for _, j in hyp.force), default=0)
        notes.append("the heuristic schedule breaks a hypothesis, so it gives no bound; horizon "
                     f"{length} from its length + sum O" + (" (makespan: optimal within this horizon)"
                                                             if objective == Objective.MAKESPAN else ""))
    return bound, length


def _make_units(instance: Instance, p: HindsightParams, objective: str, hyp: Hypotheses) -> _Units:
    """(H10): identical requests aggregated into one unit with an integer start count (tight
    variant, not for makespan); requests a hypothesis names stay alone."""
    aggregate = p.aggregate and p.variant != "plain" and objective != Objective.MAKESPAN
    pinned = {instance.index[r] for r, _ in (*hyp.force, *hyp.forbid)}
    pinned |= {instance.index[r] for pair in hyp.order for r in pair}
    members = _units(instance, aggregate, pinned)
    rep = np.array([m[0] for m in members], dtype=np.int64)
    return _Units(members, np.array([len(m) for m in members], dtype=np.int64),
                  instance.prompt[rep], instance.output[rep], earliest_slots(instance)[rep],
                  instance.arrival[rep], pinned, aggregate)


def _latest_starts(instance: Instance, objective: str, bound: float, units: _Units,
                   completion_floors: np.ndarray) -> np.ndarray:
    """(H8): the latest start of each unit in a schedule whose objective is at most ``bound``
    (using the completion floors ``L_k`` of (H9a) for total latency)."""
    n, O, a = instance.n, instance.output, instance.arrival
    if not math.isfinite(bound):
        latest = np.full(units.size, 2**40, dtype=np.int64)
    elif objective == Objective.MAKESPAN:
        latest = np.full(units.size, math.floor(bound + 1e-9)) - units.output
    elif objective == Objective.TOTAL_LATENCY:
        # C_i - a_i <= UB - sum_{j != i} (C_j - a_j); sum_{j != i} C_j >= L_1 + ... + L_{n-1} (H9a),
        # and sum_{j != i} (C_j - a_j) >= sum_{j != i} O_j >= sum O - max O
        by_floors = bound + float(np.sum(a)) - float(np.sum(completion_floors[:-1]))
        by_outputs = units.arrival + bound - (float(np.sum(O)) - float(O.max()))
        latest = np.floor(np.minimum(by_floors, by_outputs) + 1e-9).astype(np.int64) - units.output
    else:  # mean-ttft: ttft_i <= n*UB - (n - 1), every other ttft being >= 1
        latest = np.floor(units.arrival + n * bound - n + 1e-9).astype(np.int64)
    return np.asarray(np.minimum(latest, 2**40), dtype=np.int64)


def _plain_windows(p: HindsightParams, units: _Units, latest: np.ndarray, bound: float,
                   ub_makespan: int) -> _Windows:
    """(H9): one global horizon ``T``; every request completes by ``T`` in some optimal
    schedule, so the windows are ``[e_i, T - O_i]``."""
    if p.horizon is not None:
        T = int(p.horizon)
    elif math.isfinite(bound):
        T = int(max(int((latest + units.output).max()), ub_makespan))
    else:
        T = int(ub_makespan)
    return _Windows(T, latest, _nonempty(T - units.output, units), bucket=False)


def _tight_windows(p: HindsightParams, units: _Units, latest: np.ndarray, objective: str,
                   hyp: Hypotheses, ub_makespan: int, cut: int | None,
                   notes: list[str]) -> _Windows:
    """(H8) windows ``[e_u, min(latest_u, cut - 1)]``; starts at or after the cut go to the
    late-start bucket (H12) when one may be needed."""
    n = units.earliest.size
    cut_ = int(cut if cut is not None else (p.horizon if p.horizon is not None else ub_makespan))
    cut_ = max(cut_, int(units.earliest.max()) + 1 if n else 1)
    if hyp.force:  # a forced slot must lie before the cut, so late starts cannot be in it
        cut_ = max(cut_, max(j for _, j in hyp.force) + 1)
    beyond = objective != Objective.MAKESPAN and bool(np.any(latest >= cut_))
    if not p.bucket and beyond:
        notes.append(f"bucket=off: starts restricted to slots < {cut_} without proof that a "
                     "longer horizon cannot help; 'optimal' is optimal within that horizon only")
    return _Windows(cut_, latest, _nonempty(np.minimum(latest, cut_ - 1), units),
                    bucket=p.bucket and beyond)


def _nonempty(last: np.ndarray, units: _Units) -> np.ndarray:
    """``last`` no earlier than ``e_u - 1``: an empty window has no columns (an infeasible
    ``at_most`` then shows as an infeasible model)."""
    return np.maximum(last, units.earliest - 1)


def _start_columns(instance: Instance, units: _Units, windows: _Windows) -> _Columns:
    """(H1) one column per unit and start slot of its window, and (H0) the slots each column
    occupies with the KV it holds there: ``I_u + k`` after slot ``t + k``."""
    lens = np.maximum(windows.last - units.earliest + 1, 0)
    unit = np.repeat(np.arange(units.size), lens)
    start = (np.arange(unit.size) - np.repeat(np.cumsum(lens) - lens, lens)) + units.earliest[unit]
    output = units.output[unit]
    age = np.concatenate([np.arange(o) for o in output]) if unit.size else np.zeros(0, np.int64)
    occ_column = np.repeat(np.arange(unit.size), output)
    kv = footprint(instance, units.prompt[unit][occ_column] + age).astype(float)
    return _Columns(unit, start, occ_column, start[occ_column] + age, age, kv)


def _start_variables(m: milp.Model, units: _Units, windows: _Windows, cols: _Columns
                     ) -> tuple[milp.VarBlock, milp.VarBlock | None, np.ndarray]:
    """(H1) start counts ``x[u, t]`` (binary when no unit aggregates), and (H12) the late
    counts of the units whose latest start lies past the cut; returns ``x, late, late_units``."""
    all_binary = bool(np.all(units.count == 1))
    vtype = "B" if all_binary else "I"
    x = m.add_vars("x", cols.size, lb=0, ub=units.count[cols.unit].astype(float), vtype=vtype)
    late_units = np.flatnonzero(windows.latest >= windows.cut) if windows.bucket \
        else np.zeros(0, np.int64)
    late = None
    if windows.bucket and late_units.size:
        late = m.add_vars("late", late_units.size, lb=0,
                          ub=units.count[late_units].astype(float), vtype=vtype)
    return x, late, late_units


def _start_once_rows(m: milp.Model, units: _Units, x: milp.VarBlock, cols: _Columns,
                     late: milp.VarBlock | None, late_units: np.ndarray) -> None:
    """(H2) every request starts once: a unit's starts (in the window or late) sum to its size."""
    rows = [cols.unit]
    columns = [x.ids]
    if late is not None:
        rows.append(late_units)
        columns.append(late.ids)
    m.add_constraints(np.concatenate(rows), np.concatenate(columns), 1.0, lo=units.count,
                      hi=units.count, name="start_once")


def _running_rows(m: milp.Model, instance: Instance, x: milp.VarBlock, cols: _Columns,
                  horizon: int) -> milp.VarBlock:
    """Plain variant: (H3) ``y[i, t] = sum_{t - O_i < t' <= t} x[i, t']`` (running) and (H6)
    ``sum_t y[i, t] = O_i``, the paper's constraints kept for fidelity."""
    n = instance.n
    y = m.add_vars("y", (n, horizon), vtype="B")
    ri = cols.unit[cols.occ_column] * horizon + cols.occ_slot
    m.add_constraints(np.concatenate([ri, np.arange(n * horizon)]),
                      np.concatenate([x.ids[cols.occ_column], y.ids.ravel()]),
                      np.concatenate([np.ones(ri.size), -np.ones(n * horizon)]),
                      lo=0, hi=0, nrows=n * horizon, name="running")
    m.add_constraints(np.repeat(np.arange(n), horizon), y.ids.ravel(), 1.0, lo=instance.output,
                      hi=instance.output, name="run_length")
    return y


def _memory_slots(instance: Instance, units: _Units, windows: _Windows, horizon: int,
                  plain: bool) -> np.ndarray:
    """(H14) the slots whose memory row can bind: the peaks of all units whose spans touch the
    slot exceed ``M`` (every slot in the plain variant)."""
    if plain:
        return np.arange(horizon)
    peak = footprint(instance, units.prompt + units.output - 1).astype(float) * units.count
    touch = np.zeros((horizon + 1,))
    # units touching slot s: window [e_u, last_u + O_u - 1]
    np.add.at(touch, np.minimum(units.earliest, horizon), peak)
    np.add.at(touch, np.minimum(windows.last + units.output, horizon), -peak)
    need = np.cumsum(touch)[:horizon]
    return np.flatnonzero(need > instance.limits.kv_capacity)


def _memory_rows(m: milp.Model, instance: Instance, p: HindsightParams, units: _Units,
                 windows: _Windows, x: milp.VarBlock, cols: _Columns, horizon: int,
                 notes: list[str]) -> dict[str, milp.VarBlock]:
    """(H4) memory per slot, only where it can bind (H14), or as a flow over slots (H16,
    ``memory=flow``, tight variant, block size 1); returns the flow's variable blocks."""
    plain = p.variant == "plain"
    M = instance.limits.kv_capacity
    mem_slots = _memory_slots(instance, units, windows, horizon, plain)
    extra: dict[str, milp.VarBlock] = {}
    keep = np.isin(cols.occ_slot, mem_slots)
    form = p.memory
    if form == "auto":
        form = "flow" if int(keep.sum()) > DENSE_MEMORY_MAX_NONZEROS else "dense"
        if form == "flow" and instance.limits.block_size == 1 and not plain:
            notes.append(f"(H16) memory as a flow over slots: the dense rows (H4) would have "
                         f"{int(keep.sum()):,} nonzeros, where HiGHS's presolve overruns time "
                         "limits")
    if form == "flow" and instance.limits.block_size == 1 and not plain:
        _flow_memory(m, x, cols, units, horizon, M)
        extra = {"mem": m.block("mem"), "act": m.block("act")}
    else:
        rmap = np.full(horizon, -1)
        rmap[mem_slots] = np.arange(mem_slots.size)
        m.add_constraints(rmap[cols.occ_slot[keep]], x.ids[cols.occ_column[keep]],
                          cols.occ_kv[keep], hi=M, nrows=mem_slots.size, name="memory")
    if not plain and mem_slots.size < horizon:
        notes.append(f"(H14) {horizon - mem_slots.size} of {horizon} memory rows dropped: those "
                     "slots can never exceed M")
    if not plain and p.cliques > 0:
        _dff_rows(m, x, cols, M, horizon, p.cliques, mem_slots)
    return extra


def _batch_limit_rows(m: milp.Model, lim: Limits, units: _Units, x: milp.VarBlock,
                      cols: _Columns, horizon: int) -> None:
    """(H17) tokens, prefill tokens and batch size per slot, each only where it can bind."""
    M, C, P, B = lim.kv_capacity, lim.max_batch_tokens, lim.prefill_budget, lim.max_batch_size
    if C < M:  # tokens <= memory after the batch <= M, so C >= M never binds (H17)
        tokens = np.where(cols.occ_age == 0, units.prompt[cols.unit][cols.occ_column], 1)
        m.add_constraints(cols.occ_slot, x.ids[cols.occ_column], tokens.astype(float), hi=C,
                          nrows=horizon, name="tokens")
    if P < min(C, M):
        m.add_constraints(cols.start, x.ids, units.prompt[cols.unit].astype(float), hi=P,
                          nrows=horizon, name="prefill")
    if B is not None:
        m.add_constraints(cols.occ_slot, x.ids[cols.occ_column], 1.0, hi=B, nrows=horizon,
                          name="batch_size")


@dataclass(frozen=True)
class _ObjectiveRow:
    """The objective as ``cols . coefs + constant`` (for the ``at_most`` hypothesis)."""

    cols: np.ndarray
    coefs: np.ndarray
    constant: float


def _objective(m: milp.Model, instance: Instance, objective: str, units: _Units,
               x: milp.VarBlock, cols: _Columns, late: milp.VarBlock | None, cut: int,
               horizon: int, completion_floors: np.ndarray
               ) -> tuple[milp.VarBlock | None, _ObjectiveRow]:
    """(H5) the objective; returns ``z`` (makespan only) and the objective as a row."""
    n, O, a = instance.n, instance.output, instance.arrival
    if objective == Objective.TOTAL_LATENCY:  # sum_i (t_i + O_i - a_i)
        return None, _start_sum_objective(m, x, cols, late, cut, 1.0, float(np.sum(O - a)))
    if objective == Objective.MEAN_TTFT:  # sum_i (t_i + 1 - a_i) / n
        return None, _start_sum_objective(m, x, cols, late, cut, float(n),
                                          float(np.sum(1 - a)) / n)
    return _makespan_objective(m, units, x, cols, horizon, completion_floors)


def _start_sum_objective(m: milp.Model, x: milp.VarBlock, cols: _Columns,
                         late: milp.VarBlock | None, cut: int, divisor: float,
                         constant: float) -> _ObjectiveRow:
    """(H5a, H5b) the sum of start slots over ``divisor`` plus ``constant``; (H13) a late start
    is priced as a start at the cut (a lower bound on its true start)."""
    ocols, ocoef = _objective_terms(x, cols.start, late, cut)
    row = _ObjectiveRow(ocols, ocoef / divisor, constant)
    m.set_objective(row.cols, row.coefs, constant=constant)
    return row


def _makespan_objective(m: milp.Model, units: _Units, x: milp.VarBlock, cols: _Columns,
                        horizon: int, completion_floors: np.ndarray
                        ) -> tuple[milp.VarBlock, _ObjectiveRow]:
    """(H5c) ``min z`` with ``z >= sum_t (t + O_u) x[u, t]`` per unit, and (H18) the floor
    ``z >= max(L_n, max_u (e_u + O_u))``. Every right-hand side is an integer slot, so ``z``
    is declared integer: the optimum is the same, and the model stays all-integer for
    solvers that need one (CP-SAT)."""
    z = m.add_vars("z", (), lb=0, ub=float(horizon), vtype="I")
    zc = int(z.ids)
    m.add_constraints(np.concatenate([cols.unit, np.arange(units.size)]),
                      np.concatenate([x.ids, np.full(units.size, zc)]),
                      np.concatenate([-(cols.start + units.output[cols.unit]).astype(float),
                                      np.ones(units.size)]),
                      lo=0, nrows=units.size, name="makespan_def")
    m.set_objective([zc], [1.0])
    if units.size:
        floor = float(max(completion_floors[-1], (units.earliest + units.output).max()))
        m.add_constraint([zc], [1.0], lo=floor, name="makespan_lb")
    return z, _ObjectiveRow(np.array([zc]), np.ones(1), 0.0)


def _at_most_row(m: milp.Model, at_most: float, row: _ObjectiveRow) -> None:
    """The hypothesis ``objective <= at_most`` (base.Hypotheses)."""
    m.add_constraint(row.cols, row.coefs,
                     hi=float(at_most) - row.constant + 1e-9 * max(1, abs(at_most)),
                     name="at_most")


def _objective_terms(x: milp.VarBlock, col_t: np.ndarray, late: milp.VarBlock | None,
                     cut_: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns and coefficients of the sum of start slots, late starts at the cut (H13)."""
    cols = [x.ids]
    coef = [col_t.astype(float)]
    if late is not None:
        cols.append(late.ids)
        coef.append(np.full(late.size, float(cut_)))
    return np.concatenate(cols), np.concatenate(coef)


def _flow_memory(m: milp.Model, x: milp.VarBlock, cols: _Columns, units: _Units, H: int,
                 M: int) -> None:
    """(H16): memory as a flow over slots, O(n) nonzeros per row instead of O(n * O)."""
    act = m.add_vars("act", H, lb=0, vtype="C")
    mem = m.add_vars("mem", H, lb=0, ub=float(M), vtype="C")
    t = cols.start
    fin = t + units.output[cols.unit]  # x[u,t] leaves at slot t + O (finished after slot t + O - 1)
    inside = fin < H
    # act[s] - act[s-1] - sum x[.,s] + sum_{fin = s} x = 0
    r = [np.arange(H), np.arange(1, H), t, fin[inside]]
    c = [act.ids, act.ids[:-1], x.ids, x.ids[inside]]
    v = [np.ones(H), -np.ones(H - 1), -np.ones(t.size), np.ones(int(inside.sum()))]
    m.add_constraints(np.concatenate(r), np.concatenate(c), np.concatenate(v), lo=0, hi=0, nrows=H,
                      name="act_flow")
    # mem[s] - mem[s-1] - act[s-1] - sum I x[.,s] + sum_{fin=s} (I+O) x = 0
    r = [np.arange(H), np.arange(1, H), np.arange(1, H), t, fin[inside]]
    c = [mem.ids, mem.ids[:-1], act.ids[:-1], x.ids, x.ids[inside]]
    v = [np.ones(H), -np.ones(H - 1), -np.ones(H - 1), -units.prompt[cols.unit].astype(float),
         (units.prompt + units.output)[cols.unit][inside].astype(float)]
    m.add_constraints(np.concatenate(r), np.concatenate(c), np.concatenate(v), lo=0, hi=0, nrows=H,
                      name="mem_flow")


def _dff_rows(m: milp.Model, x: milp.VarBlock, cols: _Columns, M: int, horizon: int, K: int,
              mem_slots: np.ndarray) -> None:
    """(H19): memory rows through the dual-feasible functions of Fekete and Schepers.

    ``u_k(w) = w`` if ``(k+1) w / M`` is integral, else ``floor((k+1) w / M) * M / k``; for any
    items with ``sum w <= M``, ``sum u_k(w) <= M``. ``k = 1`` is the clique "at most one request
    holding more than M/2 at a slot"; larger ``k`` count requests above ``M/(k+1)``.
    """
    slot, kv = cols.occ_slot, cols.occ_kv
    keep_slot = np.zeros(horizon, bool)
    keep_slot[mem_slots] = True
    for k in range(1, K + 1):
        q = (k + 1) * kv / M
        u = np.where(np.abs(q - np.round(q)) < 1e-9, kv, np.floor(q + 1e-12) * M / k)
        keep = (u > 0) & keep_slot[slot]
        if not keep.any():
            continue
        rows_used = np.unique(slot[keep])
        rmap = np.full(horizon, -1)
        rmap[rows_used] = np.arange(rows_used.size)
        m.add_constraints(rmap[slot[keep]], x.ids[cols.occ_column[keep]], u[keep], hi=M,
                          nrows=rows_used.size, name=f"dff{k}")


def _separation_rows(m: milp.Model, x: milp.VarBlock, all_cols: _Columns, units: _Units, M: int,
                     notes: list[str]) -> None:
    """(H20): completion separation as one machine (tight variant).

    If requests ``i`` and ``j`` both run and ``C_i <= C_j``, then at ``i``'s last slot ``i``
    holds ``fp(Q_i) >= Q_i``; either ``j`` has not started (``C_j - C_i >= O_j``) or it holds
    ``I_j + k <= M - Q_i`` with ``k = C_i - 1 - S_j``, so ``C_j - C_i >= Q_i + Q_j - M``
    (H20a). The intervals of :func:`separation_intervals` satisfy
    ``(A_j + B_i) / 2 <= min(O_j, Q_i + Q_j - M)``, so they never overlap (H20b); at every
    maximal point of the interval graph the placements covering it sum to at most 1
    (H20c, the time-indexed single-machine row).
    """
    rows, cols, nrows = separation_cover(all_cols.start, all_cols.unit, units.prompt,
                                         units.output, units.count, M)
    if nrows == 0:
        return
    m.add_constraints(rows, x.ids[cols], 1.0, hi=1.0, nrows=nrows, name="separation")
    notes.append(f"(H20) {nrows} completion-separation rows (requests whose peaks exceed M/2 "
                 "complete at least Q_i + Q_j - M slots apart)")


def _symmetry_rows(m: milp.Model, instance: Instance, x: milp.VarBlock, cols: _Columns,
                   units: _Units) -> None:
    """(H11): for identical requests i < j (same a, I, O), t_i <= t_j."""
    key: dict[tuple, list[int]] = {}
    for u, mem in enumerate(units.members):
        i = int(mem[0])
        if i in units.pinned:
            continue
        req = instance.requests[i]
        key.setdefault((req.arrival, req.prompt, req.output), []).append(u)
    pairs = [(g[k], g[k + 1]) for g in key.values() for k in range(len(g) - 1)]
    if not pairs:
        return
    rows, columns, vals = [], [], []
    for r, (u, w) in enumerate(pairs):
        cu, cw = np.flatnonzero(cols.unit == u), np.flatnonzero(cols.unit == w)
        rows += [np.full(cu.size, r), np.full(cw.size, r)]
        columns += [x.ids[cu], x.ids[cw]]
        vals += [cols.start[cu].astype(float), -cols.start[cw].astype(float)]
    m.add_constraints(np.concatenate(rows), np.concatenate(columns), np.concatenate(vals), hi=0,
                      nrows=len(pairs), name="symmetry")


def _hypothesis_rows(hm: HindsightModel, hyp: Hypotheses) -> None:
    """Force/forbid a request in batch (= slot) j; order two completions (base.Hypotheses)."""
    inst, m, x = hm.instance, hm.model, hm.x
    unit_of = np.empty(inst.n, np.int64)
    for u, mem in enumerate(hm.unit_members):
        unit_of[mem] = u
    O = inst.output
    for kind, pairs in (("force", hyp.force), ("forbid", hyp.forbid)):
        for q, (rid, j) in enumerate(pairs):
            i = inst.index[rid]
            sel = np.flatnonzero((hm.col_unit == unit_of[i]) & (hm.col_t <= j) & (hm.col_t > j - O[i]))
            lo, hi = (1.0, 1.0) if kind == "force" else (0.0, 0.0)
            if sel.size == 0:
                if kind == "force":  # impossible: an empty row 0 = 1
                    m.add_constraint([int(x.ids[0])] if x.size else [], [0.0] if x.size else [],
                                     lo=1, hi=1, name=f"{kind}_{q}")
                continue
            m.add_constraint(x.ids[sel], np.ones(sel.size), lo=lo, hi=hi, name=f"{kind}_{q}")
    for q, (ra, rb) in enumerate(hyp.order):
        ia, ib = inst.index[ra], inst.index[rb]
        ca, cb = np.flatnonzero(hm.col_unit == unit_of[ia]), np.flatnonzero(hm.col_unit == unit_of[ib])
        cols = [x.ids[ca], x.ids[cb]]
        vals = [(hm.col_t[ca] + O[ia]).astype(float), -(hm.col_t[cb] + O[ib]).astype(float)]
        if hm.late is not None:  # keep the row a relaxation when a or b starts late (H12)
            la = np.flatnonzero(hm.late_units == unit_of[ia])
            lb = np.flatnonzero(hm.late_units == unit_of[ib])
            if la.size:  # a late completes at >= cut + O_a
                cols.append(hm.late.ids[la])
                vals.append(np.full(la.size, float(hm.cut + O[ia])))
            if lb.size:  # b late: its completion is unknown, so the row is switched off
                cols.append(hm.late.ids[lb])
                vals.append(-np.full(lb.size, float(hm.horizon + hm.cut + O[ia])))
        m.add_constraint(np.concatenate(cols), np.concatenate(vals), hi=0, name=f"order_{q}")



if TYPE_CHECKING:  # mypy checks that the model satisfies the solve path's protocol
    _built_model: type[BuiltModel] = HindsightModel
