"""Checks of schedules the tests share: the columns two schedules must agree on, the order of the
tokens a schedule generates."""

from __future__ import annotations

import numpy as np

from optsched.instance import Instance

COLUMNS = ("batch_ptr", "entry_req", "entry_tokens", "evict_ptr", "evict_req",
           "swap_out_ptr", "swap_in_ptr", "entry_hidden")


def token_order(inst: Instance, s) -> list[int]:
    """The generated token's index (1 = first) of every token-generating entry, in schedule
    order (semantics section 3 replayed by hand: evictions first, ``m = S`` generates)."""
    m = np.zeros(inst.n, np.int64)
    g = np.zeros(inst.n, np.int64)
    out = []
    for j in range(s.n_batches):
        m[s.evict_req[s.evict_ptr[j]:s.evict_ptr[j + 1]]] = 0
        a, b = s.batch_ptr[j], s.batch_ptr[j + 1]
        for r, c in zip(s.entry_req[a:b].tolist(), s.entry_tokens[a:b].tolist()):
            m[r] += c
            if m[r] == inst.prompt[r] + g[r]:
                g[r] += 1
                out.append(int(g[r]))
                if g[r] == inst.output[r]:
                    m[r] = 0
    return out


def assert_first_tokens_first(inst, s) -> None:
    """Every request's first token comes before any request's second or later token."""
    order = token_order(inst, s)
    firsts = [k for k, t in enumerate(order) if t == 1]
    later = [k for k, t in enumerate(order) if t > 1]
    assert len(firsts) == inst.n
    assert not later or max(firsts) < min(later)
