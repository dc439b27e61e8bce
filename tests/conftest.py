"""Shared pytest configuration: the ``--backends`` option selects MILP backends."""


ALL_BACKENDS = ("highs", "gurobi", "cbc", "cpsat")


def pytest_addoption(parser):
    parser.addoption(
        "--backends",
        default=",".join(ALL_BACKENDS),
        help="comma-separated MILP backends to run solver tests against "
        "(default: all; uninstalled or unlicensed ones are skipped with the reason)",
    )


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        names = [b for b in metafunc.config.getoption("--backends").split(",") if b]
        metafunc.parametrize("backend", names)
