"""``optsched plot``: a Gantt chart of a schedule file."""

from __future__ import annotations

from plot_checks import png_ok

from optsched.cli import main
from optsched.schedule import Schedule


def test_cli_plot(evict_demo, tmp_path, capsys):
    inst, s, _ = evict_demo
    inst.save(tmp_path / "i.json")
    s.save(tmp_path / "s.json")
    out = tmp_path / "out" / "g.png"
    assert main(["plot", str(tmp_path / "i.json"), str(tmp_path / "s.json"), "-o", str(out),
                 "--title", "T", "--max-rows", "10"]) == 0
    png_ok(out)
    assert "written" in capsys.readouterr().out
    bad = Schedule.from_batches([([("a", 4), ("b", 3)], []), ([("a", 1), ("b", 1)], [])])
    bad.save(tmp_path / "bad.json")
    assert main(["plot", str(tmp_path / "i.json"), str(tmp_path / "bad.json"), "-o", str(out)]) == 0
    assert "infeasible" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "nope.json"), str(tmp_path / "s.json"), "-o", str(out)]) == 2


def test_cli_plot_timeline_and_window(evict_demo, tmp_path, capsys):
    inst, s, _ = evict_demo
    inst.save(tmp_path / "i.json")
    s.save(tmp_path / "s.json")
    out = tmp_path / "t.png"
    args = ["plot", str(tmp_path / "i.json"), str(tmp_path / "s.json"), "-o", str(out)]
    assert main(args + ["--timeline", "--window", "0:4", "--bins", "8"]) == 0
    png_ok(out)
    assert main(args + ["--window", "4:1"]) == 2
    assert "--window" in capsys.readouterr().err
    assert main(args + ["--timeline", "--bins", "0"]) == 2
