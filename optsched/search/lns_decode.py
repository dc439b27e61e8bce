"""Priority decoders of the large-neighbourhood search (optsched/search/lns.py): a priority key (one
number per request, smallest first) turned into a whole schedule by the simulator, resumable
after a replayed prefix (:class:`PolicyDecoder`, a
:class:`~optsched.search.decoder.ResumableDecoder`):

* ``mcsf``: MC-SF's admission rule (:mod:`optsched.policies.mcsf`, equation (1)) ranking
  waiting requests by the key, true output lengths; it never evicts (registered with the
  compiled kernels in :mod:`optsched.search.keysearch`, whose whole decodes are the same
  schedules);
* ``ttft``: the TTFT-first policy (:mod:`optsched.policies.ttft_first`) with the key as both
  its first-prefill order and its resident priority (evicting the largest key first); LNS
  tries it first for mean TTFT.

Both read the true output lengths (hypothetical): a decoded schedule is a schedule like any
other, judged by :func:`optsched.evaluate`; it bounds the optimum from above.

**Resuming** (:class:`Resume`): the schedule's first ``j0`` batches are replayed as they are
(a batch waits for the arrivals of the requests it touches, which is the evaluator's "as
early as possible" start, docs/semantics.md section 4), then the decoder takes over from the
replayed state (running, waiting and evicted requests rebuilt from ``S``, ``m``, ``g``). This
is the time-window neighbourhood: everything before the window is kept.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..instance import Instance
from ..policies.mcsf import MCSF
from ..policies.simulator import Plan, Policy, SimView, simulate_policy
from ..policies.ttft_first import TTFTFirst
from ..schedule import Schedule
from .decoder import DecoderError, get_decoder, register_decoder


class KeyedMCSF(MCSF):
    """MC-SF admitting waiting requests by ``key``, smallest first, true output lengths."""

    hypothetical = True

    def __init__(self, key: np.ndarray):
        super().__init__()
        self._key = key

    def priority(self, view: SimView, est: np.ndarray) -> np.ndarray:
        return self._key

    def resume(self, arrived: list[int]) -> None:
        """Take over after a replayed prefix: residents run, the rest of ``arrived`` waits."""
        v = self.view
        live = [i for i in arrived if v.g[i] < v.known_output[i]]
        self.running = sorted((i for i in live if v.m[i] > 0), key=self.rank_list.__getitem__)
        self.waiting = [self.rank_list[i] for i in live if v.m[i] == 0]
        heapq.heapify(self.waiting)
        self.lone = None


class KeyedTTFT(TTFTFirst):
    """TTFT-first with ``key`` as the first-prefill order and the resident priority."""

    hypothetical = True

    def __init__(self, key: np.ndarray):
        super().__init__(first="arrival")
        self._key = key

    def first_key(self, view: SimView) -> np.ndarray:
        return self._key

    def resident_key(self, idx: np.ndarray) -> np.ndarray:
        return self._key[idx]

    def resume(self, arrived: list[int]) -> None:
        """Take over after a replayed prefix: reservations rebuilt from the cached tokens (a
        (re)fill under way reserves its whole ``S``, as when it started)."""
        v = self.view
        fp = v.fp
        for i in arrived:
            g, m, S = int(v.g[i]), int(v.m[i]), int(v.S[i])
            if g >= v.known_output[i]:
                continue
            if g == 0 and m == 0:
                heapq.heappush(self.pending, (int(self.first_rank[i]), i))
                continue
            if g == 0:
                self.prefilling.append(i)
            else:
                self.active.add(i)
            if m > 0:
                self.res[i] = int(fp(S if (g == 0 or m < S - 1) else m))
                self.used += int(self.res[i])
        self.prefilling.sort(key=lambda i: int(self.first_rank[i]))


#: the keyed policy of each decoder of this module
_KEYED: dict[str, type[KeyedMCSF] | type[KeyedTTFT]] = {"mcsf": KeyedMCSF, "ttft": KeyedTTFT}


class Resume(Policy):
    """Replay ``prefix``'s first ``j0`` batches, then hand over to ``inner`` (module
    docstring)."""

    hypothetical = True

    def __init__(self, prefix: Schedule, j0: int, inner: KeyedMCSF | KeyedTTFT):
        self.prefix, self.j0, self.inner = prefix, j0, inner
        self.name = "lns-resume"

    def bind(self, view: SimView) -> None:
        super().bind(view)
        self.k = 0
        self.arrived: list[int] = []
        self.seen = np.zeros(view.n, bool)
        self.handed = False

    def on_arrivals(self, idx: list[int]) -> None:
        if self.handed:
            self.inner.on_arrivals(idx)
            return
        self.arrived.extend(idx)
        self.seen[idx] = True

    def _prefix_plan(self) -> Plan | None:
        """The next non-empty prefix batch, or None when its requests have not all arrived
        (the simulator then moves the clock to the next arrival)."""
        s = self.prefix
        while self.k < self.j0:
            a, b = s.batch_ptr[self.k], s.batch_ptr[self.k + 1]
            ea, eb = s.evict_ptr[self.k], s.evict_ptr[self.k + 1]
            if a == b and ea == eb:  # an empty batch takes no time (semantics section 3)
                self.k += 1
                continue
            req, ev = s.entry_req[a:b], s.evict_req[ea:eb]
            if not (self.seen[req].all() and self.seen[ev].all()):
                return None
            self.k += 1
            return Plan(req, s.entry_tokens[a:b], ev)
        return None

    def next_batch(self) -> Plan | None:
        if not self.handed:
            plan = self._prefix_plan()
            if plan is not None or self.k < self.j0:
                return plan
            self.inner.bind(self.view)
            self.inner.resume(self.arrived)
            self.handed = True
        return self.inner.next_batch()

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        if self.handed:
            self.inner.on_batch_end(plan, finished)


def in_instance_order(s: Schedule, ids: tuple[str, ...]) -> Schedule:
    """``s`` listing its requests in the order ``ids`` (the instance's): a schedule's request
    index is a position in its own ``ids`` (first use, for one built from batches), while
    the simulator and the decoders index requests by instance position."""
    if s.ids == ids:
        return s
    pos = {r: k for k, r in enumerate(ids)}
    perm = np.array([pos[r] for r in s.ids], dtype=np.int64)
    return Schedule(ids, s.batch_ptr, perm[s.entry_req], s.entry_tokens, s.evict_ptr,
                    perm[s.evict_req], s.start, s.swap_out_ptr, perm[s.swap_out_req],
                    s.swap_out_tokens, s.swap_in_ptr, perm[s.swap_in_req], s.entry_hidden)


class PolicyDecoder:
    """The ``mcsf`` or ``ttft`` decoder bound to ``inst`` (module docstring): a
    :class:`~optsched.search.decoder.ResumableDecoder` on the Python simulator."""

    def __init__(self, inst: Instance, kind: str):
        if kind not in _KEYED:
            raise DecoderError(f"no keyed policy for decoder {kind!r}; choose one of "
                               f"{', '.join(_KEYED)}")
        self.inst, self.kind = inst, kind

    def decode(self, key: np.ndarray) -> Schedule | None:
        return self.resume(key, None, 0, None)

    def resume(self, key: np.ndarray, prefix: Schedule | None, j0: int,
               deadline: float | None) -> Schedule:
        inner = _KEYED[self.kind](np.asarray(key, dtype=np.float64))
        if prefix is None or j0 <= 0:
            return simulate_policy(self.inst, inner, deadline=deadline)
        return simulate_policy(self.inst, Resume(in_instance_order(prefix, self.inst.ids), j0,
                                                 inner), deadline=deadline)


register_decoder("ttft", "TTFT-first with the key as first-prefill order and resident "
                 "priority (Python; resumable)", rank=5, lns=("mean-ttft", "p99-ttft"),
                 resumable=PolicyDecoder)(PolicyDecoder)


def decode(inst: Instance, kind: str, key: np.ndarray, prefix: Schedule | None = None,
           j0: int = 0, deadline: float | None = None) -> Schedule:
    """The schedule the resumable decoder ``kind`` (a registered decoder with a
    :class:`~optsched.search.decoder.ResumableDecoder` form) builds from ``key`` (after
    ``prefix``'s first ``j0`` batches, when given); past ``deadline`` (a
    ``time.perf_counter()`` value) the simulator raises ``SimulationTimeout``."""
    spec = get_decoder(kind)
    if spec.resumable is None:
        raise DecoderError(f"decoder {kind!r} cannot resume after a prefix (LNS needs one "
                           "that can)")
    return spec.resumable(inst, kind).resume(np.asarray(key, dtype=np.float64), prefix, j0,
                                             deadline)


__all__ = ["KeyedMCSF", "KeyedTTFT", "PolicyDecoder", "Resume", "decode", "in_instance_order"]
