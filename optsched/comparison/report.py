"""What a comparison, a solve and a bound say: the report files and the one-sentence verdicts.

* :func:`write_report` -- ``report.md`` (Markdown table + figures), ``report.json``,
  ``compare.png`` (bars), ``kv.png`` (KV over time), ``progress.png`` (solver incumbent and
  bound over time) and one ``gantt_<label>.png`` per schedule of a
  :class:`~optsched.comparison.rows.Comparison` (a Gantt chart; past ``max_rows`` requests
  the trace-scale :func:`optsched.plot.timeline` instead);
* the table cells (:func:`table_rows`, :func:`headers_in`, :func:`markdown_table`) and the
  goodput table (:func:`goodput_table_rows`, :func:`goodput_lines`) the CLI prints too;
* the verdicts of ``solve``, ``bound`` (here) and ``compare``
  (:func:`optsched.comparison.rows.compare_verdict`): each command ends with one sentence on
  stderr that a user can act on (:func:`say`), and puts the same sentence in its JSON output
  as ``verdict``. The numbers are the command's own: objectives from
  :func:`optsched.evaluate`, lower bounds from ``optsched.bounds`` (never above the optimum,
  ``formulations/bounds.md``); the distance to the optimum in words is
  :func:`optsched.solve_types.above_optimum`.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..formulations.base import Hypotheses
from ..instance import Instance
from ..objectives import OBJECTIVE_WORDS
from ..progress import fmt, pct, phase, unit, value
from ..solve_types import (
    ABOVE_OPTIMAL,
    CERTIFIED_GAP,
    BoundResult,
    SolveReport,
    Status,
    above_optimum,
    finite_or_none,
)
from .rows import Comparison, GoodputGap, Row, compare_verdict


def say(verdict: str) -> str:
    """Write the verdict on stderr (the last line of a command) and return it."""
    print(f"verdict: {verdict}", file=sys.stderr, flush=True)
    return verdict


def solve_verdict(instance: Instance, objective: str, rep: SolveReport,
                  hyp: Hypotheses | None, than: tuple[float, str] | None = None) -> str:
    """The sentence for ``optsched solve`` (``rep`` the pipeline's report, with its certified
    lower bound; ``than`` the ``--at-most K --than X`` pair as (K, X) when given)."""
    if rep.lower_bound is None:
        raise ValueError("solve_verdict: the report has no certified lower bound")
    lb = rep.lower_bound.value
    what = OBJECTIVE_WORDS.get(objective, objective)
    if hyp is not None and hyp.any:
        return _hypothesis_verdict(instance, objective, rep, hyp, than)
    if rep.proven_optimal and rep.objective is not None:
        ws = rep.warm_start
        tail = ""
        if ws is not None and ws.objective and ws.policy not in (None, "schedule"):
            tail = (f"; {ws.policy} is {pct(ws.objective / rep.objective - 1)} "
                    "above it")
        return f"The optimal {what} is {value(rep.objective, instance)} (proven){tail}."
    if rep.model_restriction is not None and rep.objective is not None \
            and rep.status.has_solution:
        return _restricted_verdict(instance, objective, rep, lb)
    if rep.objective is not None:
        return (f"The best schedule found has {what} {value(rep.objective, instance)}, "
                f"{above_optimum(rep.objective, lb, None, False)} "
                f"(lower bound {value(lb, instance)}).")
    fb = rep.fallback
    if fb is not None:
        return (f"The exact model did not fit the time limit; the best schedule found "
                f"({fb.policy}) has {what} {value(fb.objective, instance)}, "
                f"{above_optimum(fb.objective, lb, None, False)} "
                f"(lower bound {value(lb, instance)}).")
    if rep.status == Status.ERROR:
        return (f"The solver failed ({rep.message or 'no message'}); every schedule has {what} "
                f"at least {value(lb, instance)} (certified lower bound).")
    return (f"No schedule within the time limit; every schedule has {what} at least "
            f"{value(lb, instance)} (certified lower bound).")


def _restricted_verdict(instance: Instance, objective: str, rep: SolveReport, lb: float) -> str:
    """A restricted model's answer, each figure named by the model it holds in: the model's
    status and own bound, the certified distance under docs/semantics.md, and a better
    schedule the model cannot represent when the solve knows one (the warm start)."""
    what = OBJECTIVE_WORDS.get(objective, objective)
    obj = rep.objective
    assert obj is not None
    gap = rep.model_answer()["gap"]
    if rep.status in (Status.OPTIMAL, Status.RESTRICTED_OPTIMAL):
        there = "proven optimal in that model"
    elif gap is not None and rep.model_bound is not None:
        there = (f"within {pct(gap)} of that model's optimum (its bound "
                 f"{value(rep.model_bound, instance)})")
    else:
        there = "with no bound in that model"
    text = (f"In the {rep.formulation} model ({rep.model_restriction}) the best schedule has "
            f"{what} {value(obj, instance)}, {there}. Under docs/semantics.md, which allows more "
            f"schedules, it is {above_optimum(obj, lb, None, False)} (certified lower bound "
            f"{value(lb, instance)}).")
    bk = rep.best_known
    if bk is not None and bk[1] < obj * (1 - 1e-9):
        text += (f" A better schedule outside that model: the {bk[0]}, {what} "
                 f"{value(bk[1], instance)}, {above_optimum(bk[1], lb, None, False)}.")
    return text


def _hypothesis_verdict(instance: Instance, objective: str, rep: SolveReport, hyp: Hypotheses,
                        than: tuple[float, str] | None) -> str:
    what = OBJECTIVE_WORDS.get(objective, objective)
    kind = "eviction-free schedule" if hyp.no_evictions else "schedule"
    extra = " meeting the --force/--forbid/--order hypotheses" \
        if (hyp.force or hyp.forbid or hyp.order) else ""
    if rep.status.has_solution and rep.objective is not None:
        yes = f"Yes: an {kind}{extra} with {what} {value(rep.objective, instance)}"
        if than is not None and hyp.at_most:
            rel = rep.objective / hyp.at_most * than[0] - 1  # at_most = K x the reference
            yes += f" ({pct(abs(rel))} {'slower' if rel > 0 else 'faster'} than {than[1]})"
        return yes + " exists."
    if rep.status == Status.INFEASIBLE:
        if than is not None and hyp.at_most is not None:
            k, ref = than
            if k > 1:
                return f"No: every {kind}{extra} is more than {pct(k - 1)} slower than {ref} on {what}."
            if k == 1:
                return f"No: every {kind}{extra} is slower than {ref} on {what}."
            return f"No: no {kind}{extra} is {pct(1 - k)} faster than {ref} on {what}."
        if hyp.at_most is not None:
            return (f"No: every {kind}{extra} has {what} above "
                    f"{value(hyp.at_most, instance)}.")
        return f"No: there is no {kind}{extra}."
    return (f"Unknown: the solver neither found an {kind}{extra} nor proved that none exists "
            f"({rep.status}).")


def bound_verdict(instance: Instance, objective: str, res: BoundResult) -> str:
    """The sentence for ``optsched bound``."""
    what = OBJECTIVE_WORDS.get(objective, objective)
    return (f"Every schedule of these {instance.n} requests has {what} at least "
            f"{value(res.value, instance)} (certified lower bound, method {res.method}).")


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "schedule"


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
        out.append([r.label, r.status_text, r.objective, g, r.metric("evictions"), r.metric("mean_ttft"),
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
        "offered_load": None if cmp.offered_load is None else cmp.offered_load.to_dict(),
        "solve": None if rep is None else rep.to_dict(include_schedule=False, pipeline=False),
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
    from ..plot import COMPARE_METRICS, compare_bars, kv_over_time, solver_progress

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
                     gap_label=("above optimal (%)" if ref_kind == "optimum" else
                                f"{ABOVE_OPTIMAL} (%)") if ref_kind else None, save=out / "compare.png")
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
    from ..plot import gantt, timeline

    # past max_rows requests a sampled Gantt chart hides most rows: the timeline draws all
    trace_scale = max_rows is not None and max_rows > 0 and cmp.instance.n > max_rows
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
        title = f"{r.label}: {cmp.objective} {fmt(r.objective)}, " \
                f"{r.metric('evictions')} evictions"
        if trace_scale:
            timeline(cmp.instance, r.schedule, r.evaluation, title=title, save=out / name)
        else:
            gantt(cmp.instance, r.schedule, r.evaluation, max_rows=max_rows or None,
                  title=title, save=out / name)
        gantts[r.label] = name
        clock.done()
    return gantts


def _markdown(cmp: Comparison, files: dict[str, str], gantts: dict[str, str],
              title: str | None) -> list[str]:
    inst, rep, ref, ref_kind = cmp.instance, cmp.report, cmp.reference, cmp.reference_kind
    lim = inst.limits
    gap_head = {"optimum": "above optimal", "bound": f"{ABOVE_OPTIMAL} (optimum not proven)",
                None: "gap (no bound)"}[ref_kind]

    headers = headers_in(unit(inst), cmp.objective)
    headers[3] = gap_head
    md = [f"# Comparison on `{inst.name or title}`", "",
          f"- requests: {inst.n}; M = {lim.kv_capacity}, C = {lim.max_batch_tokens}"
          + (f", P = {lim.max_prefill_tokens}" if lim.max_prefill_tokens is not None else "")
          + (f", max batch size {lim.max_batch_size}" if lim.max_batch_size is not None else "")
          + f"; cost model: {inst.cost_model.kind}",
          f"- objective: {cmp.objective} (from `Evaluation.objective`; every schedule replayed by "
          "`optsched.evaluate`)"]
    if cmp.offered_load is not None:
        md.append(f"- {cmp.offered_load.describe()} (docs/semantics.md section 4)")
        warning = cmp.offered_load.warning()
        if warning:
            md.append(f"- **warning:** {warning}")
    if rep is not None:
        limit = "none" if cmp.time_limit is None else f"{cmp.time_limit:g} s"
        md.append(f"- solver: formulation `{rep.formulation}`, {rep.solver or cmp.solver}, status "
                  f"**{rep.status}**, objective {fmt(rep.objective)}, bound {fmt(rep.bound)}, "
                  f"{CERTIFIED_GAP} {fmt(rep.gap)}, {rep.runtime:.3g} s (limit {limit} for the command)")
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


GOODPUT_HEADERS = ("policy", "SLO attainment", "upper bound (B12)", "gap")


def goodput_table_rows(g: GoodputGap) -> list[list[Any]]:
    """Cells of the goodput table, one list per row (in :data:`GOODPUT_HEADERS` order)."""
    return [[r.label, r.attainment, g.upper,
             None if r.gap is None else f"{100 * r.gap:.2f}%"] for r in g.rows]


def goodput_lines(g: GoodputGap) -> list[str]:
    """The sentences under the table (report and terminal)."""
    b, gb = g.best, g.bound
    lines = [f"goodput: at most {gb.both} of the {gb.with_slo} requests with an SLO can meet "
             f"all of theirs (attainment <= {g.upper:.4g}; TTFT alone <= {gb.ttft}; "
             f"formulations/bounds.md B12, {g.seconds:.2g} s); gap = (bound - attainment) / "
             "bound, an upper bound on the shortfall from the optimum relative to it"]
    if b is not None and b.attainment is not None:
        lines.append(f"goodput best: {b.label}, attainment {b.attainment:.4g}, gap "
                     f"{100 * (b.gap or 0.0):.2f}%")
    return lines


__all__ = ["GOODPUT_HEADERS", "HEADERS", "bound_verdict", "goodput_lines", "goodput_table_rows",
           "headers_in", "markdown_table", "say", "solve_verdict", "table_rows", "write_report"]
