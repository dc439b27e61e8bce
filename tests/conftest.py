"""Shared pytest configuration: the ``--backends`` option selects MILP backends; the
``evict_demo`` fixture (a hand-worked schedule with an eviction, drawn by the plot tests); the
warnings summary shows each kind of warning once, with its count."""

from __future__ import annotations

import re
import types
from collections import Counter

import pytest

from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule

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


@pytest.fixture
def evict_demo():
    """a (I=4, O=3) and b (I=3, O=3), M = 8: b is evicted at batch 1 and refilled at batch 3.

    batch 0: a 4 + b 3 (two prefills, KV 7); 1: a decode, b evicted (KV 5); 2: a decode,
    a finishes (KV 6); 3: b refills its 4 known tokens (KV 4); 4: b decode, finishes (KV 5).
    """
    inst = Instance("evict-demo", Limits(kv_capacity=8, max_batch_tokens=64),
                    requests=(Request("a", 0, 4, 3), Request("b", 0, 3, 3)))
    s = Schedule.from_batches([
        ([("a", 4), ("b", 3)], []),
        ([("a", 1)], ["b"]),
        ([("a", 1)], []),
        ([("b", 4)], []),
        ([("b", 1)], []),
    ])
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations
    return inst, s, ev


# -- the warnings summary: each kind once ----------------------------------------------------
# Hypothesis draws hundreds of instances on which a policy without chunked prefill must chunk a
# long prompt: the same PolicyWarning with other numbers each time. pytest's summary groups
# warnings by their exact text, so it printed each of them (430 of 435 warnings). Grouped by
# their text with the numbers masked, each kind is printed once with how often it came and
# from which test files; the count on the last line stays the number of warnings.
def _kind(message: str) -> str:
    """A warning's kind: the line of code that issued it and its category (``path:line:
    Category``), else its text with every number masked."""
    first = message.splitlines()[0] if message else ""
    site = re.match(r"(.*?:\d+: \w+):", first)
    return site.group(1) if site else re.sub(r"\d+(?:\.\d+)?", "#", first)


def _summary_warnings_once(self) -> None:
    if not self.hasopt("w"):
        return
    everything = self.stats.get("warnings")
    if not everything:
        return
    final = self._already_displayed_warnings is not None
    reports = everything[self._already_displayed_warnings:] if final else everything
    self._already_displayed_warnings = len(reports)
    if not reports:
        return
    kinds: dict[str, list] = {}
    for wr in reports:
        kinds.setdefault(_kind(wr.message), []).append(wr)
    self.write_sep("=", "warnings summary (final)" if final else "warnings summary (each kind once)",
                   yellow=True, bold=False)
    for same in kinds.values():
        files = Counter(str(w.get_location(self.config) or "?").split("::", 1)[0] for w in same)
        where = ", ".join(f"{f} ({n})" for f, n in files.most_common(3))
        if len(files) > 3:
            where += f", and {len(files) - 3} more test files"
        self._tw.line(f"{len(same)} x, from {where}:")
        varies = len({w.message for w in same}) > 1
        self._tw.line("  " + same[0].message.strip().splitlines()[0]
                      + ("  [the first; the others differ in names or numbers]" if varies else ""))
    self._tw.line()


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and hasattr(reporter, "_already_displayed_warnings"):
        reporter.summary_warnings = types.MethodType(_summary_warnings_once, reporter)

