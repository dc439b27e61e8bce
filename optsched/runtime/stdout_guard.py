"""Standard output belongs to optsched: what solver libraries print at C level goes elsewhere.

Solver libraries write banners and logs straight to file descriptor 1 from C/C++ (highspy >= 1.16
prints ``Running HiGHS ... Copyright`` when the first ``Highs`` object is built, before any
option can be set), which Python's ``sys.stdout`` neither sees nor can stop. A ``--json``
command must print exactly one JSON document there, and a table must not have a banner in it.

* :func:`silenced_c_stdout` sends file descriptor 1 to the null device (for constructors whose
  only output is a banner, e.g. :func:`optsched.milp.backends.highs.new_highs`);
* :func:`c_stdout_to_stderr` sends file descriptor 1 to file descriptor 2 (around a solve: a
  solver's log is still seen, on stderr);
* :func:`stdout_for_python_only` is the command line's guard: for the whole command, Python's
  ``sys.stdout`` keeps writing the real standard output while anything else written on file
  descriptor 1 (C libraries, child processes inheriting it) goes to stderr.

The redirections are counted, so they nest and several threads may hold them at once: the
first to enter moves descriptor 1, the last to leave puts it back.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import sys
import threading
from collections.abc import Iterator

_lock = threading.RLock()
_depth = 0  # holders of c_stdout_to_stderr
_saved_fd: int | None = None  # the real descriptor 1 while it points at stderr


def _flush() -> None:
    """Flush Python's and C's buffers so nothing written before a switch lands after it."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def c_stdout_to_stderr() -> Iterator[int | None]:
    """Within the block, file descriptor 1 is a copy of descriptor 2. Yields a descriptor of the
    real standard output (None where descriptors cannot be moved); the caller must not close it."""
    global _depth, _saved_fd
    with _lock:
        if _depth == 0:
            _flush()
            try:
                _saved_fd = os.dup(1)
                os.dup2(2, 1)
            except OSError:  # no descriptor 1 or 2 (e.g. closed by a daemon): nothing to move
                if _saved_fd is not None:
                    os.close(_saved_fd)
                _saved_fd = None
        _depth += 1
        saved = _saved_fd
    try:
        yield saved
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved_fd is not None:
                _flush()
                os.dup2(_saved_fd, 1)
                os.close(_saved_fd)
                _saved_fd = None


@contextlib.contextmanager
def silenced_c_stdout() -> Iterator[None]:
    """Within the block, file descriptor 1 points at the null device. Holds the module's lock
    throughout, so keep the block short (a constructor)."""
    with _lock:
        _flush()
        try:
            saved = os.dup(1)
        except OSError:
            yield
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, 1)
            finally:
                os.close(null)
            yield
        finally:
            _flush()
            os.dup2(saved, 1)
            os.close(saved)


def _writes_fd1(stream) -> bool:
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False


@contextlib.contextmanager
def stdout_for_python_only() -> Iterator[None]:
    """Within the block, ``print`` (``sys.stdout``) still reaches the real standard output while
    everything else written on file descriptor 1 goes to stderr. When ``sys.stdout`` is not
    descriptor 1 (a test capturing it), it is left as it is."""
    own = _writes_fd1(sys.stdout)
    with c_stdout_to_stderr() as real:
        if not own or real is None:
            yield
            return
        old = sys.stdout
        sys.stdout = open(os.dup(real), "w", encoding=old.encoding, errors=old.errors,
                          buffering=1 if old.line_buffering else -1, closefd=True)
        try:
            yield
        finally:
            new, sys.stdout = sys.stdout, old
            with contextlib.suppress(BrokenPipeError):
                new.flush()
            with contextlib.suppress(OSError):
                new.close()
