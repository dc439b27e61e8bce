"""Helpers shared by the CLI commands: loading inputs, printing tables and JSON."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputFileError
from ..instance import Instance
from ..schedule import Schedule


def load_instance(path: str) -> Instance:
    """Load an instance file, or an instance shipped with optsched by name."""
    p = Path(path)
    if not p.exists():
        from ..data import embedded_instance_path

        shipped = embedded_instance_path(path)
        if shipped is None:
            raise InputFileError(f"{path}: no such instance file (nor a shipped instance of that name)")
        p = shipped
    return Instance.load(p)


def load_schedule(path: str) -> Schedule:
    return Schedule.load(path)


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1, default=_default)
    sys.stdout.write("\n")


def _default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not math.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def fmt(v: Any, digits: int = 6) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.{digits}g}"
    return str(v)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain aligned text table."""
    rows = [[fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(r, widths)))
    return "\n".join(out)


def _numeric(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False
