"""Policies (and schedule files) against the optimum: the library behind ``optsched compare``.

Every schedule -- simulated, loaded, or the solver's -- goes through
:func:`optsched.evaluate.evaluate`; objective values are ``Evaluation.objective``. With
``optimal=True`` the reference is the solver's objective when it is proven optimal, else its
bound (:func:`reference` says which); gaps are ``(objective - reference) / |reference|``
(:func:`gap`), so a gap to the bound is an upper bound on the gap to the (unknown) optimum.

``compare(instance, ["vllm", "my_policy.py:MyPolicy"], optimal=True)`` returns a
:class:`Comparison` (one :class:`Row` per schedule); :func:`write_report` writes
``report.md`` (Markdown table + figures), ``report.json``, ``compare.png`` (bars), ``kv.png``
(KV over time), ``progress.png`` (solver incumbent and bound over time) and one
``gantt_<label>.png`` per schedule. Notebooks and benches use this module, never
:mod:`optsched.cli`.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bounds import BoundResult, Budget, bound_methods, lower_bound
from .errors import OptschedError
from .evaluate import OBJECTIVES, Evaluation, evaluate
from .formulations.base import SolveReport, bound_is_global
from .instance import Instance
from .pipeline import Solved
from .pipeline import run as solve_pipeline
from .plugins import is_reference
from .policies import get_spec, list_policies, simulate
from .progress import phase
from .schedule import Schedule
from .search.lns import LNSOptions, improve
from .serving.goodput_gap import HEADERS as GOODPUT_HEADERS
from .serving.goodput_gap import GoodputGap, goodput_gap, goodput_lines, goodput_table_rows
from .solve_types import SolveOptions, Status, WarmStart, finite_or_none, relative_gap
from .verdict import compare_verdict, fmt, unit


class CompareInputError(OptschedError):
    """Nothing to compare, or an unknown policy."""


@dataclass
class Row:
    """One compared schedule (or a failed attempt to get one)."""

    label: str
    kind: str  # "policy", "schedule", "lns" or "optimum"
    status: str  # feasible / infeasible / optimal / best found / error / no_solution ...
    schedule: Schedule | None = None
    evaluation: Evaluation | None = None
    objective: float | None = None  # Evaluation.objective(kind) of this row's schedule
    runtime: float | None = None
    gap: float | None = None
    message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def metric(self, key: str) -> Any:
        return None if self.evaluation is None else self.evaluation.metrics.get(key)

    @property
    def method(self) -> str:
        """What produced this row's schedule: ``policy``, ``schedule file``, ``solver
        (FORMULATION)`` or, for an ``lns`` row, ``lns: NEIGHBOURHOOD`` (the one that found
        the result, :attr:`optsched.search.lns.LNSResult.method`)."""
        if "method" in self.extra:
            return str(self.extra["method"])
        if self.kind == "optimum":
            return f"solver ({self.extra.get('formulation', '?')})"
        return {"schedule": "schedule file"}.get(self.kind, self.kind)

    def to_dict(self) -> dict[str, Any]:
        ev = self.evaluation
        return {
            "label": self.label,
            "kind": self.kind,
            "status": self.status,
            "feasible": None if ev is None else ev.feasible,
            "violations": None if ev is None else int(sum(ev.violation_counts.values())),
            "objective": finite_or_none(self.objective),
            "gap": finite_or_none(self.gap),
            "evictions": self.metric("evictions"),
            "mean_ttft": finite_or_none(self.metric("mean_ttft")),
            "mean_tpot": finite_or_none(self.metric("mean_tpot")),
            "runtime": finite_or_none(self.runtime),
            "message": self.message,
            **self.extra,
            "method": self.method,
        }


@dataclass
class Comparison:
    """The rows of one comparison, the solve behind the optimum row and the gap reference."""

    instance: Instance
    objective: str
    rows: list[Row]
    optimum: Row | None = None
    report: SolveReport | None = None
    #: what the gaps are measured against: ``"optimum"``, ``"bound"`` or None (no gaps)
    reference_kind: str | None = None
    reference: float | None = None
    time_limit: float | None = None
    solver: str = ""
    #: the certified lower bound (``optsched.bounds``), computed at every size
    lower_bound: BoundResult | None = None
    #: where the reference comes from, in words ("proven optimum", "bound: work", ...)
    reference_source: str | None = None
    #: what the comparison could not do within the time limit
    notes: list[str] = field(default_factory=list)
    #: SLO attainment of every row beside its certified upper bound (None: no SLO)
    goodput: GoodputGap | None = None

    @property
    def best(self) -> Row | None:
        """The feasible row with the smallest objective (first of equals), None if none."""
        feas = [r for r in self.rows if r.evaluation is not None and r.evaluation.feasible
                and r.objective is not None and math.isfinite(r.objective)]
        return min(feas, key=_objective_of) if feas else None

    @property
    def all_feasible(self) -> bool:
        """Every row has a feasible schedule (the CLI's exit 0)."""
        return all(r.evaluation is not None and r.evaluation.feasible for r in self.rows)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "schedule"


def policy_names(spec: str | Sequence[str]) -> list[str]:
    """Policy names from ``"a,b"`` (or a list): ``"all"`` is every registered policy; a
    ``file.py:Class`` / ``module:Class`` reference is loaded (a bad one raises)."""

    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [s.strip() for s in items if s.strip()]
    if not names:
        return []
    known = [p.name for p in list_policies()]
    if names == ["all"]:
        return known
    for n in names:
        if is_reference(n) or (n.endswith(".py") and n not in known):
            get_spec(n)  # a bare file.py names its one Policy subclass, or the error lists them
        elif n not in known:
            raise CompareInputError(f"--policies: unknown policy {n!r}; known: {', '.join(known)}")
    return names


def evaluated_row(label: str, kind: str, inst: Instance, sched: Schedule, objective: str,
                  runtime: float | None) -> Row:
    """A row for ``sched``, replayed by the evaluator."""
    ev = evaluate(inst, sched)
    status = "feasible" if ev.feasible else f"infeasible ({sum(ev.violation_counts.values())} violations)"
    return Row(label, kind, status, sched, ev, ev.objective(objective), runtime)


def run_policies(inst: Instance, names: Sequence[str], objective: str = "makespan",
                 deadline: float | None = None) -> list[Row]:
    """Simulate and evaluate each policy; a policy that fails, or does not finish by
    ``deadline`` (a ``time.perf_counter()`` value), is a row with status ``error``."""

    rows = []
    for name in names:
        t0 = time.perf_counter()
        phase(f"simulating {name}")
        try:
            sched = simulate(inst, name, deadline=deadline)
        except OptschedError as e:
            rows.append(Row(name, "policy", "error", runtime=time.perf_counter() - t0, message=str(e)))
            continue
        rows.append(evaluated_row(name, "policy", inst, sched, objective, time.perf_counter() - t0))
    return rows


def run_optimum(inst: Instance, candidates: Sequence[Row], *, formulation: str = "infermax",
                objective: str = "makespan", solver: str = "highs",
                time_limit: float | None = 60.0, threads: int | None = None
                ) -> tuple[Row, SolveReport]:
    """Solve through the one pipeline (:func:`optsched.pipeline.run`); the best feasible
    compared schedule is the warm start (else ``"auto"``)."""
    opts = SolveOptions(solver=solver, time_limit=time_limit, threads=threads, progress=False)
    done = solve_pipeline(inst, formulation, objective, options=opts,
                          warm_start=_warm_start_of(candidates))
    return optimum_row(done.report, formulation, objective), done.report


def _warm_start_of(rows: Sequence[Row]) -> WarmStart | str:
    """The best feasible row as an evaluated warm start (its replay is not repeated), else
    ``"auto"``."""
    feas = [r for r in rows if r.evaluation is not None and r.evaluation.feasible
            and r.schedule is not None and r.objective is not None and math.isfinite(r.objective)]
    if not feas:
        return "auto"
    best = min(feas, key=_objective_of)
    assert best.schedule is not None and best.evaluation is not None  # feas keeps only those
    return WarmStart(best.schedule, best.evaluation, best.label)


def optimum_row(rep: SolveReport, formulation: str, objective: str) -> Row:
    """The optimum row of a solve's report (its schedule replayed by the pipeline)."""
    extra = {"solver_status": rep.status, "bound": finite_or_none(rep.bound),
             "solver_gap": finite_or_none(rep.gap),
             "formulation": rep.formulation, "solver": rep.solver,
             "bound_global": bound_is_global(rep), "restricted": rep.restricted}
    solved = rep.status in (Status.OPTIMAL, Status.FEASIBLE)
    if rep.status == Status.OPTIMAL:
        label, status = f"optimal ({formulation})", "optimal"
    elif rep.status == Status.FEASIBLE:
        label, status = f"best found ({formulation})", "best found (not proven optimal)"
    else:
        label, status = f"{formulation}", rep.status
    row = Row(label, "optimum", status, rep.schedule if solved else None,
              rep.evaluation if solved else None, runtime=rep.runtime, message=rep.message,
              extra=extra)
    if row.evaluation is not None:
        row.objective = row.evaluation.objective(objective)
    return row


def _objective_of(row: Row) -> float:
    return math.inf if row.objective is None else row.objective


def reference(opt: Row | None, lower: BoundResult | None = None
              ) -> tuple[float | None, str | None, str | None]:
    """(value, "optimum" | "bound", source) the gaps are measured against.

    The proven optimum when the solve proved one; else the largest *global* lower bound:
    the solver's bound unless its model was a restriction (:func:`bound_is_global`), or the
    certified bound of ``optsched.bounds``."""
    if (opt is not None and opt.extra.get("solver_status") == Status.OPTIMAL
            and opt.objective is not None
            and not opt.extra.get("restricted")):
        return opt.objective, "optimum", f"proven optimum ({opt.extra.get('formulation')})"
    cands: list[tuple[float, str]] = []
    if lower is not None and math.isfinite(lower.value):
        cands.append((lower.value, f"certified lower bound ({lower.method}, "
                                   "formulations/bounds.md)"))
    b = None if opt is None else opt.extra.get("bound")
    if opt is not None and opt.extra.get("bound_global") and b is not None and math.isfinite(b):
        cands.append((b, f"solver bound ({opt.extra.get('formulation')})"))
    if not cands:
        return None, None, None
    value, source = max(cands)
    return value, "bound", source


def gap(value: float | None, ref: float | None) -> float | None:
    """``(value - ref) / |ref|``: the one gap formula per reference
    (:func:`optsched.solve_types.relative_gap` with ``per="bound"``)."""
    return relative_gap(value, ref, per="bound")


def compare(instance: Instance, policies: str | Sequence[str] = (),
            schedules: Mapping[str, Schedule] | Sequence[tuple[str, Schedule]] = (), *,
            optimal: bool = False,
            formulation: str = "infermax", objective: str = "makespan", solver: str = "highs",
            time_limit: float | None = 60.0, threads: int | None = None,
            improve_seconds: float = 0.0, seed: int = 0) -> Comparison:
    """Simulate ``policies``, evaluate ``schedules`` (label -> schedule) and, with
    ``optimal``, solve ``formulation``; every feasible row gets its gap to the reference.
    ``schedules`` may also be ``(label, schedule)`` pairs. Every row label (policy name or
    schedule label) must be unique: rows are reported, charted and filed by label. With
    ``improve_seconds`` > 0, large-neighbourhood search (:mod:`optsched.search.lns`) runs that long
    (within the budget) from the best feasible row and adds an ``lns`` row."""
    if objective not in OBJECTIVES:
        raise CompareInputError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    names = policy_names(policies)
    pairs = list(schedules.items()) if isinstance(schedules, Mapping) else list(schedules)
    if not names and not pairs and not optimal:
        raise CompareInputError("nothing to compare: give --policies, --schedule or --optimal")
    labels = names + [label for label, _ in pairs]
    twice = sorted({x for x in labels if labels.count(x) > 1})
    if twice:
        raise CompareInputError(f"row label {twice[0]!r} is given twice (policies and --schedule "
                                "labels name the rows; each must be unique)")
    budget = Budget.seconds(time_limit)
    # the policies may use at most POLICY_SHARE of the budget: the rest is for the bound, the
    # model (or LNS in its place) and the report
    policy_deadline = None if budget.deadline is None else \
        time.perf_counter() + POLICY_SHARE * budget.left()
    rows = run_policies(instance, names, objective, policy_deadline) if names else []
    rows += [evaluated_row(label, "schedule", instance, s, objective, None)
             for label, s in pairs]
    notes: list[str] = []
    if improve_seconds > 0:
        rows += _lns_row(instance, rows, objective, min(improve_seconds, budget.left()), seed)
    if instance.limits.hidden_cache:  # no bound or formulation models it (semantics section 6)
        if optimal:
            raise CompareInputError("--optimal: the instance enables hidden cache "
                                    "(limits.hidden_cache), which no formulation represents; "
                                    "compare the policies without --optimal")
        lower = None
        notes.append("no certified lower bound: the instance enables hidden cache, which the "
                     "bounds do not model (docs/semantics.md section 6)")
    elif instance.has_prefix and not bound_methods()["combinatorial"].reuse_aware:
        if optimal:
            raise CompareInputError("--optimal: the instance's requests list prefix block ids, "
                                    "and the formulations do not model prefix reuse "
                                    "(docs/semantics.md section 6); compare the policies "
                                    "without --optimal")
        lower = None
        notes.append("no certified lower bound: the instance's requests list prefix block "
                     "ids, and the bounds do not model prefix reuse (docs/semantics.md "
                     "section 6)")
    else:
        lower = lower_bound(instance, objective, "combinatorial", budget=budget)
    opt, rep = None, None
    if optimal:
        done = _optimum_within(instance, rows, budget, lower, formulation=formulation,
                               objective=objective, solver=solver, threads=threads,
                               seed=seed, search=improve_seconds <= 0)
        opt, rep = _optimum(done, formulation, objective, notes)
        rows += _skipped_lns_row(instance, done, objective, notes) + [opt]
    ref, ref_kind, source = reference(opt, lower)
    for r in rows:
        if r.evaluation is not None and r.evaluation.feasible:
            r.gap = gap(r.objective, ref)
    return Comparison(instance, objective, rows, opt, rep, ref_kind, ref, time_limit, solver,
                      lower, source, notes, goodput_gap(instance, rows))


#: the policies' share of the budget (the rest: the bound, the pipeline's model or its LNS
#: fallback, and the report); seconds of the budget kept for the report (charts are skipped
#: past the deadline)
POLICY_SHARE, REPORT_SECONDS = 0.6, 1.0


def _lns_row(instance: Instance, rows: list[Row], objective: str, seconds: float,
             seed: int) -> list[Row]:
    """An ``lns`` row improving the best feasible row (none without one or without time)."""

    feas = [r for r in rows if r.evaluation is not None and r.evaluation.feasible
            and r.schedule is not None and not r.schedule.has_swaps
            and not r.schedule.has_hidden
            and r.objective is not None and math.isfinite(r.objective)]
    if not feas or not seconds > 0 or instance.limits.swapping or instance.limits.hidden_cache \
            or instance.has_prefix:
        return []
    best = min(feas, key=_objective_of)
    if best.schedule is None:  # feas keeps only rows with a schedule
        raise RuntimeError(f"compare: row {best.label!r} has no schedule to improve")

    phase(f"large-neighbourhood search for {seconds:.1f} s from {best.label}")
    res = improve(instance, best.schedule, objective,
                  LNSOptions(time_limit=seconds, seed=seed, progress=False))
    phase(f"large-neighbourhood search: {res.start_objective:.6g} -> {res.objective:.6g} "
          f"in {res.runtime:.1f} s")
    row = evaluated_row(f"lns ({best.label})", "lns", instance, res.schedule, objective,
                        res.runtime)
    row.extra["method"] = f"lns: {res.method}"
    return [row]


def _optimum_within(instance: Instance, rows: list[Row], budget: Budget,
                    lower: BoundResult | None, *, formulation: str, objective: str,
                    solver: str, threads: int | None, seed: int, search: bool) -> Solved:
    """The solve pipeline (:func:`optsched.pipeline.run`) in what is left of the budget,
    from the best compared row: the same plan, warm start and fallback as ``optsched
    solve`` (with ``search``, the skipped model's time goes to LNS, as there)."""
    # the report (table, charts) keeps REPORT_SECONDS of the command's budget
    deadline = None if budget.deadline is None else budget.deadline - REPORT_SECONDS
    limit = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
    opts = SolveOptions(solver=solver, time_limit=limit or None, threads=threads, seed=seed,
                        progress=False)
    return solve_pipeline(instance, formulation, objective, options=opts,
                          warm_start=_warm_start_of(rows), deadline=deadline,
                          lower=lower, fallback=True, improve_fallback=search)


def _optimum(done: Solved, formulation: str, objective: str,
             notes: list[str]) -> tuple[Row, SolveReport | None]:
    """The optimum row: the solver's answer, or, when the model was skipped (estimated
    before building, ``optsched.budget``), a ``skipped`` row saying why, with the fallback
    ``optsched solve`` reports."""
    plan = done.plan
    if plan.build:
        notes.append(plan.note)
        return optimum_row(done.report, formulation, objective), done.report
    est = plan.estimate
    return Row(f"{formulation} (skipped)", "optimum", "skipped", message=plan.note,
               extra={"solver_status": "skipped", "formulation": formulation,
                      "estimate": None if est is None else est.describe(),
                      "fallback": done.fallback}), None


def _skipped_lns_row(instance: Instance, done: Solved, objective: str,
                     notes: list[str]) -> list[Row]:
    """The ``lns`` row of the search the pipeline ran in the skipped model's time."""
    res, ws = done.lns, done.warm_start
    if res is None or ws is None:
        return []
    notes.append(f"the exact model was skipped; its {res.runtime:.0f} s went to "
                 "large-neighbourhood search (the lns row)")
    row = evaluated_row(f"lns ({ws.source or 'schedule'})", "lns", instance, res.schedule,
                        objective, res.runtime)
    row.extra["method"] = f"lns: {res.method}"
    return [row]


# -- the report ---------------------------------------------------------------------------
HEADERS = ("policy", "status", "objective", "gap", "evictions", "mean TTFT", "mean TPOT", "runtime (s)",
           "method")


def headers_in(unit: str, objective: str | None = None) -> list[str]:
    """:data:`HEADERS` with the unit of times (``s``, or ``time units`` under unit cost)."""
    h = list(HEADERS)
    h[2] = f"objective ({objective + ', ' if objective else ''}{unit})"
    h[5], h[6] = f"mean TTFT ({unit})", f"mean TPOT ({unit})"
    return h


def table_rows(rows: Sequence[Row]) -> list[list[Any]]:
    """The report table's cells, one list per row (in :data:`HEADERS` order)."""
    out = []
    for r in rows:
        g = None if r.gap is None else f"{100 * r.gap:+.2f}%"
        out.append([r.label, r.status, r.objective, g, r.metric("evictions"), r.metric("mean_ttft"),
                    r.metric("mean_tpot"), None if r.runtime is None else f"{r.runtime:.3g}",
                    r.method])
    return out


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        return fmt(v).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(out: Path, cmp: Comparison, *, gantt_charts: bool = True, max_rows: int | None = 300,
                 title: str | None = None, deadline: float | None = None) -> dict[str, str]:
    """Figures, ``report.md`` and ``report.json`` in ``out``; returns {what: file name}.
    ``max_rows``: Gantt rows per figure (None = all); ``title``: the instance's name in the
    heading when the instance has none; past ``deadline`` (a ``time.perf_counter()`` value,
    the command's budget) no further figure is drawn and the notes say which were not."""
    out.mkdir(parents=True, exist_ok=True)
    clock = _Clock(deadline)
    files = _figures(out, cmp, clock)
    gantts = _gantts(out, cmp, max_rows, clock) if gantt_charts else {}

    verdict = compare_verdict(cmp)
    md = _markdown(cmp, files, gantts, title)
    md[2:2] = [f"**Verdict:** {verdict}", ""]
    (out / "report.md").write_text("\n".join(md) + "\n")
    files["report"] = "report.md"
    rep = cmp.report
    report: dict[str, Any] = {
        "instance": cmp.instance.name, "objective_kind": cmp.objective,
        "reference": {"kind": cmp.reference_kind, "value": finite_or_none(cmp.reference),
                      "source": cmp.reference_source},
        "lower_bound": None if cmp.lower_bound is None else cmp.lower_bound.to_dict(),
        "notes": list(cmp.notes),
        "verdict": verdict,
        "best": _best_dict(cmp),
        "goodput": None if cmp.goodput is None else cmp.goodput.to_dict(),
        "solve": None if rep is None else rep.to_dict(include_schedule=False),
        "rows": [r.to_dict() for r in cmp.rows],
        "figures": {**{k: v for k, v in files.items() if k != "report"}, "gantt": gantts},
    }
    if report["solve"] is not None:
        report["solve"].pop("evaluation", None)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    files["json"] = "report.json"
    return files


def _best_dict(cmp: Comparison) -> dict[str, Any] | None:
    """Which row holds the best schedule and which method found it (report.json's ``best``)."""
    b = cmp.best
    return None if b is None else {"label": b.label, "method": b.method,
                                   "objective": finite_or_none(b.objective), "gap": finite_or_none(b.gap)}


#: seconds loading matplotlib is assumed to take when it is not loaded yet (0.5-1 s on a
#: quiet 2-core machine, up to 7 s at load 8)
MATPLOTLIB_SECONDS = 2.0


class _Clock:
    """The charts' deadline: a chart is started only if the last one, drawn in the time it
    took, would still end before ``deadline`` (a ``time.perf_counter()`` value)."""

    def __init__(self, deadline: float | None):
        self.deadline, self.last, self.started = deadline, 0.0, time.perf_counter()
        if "matplotlib.axes" not in sys.modules:  # loading it is the first chart's cost
            self.last = MATPLOTLIB_SECONDS

    def late(self, cmp: Comparison, what: str) -> bool:
        """Whether ``what`` cannot be drawn in time (a note says so); else it starts now."""
        now = time.perf_counter()
        if self.deadline is None or now + self.last < self.deadline:
            self.started = now
            return False
        cmp.notes.append(f"{what} not drawn: the time limit was reached")
        return True

    def done(self) -> None:
        self.last = time.perf_counter() - self.started


def _figures(out: Path, cmp: Comparison, clock: _Clock) -> dict[str, str]:

    files: dict[str, str] = {}
    if clock.late(cmp, "the charts (compare.png, kv.png, Gantt charts)"):
        clock.last = math.inf  # none will be drawn
        return files
    phase("report: loading matplotlib and drawing the charts")
    from .plot import COMPARE_METRICS, compare_bars, kv_over_time, solver_progress

    inst, rows, ref_kind, rep = cmp.instance, cmp.rows, cmp.reference_kind, cmp.report
    done = [r for r in rows if r.evaluation is not None]
    bar_rows = [{"policy": r.label, "objective": r.objective, "gap": r.gap,
                 "evictions": r.metric("evictions"), "mean_ttft": r.metric("mean_ttft"),
                 "mean_tpot": r.metric("mean_tpot"), "optimal": r.kind == "optimum",
                 "feasible": r.evaluation.feasible if r.evaluation is not None else None} for r in rows]
    if rows and not clock.late(cmp, "compare.png (comparison bars)"):
        metrics = [m for m in COMPARE_METRICS if ref_kind or m[0] != "gap"]
        compare_bars(bar_rows, title=f"{inst.name}: {cmp.objective}"
                     + ("" if ref_kind else " (no optimum computed)"), metrics=metrics,
                     gap_label=f"gap to {ref_kind} (%)" if ref_kind else None, save=out / "compare.png")
        files["bars"] = "compare.png"
        clock.done()
    if done and not clock.late(cmp, "kv.png (KV cache use over time)"):
        kv_over_time({r.label: (inst, r.evaluation) for r in done if r.evaluation is not None},
                     title=f"{inst.name}: KV cache use over time", save=out / "kv.png")
        files["kv"] = "kv.png"
        clock.done()
    history = rep.history if rep is not None else ()
    if rep is not None and history and not clock.late(cmp, "progress.png"):
        solver_progress(history, title=f"{inst.name}: {rep.formulation} / {rep.solver}",
                        save=out / "progress.png")
        files["progress"] = "progress.png"
        clock.done()
    return files


def _gantts(out: Path, cmp: Comparison, max_rows: int | None, clock: _Clock) -> dict[str, str]:
    gantts: dict[str, str] = {}
    used: set[str] = set()
    if math.isinf(clock.last):  # no chart at all (the note says so)
        return gantts
    from .plot import gantt

    for r in cmp.rows:
        if r.evaluation is None or r.schedule is None:
            continue
        if clock.late(cmp, f"the Gantt chart of {r.label}"):
            continue
        name = f"gantt_{_slug(r.label)}.png"
        k = 2
        while name in used:
            name, k = f"gantt_{_slug(r.label)}_{k}.png", k + 1
        used.add(name)
        gantt(cmp.instance, r.schedule, r.evaluation, max_rows=max_rows or None,
              title=f"{r.label}: {cmp.objective} {fmt(r.objective)}, "
                    f"{r.metric('evictions')} evictions", save=out / name)
        gantts[r.label] = name
        clock.done()
    return gantts


def _markdown(cmp: Comparison, files: dict[str, str], gantts: dict[str, str],
              title: str | None) -> list[str]:
    inst, rep, ref, ref_kind = cmp.instance, cmp.report, cmp.reference, cmp.reference_kind
    lim = inst.limits
    gap_head = {"optimum": "gap to optimum", "bound": "gap to bound (optimum not proven)",
                None: "gap (no bound)"}[ref_kind]

    headers = headers_in(unit(inst), cmp.objective)
    headers[3] = gap_head
    md = [f"# Comparison on `{inst.name or title}`", "",
          f"- requests: {inst.n}; M = {lim.kv_capacity}, C = {lim.max_batch_tokens}"
          + (f", P = {lim.max_prefill_tokens}" if lim.max_prefill_tokens is not None else "")
          + (f", max batch size {lim.max_batch_size}" if lim.max_batch_size is not None else "")
          + f"; cost model: {inst.cost_model.kind}",
          f"- objective: {cmp.objective} (from `Evaluation.objective`; every schedule replayed by "
          "`optsched.evaluate.evaluate`)"]
    if rep is not None:
        limit = "none" if cmp.time_limit is None else f"{cmp.time_limit:g} s"
        md.append(f"- solver: formulation `{rep.formulation}`, {rep.solver or cmp.solver}, status "
                  f"**{rep.status}**, objective {fmt(rep.objective)}, bound {fmt(rep.bound)}, "
                  f"solver gap {fmt(rep.gap)}, {rep.runtime:.3g} s (limit {limit} for the command)")
        for n in rep.notes:
            md.append(f"- note: {n}")
        if rep.message:
            md.append(f"- solver message: {rep.message}")
    lb = cmp.lower_bound
    if lb is not None:
        md.append(f"- certified lower bound: {fmt(lb.value)} (method `{lb.method}`, "
                  f"{lb.runtime:.2g} s; rungs: "
                  + ", ".join(f"{k} {fmt(v)}" for k, v in lb.ladder.items())
                  + "; validity arguments in `formulations/bounds.md`)")
    if ref_kind == "optimum":
        md.append(f"- gaps are relative to the proven optimum {fmt(ref)}: "
                  "(objective - optimum) / optimum")
    elif ref_kind == "bound":
        md.append(f"- the optimum is **not proven**; gaps are relative to the {cmp.reference_source} "
                  f"{fmt(ref)}: (objective - bound) / bound, an upper bound on the gap to the optimum")
    for n in cmp.notes:
        md.append(f"- {n}")
    md += ["", markdown_table(headers, table_rows(cmp.rows)), ""]
    if cmp.best is not None:
        md.append(f"- best schedule: `{cmp.best.label}` ({cmp.best.method}), "
                  f"{cmp.objective} {fmt(cmp.best.objective)}")
    if cmp.goodput is not None:
        md += ["", "## SLO goodput", "", markdown_table(GOODPUT_HEADERS,
                                                        goodput_table_rows(cmp.goodput)), ""]
        md += [f"- {line}" for line in goodput_lines(cmp.goodput)]
    for r in cmp.rows:
        if r.message:
            md.append(f"- {r.label}: {r.message}")
    if "bars" in files:
        md += ["", "## Comparison", "", "![comparison bars](compare.png)"]
    if "kv" in files:
        md += ["", "## KV cache use over time", "", "![KV over time](kv.png)"]
    if "progress" in files:
        md += ["", "## Solver progress", "", "![incumbent and bound over time](progress.png)"]
    if gantts:
        md += ["", "## Schedules", "",
               "(p)refill black, decode gray, evicted until refill red; KV use against M below."]
        for label, name in gantts.items():
            md += ["", f"### {label}", "", f"![{label}]({name})"]
    return md


__all__ = [
    "CompareInputError", "Comparison", "HEADERS", "Row", "bound_is_global", "compare",
    "evaluated_row", "fmt", "gap", "markdown_table", "optimum_row", "policy_names", "reference",
    "run_optimum", "run_policies", "table_rows",
    "write_report",
]


# ``optsched.compare(instance, ...)`` is this module's compare() (the top-level API)
from ._api import make_callable  # noqa: E402  (after compare() is defined)

make_callable(__name__)
