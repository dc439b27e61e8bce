"""The top-level API: every name resolves to the one object of its concept, each verb returns
its exported result type, ``import optsched`` stays light, and the renamed backend warm start
keeps a deprecated alias."""

import subprocess
import sys

import pytest

import optsched


def test_names_resolve_to_their_modules_objects():
    from optsched.data import load_instance
    from optsched.instance import Instance
    from optsched.policies import Plan, Policy, simulate
    from optsched.schedule import Schedule
    from optsched.solve_types import SolveOptions
    from optsched.solving import lower_bound, solve

    expected = {"load": load_instance, "Instance": Instance, "Schedule": Schedule,
                "simulate": simulate, "Policy": Policy, "Plan": Plan, "solve": solve,
                "SolveOptions": SolveOptions, "lower_bound": lower_bound}
    for name, obj in expected.items():
        assert getattr(optsched, name) is obj, name
    assert set(optsched.__all__) >= set(expected) | {"evaluate", "compare"}


def test_no_submodule_is_named_like_a_top_level_name():
    """Python binds a submodule on its package when it is imported, so a module
    ``optsched/evaluate.py`` would replace the function ``optsched.evaluate``."""
    import pkgutil

    clash = {m.name for m in pkgutil.iter_modules(optsched.__path__)} & set(optsched.__all__)
    assert clash == set()


def test_evaluate_and_compare_are_functions_whatever_was_imported_first():
    import optsched.comparison.logic
    import optsched.evaluation.evaluator
    from optsched.comparison import compare
    from optsched.evaluation import evaluate

    assert optsched.evaluate is evaluate and optsched.compare is compare
    inst = optsched.load("tiny")
    sched = optsched.simulate(inst, "vllm")
    assert optsched.evaluate(inst, sched).metrics == \
        optsched.evaluation.evaluator.evaluate(inst, sched).metrics
    rows = optsched.compare(inst, ["vllm"]).rows
    assert [r.label for r in rows] == ["vllm"]


def test_every_verb_returns_its_exported_result_type():
    from optsched.comparison import Comparison, Row
    from optsched.evaluation import Evaluation
    from optsched.solve_types import BoundResult, Fallback, Objective, SolveReport, Status

    assert (optsched.Evaluation, optsched.SolveReport, optsched.BoundResult, optsched.Comparison,
            optsched.Row, optsched.Fallback, optsched.Status, optsched.Objective) == \
        (Evaluation, SolveReport, BoundResult, Comparison, Row, Fallback, Status, Objective)
    inst = optsched.load("tiny")
    assert isinstance(optsched.evaluate(inst, optsched.simulate(inst, "vllm")), optsched.Evaluation)
    rep = optsched.solve(inst, "exhaustive", "makespan",
                         options=optsched.SolveOptions(time_limit=30))
    assert isinstance(rep, optsched.SolveReport) and rep.status is optsched.Status.OPTIMAL
    assert rep.plan is not None and rep.lower_bound is None and rep.fallback is None
    assert isinstance(optsched.lower_bound(inst, "makespan"), optsched.BoundResult)
    for obj in (rep, optsched.lower_bound(inst, "makespan"), optsched.compare(inst, ["vllm"])):
        assert str(obj) == obj.summary() and str(obj)


def test_load_takes_a_file_or_a_shipped_name(tmp_path):
    from optsched.data import embedded_instance_path
    from optsched.errors import InputFileError

    path = embedded_instance_path("demo")
    assert path is not None
    assert optsched.load(str(path)).requests == optsched.load("demo").requests
    with pytest.raises(InputFileError, match="nope.json: no such instance file"):
        optsched.load(str(tmp_path / "nope.json"))


def test_import_optsched_imports_no_api_module():
    code = ("import sys, optsched; heavy = [m for m in ('numpy', 'optsched.evaluation', "
            "'optsched.formulations', 'optsched.policies') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        optsched.nope  # noqa: B018


def test_backend_warm_start_is_column_start_with_a_deprecated_alias():
    from optsched.milp import backends
    from optsched.milp.backends.base import ColumnStart

    with pytest.warns(DeprecationWarning, match="use ColumnStart"):
        assert backends.WarmStart is ColumnStart
    from optsched.solve_types import WarmStart

    assert WarmStart is not ColumnStart


def test_all_lists_exactly_the_lazy_names():
    assert set(optsched.__all__) == set(optsched._LAZY) | {"__version__"}
