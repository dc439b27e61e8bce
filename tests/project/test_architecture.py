"""The layer contract: ``[tool.importlinter]`` in ``pyproject.toml`` holds with every import
counted (type-checking ones too), it is not vacuous (a planted upward import, a planted
type-checking one and a planted circle break it), and no circle is left between any two
modules -- including a package and its own submodules, which the import-linter sibling
contract does not look at -- but the four listed type-only ties."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from paths import REPO

pytest.importorskip("importlinter", reason="import-linter is in the dev extra")
grimp = pytest.importorskip("grimp")

CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
LINT = ("import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    # lint_imports puts the working directory first on sys.path: it checks `where`'s optsched
    return subprocess.run([sys.executable, "-c", LINT], cwd=where, capture_output=True,
                          text=True, timeout=300)


def _ignored() -> set[tuple[str, str]]:
    """The imports the contracts ignore (each commented in pyproject.toml with its reason)."""
    out = set()
    for contract in CONFIG["contracts"]:
        for line in contract.get("ignore_imports", []):
            a, b = (s.strip() for s in line.split("->"))
            out.add((a, b))
    return out


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, recursive: the
    graph has ~130 nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_layer_contract_holds():
    res = _lint(REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 kept, 0 broken" in res.stdout, res.stdout


def _graph(type_checking: bool):
    return grimp.build_graph("optsched", exclude_type_checking_imports=not type_checking,
                             cache_dir=None)


def test_the_contract_counts_type_checking_imports():
    assert CONFIG["exclude_type_checking_imports"] is False


@pytest.mark.parametrize("type_checking", [False, True])
def test_no_import_circle_between_any_two_modules(type_checking):
    g = _graph(type_checking)
    ignored = _ignored()
    graph = {m: {t for t in g.find_modules_directly_imported_by(m) if (m, t) not in ignored}
             for m in g.modules}
    assert _circles(graph) == []


def test_circle_finder_finds_a_circle():
    # a -> b -> c -> a plus d -> a: one circle of three; d is outside it
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_every_ignored_import_exists():
    # an ignore entry for an import that is gone would hide the next one silently;
    # import-linter also refuses unmatched ignores (its default alerting is "error")
    g = _graph(type_checking=True)
    for a, b in _ignored():
        assert g.direct_import_exists(importer=a, imported=b), (a, b)


def test_only_the_listed_type_only_ties_are_exempt():
    # each is a type named for annotations only, by a helper of the module defining it:
    # at run time (type-checking imports left out) none of them exists
    infermax = "optsched.formulations.infermax"
    assert _ignored() == {(f"{infermax}.flow_objectives", f"{infermax}.flow"),
                          (f"{infermax}.flow_remainder", f"{infermax}.flow"),
                          (f"{infermax}.encode", f"{infermax}.model"),
                          ("optsched.milp.export", "optsched.milp.model")}
    g = _graph(type_checking=False)
    for a, b in _ignored():
        assert not g.direct_import_exists(importer=a, imported=b), (a, b)


def test_a_planted_upward_import_and_circle_break_the_contract(tmp_path):
    shutil.copytree(REPO / "optsched", tmp_path / "optsched",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    # metrics is below sweep, policies below solving; a -> b -> a is a circle inside search/
    with open(tmp_path / "optsched" / "metrics" / "serving.py", "a") as f:
        f.write("\nfrom ..sweep import spec  # noqa\n")
    with open(tmp_path / "optsched" / "policies" / "registry.py", "a") as f:
        f.write("\nfrom typing import TYPE_CHECKING  # noqa\n\nif TYPE_CHECKING:\n"
                "    from ..solving import pipeline  # noqa\n")
    (tmp_path / "optsched" / "search" / "planted_a.py").write_text("from . import planted_b\n")
    (tmp_path / "optsched" / "search" / "planted_b.py").write_text("from . import planted_a\n")
    res = _lint(tmp_path)
    assert res.returncode != 0
    assert "0 kept, 2 broken" in res.stdout, res.stdout
    assert "optsched.metrics.serving -> optsched.sweep.spec" in res.stdout, res.stdout
    assert "optsched.policies.registry -> optsched.solving.pipeline" in res.stdout, res.stdout
    assert "No cycles are allowed in optsched.search" in res.stdout, res.stdout
