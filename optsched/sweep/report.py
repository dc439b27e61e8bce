"""``optsched sweep report``: what a sweep's dataset says, per method, as Markdown + plots.

For each instance and objective the *reference* is the largest lower bound any cell of the
sweep proved: a bound method's value, or a formulation's bound (a proven optimum is its own
bound). When the largest comes from a proven optimum the reference is called an optimum.
Each method's cell is then measured by ``ratio = objective / reference`` (1 = matches it;
``gap = ratio - 1``). A formulation that solves a *restricted* model (the row's
``restricted`` column, e.g. the hindsight IP: no preemption, no chunking, unit slots)
proves an optimum of its own model only, which is *not* a lower bound on the optimum of
docs/semantics.md: such a reference is labelled ``restricted optimum`` / ``restricted
bound``; it bounds only the schedules of that model (MC-SF's, in the online paper's
experiment), and a schedule below it is not an error but a finding, counted as ``below
reference``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ..plot._common import finish, new_figure
from ..solve_types import Status
from .cells import FAILED
from .results import ResultsError, ResultStore

TOL = 1e-9
WITH_SCHEDULE = {"policy": (Status.FEASIBLE,), "improve": (Status.FEASIBLE,),
                 "formulation": (Status.OPTIMAL, Status.RESTRICTED_OPTIMAL, Status.FEASIBLE)}
MAX_LISTED = 20


def _references(rows: list[dict]) -> dict[tuple[str, str], tuple[float, str]]:
    """(instance_hash, objective) -> (largest proven lower bound, "optimum" | "bound")."""
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for r in rows:
        b = r["bound"]
        if b is None or not math.isfinite(b) or r["status"] in (FAILED, Status.ERROR, Status.INFEASIBLE):
            continue
        kind = "optimum" if r["status"] == Status.OPTIMAL else "bound"
        if r.get("restricted"):
            kind = "restricted " + kind
        g = (r["instance_hash"], r["objective_kind"])
        cur = best.get(g)
        if cur is None or b > cur[0] + TOL or (abs(b - cur[0]) <= TOL and kind.endswith("optimum")):
            best[g] = (b, kind)
    return best


def _ratio(value: float, ref: float) -> float | None:
    if ref > 0:
        return value / ref
    return 1.0 if ref == 0 and value == 0 else None


def _group_label(r: dict) -> str:
    params = {k: v for k, v in json.loads(r["generator_params"] or "{}").items() if k != "seed"}
    inner = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"{r['generator'] or 'file'}({inner}) {r['objective_kind']}"


def _stats(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"mean": None, "median": None, "p90": None, "max": None}
    a = np.asarray(xs, float)
    return {"mean": float(a.mean()), "median": float(np.median(a)), "p90": float(np.quantile(a, 0.9)),
            "max": float(a.max())}


def summarise(rows: list[dict]) -> dict[str, Any]:
    """Per-method and per-group figures (the JSON of ``sweep report --json``)."""
    refs = _references(rows)
    methods: dict[str, dict] = {}
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    below, failed = [], []
    for r in rows:
        m = methods.setdefault(r["method"], {"method": r["method"], "kind": r["method_kind"], "cells": 0,
                                             "failed": 0, "statuses": defaultdict(int), "ratios": [],
                                             "runtimes": [], "solver_gaps": []})
        m["cells"] += 1
        m["statuses"][r["status"]] += 1
        if r["runtime"] is not None:
            m["runtimes"].append(r["runtime"])
        if r["status"] == FAILED:
            m["failed"] += 1
            failed.append({k: r[k] for k in ("method", "instance", "seed", "error")})
            continue
        if r["method_kind"] == "formulation" and r["gap"] is not None:
            m["solver_gaps"].append(r["gap"])
        ref = refs.get((r["instance_hash"], r["objective_kind"]))
        value = r["objective"]
        if ref is None or value is None or r["status"] not in WITH_SCHEDULE.get(r["method_kind"], ()):
            continue
        ratio = _ratio(value, ref[0])
        if ratio is None:
            continue
        m["ratios"].append(ratio)
        groups[(_group_label(r), r["method"])].append(ratio)
        if ratio < 1 - 1e-6:
            below.append({"method": r["method"], "instance": r["instance"], "seed": r["seed"],
                          "objective": value, "reference": ref[0], "reference_kind": ref[1]})
    out_methods = []
    for m in methods.values():
        ratios = m.pop("ratios")
        m["statuses"] = dict(m["statuses"])
        m["with_ratio"] = len(ratios)
        m["ratio"] = _stats(ratios)
        m["at_reference"] = sum(1 for x in ratios if abs(x - 1) <= 1e-6)
        m["below_reference"] = sum(1 for x in ratios if x < 1 - 1e-6)
        m["runtime"] = _stats(m.pop("runtimes"))
        gaps = m.pop("solver_gaps")
        m["solver_gap_mean"] = float(np.mean(gaps)) if gaps else None
        m["_ratios"] = ratios
        out_methods.append(m)
    kinds: defaultdict[str, int] = defaultdict(int)
    for _, k in refs.values():
        kinds[k] += 1
    n_groups = len({(r["instance_hash"], r["objective_kind"]) for r in rows})
    return {
        "sweeps": sorted({r["sweep"] for r in rows}),
        "cells": len(rows),
        "instances": len({r["instance_hash"] for r in rows}),
        "references": {"optimum": kinds["optimum"], "bound": kinds["bound"],
                       "restricted optimum": kinds["restricted optimum"],
                       "restricted bound": kinds["restricted bound"],
                       "none": n_groups - len(refs)},
        "methods": out_methods,
        "groups": [{"group": g, "method": meth, **_stats(v), "cells": len(v)}
                   for (g, meth), v in sorted(groups.items())],
        "below_reference": below[:MAX_LISTED], "below_reference_count": len(below),
        "failed": failed[:MAX_LISTED], "failed_count": len(failed),
    }


# -- plots --------------------------------------------------------------------------------
def _cdf(ax, values, label: str) -> None:
    """Empirical CDF as a step line from 0 (left of the smallest value) to 1."""
    xs = np.sort(np.asarray(values, float))
    ax.step(np.r_[xs[0], xs], np.r_[0.0, np.arange(1, xs.size + 1) / xs.size], where="post", label=label)
    ax.set_ylim(0, 1.02)


def _plots(summary: dict, out: Path) -> dict[str, str]:
    files = {}
    with_ratio = [m for m in summary["methods"] if m["_ratios"]]
    if with_ratio:
        fig = new_figure((6.4, 4.0))
        ax = fig.add_subplot()
        for m in with_ratio:
            _cdf(ax, m["_ratios"], m["method"])
        ax.set_xlabel("objective / reference (best bound or proven optimum)")
        ax.set_ylabel("fraction of instances")
        ax.axvline(1.0, color="black", lw=0.6)
        ax.legend(fontsize=7)
        finish(fig, out / "ratio_cdf.png")
        files["ratio_cdf"] = "ratio_cdf.png"

        fig = new_figure((6.4, 0.6 + 0.35 * len(with_ratio) + 2))
        ax = fig.add_subplot()
        ys = np.arange(len(with_ratio))
        ax.barh(ys, [100 * (m["ratio"]["mean"] - 1) for m in with_ratio], color="#4c72b0", label="mean")
        ax.plot([100 * (m["ratio"]["median"] - 1) for m in with_ratio], ys, "ko", ms=4, label="median")
        ax.plot([100 * (m["ratio"]["max"] - 1) for m in with_ratio], ys, "k|", ms=10, label="max")
        ax.set_yticks(ys, [m["method"] for m in with_ratio], fontsize=8)
        ax.set_xlabel("gap to reference (%)")
        ax.legend(fontsize=7)
        finish(fig, out / "gap_bars.png")
        files["gap_bars"] = "gap_bars.png"
    timed = [m for m in summary["methods"] if m["runtime"]["max"] is not None]
    if timed:
        fig = new_figure((6.4, 4.0))
        ax = fig.add_subplot()
        for m in timed:
            _cdf(ax, np.maximum(np.asarray(m["_runtimes"], float), 1e-4), m["method"])
        ax.set_xscale("log")
        ax.set_xlabel("runtime per cell (s)")
        ax.set_ylabel("fraction of cells")
        ax.legend(fontsize=7)
        finish(fig, out / "runtime.png")
        files["runtime"] = "runtime.png"
    return files


# -- Markdown -----------------------------------------------------------------------------
def _f(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * (v - 1):+.2f}%"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _markdown(summary: dict, files: dict[str, str]) -> str:
    refs = summary["references"]
    md = [f"# Sweep report: {', '.join(summary['sweeps'])}", "",
          f"- {summary['cells']} cells on {summary['instances']} instances; every schedule replayed by "
          "`optsched.evaluate`",
          f"- reference per instance and objective: the largest lower bound proven by any cell - a proven "
          f"optimum on {refs['optimum']}, a bound on {refs['bound']}, none on {refs['none']}",
          f"- from a restricted model (its optimum bounds only that model's schedules, not the "
          f"optimum of docs/semantics.md): a restricted optimum on {refs['restricted optimum']}, a "
          f"restricted bound on {refs['restricted bound']}",
          "- ratio = objective / reference; gap = ratio - 1 (to a bound it overstates the gap to the "
          "optimum)",
          "", "| method | kind | cells | failed | with ratio | at reference | ratio mean | median | p90 "
          "| max | solver gap | runtime median (s) | runtime max (s) |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in summary["methods"]:
        r, t = m["ratio"], m["runtime"]
        md.append(f"| {m['method']} | {m['kind']} | {m['cells']} | {m['failed']} | {m['with_ratio']} | "
                  f"{m['at_reference']} | {_f(r['mean'])} | {_f(r['median'])} | {_f(r['p90'])} | "
                  f"{_f(r['max'])} | {_f(m['solver_gap_mean'])} | {_f(t['median'])} | {_f(t['max'])} |")
    if len({g["group"] for g in summary["groups"]}) > 1:
        md += ["", "## By instance family", "", "| family | method | cells | ratio mean | median | max |",
               "|---|---|---:|---:|---:|---:|"]
        md += [f"| {g['group']} | {g['method']} | {g['cells']} | {_f(g['mean'])} | {_f(g['median'])} | "
               f"{_f(g['max'])} |" for g in summary["groups"]]
    if summary["below_reference_count"]:
        md += ["", f"## Below the reference ({summary['below_reference_count']} cells)", "",
               "A schedule better than the reference: the reference came from a model that restricts "
               "schedules (its optimum is not a bound for every schedule) - or a bound is wrong.", ""]
        md += [f"- {b['method']} on {b['instance']}: {_f(b['objective'])} < {b['reference_kind']} "
               f"{_f(b['reference'])}" for b in summary["below_reference"]]
    if summary["failed_count"]:
        md += ["", f"## Failed cells ({summary['failed_count']})", ""]
        md += [f"- {f['method']} on {f['instance']}: {f['error']}" for f in summary["failed"]]
    titles = {"ratio_cdf": "Ratio to the reference (CDF)", "gap_bars": "Gap to the reference per method",
              "runtime": "Runtime per cell"}
    for k, name in files.items():
        md += ["", f"## {titles[k]}", "", f"![{titles[k]}]({name})"]
    return "\n".join(md) + "\n"


def write_report(sweep_out: str | Path, report_dir: str | Path) -> dict[str, Any]:
    """Compact the dataset of ``sweep_out``, write ``report.md`` + PNGs to ``report_dir``;
    returns the summary (JSON-ready)."""
    store = ResultStore(sweep_out)
    if not store.files() and not store.journals():
        raise ResultsError(f"{sweep_out}: no sweep results here (expected Parquet files in {store.dir})")
    try:
        store.lock()
    except ResultsError:  # a sweep is running into it: report what is there, compact later
        rows = store.read().to_pylist()
    else:
        try:
            rows = store.compact().to_pylist()
        finally:
            store.unlock()
    summary = summarise(rows)
    runtimes = defaultdict(list)
    for r in rows:
        if r["runtime"] is not None:
            runtimes[r["method"]].append(r["runtime"])
    for m in summary["methods"]:
        m["_runtimes"] = runtimes[m["method"]]
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = _plots(summary, out)
    (out / "report.md").write_text(_markdown(summary, files))
    for m in summary["methods"]:
        del m["_ratios"], m["_runtimes"]
    summary["files"] = {"report": "report.md", **files}
    summary["report_dir"] = str(out)
    (out / "report.json").write_text(json.dumps(summary, indent=1))
    return summary


__all__ = ["write_report", "summarise"]
