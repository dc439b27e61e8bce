"""Plug-ins written the way a user writes them, outside optsched: a policy and a formulation,
loaded by ``tests/test_plugins.py`` as ``tests/user_plugins.py:Name``, as
``user_plugins:Name`` and through an entry point."""

from __future__ import annotations

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
