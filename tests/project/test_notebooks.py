"""The notebooks of ``notebooks/``: Jupytext percent-format text (``NN-name.py``, read by ruff
and reviewers as code, opened as notebooks by Jupytext), canonical in that format, and executed
end to end in FAST mode (``OPTSCHED_FAST=1``).

Each notebook is its own test so that pytest-xdist spreads them over the workers. A notebook that
executes without error is also written, with its outputs, to ``docs/notebooks/NN-name.ipynb``
(git-ignored): ``make docs`` renders those copies and re-executes only the ones older than their
``.py``, so in CI (``make test`` then ``make docs``) the notebooks run once, not twice. The kernel is
a kernel spec written at test time into a temporary ``JUPYTER_PATH`` whose ``argv`` is this
test process's Python (``sys.executable``), so the notebooks run in the same venv as the tests.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from paths import REPO

nbformat = pytest.importorskip("nbformat")
jupytext = pytest.importorskip("jupytext")

NB_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("[0-9]*.py"))
KERNEL = "optsched-test-python"
#: the notebooks that take over a minute of CPU in FAST mode (06: 120-130 CPU s on this project's
#: 2-core machine), or more than a few seconds (10: 30-50 CPU s; 11: about 30 CPU s, most of it
#: the cluster search): executed by the slow step
#: or by ``make docs``, never by the fast suite
HEAVY = {"06-ecoserve", "07-bros", "08-aptserve", "09-theory-vs-practice", "10-prefix-reuse",
         "11-clusters"}


def _executor():
    """docs/execute_notebooks.py, imported from its path (docs/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("execute_notebooks",
                                                  REPO / "docs" / "execute_notebooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _params():
    for p in NOTEBOOKS:
        marks = [pytest.mark.slow] if p.stem in HEAVY else []
        yield pytest.param(p, id=p.stem, marks=marks)


def test_the_notebooks_exist():
    names = [p.name for p in NOTEBOOKS]
    assert names == ["01-quickstart.py", "02-eviction-hypothesis.py", "03-mcsf-vs-hindsight.py",
                     "04-heuristics-vs-optimum.py", "05-real-trace.py", "06-ecoserve.py",
                     "07-bros.py", "08-aptserve.py", "09-theory-vs-practice.py",
                     "10-prefix-reuse.py", "11-clusters.py"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_canonical_percent_text(path):
    """Reading and writing the file back gives the same text, so an edit made in Jupyter (with
    Jupytext) or in an editor leaves nothing to review but the edit; no outputs can be stored."""
    text = path.read_text()
    book = jupytext.reads(text, fmt="py:percent")
    assert text.startswith("# %% [markdown]\n# # "), f"{path.name}: starts with its title cell"
    assert sum(c.cell_type == "code" for c in book.cells) >= 3
    assert jupytext.writes(book, fmt="py:percent") == text, (
        f"{path.name} is not in canonical percent format: run `jupytext --to py:percent {path.name}`")


def test_every_notebook_has_fast_switch_and_verdict():
    # the switch is defined once, in the notebooks' shared setup module, and every notebook uses it
    assert 'os.environ.get("OPTSCHED_FAST", "1") == "1"' in (NB_DIR / "nbsetup.py").read_text()
    for path in NOTEBOOKS:
        book = jupytext.read(path)
        src = "\n".join(c.source for c in book.cells)
        assert "from nbsetup import FAST" in src, path.name
        if not path.name.startswith("01"):
            assert "agree" in src.lower(), f"{path.name} must state where it agrees with the paper"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    """A kernel spec running this interpreter, found through a temporary JUPYTER_PATH."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    d = tmp_path_factory.mktemp("jupyter")
    spec_dir = d / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "optsched tests",
        "language": "python",
        "env": {"OPTSCHED_FAST": "1", "MPLBACKEND": "Agg"},
    }))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(d) + (os.pathsep + old if old else "")
    yield KERNEL
    if old is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = old


def _docs_copy(path: Path) -> Path:
    return REPO / "docs" / "notebooks" / f"{path.stem}.ipynb"


def _execute(book, kernel):
    from nbclient import NotebookClient

    client = NotebookClient(book, timeout=600, kernel_name=kernel,
                            resources={"metadata": {"path": str(NB_DIR)}})
    return client.execute()


def test_kernel_runs_this_interpreter(kernel_name, monkeypatch):
    monkeypatch.setenv("OPTSCHED_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, sys; print(sys.executable); print(os.environ['OPTSCHED_FAST'])")])
    out = _execute(book, kernel_name).cells[0].outputs[0]["text"].split()
    assert Path(out[0]).resolve() == Path(sys.executable).resolve()
    assert out[1] == "1"


def test_heavy_notebooks_exist():
    assert HEAVY <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("path", list(_params()))
def test_notebook_executes_in_fast_mode(path, kernel_name, monkeypatch):
    """The notebook runs without an error and prints its verdict: executed here, or read from
    the copy ``make docs`` (or an earlier test) executed from exactly the current sources."""
    ex = _executor()
    copy = _docs_copy(path)
    if ex.stale(path, copy):
        monkeypatch.setenv("OPTSCHED_FAST", "1")
        monkeypatch.setenv("MPLBACKEND", "Agg")
        monkeypatch.delenv("OPTSCHED_TIME_LIMIT", raising=False)
        t0 = time.perf_counter()
        done = _execute(jupytext.read(path), kernel_name)
        print(f"{path.name}: executed in {time.perf_counter() - t0:.1f} s")
        if not _errors(done):  # an executed copy is what make docs renders: only a clean one
            copy.parent.mkdir(parents=True, exist_ok=True)
            ex.write_copy(done, path, copy)
        _check_outputs(done, path)
    else:
        print(f"{path.name}: checked the copy executed from the current sources, {copy}")
        _check_outputs(nbformat.read(copy, as_version=4), path)


def _errors(done) -> list:
    return [o for c in done.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.get("output_type") == "error"]


def _check_outputs(done, path: Path) -> None:
    errors = _errors(done)
    assert not errors, f"{path.name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    text = json.dumps([c.get("outputs", []) for c in done.cells if c.cell_type == "code"])
    assert "FAST = True" in text
    # the computed verdict is displayed as markdown by every experiment notebook
    if "The trace is missing" in text:  # notebooks 05, 07 without ../shared/data: no verdict
        pytest.skip(f"{path.name}: ../shared/data is missing, so there is no verdict to check")
    if not path.name.startswith("01"):
        assert "agree" in text.lower(), f"{path.name}: no computed verdict"
