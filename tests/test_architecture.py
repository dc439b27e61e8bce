"""The layer contract (issue 27 items 3-4): ``[tool.importlinter]`` in ``pyproject.toml`` holds,
it is not vacuous (a planted upward import and a planted circle break it), and no circle is
left between any two modules -- including a package and its own submodules, which the
import-linter sibling contract does not look at."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is in the dev extra")
grimp = pytest.importorskip("grimp")

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LINT = ("import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    # lint_imports puts the working directory first on sys.path: it checks `where`'s optsched
    return subprocess.run([sys.executable, "-c", LINT], cwd=where, capture_output=True,
                          text=True, timeout=300)


def _ignored() -> set[tuple[str, str]]:
    """The imports the contracts ignore (each commented in pyproject.toml with its issue)."""
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
    res = _lint(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 kept, 0 broken" in res.stdout, res.stdout


def test_no_import_circle_between_any_two_modules():
    g = grimp.build_graph("optsched", exclude_type_checking_imports=True, cache_dir=None)
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
    g = grimp.build_graph("optsched", exclude_type_checking_imports=True, cache_dir=None)
    for a, b in _ignored():
        assert g.direct_import_exists(importer=a, imported=b), (a, b)


def test_no_import_is_exempt_from_the_contracts():
    # issue 27: the last five exceptions (exhaustive search, exact rung, claim checkers,
    # manifest prover, formulations.solve alias) were removed by moving or injecting code
    assert _ignored() == set()


def test_a_planted_upward_import_and_circle_break_the_contract(tmp_path):
    shutil.copytree(ROOT / "optsched", tmp_path / "optsched",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    # metrics is below sweep; a -> b -> a is a circle inside search/
    with open(tmp_path / "optsched" / "metrics" / "serving.py", "a") as f:
        f.write("\nfrom ..sweep import spec  # noqa\n")
    (tmp_path / "optsched" / "search" / "planted_a.py").write_text("from . import planted_b\n")
    (tmp_path / "optsched" / "search" / "planted_b.py").write_text("from . import planted_a\n")
    res = _lint(tmp_path)
    assert res.returncode != 0
    assert "0 kept, 2 broken" in res.stdout, res.stdout
    assert "optsched.metrics.serving -> optsched.sweep.spec" in res.stdout, res.stdout
    assert "No cycles are allowed in optsched.search" in res.stdout, res.stdout
