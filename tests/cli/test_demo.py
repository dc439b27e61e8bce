"""``optsched demo``: bad options are refused before any output; the demo runs."""

from __future__ import annotations

import json

import pytest
from cli_helpers import fuzz_check, fuzz_run, fuzz_write


@pytest.mark.parametrize("extra", [["--time-limit", "-1"], ["--time-limit", "nan"],
                                   ["--time-limit", "inf"], ["--time-limit", "0"],
                                   ["--time-limit", "x"], ["-o", "{file}"],
                                   ["-o", "{file}/sub"], ["-o", "/dev/null/x"]])
def test_demo_bad_args(tmp_path, capsys, extra):
    """Before: a bad --time-limit was refused only after the compare table was printed (exit
    2 with output on stdout), and ``-o`` under a file was an internal error (exit 3)."""
    afile = fuzz_write(tmp_path / "afile", "x")
    argv = ["demo", *[x.format(file=afile) for x in extra]]
    rc, out, err = fuzz_run(capsys, argv)
    fuzz_check(rc, out, err, argv)
    assert rc == 2 and out == "", (argv, rc, out, err)


def test_demo_runs(tmp_path, capsys):
    """The demo itself: exit 0, its table on stdout, the report written, no traceback."""
    argv = ["demo", "-o", str(tmp_path / "d"), "--time-limit", "20"]
    rc, out, err = fuzz_run(capsys, argv)
    fuzz_check(rc, out, err, argv)
    assert rc == 0 and "proof by example" in out, err
    assert json.loads((tmp_path / "d" / "report.json").read_text())["rows"]
