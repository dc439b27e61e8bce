"""PuLP (CBC) and gurobipy are optional extras; a missing one is reported by the
backend's ``is_available()`` with the extra to install, never by an ImportError."""

import importlib.util

import pytest

from optsched.milp.backends import cbc, gurobi
from optsched.milp.solve import get_backend


def _hide(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == missing else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_cbc_without_pulp_names_the_cbc_extra(monkeypatch):
    _hide(monkeypatch, "pulp")
    backend = get_backend("cbc")
    assert not backend.is_available()
    assert backend.unavailable_reason() == "cbc: pulp not installed (pip install 'optsched[cbc]')"


def test_gurobi_without_gurobipy_names_the_gurobi_extra(monkeypatch):
    _hide(monkeypatch, "gurobipy")
    monkeypatch.setattr(gurobi, "_license", None)  # the probe caches per process: probe afresh
    backend = get_backend("gurobi")
    assert not backend.is_available()
    assert backend.unavailable_reason() == (
        "gurobi: gurobipy not installed (pip install 'optsched[gurobi]')")


def test_cbc_path_without_pulp_is_none_not_an_import_error(monkeypatch):
    _hide(monkeypatch, "pulp")
    monkeypatch.setattr(cbc.shutil, "which", lambda name: None)
    assert cbc._cbc_path() is None
