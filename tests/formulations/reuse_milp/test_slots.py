"""The certified slot count of the reuse MILP (formulations/reuse-milp.md R0), by hand."""

from __future__ import annotations

from optsched.cost import UnitCost
from optsched.formulations.reuse_milp.slots import certified_slots
from optsched.instance import Instance, Limits, Request


def test_slots_by_hand():
    inst = Instance("t", Limits(16, 4, block_size=1), UnitCost(),
                    (Request("a", 0, 3, 1, prefix=(1,)), Request("b", 0, 3, 2, prefix=(1,)),
                     Request("c", 1, 3, 1, prefix=(1,))))
    # makespan <= 7.5: seven unit batches fit in [0, 7.5]
    assert certified_slots(inst, "makespan", 7.5) == 7
    # total latency <= 6: the last request's latency <= 6 - (sum O - max O) = 6 - (4 - 2) = 4,
    # and it arrives by 1, so every batch ends by 1 + 4 = 5
    assert certified_slots(inst, "total-latency", 6) == 5
