"""Progress lines on stderr for commands that may run longer than a few seconds.

The CLI turns reporting on (``--quiet`` turns it off); library calls are silent unless a
caller enables it. :func:`phase` writes one line per phase, ``[optsched solve  12.3 s]
warm start: simulating vllm``, in user units (seconds, tokens), whether or not stderr is a
terminal, so a log of a non-interactive run shows where its time went. The solver's own
improvements are reported by :class:`optsched.milp.progress.Progress`.

The numbers in those lines, in the commands' tables and in their verdicts read the same way:
:func:`fmt` (a table cell), :func:`value` (a time in user units), :func:`pct` (a ratio), and
:func:`table` lays cells out as plain aligned text.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

#: phase lines are held back for this many seconds of a command (and dropped if it ends
#: sooner): a quick command, or a bad input's one-line error, prints no progress
QUIET_SECONDS = 2.0

_state: dict = {"on": False, "t0": time.perf_counter(), "who": "optsched", "stream": None,
                "t_main": time.perf_counter(), "held": []}


def process_age() -> float:
    """Seconds since this process started (interpreter start-up and imports included), from
    ``/proc``; 0 where that is not available. A command's ``--time-limit`` counts from here,
    since the wall time a user measures does."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])

        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return age if 0.0 <= age < 3600.0 else 0.0


def enable(on: bool = True, command: str | None = None, stream: TextIO | None = None,
           from_process_start: bool = False) -> None:
    """Report phases from now on (``on``); the clock (:func:`elapsed`, the commands' budget)
    counts from now, or from the process start with ``from_process_start``."""
    age = process_age() if from_process_start else 0.0
    _state.update(on=bool(on), t0=time.perf_counter() - age, t_main=time.perf_counter(),
                  held=[],
                  who=f"optsched {command}" if command else "optsched", stream=stream)


def enabled() -> bool:
    """Whether phase lines are being written."""
    return bool(_state["on"])


def elapsed() -> float:
    """Seconds since the last :func:`enable` (or the process start it counted from)."""
    return time.perf_counter() - float(_state["t0"])


def phase(text: str) -> None:
    """One progress line on stderr (when enabled); held back during the first
    :data:`QUIET_SECONDS` of the command, then written with the lines held."""
    if not _state["on"]:
        return
    line = f"[{_state['who']} {elapsed():6.1f} s] {text}\n"
    if time.perf_counter() - _state["t_main"] < QUIET_SECONDS:
        _state["held"].append(line)
        return
    stream = _state["stream"] or sys.stderr
    try:
        stream.write("".join(_state["held"]) + line)
        stream.flush()
    except (OSError, ValueError):
        _state["on"] = False
    _state["held"] = []


# -- numbers in words: table cells, phase lines, verdicts ---------------------------------------
def fmt(v: Any, digits: int = 6) -> str:
    """A table cell: ``-`` for None and non-finite numbers, ``digits`` significant digits."""
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.{digits}g}"
    return str(v)


def unit(instance: Any) -> str:
    """The unit of times: seconds under a cost model in seconds, else the model's units."""
    return "time units" if instance.cost_model.kind == "unit" else "s"


def value(v: float, instance: Any) -> str:
    """``v`` in user units: ``12.3 s`` (or ``12 time units`` under unit cost)."""
    return f"{v:.4g} {unit(instance)}"


def pct(x: float) -> str:
    """A ratio minus one as a percentage: ``0.42`` -> ``42%``."""
    return f"{100 * x:.3g}%"


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
