"""Running ``optsched`` in-process in a test and checking its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from paths import GOOD

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


def one_line_error_no_stdout(capsys, *argv, match: str) -> str:
    """:func:`one_line_error` with nothing printed on stdout either."""
    return one_line_error(capsys, *argv, match=match, stdout_empty=True)


def other_arrivals(tmp_path) -> Path:
    d = json.loads(GOOD.read_text())
    d["requests"][1]["arrival"] = 2.0
    f = tmp_path / "other.json"
    f.write_text(json.dumps(d))
    return f


USER_POLICIES = '''
from optsched.policies import Plan, Policy

class Fractional(Policy):
    def bind(self, view):
        super().bind(view)
        self.live = []
    def on_arrivals(self, idx):
        self.live += idx
    def next_batch(self):
        v = self.view
        return Plan(self.live, [int(v.S[i] - v.m[i]) + 0.5 for i in self.live], []) if self.live else None
    def on_batch_end(self, plan, finished):
        self.live = [i for i in self.live if i not in set(finished.tolist())]

class NoHook(Policy):
    def next_batch(self):
        return None
'''


def fuzz_write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


def fuzz_run(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse: exit 2 with its usage message
        rc = int(e.code or 0)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def fuzz_check(rc: int, out: str, err: str, argv: list[str], solver: bool = False) -> None:
    where = f"{argv}: rc={rc}\n{err[-2000:]}"
    assert "Traceback" not in err and "internal error" not in err, where
    assert rc in ((0, 1, 2, 3) if solver else (0, 1, 2)), where
    if "--json" in argv and out.strip():
        json.loads(out)  # exactly one document (json.loads refuses trailing data)
    if rc == 2:
        assert out.strip() == "", where
        assert len(err.strip().splitlines()) >= 1, where
