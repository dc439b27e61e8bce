"""The test kit (optsched/testing.py), used the way a user would: a policy and a bound rung of the
user's own, in a file outside optsched (tests/helpers/user_plugins.py), property-tested with the
kit's strategies, assertions and oracle (``docs/contributing.md`` shows the same); and the kit's
own promises (its schedules are feasible, its oracle says when it cannot answer, its assertions
fail on a bound above a value)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from paths import REPO

from optsched import simulate
from optsched.bounds import lower_bound
from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies
from optsched.testing import (
    assert_bound_valid,
    assert_feasible,
    constrained_instances,
    exhaustive_optimum,
    instances,
    valid_schedules,
    wave_schedule,
)

#: a user's plug-in file, outside optsched: its policy (``OneAtATime``) and its bound rung
#: (``token_floor``) are named the way a user names them, ``file.py:Name``
USER = REPO / "tests" / "helpers" / "user_plugins.py"
POLICY = f"{USER}:OneAtATime"
RUNG = f"{USER}:token_floor"


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(inst=instances())
def test_the_users_policy_is_feasible_and_deterministic(inst):
    ev = assert_feasible(inst, simulate(inst, POLICY))
    again = simulate(inst, POLICY)
    assert again == simulate(inst, POLICY)  # re-runnable: a fresh object, the same
    assert assert_feasible(inst, again).objective("makespan") == ev.objective("makespan")


@SETTINGS
@given(inst=constrained_instances(max_requests=3, max_prompt=6, max_output=3))
def test_the_users_rung_is_below_the_exhaustive_optimum(inst):
    opt = exhaustive_optimum(inst, "makespan")
    assume(opt is not None)  # too large for the oracle: nothing is claimed
    bound = lower_bound(inst, "makespan", RUNG).value
    assert_bound_valid({"token-floor": bound}, opt, "the exhaustive optimum", inst)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(max_requests=5))
def test_the_users_rung_is_below_every_policy_and_the_users_policy(inst):
    bound = lower_bound(inst, "makespan", RUNG).value
    assert_bound_valid(bound, assert_feasible(inst, simulate(inst, POLICY))
                       .objective("makespan"), "the user's policy (OneAtATime)", inst)
    for spec in list_policies():
        ev = assert_feasible(inst, simulate(inst, spec.name))
        assert_bound_valid({"token-floor": bound}, ev.objective("makespan"),
                           f"policy {spec.name}'s makespan", inst)


@SETTINGS
@given(data=st.data())
def test_drawn_schedules_are_feasible(data):
    inst = data.draw(instances())
    drawn = data.draw(valid_schedules(inst))
    ev = assert_feasible(inst, drawn.schedule)
    assert set(drawn.completion_batch) == set(inst.ids)
    # each request completes in the batch the drawing says: the last with an entry of it
    for rid, j in drawn.completion_batch.items():
        assert ev.completion[inst.index[rid]] == ev.batch_end[j]


def test_the_oracle_says_when_it_cannot_answer():
    reqs = tuple(Request(f"r{k}", 0.0, 3, 3) for k in range(4))
    inst = Instance("h", Limits(kv_capacity=8, max_batch_tokens=4), UnitCost(), reqs)
    assert exhaustive_optimum(inst, "makespan", max_states=2) is None
    one = Instance("h", Limits(kv_capacity=8, max_batch_tokens=4), UnitCost(), reqs[:1])
    # one request, I = 3, O = 3, C = 4: a prefill batch then two decode batches -> makespan 3
    assert exhaustive_optimum(one, "makespan") == 3.0


def test_a_bound_above_the_value_fails_with_the_instance():
    inst = Instance("h", Limits(kv_capacity=8, max_batch_tokens=4), UnitCost(), (Request("a", 0.0, 1, 1),))
    assert_bound_valid({"ok": 1.0}, 1.0, "the optimum", inst)
    with pytest.raises(AssertionError, match="bound high = 1.5 exceeds the optimum 1.0 on"):
        assert_bound_valid({"high": 1.5}, 1.0, "the optimum", inst)


def test_wave_schedule_is_feasible_and_as_large_as_it_says():
    inst, s = wave_schedule(250, wave=100, output=4)
    ev = assert_feasible(inst, s)
    assert s.n_entries == 250 * 4 and s.n_batches == 3 * 4  # waves of 100, 100, 50
    assert ev.metrics["evictions"] == 0
