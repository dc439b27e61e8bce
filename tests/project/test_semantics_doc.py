"""docs/semantics.md stays consistent with the code: every violation code the evaluator can
emit, every objective and every cost coefficient is documented, every citation of a section
points at a section the page has, and nothing cites the shared DESIGN.md any more."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
from paths import REPO

from optsched.cost import _LINEAR_KEYS
from optsched.evaluation import cluster_rules
from optsched.evaluation import evaluator as evaluate_module
from optsched.evaluation.cluster import CLUSTER_CODES
from optsched.evaluation.evaluator import CODES, _time_tolerance
from optsched.solve_types import OBJECTIVES

DOC = (REPO / "docs" / "semantics.md").read_text(encoding="utf-8")
SECTIONS = {int(m) for m in re.findall(r"^## (\d+)\. ", DOC, flags=re.M)}


def _section(n: int) -> str:
    return re.split(r"^## \d+\. ", DOC, flags=re.M)[n]


def _emitted_codes(module=evaluate_module) -> set[str]:
    """The violation codes the evaluator's functions can emit: string literals inside function
    bodies (the CODES table itself is a module-level dict and does not count)."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    out = set()
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and re.fullmatch(r"[A-Z][A-Z_]+", node.value):
                    out.add(node.value)
    return out


def test_sections_are_numbered_one_to_eight():
    assert SECTIONS == set(range(1, 9))


def test_every_violation_code_is_documented_and_only_those():
    table = set(re.findall(r"^\| `([A-Z_]+)` \|", _section(3), flags=re.M))
    assert table == set(CODES) | set(CLUSTER_CODES)
    assert _emitted_codes() == set(CODES)
    # the cluster rules (section 6, "Clusters") emit their own codes and some of section 3's
    assert set(CLUSTER_CODES) <= _emitted_codes(cluster_rules) <= set(CODES) | set(CLUSTER_CODES)


def test_objectives_and_cost_coefficients_are_documented():
    for name in OBJECTIVES:
        assert f"`{name}`" in _section(4), name
    for key in _LINEAR_KEYS:
        assert re.search(rf"\b{key}\b", _section(5)), key


def test_the_stated_tolerance_is_the_code_s():
    # the doc: 1e-9 of the longer duration plus four units in the last place of the time
    assert "1e-9" in _section(4) and "four units in the last place" in _section(4)
    t = np.array([1e9])
    assert _time_tolerance(np.array([2.0]), t)[0] == 2e-9 + 4 * np.spacing(1e9)
    assert _time_tolerance(np.array([1.0]), t)[0] < 0.5  # half a unit early at 1e9 is caught


def _cited_sections(text: str):
    for m in re.finditer(r"semantics(?:\.md`*)?\s+(?:sections?\s+)?(\d+)(?:\s*(?:-|and)\s*(\d+))?",
                         text):
        yield from (int(g) for g in m.groups() if g)


def _cited_files():
    for base in ("optsched", "tests", "formulations", "benchmarks", "studies", "docs"):
        yield from (REPO / base).rglob("*.py")
        yield from (REPO / base).rglob("*.md")
    yield REPO / "README.md"


def test_every_citation_points_at_an_existing_section():
    seen = 0
    for path in _cited_files():
        text = path.read_text(encoding="utf-8")
        if path.name != Path(__file__).name:
            assert "DESIGN.md" not in text and "DESIGN section" not in text, path
        for n in _cited_sections(text):
            seen += 1
            assert n in SECTIONS, f"{path.relative_to(REPO)} cites semantics section {n}"
    assert seen > 20  # the code does cite the page


def test_every_check_function_cites_a_section_and_names_its_codes():
    tree = ast.parse(Path(evaluate_module.__file__).read_text(encoding="utf-8"))
    checks = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("_check_")]
    assert checks
    named = set()
    for f in checks:
        doc = ast.get_docstring(f) or ""
        assert re.search(r"section \d", doc), f.name
        codes = set(re.findall(r"\b[A-Z][A-Z_]+\b", doc)) & set(CODES)
        assert codes, f.name
        named |= codes
    assert named == set(CODES)
