"""Live one-line progress display (incumbent, bound, gap, nodes, elapsed) on stderr."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from ..solve_types import relative_gap


class Progress:
    """Backends call :meth:`update` from callbacks (any thread); it redraws at most every
    ``interval`` seconds when ``enabled``. Every call that changes the incumbent or the bound
    is also recorded in :attr:`history` as ``(elapsed, incumbent, bound)`` (for solver-progress
    plots), whether or not the line is displayed; ``tracking`` says a backend should report."""

    def __init__(self, solver: str, enabled: bool, stream: TextIO | None = None,
                 interval: float = 0.25):
        self.solver = solver
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
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
            if force or now - self._last_draw >= self.interval:
                self._last_draw = now
                self._draw()

    def line(self) -> str:
        """The text of the progress line as it stands."""

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:.8g}"

        gap = relative_gap(self.incumbent, self.bound)
        gap_s = "-" if gap is None else f"{100 * gap:.2f}%"
        nodes = "" if self.nodes is None else f"  nodes {self.nodes}"
        el = 0.0 if self.elapsed is None else self.elapsed
        return (f"[{self.solver}] incumbent {fmt(self.incumbent)}  bound {fmt(self.bound)}  "
                f"gap {gap_s}{nodes}  {el:.1f}s")

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


def make_progress(solver: str, wanted: bool | None, stream: TextIO | None = None) -> Progress:
    """A :class:`Progress` that is on when ``wanted`` is True, or when it is None and the
    stream (stderr by default) is a terminal."""
    s = stream if stream is not None else sys.stderr
    if wanted is None:
        try:
            wanted = bool(s.isatty())
        except (AttributeError, ValueError):
            wanted = False
    return Progress(solver, bool(wanted), s)
