"""What every notebook in this folder sets up first, in one place.

* ``FAST`` -- ``OPTSCHED_FAST=1`` (the default) keeps each notebook within the test suite's
  budget; ``OPTSCHED_FAST=0`` runs the full settings that reproduce the README's figures;
* ``show`` / ``FIGDIR`` -- figures saved to ``notebooks/figures/`` (git-ignored) and displayed;
* ``pct``, ``describe``, ``md_table`` -- numbers in words (never "optimal" unless proven);
* ``trace_path`` -- where the shared traces are (``../shared/data`` beside the repository, or
  ``OPTSCHED_DATA``), with a visible note when they are missing.

Notebooks run with this folder as the working directory (the test suite does so too), so a
plain ``from nbsetup import ...`` finds this module.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from IPython.display import Image, Markdown, display

FAST = os.environ.get("OPTSCHED_FAST", "1") == "1"
FIGDIR = Path("figures")


def show(fig, name: str) -> None:
    """Save a figure to notebooks/figures/ and display it (works with any matplotlib backend)."""
    FIGDIR.mkdir(exist_ok=True)
    path = FIGDIR / f"{name}.png"
    fig.savefig(path, dpi=80)
    display(Image(filename=str(path)))


def pct(x, digits: int = 1) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.{digits}f}%"


def describe(rep) -> str:
    """A solve report in words: never call a number optimal unless the solver proved it."""
    if rep.status == "optimal":
        return f"optimal {rep.objective:.6g} (proven)"
    if rep.status == "feasible":
        return f"best found {rep.objective:.6g}, gap {pct(rep.gap)} (not proven optimal)"
    return f"{rep.status}" + (f" ({rep.message})" if rep.message else "")


def md_table(headers, rows) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def repo_root() -> Path:
    p = Path.cwd().resolve()
    for q in (p, *p.parents):
        if (q / "pyproject.toml").exists() and (q / "optsched").is_dir():
            return q
    return p.parent


def trace_path(name: str = "AzureLLMInferenceTrace_conv.csv") -> tuple[Path, bool]:
    """(path of a shared trace, whether it exists); says so in the notebook when it is missing."""
    data = Path(os.environ.get("OPTSCHED_DATA", repo_root().parent / "shared" / "data"))
    trace = data / "traces" / name
    if not trace.exists():
        display(Markdown(f"**The trace is missing** (`{trace}`): this notebook skips its experiments. "
                         "Put the shared data next to the repository (`../shared/data`) or set "
                         "`OPTSCHED_DATA`."))
    return trace, trace.exists()
