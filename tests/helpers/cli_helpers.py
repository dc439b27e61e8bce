"""Running ``optsched`` in-process in a test and checking its one-line errors."""

from __future__ import annotations

from optsched.cli import main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``optsched ARGV`` -> (exit code, stdout, stderr)."""
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def err_of(capsys, *argv) -> tuple[int, str]:
    """``optsched ARGV`` -> (exit code, stderr stripped)."""
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    return rc, err


def one_line_error(capsys, *argv, match: str, stdout_empty: bool = False) -> str:
    """Exit 2 with one line on stderr that contains ``match`` and no traceback (and nothing on
    stdout when ``stdout_empty``); returns that line."""
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    if stdout_empty:
        assert out == "", out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], err
    return lines[0]
