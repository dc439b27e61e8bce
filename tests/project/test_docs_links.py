"""The docs site and the README link only to files that exist.

``mkdocs build --strict`` (``make docs``) already fails on a broken link between pages; this test
also runs without the docs packages and checks what mkdocs cannot see: links from README.md, the
nav of ``mkdocs.yml``, the files the pages include (``--8<--``), and links to the executed
notebooks, whose ``.ipynb`` exist only after ``docs/execute_notebooks.py`` (their ``.py`` must).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from paths import REPO

DOCS = REPO / "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"', re.M)
# pages written in parallel on another branch, linked from here and expected at merge
PENDING = {DOCS / "results" / "serving.md"}


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [REPO / "README.md"]


def _target(page: Path, link: str) -> Path | None:
    """The file a relative link names (None for web links and in-page anchors)."""
    if re.match(r"^[a-z]+:", link) or link.startswith("#"):
        return None
    path = (page.parent / link.split("#", 1)[0]).resolve()
    if link.split("#", 1)[0].endswith("/") and not path.is_dir():
        path = path.with_suffix(".md")  # a directory-style page link: serving/ -> serving.md
    return path


def _exists(path: Path) -> bool:
    if path in PENDING or path.exists():
        return True
    # an executed notebook in docs/notebooks/ is made from notebooks/<same name>.py
    return path.suffix == ".ipynb" and path.parent == DOCS / "notebooks" \
        and (REPO / "notebooks" / f"{path.stem}.py").exists()


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_and_include_of_a_page_exists(page):
    text = page.read_text(encoding="utf-8")
    missing = [link for link in LINK.findall(text)
               if (t := _target(page, link)) is not None and not _exists(t)]
    missing += [inc for inc in SNIPPET.findall(text) if not (REPO / inc).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to missing files: {missing}"


def test_every_nav_entry_of_mkdocs_yml_exists():
    nav = re.findall(r"^\s*- (?:[^:\n]+: )?([\w./-]+\.(?:md|ipynb))\s*$",
                     (REPO / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert len(nav) >= 20, nav  # the nav is read (home, guides, formulations, API, notebooks, results)
    assert not [p for p in nav if not _exists((DOCS / p).resolve())]


def test_the_checker_catches_a_missing_file(tmp_path):
    page = DOCS / "results" / "index.md"
    assert not _exists(_target(page, "no-such-study.md"))  # type: ignore[arg-type]
    assert not _exists(_target(page, "../notebooks/99-none.ipynb"))  # type: ignore[arg-type]
    assert _exists(_target(page, "serving/"))  # type: ignore[arg-type]  # pending at merge
    assert _target(page, "https://example.org/x.md") is None


def _executor():
    """docs/execute_notebooks.py, imported from its path (docs/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("execute_notebooks", DOCS / "execute_notebooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_make_docs_re_executes_only_stale_notebooks(tmp_path):
    """An executed copy is stale when missing, unstamped, or stamped from other sources (the
    notebook, nbsetup.py or any module of optsched/), so that the copies the notebook test writes
    during `make test` make `make docs` execute nothing, and a library change re-executes."""
    import nbformat

    ex = _executor()
    src = REPO / "notebooks" / "01-quickstart.py"
    out = tmp_path / "01-quickstart.ipynb"
    assert ex.stale(src, out)  # missing
    out.write_text("{}")
    assert ex.stale(src, out)  # not a stamped notebook
    book = nbformat.v4.new_notebook()
    ex.write_copy(book, src, out)
    assert not ex.stale(src, out)  # made from the current sources
    book.metadata["optsched"]["source_stamp"] = "0" * 64
    nbformat.write(book, out)
    assert ex.stale(src, out)  # a source changed since


def test_source_stamp_covers_the_notebook_and_the_library(tmp_path, monkeypatch):
    ex = _executor()
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "optsched" / "sub").mkdir(parents=True)
    nb, setup, mod = (root / "notebooks" / "01-x.py", root / "notebooks" / "nbsetup.py",
                      root / "optsched" / "sub" / "m.py")
    for f in (nb, setup, mod):
        f.write_text("a = 1\n")
    monkeypatch.setattr(ex, "ROOT", root)
    monkeypatch.setattr(ex, "NB_DIR", root / "notebooks")
    stamps = [ex.source_stamp(nb)]
    for f in (nb, setup, mod):
        f.write_text("a = 2\n")
        stamps.append(ex.source_stamp(nb))
    assert len(set(stamps)) == 4  # each of the three changes moves the stamp
