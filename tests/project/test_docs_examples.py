"""The examples of the documentation run as the pages show them."""

from __future__ import annotations

import json

from cli_helpers import run_cli
from paths import GOOD, REPO


# -- 5. the policy API page ----------------------------------------------------------------
def test_the_worked_example_of_docs_policies_runs(tmp_path, capsys):
    """docs/policies.md's example, cut from the page, runs from a file as --policy x.py:Class
    and its schedule is feasible (the evaluator's verdict)."""
    page = (REPO / "docs" / "policies.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    f = tmp_path / "shortest.py"
    f.write_text(code)
    rc, out, err = run_cli(capsys, "simulate", GOOD, "--policy", f"{f}:ShortestPromptFirst",
                           "--param", "chunk=1", "--json")
    assert rc == 0, err
    assert json.loads(out)["evaluation"]["feasible"] is True
    # the one Policy subclass in the file is picked without :Class
    rc, out, err = run_cli(capsys, "simulate", GOOD, "--policy", f, "--json")
    assert rc == 0, err
