"""Plug-ins written the way a user writes them, outside optsched: a policy, a formulation and a
bound rung (``token_floor``, property-tested by ``tests/test_testing.py`` with the test kit),
loaded by ``tests/test_plugins.py`` as ``tests/helpers/user_plugins.py:Name``, as
``user_plugins:Name`` and through an entry point."""

from __future__ import annotations

import math

from optsched.bounds import BoundError, BoundResult
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.formulations import RawSolution
from optsched.plugins import ParamSpec
from optsched.policies import Plan, Policy, simulate


class OneAtATime(Policy):
    """One request at a time to completion, in arrival or shortest-prompt order."""

    params = (ParamSpec("order", str, "arrival", "arrival or prompt", choices=("arrival", "prompt")),)

    def __init__(self, order: str = "arrival"):
        self.order = order

    def bind(self, view):
        super().bind(view)
        self.waiting: list[int] = []

    def on_arrivals(self, idx):
        self.waiting += idx
        if self.order == "prompt":
            self.waiting.sort(key=lambda i: (self.view.prompt[i], i))

    def next_batch(self):
        if not self.waiting:
            return None
        i, v = self.waiting[0], self.view
        lim = v.limits
        c = min(int(v.S[i] - v.m[i]), lim.max_batch_tokens, lim.prefill_budget)
        return Plan([i], [c], [])

    def on_batch_end(self, plan, finished):
        done = set(finished.tolist())
        self.waiting = [i for i in self.waiting if i not in done]


def run(instance, objective, hypotheses, options, warm_start):
    """One-at-a-time as a 'formulation': a feasible schedule, no bound."""
    sched = simulate(instance, OneAtATime())
    return RawSolution("feasible", evaluate(instance, sched).objective(objective),
                       schedule=sched, solver="one-at-a-time")


class NotAPolicy:
    """Has no next_batch."""


BROKEN = 1 / 1  # a plain value: not loadable as a policy


def token_floor(instance, objective, budget):
    """A makespan rung: every request processes at least ``I + O - 1`` tokens, a batch at most
    ``C``, and a batch with an entry takes at least ``k0`` (1 under unit time; every other term
    of semantics section 5 is >= 0 per entry); batches do not overlap."""
    if objective != "makespan":
        raise BoundError("token-floor: a makespan bound only")
    tokens = int((instance.prompt + instance.output - 1).sum())
    cm = instance.cost_model
    least = 1.0 if isinstance(cm, UnitCost) else cm.k0
    return BoundResult(math.ceil(tokens / instance.limits.max_batch_tokens) * least, "token-floor",
                       objective)

