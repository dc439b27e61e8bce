"""``optsched bound``: its help, exit codes and refusals on the command line (the rungs
themselves are tested in tests/bounds/)."""

from __future__ import annotations

import pytest
from cli_helpers import one_line_error

from optsched.bounds import bound_methods
from optsched.cli import build_parser


def test_help_lists_every_registered_method(capsys):
    """Before: ``bound --help`` named a hand-written subset of the rungs and omitted
    ``events``; the list is now read from the registry when the help is printed."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bound", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    # argparse wraps lines at hyphens ("reuse-" / "srpt"): undo that before looking names up
    listed = text.split("registered: ", 1)[1].replace("- ", "-")
    for name in bound_methods():
        assert name in listed, name
    assert "events" in listed


def test_exact_out_of_time_exits_4_not_2(capsys):
    """Before: ``bound --method exact`` stopping at its time limit exited 2, the code of bad
    input. 40 requests in 1 s: no exact bound (the exhaustive search is for small instances,
    the flow model does not fit the second), so the answer is undecided: exit 4, one line."""
    from cli_helpers import run_cli
    from paths import N40

    rc, out, err = run_cli(capsys, "bound", N40, "--method", "exact", "--time-limit", 1)
    assert rc == 4, err
    assert out == "" and "no bound: exact:" in err and "Traceback" not in err
    rc, _, err = run_cli(capsys, "bound", N40, "--method", "no-such-rung")
    assert rc == 2, err  # bad input stays 2


@pytest.mark.parametrize("method", ["combinatorial", "request", "exact"])
def test_bound_refuses_prefix_ids_in_one_line(capsys, method):
    """A reuse-blind rung (docs/semantics.md section 6) is not a lower bound when hits skip
    prefill work, so the command exits 2 with one line."""
    one_line_error(capsys, "bound", "shared-prefix", "--method", method,
                   match="prefix reuse", stdout_empty=True)


def test_bound_best_on_prefix_ids_climbs_the_reuse_aware_rungs(capsys):
    """With block ids ``best`` climbs only the rungs valid with prefix reuse (bounds.md B19),
    names the one that gave the bound, and says which rungs it left out."""
    import json

    from cli_helpers import run_cli

    rc, out, err = run_cli(capsys, "bound", "shared-prefix", "--method", "best", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["method"] in ("reuse-request", "reuse-work")
    assert "not model prefix reuse" in err or any(
        "not model prefix reuse" in n for n in doc.get("notes", []))
