"""Bad input on the command line: one line on stderr naming the culprit, exit 2, and no work
done first (found by an audit that fed every command malformed files and options)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import err_of, one_line_error, one_line_error_no_stdout
from paths import GOOD, N40, SHARED_DATA
from trace_files import azure_csv

from optsched.cli import build_parser, main
from optsched.cost import LinearCost, UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.milp import available_backends
from optsched.serving.load import offered_load

#: a linear cost model with every coefficient stated (a partial one is refused)
ZERO_LINEAR = {"kind": "linear", **{k: 0.0 for k in LinearCost().coefficients}}

def instance_with(tmp_path, **changes) -> Path:
    d = json.loads(GOOD.read_text())
    for path, value in changes.items():
        node = d
        *head, last = path.split("__")
        for k in head:
            node = node[int(k)] if k.isdigit() else node[k]
        node[last] = value
    f = tmp_path / "inst.json"
    f.write_text(json.dumps(d))
    return f


@pytest.mark.parametrize("opt, value, match", [
    ("--time-limit", "0", "time_limit must be > 0"),
    ("--threads", "0", "threads must be a positive integer"),
    ("--seed", "-1", "seed must be a non-negative integer"),
])
def test_solver_options_are_checked(capsys, opt, value, match):
    one_line_error(capsys, "solve", GOOD, opt, value, match=match)


def test_output_paths_are_checked_before_any_work(capsys, tmp_path):
    one_line_error(capsys, "solve", GOOD, "-o", tmp_path / "no" / "s.json", match="does not exist")
    one_line_error(capsys, "solve", GOOD, "-o", tmp_path, match="is a directory")
    one_line_error(capsys, "simulate", GOOD, "--policy", "fcfs", "-o", tmp_path, match="is a directory")
    one_line_error(capsys, "solve", GOOD, "--log", tmp_path / "no" / "log.txt", match="does not exist")
    afile = tmp_path / "a.json"
    afile.write_text("{}")
    one_line_error(capsys, "compare", GOOD, "--policies", "fcfs", "-o", afile,
                   match="exists and is not a directory")
    one_line_error(capsys, "plot", GOOD, afile, "-o", afile / "x.png", match="is not a directory")


def test_plot_output_format(capsys, tmp_path):
    sched = tmp_path / "s.json"
    assert main(["simulate", str(GOOD), "--policy", "fcfs", "-o", str(sched)]) == 0
    capsys.readouterr()
    one_line_error(capsys, "plot", GOOD, sched, "-o", tmp_path / "x.txt",
                   match="format 'txt' is not supported")
    one_line_error(capsys, "plot", GOOD, sched, "-o", tmp_path / "x.png", "--max-rows", "-5",
                   match="--max-rows must be >= 0")
    assert main(["plot", str(GOOD), str(sched), "-o", str(tmp_path / "noext")]) == 0
    assert f"figure written to {tmp_path / 'noext.png'}" in capsys.readouterr().out
    assert (tmp_path / "noext.png").stat().st_size > 0


@pytest.mark.parametrize("text, match", [
    ('{"batches": [{"entries": [["a", 2]], "evict": null}]}', "'evict' must be a list"),
    ('{"batches": [{"entries": [["a", 2]], "evict": 5}]}', "'evict' must be a list"),
    ('{"batches": [5]}', "batch 0: expected an object with 'entries'"),
    ('{"batches": [null]}', "batch 0: expected an object with 'entries'"),
    ('{"batches": [{"entries": [["a", 1000000000000000000000000000000]]}]}', "out of range"),
])
def test_malformed_schedule_json(capsys, tmp_path, text, match):
    f = tmp_path / "s.json"
    f.write_text(text)
    one_line_error(capsys, "validate", GOOD, f, match=match)


def test_malformed_schedule_files(capsys, tmp_path):
    latin = tmp_path / "l.json"
    latin.write_bytes(b'{"batches": "\xe9"}')
    one_line_error(capsys, "validate", GOOD, latin, match="not a UTF-8 JSON schedule")
    empty = tmp_path / "e.npz"
    empty.write_bytes(b"")
    one_line_error(capsys, "validate", GOOD, empty, match="unreadable npz schedule")
    strs = tmp_path / "s.npz"
    np.savez(strs, ids=np.array(["a"]), batch_ptr=np.array([0, 1]), entry_req=np.array([0]),
             entry_tokens=np.array(["x"]), evict_ptr=np.array([0, 0]),
             evict_req=np.zeros(0, np.int64), start=np.array([np.nan]))
    one_line_error(capsys, "validate", GOOD, strs, match="entry_tokens must hold numbers")
    missing = tmp_path / "m.npz"
    np.savez(missing, ids=np.array(["a"]))
    rc, err = err_of(capsys, "validate", GOOD, missing)
    assert rc == 2 and err.count(str(missing)) == 1 and "lacks arrays" in err


@pytest.mark.parametrize("changes, match", [
    ({"limits__kv_capacity": 2**63}, "'kv_capacity' must be an integer in 1..1099511627776"),
    ({"requests__0__prompt": 10**25}, "'prompt' must be an integer in 1..1099511627776"),
    ({"requests__1__arrival": 1e19}, "'arrival' must be a finite number in [0, 1e+12]"),
    ({"cost_model": {"preset": ["x"]}}, "'preset' must be a preset name"),
    ({"cost_model": {**ZERO_LINEAR, "k0": 1e308}}, "coefficient k0 must be a finite number of at most"),
    ({"cost_model": {**ZERO_LINEAR, "k0": 1.0, "preset": "whatever"}}, "unknown preset label 'whatever'"),
])
def test_out_of_range_instances(capsys, tmp_path, changes, match):
    one_line_error(capsys, "info", instance_with(tmp_path, **changes), match=match)


def test_preset_label_must_match_its_coefficients(capsys, tmp_path):
    from optsched.cost import PRESETS

    d = PRESETS["infermax-llama2-7b-a100"].to_dict()
    d["k0"] *= 2
    one_line_error(capsys, "info", instance_with(tmp_path, cost_model=d),
                   match="differ from preset 'infermax-llama2-7b-a100'")


def test_non_utf8_instance(capsys, tmp_path):
    f = tmp_path / "x.json"
    f.write_bytes(b'{"name": "\xe9"}')
    one_line_error(capsys, "info", f, match="not a UTF-8 JSON instance")


@pytest.mark.parametrize("formulation, param, match", [
    ("infermax", "batches=abc", "batches must be an integer, got 'abc'"),
    ("infermax", "batches=0", "batches must be an integer in 1..100000"),
    ("infermax", "slack=-1", "slack must be an integer in 0..100000"),
    ("hindsight", "horizon=abc", "horizon must be an integer"),
    ("hindsight", "max_rounds=-1", "max_rounds must be an integer >= 0"),
    ("hindsight", "aggregate=maybe", "aggregate must be true or false"),
    ("exhaustive", "max_states=2.5", "max_states must be an integer >= 1"),
])
def test_formulation_params_are_checked(capsys, formulation, param, match):
    one_line_error(capsys, "solve", GOOD, "--formulation", formulation, "--param", param, match=match)


def test_negative_seeds(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:  # argparse rejects it while parsing
        main(["generate", "mix", "-o", str(tmp_path / "g.json"), "--n", "4", "--mix", "SISO",
              "--seed", "-1"])
    assert exc.value.code == 2 and "--seed: expected an integer >= 0" in capsys.readouterr().err
    one_line_error(capsys, "simulate", GOOD, "--policy", "alpha-beta-clearing", "--param", "seed=-1",
                   match="seed must be >= 0")


def test_hindsight_refuses_a_time_line_it_cannot_allocate(capsys, tmp_path):
    f = instance_with(tmp_path, requests__1__arrival=1.7e9)  # an epoch timestamp
    one_line_error(capsys, "solve", f, "--formulation", "hindsight", match="at most 1,000,000")


def test_exhaustive_stops_inside_one_huge_expansion():
    """n = 40: a single expansion enumerates more batches than any time limit allows; the search
    notices the limit while enumerating (it used to finish the expansion first, for minutes)."""
    from optsched.formulations import SolveOptions
    from optsched.solving import solve

    rep = solve(Instance.load(N40), "exhaustive", "total-latency",
                options=SolveOptions(time_limit=1, progress=False), warm_start=None)
    assert rep.status == "no_solution"
    assert "time limit 1 s reached after 1 expanded" in rep.message


def test_infeasible_warm_start_is_reported_as_unused(capsys, tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"batches": [{"entries": [["a", 2]]}]}')
    assert main(["solve", str(GOOD), "--warm-start", str(f)]) == 0
    assert "infeasible, so not used" in capsys.readouterr().out


# -- 3. exit codes ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, match", [
    ("[" * 1000 + "]" * 1000, "nested"),
    ('{"a":' * 1000 + "1" + "}" * 1000, "nested"),
    ("", "empty"),
])
def test_unparsable_instance_files_exit_2(tmp_path, capsys, text, match):
    f = tmp_path / "i.json"
    f.write_text(text)
    one_line_error_no_stdout(capsys, "info", f, match=match)


def test_header_only_trace_exits_2(tmp_path, capsys):
    csv = azure_csv(tmp_path / "t.csv", [])
    one_line_error_no_stdout(capsys, "simulate", "--trace", csv, "--policy", "vllm", "--kv-capacity",
                   1000, "--max-batch-tokens", 100, match="no data rows")


def test_lone_surrogate_in_a_request_id_exits_2(tmp_path, capsys):
    f = tmp_path / "i.json"
    f.write_text(GOOD.read_text().replace('"id": "a"', '"id": "\\ud800"'))
    one_line_error_no_stdout(capsys, "info", f, match="field 'id'")


@pytest.mark.parametrize("raw", [b"\xff\xfe{\x00}\x00", b"\x00\x01\x02"])
def test_bad_encodings_exit_2(tmp_path, capsys, raw):
    f = tmp_path / "s.json"
    f.write_bytes(raw)
    one_line_error_no_stdout(capsys, "validate", GOOD, f, match=str(f))


@pytest.mark.parametrize("value, field", [("NaN", "arrival"), ("Infinity", "prompt"),
                                          ("-Infinity", "k0")])
def test_nan_and_infinity_name_the_field(tmp_path, capsys, value, field):
    d = json.loads(GOOD.read_text())
    d["cost_model"] = {**ZERO_LINEAR, "k0": 1.0}
    target = d["cost_model"] if field == "k0" else d["requests"][1]
    target[field] = "@@"
    f = tmp_path / "i.json"
    f.write_text(json.dumps(d).replace('"@@"', value))
    line = one_line_error_no_stdout(capsys, "info", f, match=field)
    assert value.lstrip("-") in line


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


def run_process(*args: str) -> subprocess.CompletedProcess:
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
        out = run_process(*args)
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
        out = run_process(*path, *positionals, *options, "--json")
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


# -- the offered load on the command line (say_load, command_load, generate --load) ----------------
def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def overloaded(tmp_path):
    """I = 1, O = 1, C = M = 4, unit time: at most 4 requests a step (certified: a batch holds
    at most 4 tokens), and 12 arrive 0.1 steps apart, lambda = 10: load >= 2.5, certified."""
    reqs = tuple(Request(f"r{k}", 0.1 * k, 1, 1) for k in range(12))
    f = tmp_path / "over.json"
    Instance("over", Limits(kv_capacity=4, max_batch_tokens=4), UnitCost(), reqs).save(f)
    return f


def _says_overloaded(err: str, command: str) -> None:
    assert f"optsched {command}: offered load" in err and "OVERLOADED (certified)" in err
    assert (f"optsched {command}: warning: the instance is overloaded (certified: load >= 2.5)"
            f": latency grows with the window's length; see --load") in err


def test_info_shows_the_load_and_warns(capsys, overloaded):
    rc, out, err = run(capsys, "info", overloaded)
    assert rc == 0 and "offered load 2.5" in out and "OVERLOADED (certified)" in out
    assert err.strip() == ("optsched info: warning: the instance is overloaded (certified: load "
                           ">= 2.5): latency grows with the window's length; see --load")
    rc, out, _ = run(capsys, "info", overloaded, "--json")
    d = json.loads(out)["offered_load"]
    assert d["status"] == "overloaded" and d["overloaded"] is True
    assert d["lower"] == pytest.approx(2.5) and d["upper"] == pytest.approx(2.5)


@pytest.mark.parametrize("argv", [
    ("simulate", "{f}", "--policy", "vllm", "--json"),
    ("evaluate", "{f}", "{s}", "--json"),
    ("bound", "{f}", "--objective", "total-latency", "--method", "work", "--json"),
    ("solve", "{f}", "--formulation", "exhaustive", "--objective", "total-latency",
     "--time-limit", "20", "--json"),
])
def test_every_report_says_the_load_and_warns(capsys, tmp_path, overloaded, argv):
    sched = tmp_path / "v.json"
    assert run(capsys, "simulate", overloaded, "--policy", "vllm", "-o", sched)[0] == 0
    rc, out, err = run(capsys, *(a.format(f=overloaded, s=sched) for a in argv))
    assert rc == 0, err
    _says_overloaded(err, argv[0])
    d = json.loads(out)
    assert d["offered_load"]["status"] == "overloaded"


def test_compare_report_carries_the_load(capsys, tmp_path, overloaded):
    rc, _, err = run(capsys, "compare", overloaded, "--policies", "vllm,sarathi", "--no-gantt",
                     "--objective", "total-latency", "-o", tmp_path / "rep")
    assert rc == 0
    _says_overloaded(err, "compare")
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["offered_load"]["status"] == "overloaded"
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "OVERLOADED (certified)" in md and "see --load" in md


def test_a_stable_instance_gets_no_warning(capsys, tmp_path):
    reqs = tuple(Request(f"r{k}", 2.0 * k, 1, 1) for k in range(12))  # lambda 0.5 vs mu 4
    f = tmp_path / "calm.json"
    Instance("calm", Limits(kv_capacity=4, max_batch_tokens=4), UnitCost(), reqs).save(f)
    rc, _, err = run(capsys, "simulate", f, "--policy", "vllm")
    assert rc == 0 and "offered load 0.125" in err and ": stable" in err
    assert "warning" not in err


def _azure_csv(path, n=300):
    """A small Azure-format trace: a request every 0.05 s, prompts 200-1,200, outputs 20-220."""
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for k in range(n):
        sec = 0.05 * k
        rows.append(f"2023-11-16 18:{int(sec // 60):02d}:{sec % 60:010.7f},"
                    f"{200 + (k * 37) % 1000},{20 + (k * 53) % 200}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("target", [0.7, 1.5])
def test_generate_trace_at_a_load(capsys, tmp_path, target):
    trace = _azure_csv(tmp_path / "t.csv")
    f = tmp_path / "w.json"
    rc, out, err = run(capsys, "generate", "azure", "--trace", trace, "--kv-capacity", 30000,
                       "--max-batch-tokens", 8192, "--load", target, "-o", f)
    assert rc == 0, err
    load = offered_load(Instance.load(f))
    assert load.point == pytest.approx(target, rel=1e-6) and load.lower <= target * (1 + 1e-9)
    assert f"offered load {target:.3g}" in out
    assert ("see --load" in err) == (target > 1)


def test_generate_family_at_a_load(capsys, tmp_path):
    f = tmp_path / "c.json"
    rc, out, err = run(capsys, "generate", "chat-like", "--n", 150, "--seed", 3, "--load", 0.5,
                       "-o", f)
    assert rc == 0, err
    assert offered_load(Instance.load(f)).point == pytest.approx(0.5, rel=0.005)
    g = tmp_path / "p.json"  # unit time, Poisson counts per round: redrawn with the rate
    rc, out, err = run(capsys, "generate", "online-paper", "--n", 12, "--arrival", "poisson",
                       "--load", 0.8, "-o", g)
    assert rc == 0, err
    reached = offered_load(Instance.load(g)).point
    # within 2% silently (LOAD_MISS), else said
    assert (abs(reached - 0.8) <= 0.02 * 0.8 and "warning" not in err) or (
        f"the load reached is {reached:.3g}" in err and "give --rate" in err), (reached, err)


@pytest.mark.parametrize("argv,msg", [
    (["generate", "fixed", "--n", "2", "--prompt", "3", "--output", "2", "--load", "0.7"],
     "has no arrival rate to set"),
    (["generate", "online-paper", "--n", "5", "--load", "0.7"], "give --arrival poisson"),
    (["generate", "chat-like", "--n", "5", "--rate", "2", "--load", "0.7"], "drop --rate"),
    (["generate", "chat-like", "--n", "5", "--load", "0"], "--load must be a finite number > 0"),
    (["generate", "azure", "--trace", "T", "--rate-scale", "2", "--load", "0.7"],
     "drop --rate-scale"),
])
def test_load_bad_input_is_one_line(capsys, tmp_path, argv, msg):
    rc, _, err = run(capsys, *argv, "-o", tmp_path / "x.json")
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1, err
