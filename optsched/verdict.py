"""One-sentence verdicts for ``solve``, ``compare`` and ``bound`` (issue 30 item 3).

Each command ends with one sentence on stderr that a user can act on, and puts the same
sentence in its JSON output as ``verdict``. The numbers are the command's own: objectives
from :func:`optsched.evaluate.evaluate`, lower bounds from ``optsched.bounds`` (never above
the optimum, ``formulations/bounds.md``). With a proven optimum ``OPT``, a schedule of value
``v`` is ``v / OPT - 1`` above it; otherwise ``OPT`` lies in ``[L, U]`` (``L`` the largest
lower bound, ``U`` the best schedule known), so it is at least ``v / U - 1`` and at most
``v / L - 1`` above it.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from .solve_types import Status

#: how the objectives read in a sentence
OBJECTIVE_WORDS = {"makespan": "makespan", "total-latency": "total latency",
                   "mean-ttft": "mean TTFT"}


def fmt(v: Any, digits: int = 6) -> str:
    """A table cell: ``-`` for None and non-finite numbers, ``digits`` significant digits.
    (Here, low in the layers, so that the CLI's shared helpers need not import
    :mod:`optsched.compare`, which imports the solvers, the search and numba: issue 31.)"""
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.{digits}g}"
    return str(v)


def unit(instance: Any) -> str:
    """The unit of times: seconds under a cost model in seconds, else the model's units."""
    return "time units" if instance.cost_model.kind == "unit" else "s"


def value(v: float, instance: Any) -> str:
    """``v`` in user units: ``12.3 s`` (or ``12 time units`` under unit cost)."""
    return f"{v:.4g} {unit(instance)}"


def pct(x: float) -> str:
    """A ratio minus one as a percentage: ``0.42`` -> ``42%``."""
    return f"{100 * x:.3g}%"


def above_optimum(v: float, lower: float | None, upper: float | None, proven: bool) -> str:
    """How far ``v`` is above the optimum, in words (module docstring)."""
    if proven and upper is not None and upper > 0:
        return f"{pct(v / upper - 1)} above optimal"
    lo = None if upper is None or upper <= 0 else max(0.0, v / upper - 1)
    hi = None if lower is None or not lower > 0 else v / lower - 1
    if lo is not None and hi is not None:
        return f"at least {pct(lo)} and at most {pct(hi)} above optimal"
    if hi is not None:
        return f"at most {pct(hi)} above optimal"
    return "of unknown distance to the optimum (no positive lower bound)"


def say(verdict: str) -> str:
    """Write the verdict on stderr (the last line of a command) and return it."""
    print(f"verdict: {verdict}", file=sys.stderr, flush=True)
    return verdict


def solve_verdict(instance: Any, objective: str, done: Any, hyp: Any,
                  than: tuple[float, str] | None = None) -> str:
    """The sentence for ``optsched solve`` (``done`` a :class:`optsched.pipeline.Solved`;
    ``than`` the ``--at-most K --than X`` pair as (K, X) when given)."""
    rep, lb = done.report, done.lower_bound.value
    what = OBJECTIVE_WORDS.get(objective, objective)
    if hyp is not None and hyp.any:
        return _hypothesis_verdict(instance, objective, rep, hyp, than)
    if rep.status == Status.OPTIMAL and rep.objective is not None and not rep.restricted:
        ws = rep.warm_start or {}
        tail = ""
        if ws.get("objective") and ws.get("policy") not in (None, "schedule"):
            tail = (f"; {ws['policy']} is {pct(ws['objective'] / rep.objective - 1)} "
                    "above it")
        return f"The optimal {what} is {value(rep.objective, instance)} (proven){tail}."
    if rep.objective is not None:
        return (f"The best schedule found has {what} {value(rep.objective, instance)}, "
                f"{above_optimum(rep.objective, lb, None, False)} "
                f"(lower bound {value(lb, instance)}).")
    fb = done.fallback
    if fb is not None:
        return (f"The exact model did not fit the time limit; the best schedule found "
                f"({fb['policy']}) has {what} {value(fb['objective'], instance)}, "
                f"{above_optimum(fb['objective'], lb, None, False)} "
                f"(lower bound {value(lb, instance)}).")
    if rep.status == Status.ERROR:
        return (f"The solver failed ({rep.message or 'no message'}); every schedule has {what} "
                f"at least {value(lb, instance)} (certified lower bound).")
    return (f"No schedule within the time limit; every schedule has {what} at least "
            f"{value(lb, instance)} (certified lower bound).")


def _hypothesis_verdict(instance: Any, objective: str, rep: Any, hyp: Any,
                        than: tuple[float, str] | None) -> str:
    what = OBJECTIVE_WORDS.get(objective, objective)
    kind = "eviction-free schedule" if hyp.no_evictions else "schedule"
    extra = " meeting the --force/--forbid/--order hypotheses" \
        if (hyp.force or hyp.forbid or hyp.order) else ""
    if rep.status in (Status.OPTIMAL, Status.FEASIBLE) and rep.objective is not None:
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


def bound_verdict(instance: Any, objective: str, res: Any) -> str:
    """The sentence for ``optsched bound``."""
    what = OBJECTIVE_WORDS.get(objective, objective)
    return (f"Every schedule of these {instance.n} requests has {what} at least "
            f"{value(res.value, instance)} (certified lower bound, method {res.method}).")


def compare_verdict(cmp: Any) -> str:
    """The sentence for ``optsched compare`` (``cmp`` a :class:`optsched.compare.Comparison`):
    the best policy row against the optimum, or the interval the optimum lies in."""
    inst, what = cmp.instance, OBJECTIVE_WORDS.get(cmp.objective, cmp.objective)
    feas = [r for r in cmp.rows if r.evaluation is not None and r.evaluation.feasible
            and r.objective is not None and math.isfinite(r.objective)]
    if not feas:
        return "No feasible schedule to compare: every row failed or is infeasible."
    proven = cmp.reference_kind == "optimum"
    upper = cmp.reference if proven else min(r.objective for r in feas)
    lower = cmp.reference if cmp.reference_kind is not None else None
    policies = [r for r in feas if r.kind in ("policy", "schedule")]
    if not policies:
        best = min(feas, key=lambda r: r.objective)
        return (f"The best schedule ({best.label}) has {what} "
                f"{value(best.objective, inst)}, "
                f"{above_optimum(best.objective, lower, upper, proven)}.")
    best = min(policies, key=lambda r: r.objective)
    of = f" (the best of {len(policies)})" if len(policies) > 1 else ""
    return (f"{best.label}{of} is {above_optimum(best.objective, lower, upper, proven)} "
            f"on {what} ({value(best.objective, inst)}).")
