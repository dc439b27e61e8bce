"""The bound rungs the validity tests run (cheap enough for every example)."""

from __future__ import annotations

from optsched.bounds import bound_methods, lower_bound

CHEAP = ("request", "work", "srpt", "mbt", "combinatorial", "spread", "events")


def cheap_bounds(inst, objective):
    out = {}
    for name in CHEAP:
        if objective in bound_methods()[name].objectives:
            out[name] = lower_bound(inst, objective, name).value
    return out
