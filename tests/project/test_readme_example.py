"""The README's Python example (its first ```python block, under "In Python") runs as written
and prints what the top-level API promises."""

import contextlib
import io
import re

from paths import REPO

README = REPO / "README.md"


def readme_example() -> str:
    """The first ```python block of README.md."""
    m = re.search(r"^```python\n(.*?)^```$", README.read_text(), re.S | re.M)
    assert m is not None, "README.md has no ```python block"
    return m.group(1)


def test_readme_example_is_five_lines():
    lines = [ln for ln in readme_example().splitlines() if ln.strip()]
    assert len(lines) == 5, lines


def test_readme_example_runs_and_the_optimum_sits_between_bound_and_policy():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_example(), str(README), "exec"), {"__name__": "readme"})
    policy, status, optimum, bound = out.getvalue().split()
    assert status == "optimal"
    # a bound never exceeds the optimum, and no policy beats it (house rules; 1e-9 relative:
    # the bound ladder's values carry the solver's tolerance)
    assert float(bound) <= float(optimum) * (1 + 1e-9) <= float(policy) * (1 + 1e-9)
