"""Execute the Jupytext notebooks of ``notebooks/`` in FAST mode into ``docs/notebooks/*.ipynb``
(git-ignored), so that the docs site renders them WITH their outputs (``make docs``).

A notebook is re-executed only when its executed copy is missing or was made from other sources:
each copy carries a *source stamp* (a hash of the notebook, ``notebooks/nbsetup.py`` and every
module of ``optsched/``) in its metadata, so a second ``make docs`` with unchanged sources executes
nothing, and a copy made before a change of the library is never taken for a current one. The
notebook test (``tests/project/test_notebooks.py``) writes and reads the same stamped copies, so
in CI (``make test``, ``make docs``, ``make test-slow``) each notebook runs once. The kernel is
this interpreter (a kernel spec written into a temporary ``JUPYTER_PATH``, as the notebook test
does), run with ``OPTSCHED_FAST=1`` and ``MPLBACKEND=Agg``; ``--jobs`` notebooks run at once (each
its own kernel). Prints one line per notebook with its wall and the total on stderr; exits 1
naming the notebook and cell when one fails.

    python docs/execute_notebooks.py            # only the stale ones, two at a time
    python docs/execute_notebooks.py --force    # all of them
    python docs/execute_notebooks.py --jobs 1   # one at a time
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
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


def source_stamp(src: Path) -> str:
    """A hash of what an executed copy of ``src`` depends on: the notebook, the shared setup
    module and every module of the library (their paths and bytes)."""
    h = hashlib.sha256()
    for f in [src, NB_DIR / "nbsetup.py", *sorted((ROOT / "optsched").rglob("*.py"))]:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def stamp_of(out: Path) -> str | None:
    """The source stamp an executed copy was made from (None: missing, unreadable, unstamped)."""
    try:
        meta = json.loads(out.read_text())["metadata"]
        return meta["optsched"]["source_stamp"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stale(src: Path, out: Path) -> bool:
    """True when ``out`` is missing or was not made from ``src``'s current sources."""
    return stamp_of(out) != source_stamp(src)


def write_copy(book, src: Path, out: Path) -> None:
    """Write an executed notebook with its source stamp, whole and then renamed, so that a
    concurrent reader never sees half a file."""
    import nbformat

    book.metadata["optsched"] = {"source_stamp": source_stamp(src)}
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    nbformat.write(book, tmp)
    tmp.replace(out)


def execute(src: Path, out: Path) -> float:
    """Run one notebook top to bottom and write it with its outputs; raise on a failing cell.
    Returns the wall seconds it took."""
    import jupytext
    from nbclient import NotebookClient

    t0 = time.perf_counter()
    book = jupytext.read(src)
    NotebookClient(book, timeout=600, kernel_name=KERNEL,
                   resources={"metadata": {"path": str(NB_DIR)}}).execute()
    write_copy(book, src, out)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="re-execute every notebook")
    ap.add_argument("--jobs", type=int, default=2, help="notebooks executed at once (default 2)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    os.environ["JUPYTER_PATH"] = _kernel_dir() + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    os.environ.setdefault("OPTSCHED_FAST", "1")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    todo = [src for src in sorted(NB_DIR.glob("[0-9]*.py"))
            if args.force or stale(src, OUT_DIR / f"{src.stem}.ipynb")]
    failed = 0
    with ProcessPoolExecutor(max_workers=min(args.jobs, max(len(todo), 1))) as pool:
        runs = {src: pool.submit(execute, src, OUT_DIR / f"{src.stem}.ipynb") for src in todo}
        for src, run in runs.items():
            try:
                print(f"docs: executed {src.name} in {run.result():.1f} s", file=sys.stderr)
            except Exception as e:  # nbclient's CellExecutionError names the cell and its error
                print(f"docs: notebook {src.name} failed: {str(e).splitlines()[0]}", file=sys.stderr)
                failed += 1
    if failed:
        return 1
    print(f"docs: notebooks up to date ({time.perf_counter() - t_all:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
