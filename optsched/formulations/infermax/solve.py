"""The registered ``infermax`` formulation: choose the variant and ``J``, solve, decode, polish.

``run`` is what the solve pipeline (:func:`optsched.solving.pipeline.run`) calls
(``formulations/infermax.md`` sections 4, 6, 7 and 9): it canonicalises the warm start,
picks the horizon, builds the Big-M model (:mod:`.model`) or the flow model (:mod:`.flow`),
solves it with the requested backend, decodes the solution and re-prices it at the exact
re-encoded point. Both models reach the
solver through the :class:`~optsched.formulations.base.BuiltModel` protocol. Which model
``run`` builds is :func:`route`, written once; the pipeline asks it through the
``applicable`` and ``estimate`` hooks registered with the formulation.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ... import milp
from ...evaluation import evaluate
from ...instance import Instance
from ...plugins import ParamSpec, parse_params
from ...schedule import Schedule
from ...solve_types import Status, WarmStart
from ..base import (
    BuiltModel,
    FormulationError,
    Hypotheses,
    ModelSize,
    RawSolution,
    SizeHint,
    SolveOptions,
    register_formulation,
)
from . import fill, remainder
from . import flow as fl
from . import flow_objectives as fo
from .encode import canonical
from .horizon import _horizon, _sequential_batches, entry_batches_upper_bound
from .model import DEFAULT_SLACK, MAX_BATCH_SLOTS, VARIANTS, _identical_groups, build

#: largest flow model (arc variables) the auto variant builds before falling back to tight
FLOW_MAX_ARCS = 45_000
#: the same limit when continuing chunks need the quadratic direct arcs (F2b, kpm != 2 kpq):
#: on the family with the fitted cost, I = 16 (12,848 columns) ends within its budget, I = 32
#: (41,520) ran 319 s past a 60 s budget without a bound; eq. 27 takes those over
FLOW_MAX_ARCS_DIRECT = 15_000
#: the same limit for the F2c chain (0 <= kpm < 2 kpq): on the family with the fitted cost,
#: I = 64 (23,685 columns) is proven in ~40 s under load, I = 128 (49,840) has no root LP in
#: 60 s, while eq. 27 with eqs. 27c-27d proves I = 128 in ~16 s
FLOW_MAX_ARCS_SPLIT = 30_000
#: largest fill model (arc columns before eq. G3 fixes the unreachable ones) auto builds: the
#: SI/LI mixes with short outputs are 10-40k; long outputs (O = 512, 1024) need J >= O batches
#: and millions of columns, and keep the previous routing
FILL_MAX_ARCS = 200_000


def fill_fits(inst: Instance) -> bool:
    """Whether ``auto`` builds the fill model (section 11) once eq. G1's conditions hold: its
    size at the sequential schedule's horizon is at most ``FILL_MAX_ARCS``. Identical
    requests take it too: on the eviction family (preset cost) it proves every I = 1 ... 1024
    in <= 0.2 s (makespan) and <= 5 s (total latency), where the flow model of section 9
    needs up to 30 s and leaves I >= 128 (makespan) and I >= 16 (total latency) open in 30 s
    (``studies/offline_optima/results/infermax-family-costs.txt``)."""
    return fill.size_estimate(inst, _sequential_batches(inst)) <= FILL_MAX_ARCS


def _polish(built: BuiltModel, sched: Schedule, obj: float | None, notes: list[str]
            ) -> float | None:
    """The model's objective at the exact point of the decoded schedule (section 7).

    Continuous columns bounded only from one side (time, products) may carry solver slack;
    re-encoding the decoded schedule and checking it against every row gives the model's
    own price of that schedule, which is what ``solve`` compares with the evaluator.
    """
    try:
        x = built.encode(sched)
    except FormulationError as exc:
        notes.append(f"objective not polished: {exc}")
        return obj
    bad = built.model.check(x)
    if bad:
        notes.append(f"objective not polished: re-encoded solution violates {bad[0]}")
        return obj
    val = built.model.objective_value(x) / built.scale
    if obj is not None and abs(val - obj) > 1e-9 * max(1.0, abs(obj)):
        notes.append(f"solver objective {obj:.10g} polished to {val:.10g} (slack removed)")
    return val


def _solve_built(built: BuiltModel, ws: Schedule | None, options: SolveOptions,
                 notes: list[str]) -> milp.SolveResult:
    """Encode the warm start, solve ``built.model`` (times scaled by ``built.scale``) with the
    requested backend, and record sizes and solver notes (shared by every variant)."""
    notes.append(f"model: {built.model.num_vars} variables ({built.model.num_integer} integer), "
                 f"{built.model.num_constraints} constraints")
    start = None
    if ws is not None:
        try:
            start = built.encode(ws)
        except FormulationError as exc:
            notes.append(f"warm start not encodable: {exc}")
    mopts = replace(options, abs_gap=options.abs_gap * built.scale)
    # progress in seconds (the model's times are scaled, section 4); unit cost has scale 1
    built.model.user_scale, built.model.user_unit = built.scale, \
        ("s" if built.scale != 1.0 else "")
    res = milp.solve(built.model, options.solver, mopts, warm_start=start, fallback="highs")
    notes += [f"{options.solver}: {n_}" for n_ in res.notes]
    return res


def _raw(built: BuiltModel, res: milp.SolveResult, sched: Schedule | None, obj: float | None,
         notes: list[str], jmax: int | None, J_param: int | None) -> RawSolution:
    """The solver result in seconds as a RawSolution (shared by every variant)."""
    status = res.status if res.status in (Status.OPTIMAL, Status.FEASIBLE, Status.INFEASIBLE,
                                          Status.NO_SOLUTION, Status.ERROR) else Status.ERROR
    J = built.horizon
    if status == Status.INFEASIBLE and (J_param is not None or jmax is None or J < jmax):
        notes.append(f"infeasible within J = {J} batch slots (a larger J might be feasible)")
    scale = built.scale
    sec = lambda v: None if v is None else v / scale  # noqa: E731
    return RawSolution(status=status, objective=obj, bound=sec(res.bound), schedule=sched,
                       runtime=res.runtime or 0.0, solver=res.solver, nodes=res.nodes,
                       exact=True, restricted=built.restricted,
                       notes=tuple(notes), message=res.message,
                       history=tuple((t, sec(a), sec(b)) for t, a, b in res.history))


#: tight InferMax model size per (request, batch slot), measured on the 20-request Azure
#: conversation slice (``optsched.formulations.infermax.build``; optsched/solving/budget.py)
TIGHT_VARS_PER_SLOT = 47
TIGHT_ROWS_PER_SLOT = 118
#: fill model rows per (request, batch slot): its per-batch cardinality rows (eq. G5)
#: outnumber the arcs, ~2.4 per request and slot on 400 identical requests (21,781 rows for
#: 713 columns at J = 23)
FILL_ROWS_PER_SLOT = 2.5


def route(inst: Instance, objective: str, hyp: Hypotheses, variant: str) -> str:
    """The model ``run`` builds for ``variant`` (the routing, written once): ``fill``
    (section 11, when eq. G1 holds and it fits :func:`fill_fits`, or asked for),
    ``first-tokens`` (F12) or ``flow`` (section 9) where the flow model applies, else the
    Big-M ``tight``/``plain`` model (sections 4-5). An explicit ``fill``/``flow`` that does
    not apply raises :class:`FormulationError` naming why."""
    if variant in ("fill", "auto") and inst.n:
        why = fill.applicable(inst, objective, hyp)
        if why is None and (variant == "fill" or fill_fits(inst)):
            return "fill"
        if variant == "fill":
            raise FormulationError(f"infermax: {why}")
    if variant in ("flow", "auto"):
        why = fl.applicable(inst, objective, hyp)
        if why is None and inst.n:
            return "first-tokens" if fo.truncation_applies(objective, hyp) else "flow"
        if variant == "flow":
            raise FormulationError(f"infermax: {why}")
        return "tight"
    return variant  # tight, plain, or fill on an empty instance


def applicable(inst: Instance, objective: str, options: SolveOptions,
               hyp: Hypotheses) -> str | None:
    """The ``applicable`` hook: why the variant ``options.params`` asks for cannot represent
    ``inst`` (only an explicit ``fill`` or ``flow`` can fail; :func:`route`), else None."""
    variant = parse_params(PARAMS, options.params, "formulation 'infermax'",
                           FormulationError)["variant"]
    try:
        route(inst, objective, hyp, variant)
    except FormulationError as e:
        return str(e).removeprefix("infermax: ")
    return None


def _estimated_horizon(inst: Instance, objective: str, hint: SizeHint) -> int:
    """The horizon ``J`` :func:`run` would choose from a warm start like ``hint``
    (section 4): its batches plus the default slack of 2, raised to the section-6 bound
    ``Jmax`` when that is close (at most twice the warm start's batches plus 4)."""
    J = hint.batches + 2
    jmax = entry_batches_upper_bound(inst, objective, hint.objective)
    if jmax is not None and hint.batches <= jmax <= 2 * hint.batches + 4:
        J = max(J, jmax)
    return J


def estimate(inst: Instance, objective: str, options: SolveOptions, hint: SizeHint,
             hyp: Hypotheses) -> ModelSize:
    """The ``estimate`` hook: the model :func:`run` would build (:func:`route`) and its size
    at the horizon of :func:`_estimated_horizon` (or ``batches``): the fill model's arcs
    (:func:`fill.size_estimate`) and eq. G5 rows, the flow model's arcs
    (:func:`flow.size_estimate`; auto keeps it below :data:`FLOW_MAX_ARCS`), else the Big-M
    model's ~47 columns and ~118 rows per request and batch slot."""
    params = parse_params(PARAMS, options.params, "formulation 'infermax'", FormulationError)
    J = params["batches"] or _estimated_horizon(inst, objective, hint)
    kind = route(inst, objective, hyp, params["variant"])
    if kind == "fill":
        arcs = fill.size_estimate(inst, J)
        rows = max(arcs, int(FILL_ROWS_PER_SLOT * inst.n * J))
        return ModelSize("fill", arcs, rows, arcs + rows,
                         f"InferMax fill model with J = {J} batch slots")
    if kind in ("flow", "first-tokens"):
        arcs = fl.size_estimate(inst, J)
        if params["variant"] == "flow" or arcs <= FLOW_MAX_ARCS:
            return ModelSize("flow", arcs, arcs, arcs,
                             f"InferMax flow model with J = {J} batch slots")
    nJ = inst.n * J
    v = TIGHT_VARS_PER_SLOT * nJ
    return ModelSize("tight" if kind != "plain" else "plain", v, TIGHT_ROWS_PER_SLOT * nJ, v,
                     f"InferMax Big-M model ({inst.n} requests x J = {J} batch slots)")


#: the ``--param`` knobs
PARAMS = (
    ParamSpec("variant", str, "auto", "auto (fill model for distinct offline requests, flow "
              "model where it applies, else tight), fill, flow, tight or plain",
              choices=("auto", "fill", "flow") + VARIANTS),
    ParamSpec("batches", int, None, "batch slots J (default: from the warm start)",
              lo=1, hi=MAX_BATCH_SLOTS),
    ParamSpec("slack", int, DEFAULT_SLACK, "batch slots added to the warm start's count",
              lo=0, hi=MAX_BATCH_SLOTS),
)


@register_formulation(
    "infermax",
    "InferMax Big-M batch-indexed MILP (paper section 5), exact pricing; variant=tight|plain, "
    "batches=J, slack=k (formulations/infermax.md)",
    params=PARAMS,
    applicable=applicable,
    estimate=estimate,
    restriction="schedules of at most J batches with entries, J below the certified number an "
    "optimum may need",
)
def run(instance: Instance, objective: str, hyp: Hypotheses, options: SolveOptions,
        warm_start: WarmStart | None) -> RawSolution:
    """The registered ``infermax`` formulation (``formulations/infermax.md``)."""
    params = parse_params(PARAMS, options.params, "formulation 'infermax'", FormulationError)
    variant, J_param, slack = params["variant"], params["batches"], params["slack"]
    inst = instance
    kind = route(inst, objective, hyp, variant)
    if kind == "fill":
        return _run_fill(inst, objective, hyp, options, warm_start, J_param, slack)
    if kind == "first-tokens":
        return _run_first_tokens(inst, hyp, options, warm_start, J_param, slack,
                                 forced=variant == "flow")
    if kind == "flow":
        return _run_flow(inst, objective, hyp, options, warm_start, J_param, slack,
                         forced=variant == "flow")
    variant = kind
    notes: list[str] = [f"infermax variant {variant}"]
    if inst.n == 0:
        return RawSolution(Status.OPTIMAL, 0.0, 0.0, Schedule.empty(), solver=options.solver,
                           notes=tuple(notes))
    tight = variant == "tight"
    ws, ws_obj = _big_m_warm_start(inst, objective, hyp, warm_start, tight, notes)
    ub = ws_obj
    if hyp.at_most is not None:
        ub = hyp.at_most if ub is None else min(ub, hyp.at_most)
    jmax = entry_batches_upper_bound(inst, objective, ub, hyp.no_evictions)
    base_J = ws.n_batches if ws is not None else _sequential_batches(inst)
    forced = max((j for _, j in hyp.force), default=-1)
    J = max(_horizon(base_J, _big_m_slots(jmax), J_param, slack), forced + 1)
    notes.append(_big_m_horizon_note(J, jmax, ub))
    jmax = _big_m_slots(jmax)  # from here on: the slots a global claim needs
    if tight and remainder.applicable(inst, objective, hyp) is None:
        # kpm < 2 kpq (every fitted cost model): eqs. 27-27b
        return _run_remainder(inst, hyp, options, ws, ub, J, jmax, J_param, notes)
    im = build(inst, objective, hyp, J=J, variant=variant, ub=ub if tight else None,
               restricted=jmax is None or J < jmax)
    if tight:
        if im.dominance:
            notes.append("tight: evictions restricted to caught-up requests (dominance, eq. 13)")
        if im.symmetry:
            notes.append(f"tight: symmetry breaking over {len(im.symmetry)} group(s) of "
                         "identical requests (eq. 14)")
    res = _solve_built(im, ws, options, notes)
    sched = None
    obj = None if res.objective is None else res.objective / im.scale
    if res.values is not None and res.status in (Status.OPTIMAL, Status.FEASIBLE):
        sched = im.decode(res.values)
        obj = _polish(im, sched, obj, notes)
    return _raw(im, res, sched, obj, notes, jmax, J_param)


def _run_remainder(inst: Instance, hyp: Hypotheses, options: SolveOptions, ws: Schedule | None,
                   ub: float | None, J: int, jmax, J_param, notes: list[str]) -> RawSolution:
    """The tight model for ``kpm < 2 kpq`` (``formulations/infermax.md`` eqs. 27-27b): the
    ``kpq' = kpm/2`` telescoping part plus the remainder ``(kpq - kpm/2) c^2`` on secants at a
    point set. Every round's bound is a lower bound on the true optimum (the secants price
    every schedule at or below its price), every decoded schedule is priced exactly; rounds
    add the secants of the incumbent's entry sizes until the two meet within the gap."""
    notes.append("tight: kpm < 2 kpq priced as the kpq' = kpm/2 telescoping part (eqs. 24-26) "
                 "plus the convex remainder (kpq - kpm/2) c^2 per prefill entry on secants "
                 "(eq. 27), refined lazily (eq. 27b)")
    t0 = time.perf_counter()
    points = remainder.initial_points(inst)
    best, best_obj = ws, ub
    lb = None  # seconds
    rounds = 0
    while True:
        rounds += 1
        rm = remainder.build_remainder(inst, hyp, J=J, ub=best_obj, points=points,
                                       restricted=jmax is None or J < jmax)
        left = None if options.time_limit is None else \
            max(options.time_limit - (time.perf_counter() - t0), 0.5)
        res = _solve_built(rm, best, replace(options, time_limit=left), notes)
        if res.bound is not None and (lb is None or res.bound / rm.scale > lb):
            lb = res.bound / rm.scale
        sched, obj = None, None
        if res.values is not None and res.status in (Status.OPTIMAL, Status.FEASIBLE):
            sched = rm.decode(res.values)
            # the exact price is the evaluator's (the solver's objective may be below it where
            # the secants underprice, and the re-encoded point may then violate the cut)
            cs = rm.canonical(sched)  # the next round's warm start must be canonical
            ev = evaluate(inst, cs)
            obj = ev.objective("makespan") if ev.feasible else None
            if obj is not None and (best_obj is None or obj < best_obj):
                best, best_obj = cs, obj
        proven = best_obj is not None and lb is not None and \
            best_obj - lb <= max(options.rel_gap * abs(best_obj), options.abs_gap)
        out_of_time = options.time_limit is not None and \
            time.perf_counter() - t0 >= options.time_limit - 0.5
        if proven or res.status != Status.OPTIMAL or out_of_time or sched is None:
            break
        assert res.values is not None  # sched was decoded from them
        sizes = rm.entry_sizes(res.values)
        # the secants exact at each size the relaxation underprices (l = c - 1 and l = c;
        # neighbourhoods of +-4 tokens made the rounds slower on the family, I = 1024)
        new = {v + d for v in sizes if not rm.exact_at({v}) for d in (-1, 0)} - points
        if not new:  # priced exactly at the relaxation's optimum: the gap is the solver's
            break
        below = sorted(v for v in sizes if not rm.exact_at({v}))
        notes.append(f"eq. 27b round {rounds}: entry sizes {below} priced below c^2; their "
                     "secants added")
        points |= new
    notes.append(f"eq. 27b: {rounds} round(s), {len(points)} secant points; bound = the best "
                 "round's bound, objective = the best schedule priced exactly")
    status = res.status
    if best_obj is not None and status in (Status.OPTIMAL, Status.FEASIBLE, Status.INFEASIBLE,
                                           Status.NO_SOLUTION):
        status = Status.OPTIMAL if proven else Status.FEASIBLE
    res = replace(res, status=status, objective=None if best_obj is None else best_obj * rm.scale,
                  bound=None if lb is None else lb * rm.scale,
                  runtime=time.perf_counter() - t0)
    return _raw(rm, res, best, best_obj, notes, jmax, J_param)


def _big_m_warm_start(inst: Instance, objective: str, hyp: Hypotheses,
                      warm_start: WarmStart | None, tight: bool, notes: list[str]
                      ) -> tuple[Schedule | None, float | None]:
    """The warm start the Big-M model can use (its canonical form for the tight variant,
    eqs. 13-15) and its objective, or ``(None, None)`` when it is infeasible or breaks a
    hypothesis."""
    if warm_start is None:
        return None, None
    named = {r for r, _ in (*hyp.force, *hyp.forbid)} | {r for pair in hyp.order for r in pair}
    ws: Schedule | None = warm_start.schedule
    ev = warm_start.evaluation
    bad = hyp.broken_by(inst, warm_start.schedule, ev, objective) if ev.feasible else ["infeasible"]
    if not ev.feasible or bad:
        notes.append("warm start ignored: " + "; ".join(bad))
        return None, None
    if tight:  # the canonical form is a new schedule: replayed once more
        ws = canonical(inst, warm_start.schedule, dominance=not hyp.force and not hyp.order,
                       symmetry=_identical_groups(inst, named),
                       compact=not hyp.force and not hyp.forbid)
        ev2 = evaluate(inst, ws)
        if not ev2.feasible or hyp.broken_by(inst, ws, ev2, objective):
            return None, None  # pragma: no cover - canonical keeps feasibility
        ev = ev2
    return ws, ev.objective(objective)


def _big_m_slots(jmax: int | None) -> int | None:
    """Batch slots the Big-M models need for a global claim (section 4): ``Jmax`` batches with
    entries and an eviction-only batch between each two of them (two in a row merge into one;
    one before the first or after the last has nothing to do), so ``2 Jmax - 1``."""
    return None if jmax is None else max(2 * jmax - 1, 1)


def _big_m_horizon_note(J: int, jmax: int | None, ub: float | None) -> str:
    """What ``J`` means for the optimum (section 4): global when ``J >= 2 Jmax - 1`` (room for
    the eviction-only batches too), else a restriction."""
    slots = _big_m_slots(jmax)
    if jmax is not None and slots is not None and J >= slots:
        return (f"J = {J} batch slots; any schedule with objective <= {ub:.6g} has at most "
                f"{jmax} batches with entries (busy-time argument, formulations/infermax.md "
                f"section 6) and at most {jmax - 1} eviction-only batches between them, so the "
                "optimum is global")
    return (f"restriction: optimal among schedules with at most J = {J} batches, eviction-only "
            "batches included "
            + (f"(a schedule within the bound could need {jmax} batches with entries and "
               f"{jmax - 1} eviction-only ones between them)"
               if jmax is not None else "(no bound on the batch count is known for this "
               "objective)"))


def _run_first_tokens(inst: Instance, hyp: Hypotheses, options: SolveOptions,
                      warm_start: WarmStart | None, J_param: int | None, slack: int,
                      forced: bool) -> RawSolution:
    """Mean TTFT with evictions allowed (``formulations/infermax.md`` F12): the total latency
    (over ``N``) of the instance whose requests leave after their first token, solved by the
    flow model, and its schedule completed (evict, then finish one by one)."""
    reduced = fo.first_token_instance(inst)
    ws = fo.reduced_warm_start(inst, reduced, warm_start)
    raw = _run_flow(reduced, "mean-ttft", hyp, options, ws, J_param, slack, forced)
    return fo.lift(inst, raw)


def _run_flow(inst: Instance, objective: str, hyp: Hypotheses, options: SolveOptions,
              warm_start: WarmStart | None, J_param: int | None, slack: int,
              forced: bool) -> RawSolution:
    """The flow variant (``formulations/infermax.md`` section 9)."""
    t0 = time.perf_counter()
    notes: list[str] = ["infermax variant flow (identical requests aggregated, eqs. F1-F10)"]
    ws, ub = _flow_warm_start(inst, objective, hyp, warm_start)
    whole = fo.whole_prefills_apply(inst, objective)
    if whole and ws is not None:  # eq. F15: the warm start with whole prefills is no worse
        ws = fo.whole_prefills(inst, ws)
        ub = evaluate(inst, ws).objective(objective)
    if hyp.at_most is not None:
        ub = hyp.at_most if ub is None else min(ub, hyp.at_most)
    jmax = entry_batches_upper_bound(inst, objective, ub, hyp.no_evictions)
    if whole:  # every batch with entries completes a request
        jmax = inst.n if jmax is None else min(jmax, inst.n)
    base_J = fl.entry_batches(ws) if ws is not None else _sequential_batches(inst)
    J = _horizon(base_J, jmax, J_param, slack)
    if whole and J_param is None and jmax is not None:
        J = max(J, jmax)
    if J_param is None and jmax is not None and base_J <= jmax < J:
        # the flow model's J counts batches with entries only (F8), and no schedule within
        # the bound has more than jmax of them: the slack beyond jmax is dead weight
        J = jmax
    size = fl.size_estimate(inst, J, whole_prefills=whole)
    # F2c (0 <= kpm < 2 kpq) keeps the model linear in I like the telescoping chain; only
    # the F2b direct arcs (kpm > 2 kpq, kpq = 0) are quadratic
    if fl.telescopes(inst.cost_model):
        limit = FLOW_MAX_ARCS
    elif fl.split_remainder(inst.cost_model) is not None:
        limit = FLOW_MAX_ARCS_SPLIT
    else:
        limit = FLOW_MAX_ARCS_DIRECT
    # one class per request when eq. F14 prices the objective and the copies fit
    per_request = fo.rank_form_applies(inst, objective) and \
        fl.size_estimate(inst, J, per_request=True, whole_prefills=whole) <= limit
    if per_request and bool((inst.output == 1).all()) and J_param is None and \
            jmax is not None and J < jmax and \
            fl.size_estimate(inst, jmax, per_request=True, whole_prefills=whole) <= limit:
        J = jmax  # the rank form's copies are small: certify the horizon (F13)
    if not forced and size > limit:
        return run(inst, objective, hyp, replace(options, params={**options.params,
                                                                  "variant": "tight"}), warm_start)
    notes.append(_flow_horizon_note(J, jmax, ub))
    fm = fl.FlowModel(inst, J, hyp, ub, objective, restricted=jmax is None or J < jmax,
                      per_request=per_request, whole_prefills=whole)
    if whole:
        notes.append("whole prefills (eq. F15: one arrival, kpm >= 2 kpq, min(C, P) >= M): "
                      "some optimum prefills each request in one entry")
    if per_request:
        notes.append("one class per request, identical ones in rank order (eq. F14)")
    if fm.rem is not None:
        notes.append("flow F2c: kpm < 2 kpq, continuing chunks priced on the kpq' = kpm/2 chain "
                     "plus the remainder (kpq - kpm/2) c^2 bounded by perspective secants")
    res = _solve_built(fm, ws, _left(options, t0), notes)
    left = None if options.time_limit is None else \
        options.time_limit - (time.perf_counter() - t0)
    if ws is not None and _values_disagree(fm, res) and (left is None or left >= 1.0):
        assert res.values is not None and res.objective is not None  # _values_disagree checked
        # seen with HiGHS 1.16: a MIP start accepted "in the reduced space" at a lower
        # objective than its own, and the start's values returned with that objective
        notes.append(f"{res.solver}: returned values priced {fm.objective_seconds(res.values):.10g} "
                     f"against its objective {res.objective / fm.scale:.10g}; re-solved without "
                     "the warm start")
        res = _solve_built(fm, None, replace(options, time_limit=left), notes)
    return _decoded(fm, res, notes, jmax, J_param)


def _decoded(fm: fl.FlowModel, res: milp.SolveResult, notes: list[str], jmax: int | None,
             J_param: int | None) -> RawSolution:
    """The flow or fill model's answer: the solution decoded into a schedule, its objective
    polished at that exact point (section 7), and "optimal" only when the polished objective
    is within the solver's bound (never claim a proof we lack)."""
    sched, obj = None, None
    if res.values is not None and res.status in (Status.OPTIMAL, Status.FEASIBLE):
        assert res.objective is not None  # a solution has an objective
        sched = fm.decode(res.values)
        obj = _polish(fm, sched, res.objective / fm.scale, notes)
    raw = _raw(fm, res, sched, obj, notes, jmax, J_param)
    if raw.status == Status.OPTIMAL and obj is not None and raw.bound is not None \
            and obj > raw.bound + 1e-6 * max(1.0, abs(obj)):
        raw = replace(raw, status=Status.FEASIBLE, notes=raw.notes + (
            f"decoded schedule {obj:.10g} is above the solver's bound {raw.bound:.10g}: "
            "reported as feasible",))
    return raw


def _run_fill(inst: Instance, objective: str, hyp: Hypotheses, options: SolveOptions,
              warm_start: WarmStart | None, J_param: int | None, slack: int) -> RawSolution:
    """The fill variant (``formulations/infermax.md`` section 11): distinct requests, every
    prefill segment one entry (eq. G1), the flow model's rows over the states W, R, F."""
    t0 = time.perf_counter()
    notes: list[str] = ["infermax variant fill (distinct requests, prefill segments merged, "
                        "eqs. G1-G7)"]
    ws, ub = _flow_warm_start(inst, objective, hyp, warm_start)
    if ws is not None:  # eq. G1: merging never makes a schedule worse
        ws = fill.merge_prefills(inst, ws)
        ub = evaluate(inst, ws).objective(objective)
    if hyp.at_most is not None:
        ub = hyp.at_most if ub is None else min(ub, hyp.at_most)
    jmax = entry_batches_upper_bound(inst, objective, ub)
    base_J = fl.entry_batches(ws) if ws is not None else _sequential_batches(inst)
    J = _horizon(base_J, jmax, J_param, slack)
    notes.append(_flow_horizon_note(J, jmax, ub))
    fm = fill.FillModel(inst, J, hyp, ub, objective, restricted=jmax is None or J < jmax)
    notes.append(f"fill: {fm.fixed} arc columns fixed at 0 (eq. G3)")
    res = _solve_built(fm, ws, _left(options, t0), notes)
    return _decoded(fm, res, notes, jmax, J_param)


def _left(options: SolveOptions, t0: float) -> SolveOptions:
    """``options`` with the time limit less what building the model took since ``t0`` (the
    run's start): the limit is the whole run's, as in the Big-M path, so the caller may give
    the run all the time it has rather than guess the build time."""
    if options.time_limit is None:
        return options
    return replace(options, time_limit=max(options.time_limit - (time.perf_counter() - t0), 0.5))


def _flow_warm_start(inst: Instance, objective: str, hyp: Hypotheses,
                     warm_start: WarmStart | None) -> tuple[Schedule | None, float | None]:
    """The warm start's canonical form (eq. 13 dominance, compacted) and its objective, or
    ``(None, None)`` when it is infeasible or breaks a hypothesis."""
    if warm_start is None:
        return None, None
    ev = warm_start.evaluation
    if not ev.feasible or hyp.broken_by(inst, warm_start.schedule, ev, objective):
        return None, None
    # the canonical form is a new schedule: replayed once more
    ws = canonical(inst, warm_start.schedule, dominance=True, symmetry=None, compact=True)
    ev2 = evaluate(inst, ws)
    if not ev2.feasible:
        return None, None
    return ws, ev2.objective(objective)


def _flow_horizon_note(J: int, jmax: int | None, ub: float | None) -> str:
    """What ``J`` means for the flow model's optimum (sections 6, 9)."""
    if jmax is not None and J >= jmax:
        return (f"J = {J} batch slots; any schedule with objective <= {ub:.6g} has at most "
                f"{jmax} batches with entries (formulations/infermax.md section 6) and "
                "eviction-only batches are represented by evict-refill arcs, so the "
                "optimum is global (under the eq. 13 dominance, which loses no optimum)")
    return (f"restriction: optimal among schedules with at most J = {J} batches with "
            "entries" + (f" (a schedule within the bound could have up to {jmax})"
                         if jmax is not None else ""))


def _values_disagree(fm: fl.FlowModel, res: milp.SolveResult) -> bool:
    """True when the solver's values are not priced at the objective it reports."""
    if res.values is None or res.objective is None or res.status not in (Status.OPTIMAL, Status.FEASIBLE):
        return False
    own = fm.objective_seconds(res.values)
    rep = res.objective / fm.scale
    return abs(own - rep) > 1e-6 * max(1.0, abs(rep))
