"""Solver progress on stderr (incumbent, bound, gap, nodes, elapsed), in user units.

On a terminal one live line is redrawn; otherwise (a log file, a pipe) a line is written for
every new incumbent and at least every :data:`HEARTBEAT_SECONDS`. Values
are divided by the model's ``user_scale`` (model units per second) and carry its
``user_unit``, so a user reads seconds, not the formulation's internal units."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from ..progress import enabled as phases_on
from ..solve_types import relative_gap

#: most seconds between two progress lines when stderr is not a terminal
HEARTBEAT_SECONDS = 5.0


class Progress:
    """Backends call :meth:`update` from callbacks (any thread); it redraws at most every
    ``interval`` seconds when ``enabled``. Every call that changes the incumbent or the bound
    is also recorded in :attr:`history` as ``(elapsed, incumbent, bound)`` (for solver-progress
    plots), whether or not the line is displayed; ``tracking`` says a backend should report."""

    def __init__(self, solver: str, enabled: bool, stream: TextIO | None = None,
                 interval: float = 0.25, scale: float = 1.0, unit: str = "",
                 lines: bool = False):
        self.solver = solver
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        #: model units per user unit, and the user unit ("s"), for display only
        self.scale = scale if scale > 0 else 1.0
        self.unit = unit
        #: one line per new incumbent and every HEARTBEAT_SECONDS (not a terminal)
        self.lines = lines
        self.interval = interval
        self._lock = threading.Lock()
        self._last_draw = 0.0
        self._width = 0
        self._drawn = False
        self._start = time.monotonic()
        self.incumbent: float | None = None
        self.bound: float | None = None
        self.nodes: int | None = None
        self.elapsed: float | None = None
        self.updates = 0
        self.history: list[tuple[float, float | None, float | None]] = []
        self._tracking = True

    @property
    def tracking(self) -> bool:
        """True while updates are wanted (for display or for the history)."""
        return self.enabled or self._tracking

    def update(self, incumbent: float | None = None, bound: float | None = None,
               nodes: int | None = None, elapsed: float | None = None,
               force: bool = False) -> None:
        """Record new figures (None keeps the previous one) and maybe redraw."""
        if not self.tracking:
            return
        with self._lock:
            before = (self.incumbent, self.bound)
            self.updates += 1
            if incumbent is not None and abs(incumbent) < 1e99:
                self.incumbent = float(incumbent)
            if bound is not None and abs(bound) < 1e99:
                self.bound = float(bound)
            if nodes is not None:
                self.nodes = int(nodes)
            self.elapsed = elapsed if elapsed is not None else time.monotonic() - self._start
            if (self.incumbent, self.bound) != before:
                self.history.append((float(self.elapsed), self.incumbent, self.bound))
            if not self.enabled:
                return
            now = time.monotonic()
            if self.lines:
                if force or self.incumbent != before[0] \
                        or now - self._last_draw >= HEARTBEAT_SECONDS:
                    self._last_draw = now
                    self._write_line()
                return
            if force or now - self._last_draw >= self.interval:
                self._last_draw = now
                self._draw()

    def line(self) -> str:
        """The text of the progress line as it stands."""

        unit = f" {self.unit}" if self.unit else ""

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v / self.scale:.8g}{unit}"

        gap = relative_gap(self.incumbent, self.bound)
        gap_s = "-" if gap is None else f"{100 * gap:.2f}%"
        nodes = "" if self.nodes is None else f"  nodes {self.nodes}"
        el = 0.0 if self.elapsed is None else self.elapsed
        return (f"[{self.solver}] incumbent {fmt(self.incumbent)}  bound {fmt(self.bound)}  "
                f"gap {gap_s}{nodes}  {el:.1f}s")

    def _write_line(self) -> None:
        try:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False

    def _draw(self) -> None:
        text = self.line()
        pad = max(0, self._width - len(text))
        self._width = len(text)
        try:
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self._drawn = True
        except (OSError, ValueError):
            self.enabled = False

    def close(self) -> None:
        """Draw the final figures and end the line."""
        self._tracking = False
        if not self.enabled:
            return
        if self.lines:
            if self.updates:
                self._write_line()
            self.enabled = False
            return
        with self._lock:
            if self.updates:
                self._draw()
            if self._drawn:
                try:
                    self.stream.write("\n")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
            self.enabled = False


def make_progress(solver: str, wanted: bool | None, stream: TextIO | None = None,
                  scale: float = 1.0, unit: str = "") -> Progress:
    """A :class:`Progress` that is on when ``wanted`` is True, or when it is None and the
    stream (stderr by default) is a terminal or a command reports its phases
    (:mod:`optsched.progress`); a live line on a terminal, lines otherwise."""

    s = stream if stream is not None else sys.stderr
    try:
        tty = bool(s.isatty())
    except (AttributeError, ValueError):
        tty = False
    if wanted is None:
        wanted = tty or phases_on()
    return Progress(solver, bool(wanted), s, scale=scale, unit=unit, lines=not tty)
