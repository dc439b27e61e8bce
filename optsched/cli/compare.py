"""``optsched compare``: policies (and schedule files) against the optimum, as a report.

Every schedule -- simulated, loaded, or the solver's -- goes through
:func:`optsched.evaluate.evaluate`; objective values are ``Evaluation.objective``.
With ``--optimal`` the reference is the solver's objective when it is proven
optimal, else its bound (the table header says which); gaps are
``(objective - reference) / |reference|``, so a gap to the bound is an upper
bound on the gap to the (unknown) optimum.

Writes ``report.md`` (Markdown table + figures), ``report.json``,
``compare.png`` (bars), ``kv.png`` (KV over time), ``progress.png`` (solver incumbent and
bound over time, with ``--optimal``), ``gantt_<label>.png`` (one per
schedule). Exit 0: every schedule feasible (and the solve, if asked, found a
solution); 1: some schedule infeasible, a policy failed or the solve found
nothing / failed its check (the report is written anyway); 2: bad input.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import OptschedError
from ..evaluate import OBJECTIVES, Evaluation, evaluate
from ..instance import Instance
from ..schedule import Schedule
from . import EXIT_NO, EXIT_OK
from ._common import fmt, load_instance, load_schedule, output_dir, table


class CompareInputError(OptschedError):
    pass


def register(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="compare policies (and schedules) with each other and the optimum: Markdown report + PNGs",
        description="Every schedule (simulated, loaded or the solver's) is replayed by the evaluator; "
        "objectives are the evaluator's. With --optimal, gaps are (objective - reference) / reference "
        "where the reference is the proven optimum, or the solver's bound when optimality is not "
        "proven (the report says which). Writes report.md, report.json, compare.png, kv.png and one "
        "gantt_<label>.png per schedule, and prints the table. Exit 0: all schedules feasible; "
        "1: a schedule infeasible, a policy failed or the solve found nothing (report written anyway); "
        "2: bad input.",
    )
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("--policies", default="",
                   help="comma-separated policy names, or 'all' for every registered policy")
    p.add_argument("--schedule", action="append", default=[], metavar="LABEL=PATH",
                   help="also compare a schedule file (repeatable)")
    p.add_argument("--optimal", action="store_true", help="also solve for the optimum")
    p.add_argument("--formulation", default="infermax", help="formulation for --optimal")
    p.add_argument("--objective", default="makespan", choices=OBJECTIVES)
    p.add_argument("--time-limit", type=float, default=60.0, help="solver seconds (default 60)")
    p.add_argument("--solver", default="highs", choices=("highs", "gurobi", "cbc", "cpsat", "auto"))
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--max-rows", type=int, default=300, help="Gantt rows per figure (0 = all)")
    p.add_argument("--no-gantt", action="store_true", help="skip the per-schedule Gantt charts")
    p.add_argument("-o", "--output", required=True, metavar="REPORT_DIR", help="report directory")
    p.set_defaults(func=run)


@dataclass
class Row:
    """One compared schedule (or a failed attempt to get one)."""

    label: str
    kind: str  # "policy", "schedule" or "optimum"
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

    def to_dict(self) -> dict[str, Any]:
        ev = self.evaluation
        return {
            "label": self.label,
            "kind": self.kind,
            "status": self.status,
            "feasible": None if ev is None else ev.feasible,
            "violations": None if ev is None else int(sum(ev.violation_counts.values())),
            "objective": _num(self.objective),
            "gap": _num(self.gap),
            "evictions": self.metric("evictions"),
            "mean_ttft": _num(self.metric("mean_ttft")),
            "mean_tpot": _num(self.metric("mean_tpot")),
            "runtime": _num(self.runtime),
            "message": self.message,
            **self.extra,
        }


def _num(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "schedule"


def _policy_names(spec: str) -> list[str]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        return []
    try:
        from ..policies import list_policies
    except ImportError as e:
        raise CompareInputError(f"--policies: the policies package is not available ({e})") from None
    known = [getattr(p, "name", p) for p in list_policies()]
    if names == ["all"]:
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise CompareInputError(f"--policies: unknown policy {unknown[0]!r}; known: {', '.join(known)}")
    return names


def _evaluated(label: str, kind: str, inst: Instance, sched: Schedule, objective: str,
               runtime: float | None) -> Row:
    ev = evaluate(inst, sched)
    status = "feasible" if ev.feasible else f"infeasible ({sum(ev.violation_counts.values())} violations)"
    return Row(label, kind, status, sched, ev, ev.objective(objective), runtime)


def run_policies(inst: Instance, names: list[str], objective: str) -> list[Row]:
    from ..policies import simulate

    rows = []
    for name in names:
        t0 = time.perf_counter()
        try:
            sched = simulate(inst, name)
        except OptschedError as e:
            rows.append(Row(name, "policy", "error", runtime=time.perf_counter() - t0, message=str(e)))
            continue
        rows.append(_evaluated(name, "policy", inst, sched, objective, time.perf_counter() - t0))
    return rows


def run_optimum(inst: Instance, args, candidates: list[Row]) -> tuple[Row, Any]:
    """Solve; the best feasible compared schedule is the warm start."""
    from ..formulations import SolveOptions, solve

    feas = [r for r in candidates if r.evaluation is not None and r.evaluation.feasible
            and r.objective is not None and math.isfinite(r.objective)]
    if feas:
        ws: Any = min(feas, key=lambda r: r.objective).schedule  # type: ignore[arg-type, return-value]
    else:
        try:
            import optsched.policies  # noqa: F401

            ws = "auto"
        except ImportError:
            ws = None
    opts = SolveOptions(solver=args.solver, time_limit=args.time_limit, threads=args.threads,
                        progress=False)
    rep = solve(inst, args.formulation, args.objective, options=opts, warm_start=ws)
    extra = {"solver_status": rep.status, "bound": _num(rep.bound), "solver_gap": _num(rep.gap),
             "formulation": rep.formulation, "solver": rep.solver}
    if rep.status == "optimal":
        label, status = f"optimal ({args.formulation})", "optimal"
    elif rep.status == "feasible":
        label, status = f"best found ({args.formulation})", "best found (not proven optimal)"
    else:
        label, status = f"{args.formulation}", rep.status
    row = Row(label, "optimum", status, rep.schedule if rep.status in ("optimal", "feasible") else None,
              rep.evaluation if rep.status in ("optimal", "feasible") else None,
              runtime=rep.runtime, message=rep.message, extra=extra)
    if row.evaluation is not None:
        row.objective = row.evaluation.objective(args.objective)
    return row, rep


def reference(opt: Row | None) -> tuple[float | None, str | None]:
    """(value, "optimum" | "bound") the gaps are measured against, or (None, None)."""
    if opt is None:
        return None, None
    if opt.extra.get("solver_status") == "optimal" and opt.objective is not None:
        return opt.objective, "optimum"
    b = opt.extra.get("bound")
    if opt.extra.get("solver_status") in ("optimal", "feasible", "no_solution") \
            and b is not None and math.isfinite(b):
        return b, "bound"
    return None, None


def gap(value: float | None, ref: float | None) -> float | None:
    if value is None or ref is None or not math.isfinite(value):
        return None
    if ref == 0:
        return 0.0 if value == 0 else None
    return (value - ref) / abs(ref)


HEADERS = ("policy", "status", "objective", "gap", "evictions", "mean TTFT", "mean TPOT", "runtime (s)")


def table_rows(rows: list[Row]) -> list[list[Any]]:
    out = []
    for r in rows:
        g = None if r.gap is None else f"{100 * r.gap:+.2f}%"
        out.append([r.label, r.status, r.objective, g, r.metric("evictions"), r.metric("mean_ttft"),
                    r.metric("mean_tpot"), None if r.runtime is None else f"{r.runtime:.3g}"])
    return out


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return fmt(v).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(out: Path, inst: Instance, args, rows: list[Row], opt: Row | None, rep: Any,
                 ref: float | None, ref_kind: str | None) -> dict[str, str]:
    """Figures, report.md and report.json; returns {what: file name}."""
    from ..plot import COMPARE_METRICS, compare_bars, gantt, kv_over_time, solver_progress

    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    done = [r for r in rows if r.evaluation is not None]
    bar_rows = [{"policy": r.label, "objective": r.objective, "gap": r.gap,
                 "evictions": r.metric("evictions"), "mean_ttft": r.metric("mean_ttft"),
                 "mean_tpot": r.metric("mean_tpot"), "optimal": r.kind == "optimum",
                 "feasible": r.evaluation.feasible if r.evaluation is not None else None} for r in rows]
    if rows:
        metrics = [m for m in COMPARE_METRICS if ref_kind or m[0] != "gap"]
        compare_bars(bar_rows, title=f"{inst.name}: {args.objective}"
                     + ("" if ref_kind else " (no optimum computed)"), metrics=metrics,
                     gap_label=f"gap to {ref_kind} (%)" if ref_kind else None, save=out / "compare.png")
        files["bars"] = "compare.png"
    if done:
        kv_over_time({r.label: (inst, r.evaluation) for r in done},
                     title=f"{inst.name}: KV cache use over time", save=out / "kv.png")
        files["kv"] = "kv.png"
    history = getattr(rep, "history", ()) if rep is not None else ()
    if history:
        solver_progress(history, title=f"{inst.name}: {rep.formulation} / {rep.solver}",
                        save=out / "progress.png")
        files["progress"] = "progress.png"
    gantts = {}
    if not args.no_gantt:
        used: set[str] = set()
        for r in done:
            name = f"gantt_{_slug(r.label)}.png"
            k = 2
            while name in used:
                name, k = f"gantt_{_slug(r.label)}_{k}.png", k + 1
            used.add(name)
            gantt(inst, r.schedule, r.evaluation, max_rows=args.max_rows or None,  # type: ignore[arg-type]
                  title=f"{r.label}: {args.objective} {fmt(r.objective)}, "
                        f"{r.metric('evictions')} evictions", save=out / name)
            gantts[r.label] = name

    lim = inst.limits
    gap_head = {"optimum": "gap to optimum", "bound": "gap to bound (optimum not proven)",
                None: "gap (no optimum)"}[ref_kind]
    headers = list(HEADERS)
    headers[2] = f"objective ({args.objective})"
    headers[3] = gap_head
    md = [f"# Comparison on `{inst.name or args.instance}`", "",
          f"- requests: {inst.n}; M = {lim.kv_capacity}, C = {lim.max_batch_tokens}"
          + (f", P = {lim.max_prefill_tokens}" if lim.max_prefill_tokens is not None else "")
          + (f", max batch size {lim.max_batch_size}" if lim.max_batch_size is not None else "")
          + f"; cost model: {inst.cost_model.kind}",
          f"- objective: {args.objective} (from `Evaluation.objective`; every schedule replayed by "
          "`optsched.evaluate.evaluate`)"]
    if rep is not None:
        md.append(f"- solver: formulation `{rep.formulation}`, {rep.solver or args.solver}, status "
                  f"**{rep.status}**, objective {fmt(rep.objective)}, bound {fmt(rep.bound)}, "
                  f"solver gap {fmt(rep.gap)}, {rep.runtime:.3g} s (limit {args.time_limit:g} s)")
        if ref_kind == "optimum":
            md.append(f"- gaps are relative to the proven optimum {fmt(ref)}: "
                      "(objective - optimum) / optimum")
        elif ref_kind == "bound":
            md.append(f"- the optimum is **not proven**; gaps are relative to the solver's lower bound "
                      f"{fmt(ref)} and so overstate the gap to the optimum")
        else:
            md.append("- the solver gave neither an optimum nor a bound: no gaps")
        for n in rep.notes:
            md.append(f"- note: {n}")
        if rep.message:
            md.append(f"- solver message: {rep.message}")
    else:
        md.append("- no optimum computed (run with `--optimal`)")
    md += ["", markdown_table(headers, table_rows(rows)), ""]
    for r in rows:
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
    (out / "report.md").write_text("\n".join(md) + "\n")
    files["report"] = "report.md"
    report = {
        "instance": inst.name, "objective_kind": args.objective,
        "reference": {"kind": ref_kind, "value": _num(ref)},
        "solve": None if rep is None else rep.to_dict(include_schedule=False),
        "rows": [r.to_dict() for r in rows],
        "figures": {**{k: v for k, v in files.items() if k != "report"}, "gantt": gantts},
    }
    if report["solve"] is not None:
        report["solve"].pop("evaluation", None)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    files["json"] = "report.json"
    return files


def run(args) -> int:
    output_dir(args.output)
    inst = load_instance(args.instance)
    names = _policy_names(args.policies)
    files = []
    for item in args.schedule:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise CompareInputError(f"--schedule {item!r}: expected LABEL=PATH")
        files.append((label, load_schedule(path)))
    if not names and not files and not args.optimal:
        raise CompareInputError("nothing to compare: give --policies, --schedule or --optimal")

    rows = run_policies(inst, names, args.objective) if names else []
    rows += [_evaluated(label, "schedule", inst, s, args.objective, None) for label, s in files]
    opt, rep = (None, None)
    if args.optimal:
        opt, rep = run_optimum(inst, args, rows)
        rows.append(opt)
    ref, ref_kind = reference(opt)
    for r in rows:
        if r.evaluation is not None and r.evaluation.feasible:
            r.gap = gap(r.objective, ref)

    out = Path(args.output)
    write_report(out, inst, args, rows, opt, rep, ref, ref_kind)
    headers = list(HEADERS)
    headers[3] = {"optimum": "gap to optimum", "bound": "gap to bound", None: "gap"}[ref_kind]
    print(table(headers, table_rows(rows)))
    if ref_kind == "bound":
        print("note: the optimum is not proven; gaps are to the solver's bound")
    for r in rows:
        if r.message:
            print(f"{r.label}: {r.message}")
    print(f"report written to {out / 'report.md'}")
    bad = any(r.evaluation is None or not r.evaluation.feasible for r in rows)
    return EXIT_NO if bad else EXIT_OK
