"""Every command that has ``--json`` prints exactly one JSON document on stdout.

The commands are found in the argparse parser, so a new command with ``--json`` is run here
without editing this file (its positionals are filled by name; a required option it adds needs
an entry in ``EXTRA_ARGS``, and the test says so). Each runs as its own process, because solver
libraries write their banners from C onto file descriptor 1 (highspy >= 1.16 prints one when a
process builds its first ``Highs``), which an in-process capture of ``sys.stdout`` would miss.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys

import pytest
from shared_data import SHARED_DATA  # noqa: E402

from optsched.cli import build_parser
from optsched.milp import available_backends

PROFILING = SHARED_DATA / "profiling"
INSTANCE = "demo"  # shipped: 4 requests, linear cost model, solved to optimality in seconds
UNIT_INSTANCE = "tiny"  # shipped: 1 request, unit time (the hindsight IP needs unit time)

#: per command: the argument lists (besides positionals) it is run with, one run each
EXTRA_ARGS: dict[tuple[str, ...], list[list[str]]] = {
    ("simulate",): [["--policy", "vllm"]],
    ("improve",): [["--from", "vllm", "--time-limit", "2"]],
    ("solve",): [
        ["--time-limit", "20", "--warm-start", "vllm"],  # HiGHS, the InferMax model
        *[["--solver", s, "--formulation", "hindsight", "--time-limit", "20", "@" + UNIT_INSTANCE]
          for s in ("highs", "gurobi", "cbc", "cpsat")],
    ],
    ("check-claim",): [["--trials", "3", "--max-requests", "2"]],
    ("capacity",): [["--policy", "vllm", "--metric", "normalized-latency", "--target", "1",
                     "--rates", "0.5:2", "--probes", "2"]],
    ("sweep", "run"): [["-o", "{tmp}/local", "--workers", "1"],
                       ["-o", "{tmp}/ray", "--engine", "ray", "--workers", "1"]],
    ("kv-capacity",): [["--params", "7e9", "--layers", "32", "--hidden", "4096",
                        "--gpu-mem-gb", "80"]],
    ("fit",): [["--profiling", str(PROFILING), "--model", "Llama-2-7b-hf", "--gpu", "a100"]],
}
NEEDS_SHARED_DATA = {("fit",)}
#: a small sweep: one 3-request instance, a policy and the hindsight IP (3 cells)
SWEEP_SPEC = """
[sweep]
name = "json-check"
seeds = [0]
objective = "total-latency"

[[instances]]
generator = "online-paper"
n = 3

[[methods]]
policy = "mcsf"

