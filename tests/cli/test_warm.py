"""``python -m optsched.cli.warm`` (run by ``make test`` before the suite) runs every kernel."""

from optsched.cli.warm import warm
from optsched.policies.fast import HAVE_NUMBA


def test_warm_runs_the_kernels():
    took = warm()
    assert took >= 0.0
    if HAVE_NUMBA:
        assert took > 0.0  # it simulated and replayed, not returned at once
