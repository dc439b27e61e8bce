"""The policies' errors and warning (docs/policies.md).

Apart from the registry so that the simulator, which the registry imports to check a policy
object, can raise them without importing the registry (so the two do not import each
other); :mod:`optsched.policies.registry` and :mod:`optsched.policies` re-export
them.
"""

from __future__ import annotations

from ..errors import OptschedError


class PolicyWarning(UserWarning):
    """A policy had to depart from its published behaviour on this instance (e.g. ``vllm``
    chunking a prompt longer than ``C``); the message says how."""


class PolicyError(OptschedError, ValueError):
    """Unknown policy name, unknown parameter or a bad parameter value."""


class SimulationError(OptschedError, RuntimeError):
    """A policy produced a batch the simulator cannot apply (a policy bug), or stalled."""


class UserPolicyError(SimulationError):
    """An exception raised inside a user's policy (a hook of a class outside ``optsched``),
    named with the policy, the hook and the batch: bad input to optsched (exit 2), not an
    internal error."""


class SimulationTimeout(SimulationError):
    """The run passed its deadline (a command's time limit) before every request finished."""


__all__ = ["PolicyError", "PolicyWarning", "SimulationError", "SimulationTimeout",
           "UserPolicyError"]