[[methods]]
formulation = "hindsight"
time_limit = 20
"""


def json_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, its parser) for every (sub)command that accepts ``--json``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from json_commands(sub, (*path, name))
    if path and any("--json" in a.option_strings for a in parser._actions):
        yield path, parser


def _positional_values(parser: argparse.ArgumentParser, values: dict[str, str]):
    """One list of positional values per run: by the positional's name from ``values``, a
    positional with choices once per choice."""
    runs: list[list[str]] = [[]]
    for a in parser._actions:
        if a.option_strings:
            continue
        if a.choices:
            runs = [r + [str(c)] for r in runs for c in a.choices]
        elif a.dest in values:
            runs = [r + [values[a.dest]] for r in runs]
        elif a.nargs in ("?", "*"):
            continue
        else:
            raise LookupError(f"positional {a.dest!r}: no value known; add one to the inputs "
                              "fixture or the command to EXTRA_ARGS")
    return runs


def _cases():
    for path, parser in json_commands(build_parser()):
        for extra in EXTRA_ARGS.get(path, [[]]):
            marks = []
            if path in NEEDS_SHARED_DATA:
                marks.append(pytest.mark.skipif(not SHARED_DATA.is_dir(),
                                                reason=f"needs {SHARED_DATA} (not shipped)"))
            if "ray" in extra:  # starting a local Ray instance takes a while: the slow step
                marks += [pytest.mark.slow, pytest.mark.skipif(
                    importlib.util.find_spec("ray") is None, reason="ray not installed")]
            label = " ".join((*path, *extra)).replace(str(PROFILING), "PROFILING")
            yield pytest.param(path, parser, extra, marks=marks, id=label)


def _missing_required(parser: argparse.ArgumentParser, extra: list[str]) -> list[str]:
    return [a.option_strings[0] for a in parser._actions
            if a.option_strings and a.required and not set(a.option_strings) & set(extra)]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optsched", *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    """Values for positionals, by name: a schedule file, a sweep spec and a finished sweep."""
    d = tmp_path_factory.mktemp("json")
    schedule, spec, sweep_out = d / "vllm.json", d / "spec.toml", d / "sweep"
    spec.write_text(SWEEP_SPEC)
    for args in (["simulate", INSTANCE, "--policy", "vllm", "-o", str(schedule)],
                 ["sweep", "run", str(spec), "-o", str(sweep_out), "--workers", "1", "--quiet"]):
        out = run_cli(*args)
        assert out.returncode == 0, out.stderr
    return {"instance": INSTANCE, "schedule": str(schedule), "spec": str(spec),
            "out": str(sweep_out)}


def test_every_json_command_is_covered():
    # guards the discovery: the commands known to have --json today must be found
    found = {path for path, _ in json_commands(build_parser())}
    assert {("solve",), ("simulate",), ("validate",), ("evaluate",), ("check-claim",)} <= found
    assert set(EXTRA_ARGS) <= found, "EXTRA_ARGS names a command that has no --json"


@pytest.mark.parametrize("path,parser,extra", list(_cases()))
def test_json_stdout_is_one_document(path, parser, extra, inputs, tmp_path):
    missing = _missing_required(parser, extra)
    assert not missing, f"{' '.join(path)} requires {missing}: add them to EXTRA_ARGS"
    values = {**inputs, "instance": next((x[1:] for x in extra if x.startswith("@")), INSTANCE)}
    options = [x.replace("{tmp}", str(tmp_path)) for x in extra if not x.startswith("@")]
    for positionals in _positional_values(parser, values):
        out = run_cli(*path, *positionals, *options, "--json")
        where = f"optsched {' '.join((*path, *positionals, *options))} --json"
        # 0 success, 1 a negative answer, 3 solver error: all print their report; 2 = bad input
        assert out.returncode in (0, 1, 3), f"{where}: exit {out.returncode}\n{out.stderr}"
        assert "Traceback" not in out.stderr, f"{where}:\n{out.stderr}"
        try:
            doc = json.loads(out.stdout)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{where}: stdout is not one JSON document ({exc}); it starts "
                        f"{out.stdout[:200]!r}")
        assert isinstance(doc, (dict, list)) and doc, f"{where}: empty JSON {doc!r}"


def test_solver_library_output_never_reaches_stdout():
    # the library, without the command line's guard: highspy's banner (first Highs of a
    # process) and every backend's own log (verbose=True) must stay off file descriptor 1
    code = """if True:
        import sys
        from optsched.milp import Model, SolveOptions, available_backends, solve
        from optsched.milp.backends.highs import new_highs
        new_highs()
        m = Model("knapsack")
        x = m.add_vars("x", 3, vtype="B")
        m.add_constraint(x, [2, 3, 4], hi=5, name="cap")
        m.set_objective(x, [3, 4, 5], sense="max")
        for name in available_backends():
            r = solve(m, name, SolveOptions(verbose=True, progress=False, time_limit=20))
            print("RESULT", name, r.status, r.objective, file=sys.stderr)
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
    # the solves ran: the first two items (weight 2 + 3 = 5, value 3 + 4 = 7) are the best
    # load; the other pairs weigh 6 and 7, and a single item is worth at most 5
    results = [ln.split()[1:] for ln in out.stderr.splitlines() if ln.startswith("RESULT ")]
    assert [r[0] for r in results] == available_backends()
    assert all(r[1] == "optimal" and float(r[2]) == 7 for r in results), out.stderr
