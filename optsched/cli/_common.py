"""Helpers shared by the CLI commands: loading inputs, printing tables and JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..cost import UnitCost
from ..errors import InputFileError
from ..instance import Instance
from ..progress import fmt, table
from ..schedule import Schedule, instance_check
from ..solve_types import finite_or_none

__all__ = ["checked_schedule", "command_load", "cost_name", "fmt", "image_file", "load_instance",
           "load_schedule", "output_dir", "output_file", "print_json", "print_violations",
           "say_load", "seed_arg", "table"]


def cost_name(inst: Instance) -> str:
    """The cost model's preset name, ``unit``, or its kind (``info``, ``generate``)."""
    cm = inst.cost_model
    if isinstance(cm, UnitCost):
        return "unit"
    return getattr(cm, "preset", None) or cm.to_dict().get("kind", "?")


def seed_arg(text: str) -> int:
    """argparse type of ``--seed``: an integer >= 0 (numpy's generators take no negative seed)."""

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {v}")
    return v


def load_instance(path: str) -> Instance:
    """Load an instance file, or an instance shipped with optsched by name
    (:func:`optsched.data.load_instance`, also :func:`optsched.load`)."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..data import load_instance as load

    inst = load(path)
    warn_units(inst)
    return inst


def warn_units(inst: Instance) -> None:
    """Units that look off by 1,000 (:mod:`optsched.workloads.units`), one line each on
    stderr."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..workloads.units import unit_warnings

    for w in unit_warnings(inst):
        print(f"optsched: warning: {w}", file=sys.stderr)


def say_load(load: Any, command: str) -> dict[str, Any]:
    """Print an :class:`~optsched.serving.load.OfferedLoad` on stderr (one line, and the
    overload warning when it is overloaded: docs/semantics.md section 4, offered load);
    return its JSON for the command's output."""
    print(f"optsched {command}: {load.describe()}", file=sys.stderr)
    warning = load.warning()
    if warning:
        print(f"optsched {command}: warning: {warning}", file=sys.stderr)
    return load.to_dict()


def command_load(inst: Instance, time_limit: float | None = None) -> Any:
    """The offered load of ``inst``, its references run within 5% of ``time_limit``
    (seconds; None: no limit) so that a command's --time-limit still holds."""
    # lazy: the load runs reference policies (start-up time)
    from ..serving.load import load_deadline, offered_load

    return offered_load(inst, deadline=load_deadline(time_limit))


def load_schedule(path: str) -> Schedule:
    return Schedule.load(path)


def checked_schedule(path: str, inst: Instance, command: str, label: str | None = None
                     ) -> tuple[Schedule, dict[str, Any]]:
    """Load a schedule file and check that it was written for ``inst`` (its instance name and
    content hash, :func:`optsched.schedule.instance_check`); a schedule of another instance is
    still replayed, with a warning on stderr. Returns the schedule and the check (for JSON)."""
    sched = Schedule.load(path)
    check = instance_check(sched, inst)
    if check["matches"] is False:
        where = f"schedule {label!r} ({path})" if label else path
        print(f"optsched {command}: warning: {where}: {check['message']}", file=sys.stderr)
    return sched, check


def output_file(path: str | None, option: str = "-o", make_dirs: bool = False) -> str | None:
    """Check an output file before any work is done: it must not be a directory, and its
    directory must exist (an error after a long solve would lose the result). With
    ``make_dirs`` missing directories are fine (the writer creates them), but not a file in
    their place."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise InputFileError(f"{option} {path}: is a directory; give a file name")
    parent = p.parent
    while make_dirs and not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise InputFileError(f"{option} {path}: {str(parent)!r} {what}")
    return path


def output_dir(path: str | None, option: str = "-o") -> str | None:
    """Check an output directory before any work is done: the writer creates it (with its
    parents) when missing, so it must not be an existing file, nor have a file in place of
    a parent (``/dev/null/x``: an OSError after the work, read as an internal error)."""
    if path is None:
        return None
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputFileError(f"{option} {path}: exists and is not a directory; give a directory")
    parent = p
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise InputFileError(f"{option} {path}: {str(parent)!r} is not a directory")
    return path


def image_file(path: str, option: str = "-o") -> str:
    """An image path for matplotlib: ``.png`` is added when there is no suffix; an unknown
    format is refused before drawing; missing directories are created when it is saved."""
    # lazy: matplotlib loads only when a chart is drawn (start-up time)
    from matplotlib.figure import Figure

    p = Path(path)
    if not p.suffix:
        p = p.with_suffix(".png")
    fmt = p.suffix[1:].lower()
    known = Figure().canvas.get_supported_filetypes()
    if fmt not in known:
        raise InputFileError(f"{option} {path}: image format {fmt!r} is not supported; "
                             f"use one of {', '.join('.' + k for k in sorted(known))}")
    output_file(str(p), option, make_dirs=True)
    return str(p)


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1, default=_default)
    sys.stdout.write("\n")


def _default(o):
    # lazy: numpy loads only for the commands that need it (start-up time)
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return finite_or_none(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


#: violation lines ``validate`` and ``evaluate`` print before "... and N more" (--all: every one)
VIOLATION_LINES = 20


def print_violations(ev, show_all: bool = False) -> None:
    """The violations of an infeasible evaluation (``validate``, ``evaluate``): the count per
    code first, most frequent first, then the first :data:`VIOLATION_LINES` violations one a
    line (every one the evaluator kept with ``show_all``)."""
    counts = sorted(ev.violation_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    total = sum(n for _, n in counts)
    print(f"infeasible: {total} violation(s): "
          + ", ".join(f"{code} x {n}" for code, n in counts))
    lines = list(ev.violations) if show_all else _sample(ev.violations, VIOLATION_LINES)
    for v in lines:
        print(f"  {v}")
    if len(lines) < total:
        more = "" if show_all or len(ev.violations) <= len(lines) else " (--all lists them)"
        print(f"  ... and {total - len(lines)} more{more}")


def _sample(violations, n: int) -> list:
    """The first violation of every code, then the earliest others, ``n`` in all at most
    (every code when there are more codes than ``n``), in the evaluator's order: a rare
    code is not hidden behind thousands of a frequent one."""
    first: dict[str, int] = {}
    for k, v in enumerate(violations):
        first.setdefault(v.code, k)
    keep = set(first.values())
    for k in range(len(violations)):
        if len(keep) >= n:
            break
        keep.add(k)
    return [violations[k] for k in sorted(keep)]


def add_all_flag(p) -> None:
    """``--all`` for the commands that print violations."""
    p.add_argument("--all", action="store_true", dest="all_violations",
                   help=f"list every violation (default: the count per code, then the first "
                        f"{VIOLATION_LINES})")
