"""``optsched bound``: its help and exit codes."""

from __future__ import annotations

import pytest

from optsched.bounds import bound_methods
from optsched.cli import build_parser


def test_help_lists_every_registered_method(capsys):
    """Before: ``bound --help`` named a hand-written subset of the rungs and omitted
    ``events``; the list is now read from the registry when the help is printed."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bound", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = text.split("registered: ", 1)[1]
    for name in bound_methods():
        assert name in listed, name
    assert "events" in listed
