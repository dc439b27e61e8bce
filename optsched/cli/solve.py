"""``optsched solve``: optimal schedules (or proofs of none) with any formulation/solver."""

from __future__ import annotations

import math
import sys
from dataclasses import replace

from ..errors import OptschedError
from ..evaluation import OBJECTIVES, evaluate
from ..plugins import parse_assignments
from ..solve_types import Status
from . import EXIT_NO, EXIT_OK, EXIT_SOLVER_ERROR, EXIT_UNDECIDED
from ._common import command_load, fmt, load_instance, load_schedule, output_file, print_json, say_load, table


def register(sub) -> None:
    p = sub.add_parser(
        "solve",
        help="compute an optimal schedule (or prove a hypothesis infeasible)",
        description="Build a formulation, solve it, decode the answer and replay it through the "
        "evaluator. Exit 0: an answer (optimal, feasible, or the model skipped and the best "
        "policy's schedule given with the certified bound); 1: infeasible (no schedule meets "
        "the hypotheses); 2: bad input; 3: solver failure (an error, or no schedule within the "
        "time limit); 4: a hypothesis undecided within the time limit (verdict 'Unknown').",
    )
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("--formulation", default="infermax",
                   help="infermax (Big-M, batch-indexed), hindsight (time-indexed IP, unit time), "
                        "exhaustive (state-graph search, tiny instances), or a run function "
                        "as path/to/file.py:run or package.module:run")
    p.add_argument("--objective", default="makespan", choices=OBJECTIVES)
    p.add_argument("--solver", default="highs",
                   help="highs (default), gurobi, cbc, cpsat, auto, or an installed backend")
    p.add_argument("--time-limit", type=float, default=60.0,
                   help="seconds for the whole command (default 60): the model is sized before "
                        "it is built and skipped, with the bound and the best policy, when it "
                        "cannot fit")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gap", type=float, default=1e-6, help="relative MIP gap to stop at")
    p.add_argument("--log", default=None, help="solver log file")
    p.add_argument("--warm-start", default="auto",
                   help="policy name, a schedule file, 'auto' (best of a few policies) or 'none'")
    p.add_argument("--no-evictions", action="store_true", help="hypothesis: forbid evictions")
    p.add_argument("--at-most", type=float, default=None, metavar="K",
                   help="hypothesis: objective <= K x THAN (with --than)")
    p.add_argument("--than", default=None, metavar="POLICY|VALUE",
                   help="a policy name (its objective) or a number")
    p.add_argument("--force", action="append", default=[], metavar="REQ@BATCH",
                   help="hypothesis: request REQ has an entry in 0-based batch BATCH")
    p.add_argument("--forbid", action="append", default=[], metavar="REQ@BATCH",
                   help="hypothesis: request REQ has no entry in batch BATCH")
    p.add_argument("--order", action="append", default=[], metavar="A<B",
                   help="hypothesis: request A completes no later than B")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="formulation parameter, e.g. batches=12, variant=plain")
    p.add_argument("-o", "--output", default=None, help="write the schedule (.json or .npz)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no live progress line")
    p.set_defaults(func=run)


class CliInputError(OptschedError):
    pass


def _pairs(items, sep, what):
    out = []
    for it in items:
        if sep not in it:
            raise CliInputError(f"--{what} {it!r}: expected the form A{sep}B")
        a, b = it.split(sep, 1)
        out.append((a, b))
    return out


def resolve_than(instance, than: str, objective: str) -> float:
    try:
        value = float(than)
    except ValueError:
        pass
    else:
        if not math.isfinite(value) or value < 0:
            raise CliInputError(f"--than {than}: expected a finite number >= 0 or a policy name")
        return value
    # lazy: each subcommand imports what it runs (start-up time)
    from ..policies import simulate

    ev = evaluate(instance, simulate(instance, than))
    if not ev.feasible:
        raise CliInputError(f"--than {than}: the policy's schedule is infeasible")
    return ev.objective(objective)


