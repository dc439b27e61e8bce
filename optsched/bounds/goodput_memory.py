"""B12e: the KV and count shares of B7 on instances with hidden cache (``formulations/bounds.md``
B12 "Hidden cache").

B7 splits each batch's per-batch time ``h`` among its members in proportion to the memory
they hold after it (``kv_i / M``, the shares add to at most ``h`` because the memory after a
batch is at most ``M``) or to the entries (``1 / max_entries``). B12 used neither with
``limits.hidden_cache`` because a hidden cache is charged less than ``fp`` (docs/semantics.md
section 6, rule 4). Both hold with the *charge* instead of ``fp``:

* after the batch generating its ``g``-th token a request holds ``I + g - 1`` cached tokens of
  one type, charged ``fp(I + g - 1)`` as KV or ``hfp(I + g - 1)`` as hidden states
  (``b ceil(r m / b)``), so at least ``min(fp, hfp)(I + g - 1)``; the generating batches hold
  ``sum_g min(fp, hfp)(I + g - 1)`` (F3 with the smaller charge);
* every charge of ``m >= 1`` tokens is at least one block (``>= 1``), so a batch still has at
  most ``M`` entries (``max_entries`` unchanged).

Every compute floor (F4, F5) holds on hidden instances: a hidden entry costs ``rho m`` more,
never less. So B7's works with these areas are valid under the KV and the count share.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ..instance import Instance
from .floors import Floors
from .srpt import MIXES, job_works


class ChargeFloors(Floors):
    """Floors whose KV areas use the smaller of the KV and the hidden charge (module
    docstring). Built directly (never through :meth:`Floors.of`, whose cache holds the plain
    floors of the instance)."""

    @cached_property
    def _charge_prefix(self) -> np.ndarray:
        """``pre[x] = sum_{y=1..x} min(fp(y), hfp(y))`` for ``x`` up to the longest request."""
        inst = self.instance
        top = int((inst.prompt + inst.output).max()) if inst.n else 1
        y = np.arange(top + 1, dtype=np.int64)
        lim = inst.limits
        charge = np.minimum(lim.kv_footprint(y), lim.hidden_footprint(y))
        charge[0] = 0
        return np.cumsum(charge)

    @cached_property
    def area(self) -> np.ndarray:  # F3 with the smaller charge
        I, O = self.instance.prompt, self.instance.output
        pre = self._charge_prefix
        return pre[I + O - 1] - pre[I - 1]

    @cached_property
    def prefill_area(self) -> np.ndarray:
        """Charge held after the batch generating the first token: ``min(fp, hfp)(I)``."""
        lim, I = self.instance.limits, self.instance.prompt
        return np.minimum(lim.kv_footprint(I), lim.hidden_footprint(I))


def rule_works(instance: Instance, f: Floors) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per valid B7 sharing rule, the (first-token, whole-request) works of every request.
    Without hidden cache: B7's KV, token and count shares on ``f``. With hidden cache: the
    token share on ``f`` and the KV and count shares on :class:`ChargeFloors` (module
    docstring)."""
    rules = MIXES[:3]
    if not instance.limits.hidden_cache:
        return [(job_works(f, "mean-ttft", m), job_works(f, "total-latency", m)) for m in rules]
    cf = ChargeFloors(instance)
    return [(job_works(cf if m[1] == 0 else f, "mean-ttft", m),
             job_works(cf if m[1] == 0 else f, "total-latency", m)) for m in rules]


__all__ = ["ChargeFloors", "rule_works"]
