"""Scheduling policies and the simulator that runs them.

``simulate(instance, "vllm")`` returns a :class:`~optsched.schedule.Schedule`; judge it
with :func:`optsched.evaluate` (the simulator computes no metrics).
``list_policies()`` lists every registered policy with its description and source.
"""

from __future__ import annotations

from ..instance import Instance
from ..schedule import Schedule
from .errors import UserPolicyError
from .registry import (
    POLICIES,
    Param,
    ParamSpec,
    PolicyError,
    PolicySpec,
    SimulationError,
    SimulationTimeout,
    get_policy,
    get_spec,
    list_policies,
    parse_param_args,
    register,
)
from .simulator import Plan, Policy, SimStats, SimView, simulate_policy


def simulate(instance: Instance, policy: str | Policy, *, stats: SimStats | None = None,
             deadline: float | None = None, fast: bool | None = None, **params) -> Schedule:
    """Run ``policy`` (a registered name or a ``file.py:Class`` / ``module:Class`` reference,
    built fresh with ``params``, or a policy object)
    over ``instance`` and return its schedule; ``stats`` receives the decision time;
    past ``deadline`` (a ``time.perf_counter()`` value) it raises :class:`SimulationTimeout`.
    ``fast`` chooses the compiled kernel of a built-in policy (True), the Python simulator,
    the reference (False), or the kernel only where it pays (None, the default;
    :func:`~optsched.policies.simulator.simulate_policy`)."""
    if isinstance(policy, str):
        obj: Policy = get_policy(policy, **params)
    elif params:
        raise PolicyError("parameters can only be given with a policy name")
    else:
        obj = policy
    return simulate_policy(instance, obj, stats=stats, deadline=deadline, fast=fast)


__all__ = [
    "POLICIES",
    "ParamSpec",
    "simulate",
    "get_policy",
    "get_spec",
    "list_policies",
    "register",
    "parse_param_args",
    "Param",
    "PolicySpec",
    "PolicyError",
    "SimulationError",
    "SimulationTimeout",
    "UserPolicyError",
    "Plan",
    "Policy",
    "SimView",
    "SimStats",
    "simulate_policy",
]
