"""The one plug-in mechanism (:mod:`optsched.plugins`): discovery of a package's modules,
entry points, ``file.py:Name`` / ``module:Name`` references, and the one parameter-spec type.

The user-written plug-ins live in ``tests/user_plugins.py``, outside optsched, the way a
researcher would write them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from paths import REPO

from optsched.cli import main
from optsched.evaluation import evaluate
from optsched.formulations import FormulationError
from optsched.instance import Instance, Limits, Request
from optsched.plugins import (
    ParamSpec,
    PluginError,
    Registry,
    load_object,
    parse_assignments,
    parse_params,
    positive,
)
from optsched.policies import POLICIES, PolicyError, get_policy, list_policies, simulate
from optsched.solving import solve

HERE = REPO / "tests" / "helpers"
USER = HERE / "user_plugins.py"
INST = Instance("plug", Limits(kv_capacity=12, max_batch_tokens=6),
                requests=(Request("a", 0, 5, 3), Request("b", 0, 2, 2), Request("c", 1, 3, 1)))


def serial_makespan(inst: Instance) -> int:
    """Unit time, one request at a time: a prompt of I tokens in chunks of at most C is
    ceil(I / C) batches, then O - 1 single-token decode batches (the last prefill chunk
    yields the first output token)."""
    C = inst.limits.max_batch_tokens
    return sum(-(-int(i) // C) + int(o) - 1 for i, o in zip(inst.prompt, inst.output))


# -- references ----------------------------------------------------------------------------
def test_policy_from_a_file_is_held_to_the_evaluator():
    for order in ("arrival", "prompt"):
        sched = simulate(INST, f"{USER}:OneAtATime", order=order)
        ev = evaluate(INST, sched)
        assert ev.feasible
        # a: 5 tokens in chunks of 6 -> 1 batch + 2 decodes; b: 1 + 1; c: 1 + 0  -> 6 batches
        assert ev.objective("makespan") == serial_makespan(INST) == 6
        assert ev.metrics["evictions"] == 0


def test_policy_from_a_module_reference(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    spec = POLICIES.get("user_plugins:OneAtATime")
    assert spec.name == "user_plugins:OneAtATime"
    assert spec.description.startswith("One request at a time")
    assert [p.name for p in spec.params] == ["order"]
    policy = get_policy("user_plugins:OneAtATime", order="prompt")
    assert policy.order == "prompt" and policy.name == "user_plugins:OneAtATime"
    with pytest.raises(PolicyError, match="order must be one of arrival, prompt, got 'x'"):
        get_policy("user_plugins:OneAtATime", order="x")
    # references are loaded on demand, not listed with the registered policies
    assert "user_plugins:OneAtATime" not in {s.name for s in list_policies()}


def test_formulation_from_a_file_goes_through_solve():
    rep = solve(INST, f"{USER}:run", warm_start=None)
    assert rep.status == "feasible" and rep.formulation == f"{USER}:run"
    assert rep.objective == evaluate(INST, rep.schedule).objective("makespan") == serial_makespan(INST)


@pytest.mark.parametrize("ref, match", [
    ("nowhere/missing.py:OneAtATime", "no such file"),
    (f"{USER}:Missing", "defines no 'Missing'"),
    (f"{USER}:NotAPolicy", "not a policy"),
    (f"{USER}:BROKEN", "not a policy"),
    ("optsched_no_such_module:Thing", "cannot import 'optsched_no_such_module'"),
])
def test_bad_references_are_one_clear_error(ref, match):
    with pytest.raises(PolicyError, match=match):
        get_policy(ref)


def test_a_file_that_fails_to_import(tmp_path):
    bad = tmp_path / "bad_policy.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(PluginError, match="importing .*bad_policy.py.* failed: RuntimeError: boom"):
        load_object(f"{bad}:Anything")


# -- the command line ----------------------------------------------------------------------
def test_cli_simulate_and_compare_with_a_user_policy(tmp_path, capsys):
    INST.save(tmp_path / "inst.json")
    ref = f"{USER}:OneAtATime"
    assert main(["simulate", str(tmp_path / "inst.json"), "--policy", ref,
                 "--param", "order=prompt", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluation"]["feasible"] is True
    assert data["evaluation"]["metrics"]["makespan"] == serial_makespan(INST)
    out = tmp_path / "rep"
    assert main(["compare", str(tmp_path / "inst.json"), "--policies", f"{ref},vllm",
                 "--optimal", "--formulation", "exhaustive", "--no-gantt", "-o", str(out)]) == 0
    rows = {r["label"]: r for r in json.loads((out / "report.json").read_text())["rows"]}
    assert set(rows) == {ref, "vllm", "optimal (exhaustive)"}
    opt = rows["optimal (exhaustive)"]["objective"]
    assert rows[ref]["objective"] == serial_makespan(INST) >= opt
    assert rows[ref]["gap"] == pytest.approx((serial_makespan(INST) - opt) / opt)


@pytest.mark.parametrize("args, match", [
    (["simulate", "tiny", "--policy", "nowhere.py:P"], "no such file 'nowhere.py'"),
    (["simulate", "tiny", "--policy", f"{USER}:NotAPolicy"], "not a policy"),
    (["simulate", "tiny", "--policy", f"{USER}:OneAtATime", "--param", "order=x"],
     "order must be one of arrival, prompt"),
    (["compare", "tiny", "--policies", f"{USER}:Missing", "-o", "{tmp}"], "defines no 'Missing'"),
    (["solve", "tiny", "--formulation", f"{USER}:Missing"], "defines no 'Missing'"),
])
def test_cli_bad_plugin_reference_exits_2_with_one_line(args, match, tmp_path, capsys):
    args = [a.replace("{tmp}", str(tmp_path / "rep")) for a in args]
    assert main(args) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and match in err, err
    assert "Traceback" not in captured.err


# -- entry points --------------------------------------------------------------------------
def _distribution(root: Path, group: str, name: str, value: str) -> None:
    """An installed distribution (a .dist-info with entry_points.txt) on sys.path at ``root``."""
    info = root / "user_plugins_dist-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: user-plugins-dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")


def test_policy_from_an_entry_point(tmp_path, monkeypatch):
    _distribution(tmp_path, "optsched.policies", "one-at-a-time", "user_plugins:OneAtATime")
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.syspath_prepend(str(tmp_path))
    POLICIES.discover()  # built-ins register once, on import: take them into the copy
    monkeypatch.setattr(POLICIES, "_entries", dict(POLICIES._entries))
    monkeypatch.setattr(POLICIES, "_discovered", False)
    assert "one-at-a-time" in {s.name for s in list_policies()}
    sched = simulate(INST, "one-at-a-time", order="prompt")
    assert evaluate(INST, sched).objective("makespan") == serial_makespan(INST)
    assert get_policy("one-at-a-time").name == "one-at-a-time"


def test_a_broken_entry_point_warns_and_the_rest_still_load(tmp_path, monkeypatch):
    _distribution(tmp_path, "optsched.policies", "broken", "optsched_no_such_module:X")
    monkeypatch.syspath_prepend(str(tmp_path))
    POLICIES.discover()  # built-ins register once, on import: take them into the copy
    monkeypatch.setattr(POLICIES, "_entries", dict(POLICIES._entries))
    monkeypatch.setattr(POLICIES, "_discovered", False)
    with pytest.warns(UserWarning, match="policy plug-in 'broken'"):
        names = POLICIES.names()
    assert "vllm" in names and "broken" not in names


# -- discovery -----------------------------------------------------------------------------
def test_a_new_module_file_is_discovered(tmp_path, monkeypatch):
    pkg = tmp_path / "my_plugins"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from optsched.plugins import Registry\n"
                                     "REG = Registry('widget', packages=('my_plugins',))\n")
    for name in ("alpha", "beta"):
        (pkg / f"{name}.py").write_text(
            "from . import REG\n\n\n"
            f"@REG.register('{name}-widget')\n"
            f"class W:\n    '''The {name} widget.'''\n")
    (pkg / "_private.py").write_text("raise RuntimeError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_plugins

    assert my_plugins.REG.names() == ["alpha-widget", "beta-widget"]
    with pytest.raises(PluginError, match="unknown widget 'gamma'; known widgets: alpha-widget"):
        my_plugins.REG.get("gamma")
    for mod in [m for m in sys.modules if m == "my_plugins" or m.startswith("my_plugins.")]:
        monkeypatch.delitem(sys.modules, mod)


def test_two_plugins_of_one_name_are_refused():
    reg: Registry[object] = Registry("thing")
    reg.add("x", 1)
    reg.add("x", 1)  # the same entry again (a module imported twice) is fine
    with pytest.raises(PluginError, match="two things are registered as 'x'"):
        reg.add("x", 2)


def test_every_kind_has_a_registry_with_an_entry_point_group():
    from optsched.formulations import FORMULATIONS
    from optsched.milp.backends import BACKENDS
    from optsched.plugins import BOUNDS

    assert POLICIES.group == "optsched.policies" and "vllm" in POLICIES
    assert FORMULATIONS.group == "optsched.formulations"
    assert {"infermax", "hindsight", "exhaustive"} <= set(FORMULATIONS.names())
    assert BACKENDS.group == "optsched.backends" and "highs" in BACKENDS
    assert BOUNDS.group == "optsched.bounds"


# -- ParamSpec -----------------------------------------------------------------------------
def test_param_spec_parses_strings_and_checks_typed_values():
    n = ParamSpec("n", int, 3, "a count", lo=1, hi=10)
    assert n.parse("7") == 7 and n.parse(7) == 7
    for bad, msg in [("abc", "n must be an integer, got 'abc'"),
                     ("2.5", "n must be an integer in 1..10, got '2.5'"),
                     (2.5, "n must be an integer in 1..10, got 2.5"),
                     (True, "n must be an integer in 1..10, got True"),
                     (0, "n must be an integer in 1..10, got 0"),
                     ("11", "n must be an integer in 1..10, got '11'")]:
        with pytest.raises(PluginError) as e:
            n.parse(bad, "thing 'x'")
        assert str(e.value) == f"thing 'x': {msg}"
    f = ParamSpec("rate", float, 1.0, check=positive)
    assert f.parse("0.5") == 0.5 and f.parse(2) == 2.0 and isinstance(f.parse(2), float)
    with pytest.raises(PluginError, match="rate must be > 0, got '-1'"):
        f.parse("-1")
    with pytest.raises(PluginError, match="rate must be a number, got 'inf'"):
        f.parse("inf")
    b = ParamSpec("on", bool, False)
    assert [b.parse(v) for v in ("yes", "off", "1", "False", True)] == [True, False, True, False, True]
    with pytest.raises(PluginError, match="on must be true or false, got 'maybe'"):
        b.parse("maybe")
    opt = ParamSpec("horizon", int, None, lo=1)
    assert opt.parse(None) is None
    with pytest.raises(PluginError, match="n needs a value"):
        n.parse(None)


def test_parse_params_fills_defaults_and_names_unknown_keys():
    specs = (ParamSpec("a", int, 1), ParamSpec("b", str, "x", choices=("x", "y")))
    assert parse_params(specs, {"b": "y"}, "p") == {"a": 1, "b": "y"}
    assert parse_params(specs, {}, "p", defaults={"a": 5}) == {"a": 5, "b": "x"}
    with pytest.raises(PluginError, match=r"p: unknown parameter 'c' \(known: a, b\)"):
        parse_params(specs, {"c": 1}, "p")
    assert parse_assignments(["a=1", "b= y "]) == {"a": "1", "b": " y "}
    with pytest.raises(PluginError, match="--param 'a': expected key=value"):
        parse_assignments(["a"])


def test_formulation_params_share_the_spec():
    from optsched.formulations import FORMULATIONS

    info = FORMULATIONS.get("exhaustive")
    assert [p.name for p in info.params] == ["max_states", "no_evictions", "no_chunking", "no_pausing"]
    with pytest.raises(FormulationError, match="max_states must be an integer >= 1, got '2.5'"):
        info.parse_params({"max_states": "2.5"})
