"""Execute the Jupytext notebooks of ``notebooks/`` in FAST mode into ``docs/notebooks/*.ipynb``
(git-ignored), so that the docs site renders them WITH their outputs (``make docs``).

A notebook is re-executed only when its ``.py`` (or ``notebooks/nbsetup.py``) is newer than its
executed copy, so a second ``make docs`` with unchanged notebooks executes nothing. The kernel is
this interpreter (a kernel spec written into a temporary ``JUPYTER_PATH``, as the notebook test
does), run with ``OPTSCHED_FAST=1`` and ``MPLBACKEND=Agg``. Prints one line per notebook with
its wall and the total on stderr; exits 1 naming the notebook and cell when one fails.

    python docs/execute_notebooks.py            # only the stale ones
    python docs/execute_notebooks.py --force    # all of them
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
OUT_DIR = ROOT / "docs" / "notebooks"
KERNEL = "optsched-docs-python"


def _kernel_dir() -> str:
    """A temporary Jupyter data dir whose one kernel spec runs this interpreter in FAST mode."""
    d = Path(tempfile.mkdtemp(prefix="optsched-docs-kernel-"))
    spec = d / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "optsched docs", "language": "python",
        "env": {"OPTSCHED_FAST": "1", "MPLBACKEND": "Agg"},
    }))
    return str(d)


def stale(src: Path, out: Path) -> bool:
    """True when ``out`` is missing or older than the notebook or the shared setup module."""
    if not out.exists():
        return True
    newest = max(src.stat().st_mtime, (NB_DIR / "nbsetup.py").stat().st_mtime)
    return out.stat().st_mtime < newest


def execute(src: Path, out: Path) -> None:
    """Run one notebook top to bottom and write it with its outputs; raise on a failing cell."""
    import jupytext
    from nbclient import NotebookClient

    book = jupytext.read(src)
    NotebookClient(book, timeout=600, kernel_name=KERNEL,
                   resources={"metadata": {"path": str(NB_DIR)}}).execute()
    tmp = out.with_name(f".{out.name}")  # written whole, then renamed: no half-written copy
    jupytext.write(book, tmp, fmt="ipynb")
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="re-execute every notebook")
    args = ap.parse_args(argv)
    os.environ["JUPYTER_PATH"] = _kernel_dir() + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    os.environ.setdefault("OPTSCHED_FAST", "1")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    for src in sorted(NB_DIR.glob("[0-9]*.py")):
        out = OUT_DIR / f"{src.stem}.ipynb"
        if not (args.force or stale(src, out)):
            continue
        t0 = time.perf_counter()
        try:
            execute(src, out)
        except Exception as e:  # nbclient's CellExecutionError names the cell and its error
            print(f"docs: notebook {src.name} failed: {str(e).splitlines()[0]}", file=sys.stderr)
            return 1
        print(f"docs: executed {src.name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(f"docs: notebooks up to date ({time.perf_counter() - t_all:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