def run(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..formulations import Hypotheses, SolveOptions
    from ..solving import run as solve_pipeline
    from ..solving.budget import command_seconds

    output_file(args.output)
    output_file(args.log, "--log")
    inst = load_instance(args.instance)
    load = command_load(inst, args.time_limit)
    at_most = None
    if (args.at_most is None) != (args.than is None):
        raise CliInputError("--at-most K and --than POLICY|VALUE go together")
    if args.at_most is not None:
        if not math.isfinite(args.at_most) or args.at_most <= 0:
            raise CliInputError(f"--at-most {args.at_most:g}: expected a finite factor K > 0 "
                                "(the hypothesis is objective <= K x THAN)")
        at_most = args.at_most * resolve_than(inst, args.than, args.objective)
    force = [(a, _int(b, "force")) for a, b in _pairs(args.force, "@", "force")]
    forbid = [(a, _int(b, "forbid")) for a, b in _pairs(args.forbid, "@", "forbid")]
    hyp = Hypotheses(no_evictions=args.no_evictions, at_most=at_most, force=tuple(force),
                     forbid=tuple(forbid), order=tuple(_pairs(args.order, "<", "order")))
    ws = args.warm_start
    if ws == "none":
        ws = None
    elif ws.endswith((".json", ".npz")):
        ws = load_schedule(ws)
    opts = SolveOptions(solver=args.solver, time_limit=args.time_limit, threads=args.threads,
                        seed=args.seed, rel_gap=args.gap, log_file=args.log,
                        progress=False if args.quiet else None,
                        params=parse_assignments(args.param, error=CliInputError))
    # the limit counts from the command's start (imports included): what is left of it now
    opts = replace(opts, time_limit=command_seconds(args.time_limit))
    rep = solve_pipeline(inst, args.formulation, args.objective, options=opts, hypotheses=hyp,
                         warm_start=ws, lower="best", fallback=True,
                         improve_fallback=True)
    lb = rep.lower_bound
    assert lb is not None  # lower="best" always gives one (combinatorial at the least)
    # lazy: each subcommand imports what it runs (start-up time)
    from ..comparison.report import say, solve_verdict

    verdict = solve_verdict(inst, args.objective, rep, hyp,
                            None if args.at_most is None else (args.at_most, args.than))
    if args.output and rep.schedule is not None:
        rep.schedule.save(args.output, inst)
    say_load(load, "solve")
    if args.json:
        print_json({**rep.to_dict(include_schedule=False), "verdict": verdict,
                    "offered_load": load.to_dict()})
    else:
        # lazy: each subcommand imports what it runs (start-up time)
        from ..progress import unit
        from ..solve_types import ABOVE_OPTIMAL, CERTIFIED_GAP, above_optimal, certified_gap

        u = unit(inst)
        rows = _answer_rows(rep, u)
        if rep.warm_start is not None:
            ws_text = f"{rep.warm_start.policy} ({fmt(rep.warm_start.objective)})"
            if rep.warm_start.feasible is False:
                ws_text += " - infeasible, so not used"
            rows.append(("warm start", ws_text))
        if hyp.any:
            rows.append(("hypotheses", ", ".join(f"{k}={v}" for k, v in hyp.to_dict().items() if v)))
        if rep.evaluation is not None:
            rows.append(("evictions", rep.evaluation.metrics["evictions"]))
            rows.append(("batches", rep.evaluation.metrics["batches"]))
        rows.append((f"lower bound ({u})", f"{fmt(lb.value)} ({lb.method}; formulations/bounds.md)"))
        if rep.fallback is not None:
            rows.append(("fallback", f"{rep.fallback.policy} ({fmt(rep.fallback.objective)})"))
        best = rep.best_known
        if best is not None and rep.objective is not None and best[1] < rep.objective:
            rows.append((f"best known ({u})", f"{fmt(best[1])} ({best[0]})"))
        lbv = lb.value
        for name, g in ((CERTIFIED_GAP, certified_gap(rep.answer, lbv)),
                        (ABOVE_OPTIMAL, None if rep.answer is None else above_optimal(rep.answer, lbv))):
            rows.append((name, None if g is None else f"{100 * g:.3g}%"))
        print(table(["", "result"], rows))
        for n in rep.notes:
            print(f"note: {n}")
        if rep.message:
            print(f"message: {rep.message}", file=sys.stderr)
        if args.output and rep.schedule is not None:
            print(f"schedule written to {args.output}")
    say(verdict)
    return exit_code(rep.status, rep.fallback is not None and not hyp.any, hyp.any)


def _answer_rows(rep, u: str) -> list[tuple[str, object]]:
    """The model's answer; a restricted model's figures say that they hold in that model
    (its restriction on its own row), the certified rows below are the problem's."""
    if rep.model_restriction is None:
        return [("status", rep.status), (f"objective ({u})", rep.objective),
                (f"bound ({u})", rep.bound), ("runtime (s)", rep.runtime),
                ("solver", rep.solver), ("formulation", rep.formulation),
                ("objective kind", rep.objective_kind)]
    gap = rep.model_answer()["gap"]
    return [("model", f"{rep.formulation}: {rep.model_restriction}"),
            ("status in that model", rep.status), (f"objective ({u})", rep.objective),
            (f"bound in that model ({u})", rep.model_bound),
            ("gap in that model", None if gap is None else f"{100 * gap:.3g}%"),
            ("runtime (s)", rep.runtime), ("solver", rep.solver),
            ("objective kind", rep.objective_kind)]


def exit_code(status: Status, fallback: bool, hypothesis: bool = False) -> int:
    """The exit code of a solve (the command line's contract, ``optsched.cli``): 0 when an
    answer exists (a solution, or the best policy's schedule with the certified bound when the
    model was skipped), 1 when the model proved there is none (infeasible: no schedule meets
    the hypotheses), 4 when a hypothesis is undecided (no schedule meeting it found and none
    ruled out within the time limit: the verdict's "Unknown"), 3 when the solver failed or
    gave nothing within the time limit."""
    if status.has_solution or fallback:
        return EXIT_OK
    if status == Status.INFEASIBLE:
        return EXIT_NO
    if hypothesis and status == Status.NO_SOLUTION:
        return EXIT_UNDECIDED
    return EXIT_SOLVER_ERROR


def _int(s, what):
    try:
        return int(s)
    except ValueError:
        raise CliInputError(f"--{what}: batch index {s!r} is not an integer") from None
