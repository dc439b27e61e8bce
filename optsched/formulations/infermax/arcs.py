"""The arcs of the InferMax flow models (``formulations/infermax.md``, eqs. F1-F2c, G2): their
kinds, one request class's nodes and arcs (:class:`_Class`), and the price of a prefill
entry. The ground floor of the flow, fill and objective modules, which read these and no
longer import one another for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# arc kinds
IDLE, START, STEP, END, DECODE, EVICT, EVREFILL, CHUNK = range(8)
KIND_NAMES = ("idle", "start", "step", "end", "decode", "evict", "evict-refill", "chunk")
#: arcs that are a request's entry in the batch / a prefill entry / carry prefill tokens
ENTRY_KINDS = (START, DECODE, EVREFILL, CHUNK)
PREFILL_KINDS = (START, EVREFILL, CHUNK)
PREFILL_TOKEN_KINDS = (START, STEP, EVREFILL, CHUNK)
#: arcs that end in the next batch's layer state (KV held after the batch)
LAYER_IN_KINDS = (IDLE, END, DECODE, EVICT, CHUNK)


@dataclass
class _Class:
    ids: list[str]
    I: int
    O: int
    arrival: float
    # states: index -> (kind, g, m); kind in "W", "P", "R", "F"
    states: list[tuple[str, int, int]]
    sidx: dict[tuple[str, int, int], int]
    # in-chunk nodes: (g, k) -> node index (offset after the states)
    qidx: dict[tuple[int, int], int]
    # arc arrays
    src: np.ndarray
    dst: np.ndarray  # node ids; layer states are "next layer" for idle/end/decode/evict
    kind: np.ndarray
    tokens: np.ndarray
    price: np.ndarray  # seconds
    kv: np.ndarray  # KV footprint after the batch (layer-to-layer arcs), else 0
    finishes: np.ndarray
    # F2c (kpm < 2 kpq): chunks that continue a partial fill run on a second chain; its
    # nodes (g, k) -> node index, and per arc the level g of its start/step arcs (else -1)
    qidx_b: dict[tuple[int, int], int] = field(default_factory=dict)
    rem_level: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def n_nodes(self) -> int:
        return len(self.states) + len(self.qidx) + len(self.qidx_b)


def chunk_price(k: dict[str, float], m: int, c: int) -> float:
    """The price (docs/semantics.md section 5) of one prefill entry of ``c`` tokens over ``m``
    cached ones (without the batch-level ``k0``, ``kpb``)."""
    return k["kpr"] + k["kpl"] * m + k["k1"] * c + k["kpq"] * c * c + k["kpm"] * c * m


__all__ = ["CHUNK", "DECODE", "END", "ENTRY_KINDS", "EVICT", "EVREFILL", "IDLE", "KIND_NAMES",
           "LAYER_IN_KINDS", "PREFILL_KINDS", "PREFILL_TOKEN_KINDS", "START", "STEP", "_Class",
           "chunk_price"]
