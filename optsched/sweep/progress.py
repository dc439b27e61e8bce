"""Progress of a sweep on stderr: cells done, failed, rate and ETA.

On a terminal one line is redrawn in place; otherwise (a log file, CI) a line is printed at
most every ``every`` seconds and at the end.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _duration(s: float) -> str:
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    def __init__(self, name: str, total: int, skipped: int = 0, *, stream: TextIO | None = None,
                 enabled: bool = True, every: float = 5.0):
        self.name, self.total, self.skipped = name, total, skipped
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every
        self.done = self.failed = 0
        self.t0 = time.perf_counter()
        self._last = -1e9
        self._shown = -1  # cells done when a line was last printed (not on a terminal)

    def line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = self.total - self.done
        eta = _duration(left / rate) if rate > 0 and left else ("-" if left else "0s")
        skip = f", {self.skipped} already done" if self.skipped else ""
        return (f"sweep {self.name}: {self.done}/{self.total} cells ({self.failed} failed{skip}), "
                f"{rate:.2f} cells/s, elapsed {_duration(elapsed)}, ETA {eta}")

    def update(self, failed: bool) -> None:
        self.done += 1
        self.failed += int(failed)
        self._show(final=False)

    def _show(self, final: bool) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.tty:
            self.stream.write("\r" + self.line() + ("\n" if final else ""))
            self.stream.flush()
        elif (final and self._shown != self.done) or (not final and now - self._last >= self.every):
            self._last, self._shown = now, self.done
            print(self.line(), file=self.stream, flush=True)

    def finish(self) -> None:
        self._show(final=True)
