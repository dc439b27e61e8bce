"""Paths the tests share: the repository, the shipped instances, the shared data."""

from __future__ import annotations

from pathlib import Path

from optsched.workloads.traces import shared_data

#: the repository root
REPO = Path(__file__).resolve().parents[2]
INSTANCES = REPO / "instances"
#: a shipped three-request instance with arrivals (unit time): the tests' "good" input file
GOOD = INSTANCES / "arrivals-unit-3.json"
#: the shipped 40-request evidence instance (online paper family, seed 1)
N40 = INSTANCES / "evidence" / "online-paper-n40-s1.json"
#: the shared data (traces, profiling): ``$OPTSCHED_DATA``, else ``../shared/data``; tests that
#: need it skip with the path in the reason
SHARED_DATA = shared_data()
