"""KV-cache capacity ``M`` (tokens) from model size and GPU memory (online-scheduling paper,
section 7; semantics section 2).

Convention (the standard one, and the one this module uses)::

    free  = gpus * gpu_mem_gb * gb_bytes - params * dtype_bytes - reserved
    per   = 2 * layers * kv_dim * dtype_bytes          # K and V, every layer
    M     = floor(free / per)

with ``kv_dim = hidden`` for multi-head attention, or ``kv_heads * head_dim`` for grouped-query
attention (``head_dim`` defaults to ``hidden / n_heads``). ``gb_bytes`` is 1e9 (GB, the GPU
vendors' unit, default) or 2**30 (GiB).

**The paper's 16,492 tokens** (Llama2-70B, two 80 GB A100s: ``params = 70e9``,
``layers = 80``, ``hidden = 8192``, ``dtype_bytes = 2``) is *not* reproduced by this formula
under any unit convention we could find. Our text copy of the paper lost the formula's
symbols (``papers/001_*.txt`` lines 168-170 keep only "...calculated as follows: where").
The standard convention gives (160e9 - 140e9) / (2*80*8192*2) = **7,629** tokens; GiB memory
gives 12,130; dropping the K/V factor gives 15,258 (GB) or 24,260 (GiB); GiB for both
memory and weights (or the 12*L*H^2 parameter estimate) gives 16,384 = 2^14. A systematic
search (memory in GB/GiB, weights 70e9 / 68.98e9 / 69e9 parameters in GB/GiB, K/V factor
0.5-4, dtype 1-4 bytes, MHA or GQA widths, floor/round/ceil; ``tests/workloads/test_capacity.py``)
found no combination giving 16,492. The closest natural value is 16,384. We therefore keep
the physically meaningful formula and record the paper's figure as
:data:`PAPER_LLAMA2_70B_2XA100_TOKENS` for instances that want to reproduce the paper's
setting verbatim. Physically, note also that real Llama-2-70B uses GQA (8 KV heads of 128):
its KV is 8x smaller per token (327,680 bytes), so two 80 GB A100s hold about 61,000 tokens
(``kv_heads=8, n_heads=64``) before activation and framework overheads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InstanceError

GB = 1e9
GIB = float(2**30)

#: The figure the online-scheduling paper reports (section 7) for Llama2-70B on 2x A100-80GB.
PAPER_LLAMA2_70B_2XA100_TOKENS = 16_492
#: The paper's inputs (section 7).
PAPER_INPUTS = dict(params=70e9, layers=80, hidden=8192, dtype_bytes=2, gpu_mem_gb=80, gpus=2)


@dataclass(frozen=True)
class KVCapacity:
    """The capacity and the quantities it was computed from (bytes)."""

    tokens: int
    bytes_per_token: int
    memory_bytes: float
    weight_bytes: float
    reserved_bytes: float
    free_bytes: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _pos(name: str, v, integer: bool = False) -> None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    if ok and integer:
        ok = float(v).is_integer()
    if not ok:
        kind = "a positive integer" if integer else "a finite number > 0"
        raise InstanceError(f"kv-capacity: {name} must be {kind}, got {v!r}")


def kv_bytes_per_token(
    layers: int,
    hidden: int,
    dtype_bytes: float,
    *,
    n_heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
) -> int:
    """KV bytes of one token: ``2 * layers * kv_dim * dtype_bytes`` (K and V per layer)."""
    _pos("layers", layers, True)
    _pos("hidden", hidden, True)
    _pos("dtype_bytes", dtype_bytes)
    if kv_heads is None:
        kv_dim = hidden
    else:
        _pos("kv_heads", kv_heads, True)
        if head_dim is None:
            if n_heads is None:
                raise InstanceError("kv-capacity: with kv_heads, give head_dim or n_heads")
            _pos("n_heads", n_heads, True)
            if hidden % n_heads:
                raise InstanceError(f"kv-capacity: hidden {hidden} is not divisible by "
                                    f"n_heads {n_heads}")
            head_dim = hidden // n_heads
        if n_heads is not None:
            _pos("n_heads", n_heads, True)
            if kv_heads > n_heads:
                raise InstanceError(f"kv-capacity: kv_heads {kv_heads} exceeds n_heads {n_heads} "
                                    "(grouped-query attention shares each KV head among "
                                    "several query heads)")
        _pos("head_dim", head_dim, True)
        kv_dim = kv_heads * head_dim
    b = 2 * layers * kv_dim * dtype_bytes
    return int(b) if float(b).is_integer() else math.ceil(b)


def hidden_kv_ratio(hidden: int, *, n_heads: int | None = None, kv_heads: int | None = None,
                    head_dim: int | None = None) -> float:
    """Hidden-state bytes per token over KV bytes per token (docs/semantics.md, "Hidden
    cache", rule "memory"; Apt-Serve section 3.1 caches the input hidden state, one vector of
    ``hidden`` values per layer, instead of K and V, two vectors of ``kv_heads * head_dim``):
    ``hidden / (2 * kv_dim)``. 1/2 for multi-head attention (``kv_heads = n_heads``); 2 for
    Llama-3-8B (4096 / (2 * 8 * 128)); 4 for Llama-2-70B (8192 / (2 * 8 * 128))."""
    return hidden / kv_bytes_per_token(1, hidden, 1, n_heads=n_heads, kv_heads=kv_heads,
                                       head_dim=head_dim)


#: Head counts of the models behind the cost presets (``hidden``, ``n_heads``, ``kv_heads``),
#: from the models' published configurations.
MODEL_HEADS = {
    "llama2-7b": (4096, 32, 32),
    "llama2-70b": (8192, 64, 8),
    "llama3-8b": (4096, 32, 8),
}
#: Layers of the models behind the cost presets (the models' published configurations).
MODEL_LAYERS = {"llama2-7b": 32, "llama2-70b": 80, "llama3-8b": 32}
#: The model of each named cost preset (``optsched.cost.PRESETS``).
PRESET_MODEL = {
    "infermax-llama2-7b-a100": "llama2-7b",
    "infermax-llama2-70b-4xa100": "llama2-70b",
    "vidur-llama2-7b-a100": "llama2-7b",
    "blis-llama3.1-8b-a100": "llama3-8b",
    "blis-llama3.1-8b-h100": "llama3-8b",
}


def preset_hidden_ratio(preset: str | None) -> float | None:
    """:func:`hidden_kv_ratio` of a named cost preset's model; None for a model we do not
    know (a fitted or hand-written cost model)."""
    model = PRESET_MODEL.get(preset or "")
    if model is None:
        return None
    hidden, n_heads, kv_heads = MODEL_HEADS[model]
    return hidden_kv_ratio(hidden, n_heads=n_heads, kv_heads=kv_heads)


def preset_kv_bytes(preset: str | None) -> int | None:
    """KV bytes of one token (:func:`kv_bytes_per_token`, fp16) of a named cost preset's
    model: 524,288 for Llama-2-7B (2 x 32 layers x 4,096 x 2 bytes), 327,680 for Llama-2-70B
    (8 KV heads of 128), 131,072 for Llama-3-8B; None for a model we do not know."""
    model = PRESET_MODEL.get(preset or "")
    if model is None:
        return None
    hidden, n_heads, kv_heads = MODEL_HEADS[model]
    return kv_bytes_per_token(MODEL_LAYERS[model], hidden, 2, n_heads=n_heads, kv_heads=kv_heads)


def kv_capacity(
    params: float,
    layers: int,
    hidden: int,
    dtype_bytes: float,
    gpu_mem_gb: float,
    gpus: int = 1,
    *,
    n_heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    gb_bytes: float = GB,
    reserved_gb: float = 0.0,
) -> KVCapacity:
    """KV capacity in tokens (see the module docstring for the convention).

    Raises :class:`~optsched.errors.InstanceError` if the weights do not fit."""
    _pos("params", params)
    _pos("gpu_mem_gb", gpu_mem_gb)
    _pos("gpus", gpus, True)
    _pos("gb_bytes", gb_bytes)
    if not (isinstance(reserved_gb, (int, float)) and math.isfinite(reserved_gb) and reserved_gb >= 0):
        raise InstanceError(f"kv-capacity: reserved_gb must be >= 0, got {reserved_gb!r}")
    per = kv_bytes_per_token(layers, hidden, dtype_bytes, n_heads=n_heads, kv_heads=kv_heads,
                             head_dim=head_dim)
    mem = gpus * gpu_mem_gb * gb_bytes
    weights = params * dtype_bytes
    reserved = reserved_gb * gb_bytes
    free = mem - weights - reserved
    if free < per:
        raise InstanceError(
            f"kv-capacity: the weights ({weights / gb_bytes:.4g} GB) and reserve leave "
            f"{free / gb_bytes:.4g} GB of {mem / gb_bytes:.4g} GB: not one token of KV fits"
        )
    return KVCapacity(tokens=int(free // per), bytes_per_token=per, memory_bytes=mem,
                      weight_bytes=weights, reserved_bytes=reserved, free_bytes=free)


def kv_capacity_tokens(*args, **kwargs) -> int:
    """:func:`kv_capacity`'s token count alone."""
    return kv_capacity(*args, **kwargs).tokens


__all__ = ["KVCapacity", "MODEL_HEADS", "MODEL_LAYERS", "PRESET_MODEL", "hidden_kv_ratio",
           "preset_hidden_ratio", "kv_bytes_per_token", "preset_kv_bytes", "kv_capacity",
           "kv_capacity_tokens",
           "PAPER_LLAMA2_70B_2XA100_TOKENS", "PAPER_INPUTS", "GB", "GIB"]
