"""``optsched bound``: the refusals of its command line (the rungs themselves are tested in
tests/bounds/)."""

from __future__ import annotations

import pytest
from cli_helpers import one_line_error


@pytest.mark.parametrize("method", ["best", "combinatorial", "request", "exact"])
def test_bound_refuses_prefix_ids_in_one_line(capsys, method):
    """No rung models prefix reuse yet (docs/semantics.md section 6): a reuse-blind bound is
    not a lower bound when hits skip prefill work, so the command exits 2 with one line."""
    one_line_error(capsys, "bound", "shared-prefix", "--method", method,
                   match="prefix reuse", stdout_empty=True)
