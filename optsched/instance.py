"""The instance model (semantics section 2): requests, limits, cost model.

All three are frozen dataclasses that validate themselves in ``__post_init__``;
an invalid field raises :class:`~optsched.errors.InstanceError` naming the
request and the field. The JSON states every field that changes a result: ``cost_model`` is
required (there is no silent unit-time default in a file), and the cost model writes its
``kswap`` and ``rho`` even when they equal the code's defaults, so a saved instance means the
same to every version that reads it. ``Instance.to_dict``/``from_dict`` round-trip the
instance JSON contract::

    {"name": "tiny",
     "limits": {"kv_capacity": 16, "max_batch_tokens": 4096, "max_prefill_tokens": null,
                "max_batch_size": null, "block_size": 1},
     "cost_model": {"kind": "unit", "kswap": 0.0, "rho": 0.0},
     "requests": [{"id": "a", "arrival": 0, "prompt": 4, "output": 3}]}
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from . import jsonio
from .cost import CostModel, UnitCost, cost_model_from_dict
from .errors import InputFileError, InstanceError
from .prefix import MAX_BLOCK_ID, PrefixIndex, build_index, check_prefixes

#: token counts: one int, or an integer array (elementwise)
Tokens = TypeVar("Tokens", int, np.ndarray)


def block_round(tokens: Tokens, block_size: int) -> Tokens:
    """``tokens`` rounded up to whole blocks of ``block_size`` (elementwise for an array);
    :meth:`Limits.kv_footprint` is this with the instance's block size."""
    return tokens if block_size == 1 else -(-tokens // block_size) * block_size


#: hidden-state bytes per token over KV bytes per token of multi-head attention: one vector
#: of ``hidden`` values against two (K and V) of ``kv_heads * head_dim = hidden``
HIDDEN_RATIO_MHA = 0.5
#: largest denominator of a hidden ratio (it is a ratio of small head counts)
HIDDEN_RATIO_DENOMINATOR = 1024


def hidden_ratio_fraction(ratio: float) -> Fraction:
    """``ratio`` as the exact fraction the memory charge uses (denominator at most
    :data:`HIDDEN_RATIO_DENOMINATOR`)."""
    return Fraction(ratio).limit_denominator(HIDDEN_RATIO_DENOMINATOR)


def hidden_block_round(tokens: Tokens, block_size: int, ratio: float = HIDDEN_RATIO_MHA) -> Tokens:
    """KV-token memory charged for ``tokens`` tokens of *hidden* cache (docs/semantics.md,
    "Hidden cache", rule "memory"): ``ratio`` (hidden-state bytes over KV bytes per token,
    :func:`optsched.workloads.capacity.hidden_kv_ratio`) of the KV memory, in whole blocks:
    ``block_size * ceil(tokens * ratio / block_size)``. For multi-head attention
    (``ratio = 1/2``) a block holds ``2 * block_size`` tokens of hidden states
    (``ceil(tokens / 2)`` for ``b = 1``) -- never less than Apt-Serve's own pool, which
    stores hidden states in K-sized blocks of ``b`` positions, ``b/2 * ceil(tokens / b)``.
    Grouped-query models have ``ratio`` 2-4: their hidden state is larger than their KV."""
    f = hidden_ratio_fraction(ratio)
    return -(-(tokens * f.numerator) // (f.denominator * block_size)) * block_size

_CLASSES = (None, "rt", "be")
#: largest token count or limit an instance may hold (2**40, about 1.1e12): far above any real
#: model or trace, and sums of such counts stay exact in int64 and float64
MAX_COUNT = 2**40
#: latest arrival accepted (1e12 seconds, about 31,700 years: epoch timestamps fit)
MAX_ARRIVAL = 1e12


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


@dataclass(frozen=True)
class Request:
    """One inference request: ``prompt`` = I tokens, ``output`` = O tokens to generate.

    The last output token is EOS and is never processed, so a request that is
    never evicted peaks at ``I + O - 1`` cached tokens (semantics section 3).
    """

    id: str
    arrival: float
    prompt: int
    output: int
    predicted_output: int | None = None
    cls: str | None = None
    ttft_slo: float | None = None
    tpot_slo: float | None = None
    deadline: float | None = None
    #: ids of the prompt's first full KV blocks (docs/semantics.md section 6, "Prefix reuse");
    #: empty: the request shares nothing
    prefix: tuple[int, ...] = ()

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id:
            raise InstanceError(f"request {self.id!r}: field 'id' must be a non-empty string")
        if not self.id.isprintable():  # lone surrogates are not printable either
            # written into schedule files, CSVs and tables: it must be text that can be encoded
            raise InstanceError(f"request {self.id!r}: field 'id' must be printable Unicode text "
                                "(no control characters or lone surrogates)")
        where = f"request {self.id!r}"
        a = self.arrival
        if not _is_num(a) or not math.isfinite(a) or not 0 <= a <= MAX_ARRIVAL:
            raise InstanceError(
                f"{where}: field 'arrival' must be a finite number in [0, {MAX_ARRIVAL:g}], "
                f"got {self.arrival!r}"
            )
        object.__setattr__(self, "arrival", float(self.arrival))
        for name in ("prompt", "output"):
            v = getattr(self, name)
            if not _is_int(v) or not 1 <= v <= MAX_COUNT:
                raise InstanceError(f"{where}: field {name!r} must be an integer in 1..{MAX_COUNT}, "
                                    f"got {v!r}")
            object.__setattr__(self, name, int(v))
        if self.predicted_output is not None:
            v = self.predicted_output
            if not _is_int(v) or not 1 <= v <= MAX_COUNT:
                raise InstanceError(f"{where}: field 'predicted_output' must be an integer in "
                                    f"1..{MAX_COUNT}, got {v!r}")
            object.__setattr__(self, "predicted_output", int(v))
        if self.cls not in _CLASSES:
            raise InstanceError(f"{where}: field 'cls' must be 'rt', 'be' or null, got {self.cls!r}")
        for name in ("ttft_slo", "tpot_slo", "deadline"):
            v = getattr(self, name)
            if v is None:
                continue
            if not _is_num(v) or not math.isfinite(v) or v <= 0:
                raise InstanceError(f"{where}: field {name!r} must be a finite number > 0, got {v!r}")
            object.__setattr__(self, name, float(v))
        if type(self.prefix) is not tuple or self.prefix:
            object.__setattr__(self, "prefix", _check_prefix_ids(where, self.prefix))

    @property
    def peak_kv(self) -> int:
        """KV tokens held just before the last token is generated: ``I + O - 1``."""
        return self.prompt + self.output - 1

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "arrival": self.arrival,
            "prompt": self.prompt,
            "output": self.output,
        }
        for f in ("predicted_output", "cls", "ttft_slo", "tpot_slo", "deadline"):
            v = getattr(self, f)
            if v is not None:
                d[f] = v
        if self.prefix:
            d["prefix"] = list(self.prefix)
        return d

    @classmethod
    def from_dict(cls, d: Any, position: int | None = None) -> Request:
        where = f"request #{position}" if position is not None else "request"
        if not isinstance(d, dict):
            raise InstanceError(f"{where}: expected an object, got {type(d).__name__}")
        if isinstance(d.get("id"), str) and d["id"]:
            where = f"request {d['id']!r}"
        known = {f.name for f in fields(cls)}
        extra = set(d) - known
        if extra:
            raise InstanceError(f"{where}: unknown fields {sorted(extra)}")
        missing = [k for k in ("id", "arrival", "prompt", "output") if k not in d]
        if missing:
            raise InstanceError(f"{where}: missing field {missing[0]!r}")
        rid = d["id"]
        if _is_int(rid):
            rid = str(rid)
        if not isinstance(rid, str) or not rid:
            raise InstanceError(f"{where}: field 'id' must be a non-empty string, got {rid!r}")
        return cls(**{**d, "id": rid})


def _check_prefix_ids(where: str, v: Any) -> tuple[int, ...]:
    """``Request.prefix`` validated: a list of integer block ids in ``0 .. 2^62 - 1``."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        raise InstanceError(f"{where}: field 'prefix' must be a list of block ids, got {v!r}")
    out = []
    for k, x in enumerate(v):
        if not _is_int(x) or not 0 <= x < MAX_BLOCK_ID:
            raise InstanceError(f"{where}: field 'prefix': block id {x!r} at position {k} must "
                                "be an integer in 0..2^62-1")
        out.append(int(x))
    return tuple(out)


def _check_hidden_ratio(v: Any) -> float:
    """``limits.hidden_ratio`` validated: a finite number in (0, 64], a ratio of integers
    with a denominator of at most :data:`HIDDEN_RATIO_DENOMINATOR`."""
    if not _is_num(v) or not math.isfinite(v) or not 0 < v <= 64 \
            or abs(float(hidden_ratio_fraction(v)) - v) > 1e-12 * v:
        raise InstanceError(f"limits: field 'hidden_ratio' must be a number in (0, 64] with a "
                            f"denominator <= {HIDDEN_RATIO_DENOMINATOR} (hidden-state bytes over "
                            f"KV bytes per token), got {v!r}")
    return float(v)


@dataclass(frozen=True)
class Limits:
    """Engine limits: KV capacity ``M``, batch token budget ``C``, prefill budget ``P``."""

    kv_capacity: int
    max_batch_tokens: int
    max_prefill_tokens: int | None = None
    max_batch_size: int | None = None
    block_size: int = 1
    #: host (CPU) memory for swapped-out KV, in tokens (semantics: swap preemption). ``None``
    #: (the default) means the engine has no host memory: swapping is not part of this
    #: instance, every swap-out overflows it, and formulations that cannot represent swaps
    #: solve it. A value (``0`` included) makes swapping part of the instance.
    host_capacity: int | None = None
    #: whether a request may hold its cache as hidden states (Apt-Serve; semantics: hidden
    #: cache). False (the default) keeps every entry on KV cache and the JSON unchanged;
    #: formulations and bounds that assume KV-only memory refuse an instance with it.
    hidden_cache: bool = False
    #: hidden-state bytes per token over KV bytes per token (semantics: hidden cache, rule
    #: "memory"): ``hidden / (2 * kv_heads * head_dim)`` of the model
    #: (:func:`optsched.workloads.capacity.hidden_kv_ratio`), 1/2 for multi-head attention (the
    #: default; the JSON then has no such key), 2 for Llama-3-8B, 4 for Llama-2-70B.
    hidden_ratio: float = HIDDEN_RATIO_MHA

    def __post_init__(self):
        if not isinstance(self.hidden_cache, (bool, np.bool_)):
            raise InstanceError(f"limits: field 'hidden_cache' must be true or false, "
                                f"got {self.hidden_cache!r}")
        object.__setattr__(self, "hidden_cache", bool(self.hidden_cache))
        object.__setattr__(self, "hidden_ratio", _check_hidden_ratio(self.hidden_ratio))
        for name in ("kv_capacity", "max_batch_tokens", "block_size"):
            v = getattr(self, name)
            if not _is_int(v) or not 1 <= v <= MAX_COUNT:
                raise InstanceError(f"limits: field {name!r} must be an integer in 1..{MAX_COUNT}, "
                                    f"got {v!r}")
            object.__setattr__(self, name, int(v))
        for name in ("max_prefill_tokens", "max_batch_size", "host_capacity"):
            v = getattr(self, name)
            if v is not None:
                lo = 0 if name == "host_capacity" else 1
                if not _is_int(v) or not lo <= v <= MAX_COUNT:
                    raise InstanceError(f"limits: field {name!r} must be an integer in "
                                        f"{lo}..{MAX_COUNT} or null, got {v!r}")
                object.__setattr__(self, name, int(v))
        if self.max_prefill_tokens is not None and self.max_prefill_tokens > self.max_batch_tokens:
            raise InstanceError(
                f"limits: max_prefill_tokens P={self.max_prefill_tokens} exceeds "
                f"max_batch_tokens C={self.max_batch_tokens}"
            )

    @property
    def prefill_budget(self) -> int:
        """``P`` if set, else ``C``."""
        return self.max_prefill_tokens if self.max_prefill_tokens is not None else self.max_batch_tokens

    def kv_footprint(self, cached: Tokens) -> Tokens:
        """KV tokens charged for ``cached`` tokens (an int or an integer array, elementwise):
        rounded up to whole blocks of ``block_size`` (docs/semantics.md section 3). The one block-rounding
        function: the evaluator, the simulator, the policies and the models all call it."""
        return block_round(cached, self.block_size)

    def hidden_footprint(self, cached: Tokens) -> Tokens:
        """KV-token memory charged for ``cached`` tokens held as hidden cache: ``hidden_ratio``
        of the KV, in whole blocks (:func:`hidden_block_round`)."""
        return hidden_block_round(cached, self.block_size, self.hidden_ratio)

    def footprint(self, cached: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """Elementwise :meth:`kv_footprint` or :meth:`hidden_footprint` by cache type."""
        return np.where(hidden, self.hidden_footprint(cached), self.kv_footprint(cached))

    @property
    def swapping(self) -> bool:
        """Whether swap preemption is part of this instance (``host_capacity`` is given)."""
        return self.host_capacity is not None

    def to_dict(self) -> dict[str, Any]:
        # host_capacity only when given, hidden_cache only when on and hidden_ratio only when
        # not the default, so instances without these extensions keep their JSON
        return {f.name: getattr(self, f.name) for f in fields(self)
                if (f.name != "host_capacity" or self.host_capacity is not None)
                and (f.name != "hidden_cache" or self.hidden_cache)
                and (f.name != "hidden_ratio" or self.hidden_ratio != HIDDEN_RATIO_MHA)}

    @classmethod
    def from_dict(cls, d: Any) -> Limits:
        if not isinstance(d, dict):
            raise InstanceError(f"limits: expected an object, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        extra = set(d) - known
        if extra:
            raise InstanceError(f"limits: unknown fields {sorted(extra)}")
        for k in ("kv_capacity", "max_batch_tokens"):
            if k not in d:
                raise InstanceError(f"limits: missing field {k!r}")
        return cls(**d)


# -- clusters (docs/semantics.md section 6, "Clusters") ------------------------------------

#: engine roles: ``both`` runs any entry, ``prefill`` only prefill entries, ``decode`` only
#: decode entries (section 3's phase)
ROLES = ("both", "prefill", "decode")
#: largest transfer-link number accepted (bytes, bytes per second, seconds)
_MAX_LINK = 1e18


def _where(engine: Any) -> str:
    return f"cluster: engine {engine!r}" if engine is not None else "cluster"


@dataclass(frozen=True)
class TransferLink:
    """The link a request's KV moves over between two engines (semantics section 6,
    "Clusters"): ``k`` tokens take ``fixed + k * bytes_per_token / bandwidth`` seconds (time
    units under unit time). Transfers neither share it nor slow batches down."""

    bytes_per_token: float
    bandwidth: float
    fixed: float = 0.0

    def __post_init__(self):
        for name in ("bytes_per_token", "bandwidth", "fixed"):
            v = getattr(self, name)
            if not _is_num(v) or not math.isfinite(v) or not 0 <= v <= _MAX_LINK \
                    or (name == "bandwidth" and v == 0):
                rng = "(0, 1e18]" if name == "bandwidth" else "[0, 1e18]"
                raise InstanceError(f"cluster: transfer field {name!r} must be a finite number in "
                                    f"{rng}, got {v!r}")
            object.__setattr__(self, name, float(v))

    def time(self, tokens: Tokens) -> Any:
        """``fixed + tokens * bytes_per_token / bandwidth`` (elementwise for an array)."""
        return self.fixed + tokens * self.bytes_per_token / self.bandwidth

    def to_dict(self) -> dict[str, Any]:
        return {"fixed": self.fixed, "bytes_per_token": self.bytes_per_token,
                "bandwidth": self.bandwidth}

    @classmethod
    def from_dict(cls, d: Any) -> TransferLink:
        if not isinstance(d, dict):
            raise InstanceError(f"cluster: field 'transfer' must be an object, got {d!r}")
        extra = set(d) - {"fixed", "bytes_per_token", "bandwidth"}
        if extra:
            raise InstanceError(f"cluster: transfer: unknown fields {sorted(extra)}")
        for k in ("bytes_per_token", "bandwidth"):
            if k not in d:
                raise InstanceError(f"cluster: transfer: missing field {k!r}")
        return cls(**d)


@dataclass(frozen=True)
class Engine:
    """One engine of a cluster: its id, role, and its own limits and cost model (None: the
    instance's), the GPUs it occupies and its optional hourly cost (semantics section 6)."""

    id: str
    role: str = "both"
    limits: Limits | None = None
    cost_model: CostModel | None = None
    gpus: int = 1
    hourly_cost: float | None = None

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id or not self.id.isprintable():
            raise InstanceError(f"cluster: engine id must be non-empty printable text, "
                                f"got {self.id!r}")
        where = _where(self.id)
        if self.role not in ROLES:
            raise InstanceError(f"{where}: field 'role' must be one of {', '.join(ROLES)}, "
                                f"got {self.role!r}")
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise InstanceError(f"{where}: field 'limits' must be a Limits")
        if self.cost_model is not None and not isinstance(self.cost_model, CostModel):
            raise InstanceError(f"{where}: field 'cost_model' must be a CostModel")
        if not _is_int(self.gpus) or not 1 <= self.gpus <= 1_000_000:
            raise InstanceError(f"{where}: field 'gpus' must be an integer in 1..1000000, "
                                f"got {self.gpus!r}")
        object.__setattr__(self, "gpus", int(self.gpus))
        h = self.hourly_cost
        if h is not None:
            if not _is_num(h) or not math.isfinite(h) or not 0 <= h <= _MAX_LINK:
                raise InstanceError(f"{where}: field 'hourly_cost' must be a finite number "
                                    f">= 0, got {h!r}")
            object.__setattr__(self, "hourly_cost", float(h))

    @property
    def prefills(self) -> bool:
        """Whether prefill entries may run here (role ``prefill`` or ``both``)."""
        return self.role != "decode"

    @property
    def decodes(self) -> bool:
        """Whether decode entries may run here (role ``decode`` or ``both``)."""
        return self.role != "prefill"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "role": self.role, "gpus": self.gpus}
        if self.limits is not None:
            d["limits"] = self.limits.to_dict()
        if self.cost_model is not None:
            d["cost_model"] = self.cost_model.to_dict()
        if self.hourly_cost is not None:
            d["hourly_cost"] = self.hourly_cost
        return d

    @classmethod
    def from_dict(cls, d: Any, position: int) -> Engine:
        if not isinstance(d, dict):
            raise InstanceError(f"cluster: engine #{position}: expected an object, got {d!r}")
        where = _where(d.get("id", f"#{position}"))
        extra = set(d) - {f.name for f in fields(cls)}
        if extra:
            raise InstanceError(f"{where}: unknown fields {sorted(extra)}")
        if "id" not in d:
            raise InstanceError(f"{where}: missing field 'id'")
        kw = dict(d)
        try:
            if "limits" in kw:
                kw["limits"] = Limits.from_dict(kw["limits"])
            if "cost_model" in kw:
                kw["cost_model"] = cost_model_from_dict(kw["cost_model"])
        except InstanceError as e:
            raise InstanceError(f"{where}: {e}") from None
        return cls(**kw)


@dataclass(frozen=True)
class Cluster:
    """The engines of an instance and the link between them (semantics section 6,
    "Clusters"). Checked here: a non-empty list of engines with unique ids, a
    prefill-capable engine for every decode engine and the other way round, and a transfer
    link whenever a role other than ``both`` is declared; the checks that need the
    instance (limits, requests) are :meth:`Instance.__post_init__`'s."""

    engines: tuple[Engine, ...]
    transfer: TransferLink | None = None

    def __post_init__(self):
        engines = tuple(self.engines) if isinstance(self.engines, (list, tuple)) else None
        if not engines or not all(isinstance(e, Engine) for e in engines):
            raise InstanceError("cluster: field 'engines' must be a non-empty list of engines")
        object.__setattr__(self, "engines", engines)
        seen: set[str] = set()
        for e in engines:
            if e.id in seen:
                raise InstanceError(f"cluster: engine {e.id!r}: duplicate id")
            seen.add(e.id)
        if self.transfer is not None and not isinstance(self.transfer, TransferLink):
            raise InstanceError("cluster: field 'transfer' must be a TransferLink")
        roles = {e.role for e in engines}
        if "prefill" in roles and not any(e.decodes for e in engines):
            raise InstanceError("cluster: a 'prefill' engine needs an engine of role 'decode' "
                                "or 'both' to decode on")
        if "decode" in roles and not any(e.prefills for e in engines):
            raise InstanceError("cluster: a 'decode' engine needs an engine of role 'prefill' "
                                "or 'both' to prefill on")
        if roles != {"both"} and self.transfer is None:
            raise InstanceError("cluster: roles 'prefill' and 'decode' need a transfer link "
                                "(field 'transfer')")

    @property
    def n(self) -> int:
        return len(self.engines)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(e.id for e in self.engines)

    @property
    def gpus(self) -> int:
        return sum(e.gpus for e in self.engines)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"engines": [e.to_dict() for e in self.engines]}
        if self.transfer is not None:
            d["transfer"] = self.transfer.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Cluster:
        if not isinstance(d, dict):
            raise InstanceError(f"cluster: expected an object, got {type(d).__name__}")
        extra = set(d) - {"engines", "transfer"}
        if extra:
            raise InstanceError(f"cluster: unknown fields {sorted(extra)}")
        engines = d.get("engines")
        if not isinstance(engines, list) or not engines:
            raise InstanceError("cluster: field 'engines' must be a non-empty list")
        link = d.get("transfer")
        return cls(tuple(Engine.from_dict(e, k) for k, e in enumerate(engines)),
                   None if link is None else TransferLink.from_dict(link))


def _check_cluster(cluster: Cluster, limits: Limits, cost_model: CostModel,
                   prompt: np.ndarray, output: np.ndarray, ids: Sequence[str]) -> None:
    """The checks of a cluster that need the instance (semantics section 6, "Clusters",
    loading): no swapping or hidden cache on any engine, and every request servable."""
    for e in cluster.engines:
        lim = e.limits or limits
        if lim.host_capacity is not None or lim.hidden_cache:
            who = _where(e.id) if e.limits is not None else "cluster"
            what = "host_capacity (swapping)" if lim.host_capacity is not None \
                else "hidden_cache"
            raise InstanceError(f"{who}: limits enable {what}, which is not defined across "
                                "engines; drop it from the limits of a cluster instance")
    if not len(ids):
        return
    peak = prompt + output - 1
    pre_fit = np.zeros(len(ids), bool)
    dec_fit = np.zeros(len(ids), bool)
    for e in cluster.engines:
        lim = e.limits or limits
        if e.prefills:
            pre_fit |= lim.kv_footprint(prompt) <= lim.kv_capacity
        if e.decodes:
            dec_fit |= lim.kv_footprint(peak) <= lim.kv_capacity
    if cluster.transfer is not None:
        ok = pre_fit & ((output == 1) | dec_fit)
    else:  # no link: every engine is 'both'; one engine serves the request alone
        ok = dec_fit
    bad = np.flatnonzero(~ok)
    if bad.size:
        k = int(bad[0])
        raise InstanceError(
            f"request {ids[k]!r}: no engine of the cluster can serve it (prompt {int(prompt[k])}, "
            f"prompt + output - 1 = {int(peak[k])} KV tokens: it needs a prefill-capable "
            "engine holding the prompt and a decode-capable one holding the peak, linked, or "
            "one engine holding the peak)")


_PLAIN_KEYS = {"id": None, "arrival": None, "prompt": None, "output": None}.keys()
_PREFIX_KEYS = {"id": None, "arrival": None, "prompt": None, "output": None,
                "prefix": None}.keys()

#: the columns of plain requests: ids, arrivals, prompts, outputs and, when some request lists
#: block ids, their CSR table ``(ptr, flat ids)`` (else None)
Columns = tuple[list[str], np.ndarray, np.ndarray, np.ndarray,
                "tuple[np.ndarray, np.ndarray] | None"]


def _plain_columns(reqs: list) -> Columns | None:
    """The columns of a JSON request list when every request is plain -- exactly the keys
    ``id``, ``arrival``, ``prompt``, ``output`` (and ``prefix``, a list of ints, on some or
    all) with a string id, an int or float arrival and int token counts that fit int64 --
    else None (``Request.from_dict`` then checks each one and names the first bad request)."""
    prefixed = False
    if not all(type(r) is dict and r.keys() == _PLAIN_KEYS for r in reqs):
        if not all(type(r) is dict and (r.keys() == _PLAIN_KEYS or r.keys() == _PREFIX_KEYS)
                   for r in reqs):
            return None
        prefixed = True
    ids = [r["id"] for r in reqs]
    arr = [r["arrival"] for r in reqs]
    inp = [r["prompt"] for r in reqs]
    out = [r["output"] for r in reqs]
    if not (all(type(v) is str for v in ids) and all(type(v) in (int, float) for v in arr)
            and all(type(v) is int for v in inp) and all(type(v) is int for v in out)):
        return None
    prefix = _prefix_columns(reqs) if prefixed else None
    if prefixed and prefix is None:
        return None
    try:
        return ids, np.array(arr, dtype=np.float64), np.array(inp, dtype=np.int64), \
            np.array(out, dtype=np.int64), prefix
    except OverflowError:  # an integer beyond int64: the per-request check names it
        return None


def _prefix_columns(reqs: list) -> tuple[np.ndarray, np.ndarray] | None:
    """The CSR table of the requests' ``prefix`` lists when every one is a list of ints in
    range (else None: the per-request check names the bad one)."""
    lists = [r.get("prefix", ()) for r in reqs]
    if not all(type(v) is list or v == () for v in lists):
        return None
    lens = np.fromiter((len(v) for v in lists), np.int64, count=len(lists))
    ptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    flat_list = [x for v in lists for x in v]
    if not all(type(x) is int for x in flat_list):
        return None
    try:
        flat = np.array(flat_list, dtype=np.int64)
    except OverflowError:
        return None
    if flat.size and (flat.min() < 0 or flat.max() >= MAX_BLOCK_ID):
        return None
    return ptr, flat


def _bulk_columns(ids: tuple[str, ...], arrival, prompt, output
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three columns as float64 / int64 arrays of ``len(ids)`` (a clear error otherwise)."""
    arr = np.array(arrival, dtype=np.float64)
    cols = []
    for name, col in (("prompt", prompt), ("output", output)):
        c = np.asarray(col)
        if c.dtype.kind not in "iu":
            raise InstanceError(f"instance: column {name!r} must hold integers, got dtype {c.dtype}")
        cols.append(c.astype(np.int64))
    for name, c in (("arrival", arr), ("prompt", cols[0]), ("output", cols[1])):
        if c.shape != (len(ids),):
            raise InstanceError(f"instance: column {name!r} has shape {c.shape}, expected "
                                f"({len(ids)},) like the ids")
    return arr, cols[0], cols[1]


def _bulk_check_requests(ids: tuple[str, ...], arr: np.ndarray, inp: np.ndarray,
                         out: np.ndarray, limits: Limits) -> None:
    """``Request.__post_init__`` then ``Instance.__post_init__`` on whole columns, in their
    order: the first request with a bad field raises the per-request message (every request is
    built before the instance checks any), then the first duplicate id or request whose
    ``I + O - 1`` exceeds ``M`` in blocks (docs/semantics.md sections 2-3)."""
    bad = np.array([not isinstance(r, str) or not r or not r.isprintable() for r in ids],
                   dtype=bool).reshape(len(ids))
    bad |= ~np.isfinite(arr) | (arr < 0) | (arr > MAX_ARRIVAL)
    bad |= (inp < 1) | (inp > MAX_COUNT) | (out < 1) | (out > MAX_COUNT)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        Request(id=ids[k], arrival=arr[k].item(), prompt=int(inp[k]), output=int(out[k]))
        raise AssertionError(f"request {ids[k]!r} passed Request's checks")  # pragma: no cover
    over = np.flatnonzero(limits.kv_footprint(inp + out - 1) > limits.kv_capacity)
    k_over = int(over[0]) if over.size else len(ids)
    seen: set[str] = set()
    for rid in ids[:k_over + 1]:
        if rid in seen:
            raise InstanceError(f"request {rid!r}: duplicate id")
        seen.add(rid)
    if k_over < len(ids):
        r = Request(id=ids[k_over], arrival=float(arr[k_over]), prompt=int(inp[k_over]),
                    output=int(out[k_over]))
        raise _over_capacity(r, limits)


def _prefix_json(prefix: tuple[int, ...]) -> str:
    return ',"prefix":[' + ",".join(map(str, prefix)) + "]" if prefix else ""


def _plain_requests_json(requests: Sequence[Request]) -> str | None:
    """The ``requests`` list of :attr:`Instance.content_hash`'s text when every request is
    plain (id, arrival, prompt, output, nothing else), written as ``json.dumps(...,
    sort_keys=True, separators=(",", ":"))`` writes it (``float.__repr__``/``int.__repr__``
    numbers, ASCII-escaped ids) but ~4x faster than 19K dictionaries through the encoder
    (start-up time: the hash is computed by every ``simulate -o`` and ``evaluate``); None
    otherwise, and the hash takes the encoder's path."""
    enc = json.encoder.encode_basestring_ascii
    parts = []
    for r in requests:
        a, i, o = r.arrival, r.prompt, r.output
        if r.predicted_output is not None or r.cls is not None or r.ttft_slo is not None \
                or r.tpot_slo is not None or r.deadline is not None \
                or type(a) not in (float, int) or type(i) is not int or type(o) is not int \
                or not math.isfinite(a):
            return None
        parts.append(f'{{"arrival":{a!r},"id":{enc(r.id)},"output":{o!r}'
                     f'{_prefix_json(r.prefix)},"prompt":{i!r}}}')
    return "[" + ",".join(parts) + "]"


def _over_capacity(r: Request, limits: Limits) -> InstanceError:
    """The error for a request whose ``I + O - 1`` exceeds ``M`` in blocks (it can never finish)."""
    need = limits.kv_footprint(r.peak_kv)
    return InstanceError(
        f"request {r.id!r}: prompt + output - 1 = {r.peak_kv} KV tokens"
        + (f" ({need} in blocks of {limits.block_size})" if need != r.peak_kv else "")
        + f" exceeds kv_capacity M = {limits.kv_capacity}; it can never finish")


@dataclass(frozen=True, eq=False)
class Instance:
    """A workload: requests, engine limits and a batch-time cost model."""

    name: str
    limits: Limits
    cost_model: CostModel = field(default_factory=UnitCost)
    requests: tuple[Request, ...] = ()
    #: the engines serving the requests (semantics section 6, "Clusters"); None: one engine
    #: with ``limits`` and ``cost_model``, exactly sections 2-5
    cluster: Cluster | None = None

    def __post_init__(self):
        self._check_header()
        reqs = tuple(self.requests)
        object.__setattr__(self, "requests", reqs)
        seen: set[str] = set()
        M = self.limits.kv_capacity
        for r in reqs:
            if not isinstance(r, Request):
                raise InstanceError(f"instance: requests must be Request objects, got {type(r).__name__}")
            if r.id in seen:
                raise InstanceError(f"request {r.id!r}: duplicate id")
            seen.add(r.id)
            if self.limits.kv_footprint(r.peak_kv) > M:
                raise _over_capacity(r, self.limits)
        if any(r.prefix for r in reqs):
            lens = np.fromiter((len(r.prefix) for r in reqs), np.int64, count=len(reqs))
            ptr = np.zeros(len(reqs) + 1, np.int64)
            np.cumsum(lens, out=ptr[1:])
            flat = np.fromiter((x for r in reqs for x in r.prefix), np.int64, count=int(ptr[-1]))
            self._check_prefix(ptr, flat)
        self._attach_cluster(self.cluster)

    def _attach_cluster(self, cluster: Cluster | None) -> None:
        """Set and check ``cluster`` (semantics section 6, "Clusters", loading)."""
        if cluster is None:
            return
        if not isinstance(cluster, Cluster):
            raise InstanceError("instance: field 'cluster' must be a Cluster")
        object.__setattr__(self, "cluster", cluster)
        _check_cluster(cluster, self.limits, self.cost_model, self.prompt, self.output, self.ids)
        roles = sorted({e.role for e in cluster.engines} - {"both"})
        if self.has_prefix and not self.single_engine and roles:
            raise InstanceError(f"instance: requests list prefix block ids and the cluster has "
                                f"engines of role {roles[0]!r}; prefix reuse is modelled on "
                                "replicas only (role 'both'): moving cached blocks between "
                                "engines is not (docs/semantics.md section 6)")

    def _check_prefix(self, ptr: np.ndarray, flat: np.ndarray,
                      prompt: np.ndarray | None = None) -> None:
        """The prefix-reuse checks of docs/semantics.md section 6 ("Prefix reuse") on the
        requests' block ids, and the extensions it is not combined with."""
        lim = self.limits
        if lim.swapping or lim.hidden_cache:
            what = "host_capacity" if lim.swapping else "hidden_cache"
            raise InstanceError(f"instance: requests list prefix block ids and limits set "
                                f"{what}; prefix reuse is not modelled together with swap "
                                "preemption or hidden cache")
        if prompt is None:
            prompt = np.fromiter((r.prompt for r in self.requests), np.int64,
                                 count=len(self.requests))
        check_prefixes([r.id for r in self.requests], prompt, ptr, flat, lim.block_size)

    def _check_header(self) -> None:
        """The instance-level fields (name, limits, cost model), as ``__post_init__`` checks them."""
        if not isinstance(self.name, str) or not self.name.isprintable():
            raise InstanceError(f"instance: field 'name' must be a string of printable text, "
                                f"got {self.name!r}")
        if not isinstance(self.limits, Limits):
            raise InstanceError("instance: field 'limits' must be a Limits")
        if not isinstance(self.cost_model, CostModel):
            raise InstanceError("instance: field 'cost_model' must be a CostModel")

    @classmethod
    def from_columns(cls, name: str, limits: Limits, cost_model: CostModel, ids: Sequence[str],
                     arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray,
                     prefix: tuple[np.ndarray, np.ndarray] | None = None) -> Instance:
        """An instance of plain requests (no predictions, classes or SLOs) built from columns:
        equal to ``Instance(name, limits, cost_model, tuple(Request(...) ...))`` and raising the
        same :class:`InstanceError` (same request, same field, same message) on the first bad
        request, but with the checks of ``Request.__post_init__`` and ``__post_init__``
        (semantics section 2: ``I, O >= 1``, arrivals finite, ids unique, ``I + O - 1`` fits
        ``M`` in blocks) done on whole arrays, so loading a 19K-request trace costs
        milliseconds instead of 19K validated constructions. The columnar views (``ids``,
        ``index``, ``arrival``, ``prompt``, ``output``) come pre-filled. ``prefix``: the
        requests' block ids as a CSR pair ``(ptr, flat ids)`` (docs/semantics.md section 6,
        "Prefix reuse"), checked on the arrays too."""
        ids = tuple(ids)
        arr, inp, out = _bulk_columns(ids, arrival, prompt, output)
        _bulk_check_requests(ids, arr, inp, out, limits)
        inst = object.__new__(cls)
        for k, v in (("name", name), ("limits", limits), ("cost_model", cost_model)):
            object.__setattr__(inst, k, v)
        inst._check_header()
        if prefix is not None:
            ptr, flat = np.asarray(prefix[0], np.int64), np.asarray(prefix[1], np.int64)
            if ptr.shape != (len(ids) + 1,) or ptr[0] != 0 or ptr[-1] != flat.size \
                    or (np.diff(ptr) < 0).any():
                raise InstanceError("instance: the prefix columns are not a CSR table of the "
                                    "requests' block ids")
            bad = np.flatnonzero((flat < 0) | (flat >= MAX_BLOCK_ID))
            if bad.size:  # the per-request message
                i = int(np.searchsorted(ptr, int(bad[0]), side="right") - 1)
                _check_prefix_ids(f"request {ids[i]!r}", flat[ptr[i]:ptr[i + 1]].tolist())
            fl = flat.tolist()
            pre = [tuple(fl[a:b]) for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist())]
        else:
            pre = [()] * len(ids)
        reqs = []
        for rid, a, i, o, x in zip(ids, arr.tolist(), inp.tolist(), out.tolist(), pre):
            r = object.__new__(Request)  # every field checked above, on the arrays
            r.__dict__.update(id=rid, arrival=a, prompt=i, output=o, predicted_output=None,
                              cls=None, ttft_slo=None, tpot_slo=None, deadline=None, prefix=x)
            reqs.append(r)
        object.__setattr__(inst, "requests", tuple(reqs))
        if prefix is not None and ptr[-1]:
            inst._check_prefix(ptr, flat, inp)
            inst.__dict__["prefix_index"] = build_index((ptr, flat), inp, limits.block_size)
        inst.__dict__.update(ids=ids, index={rid: k for k, rid in enumerate(ids)},
                             arrival=arr, prompt=inp, output=out)
        return inst

    # -- identity -------------------------------------------------------------
    def __eq__(self, other):
        if not isinstance(other, Instance):
            return NotImplemented
        return (
            self.name == other.name
            and self.limits == other.limits
            and self.cost_model == other.cost_model
            and self.requests == other.requests
            and self.cluster == other.cluster
        )

    __hash__ = None  # type: ignore[assignment]

    # -- columnar views (cached; the instance is immutable) --------------------
    @cached_property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.requests)

    @cached_property
    def index(self) -> dict[str, int]:
        """Request id -> 0-based position."""
        return {r.id: i for i, r in enumerate(self.requests)}

    @cached_property
    def arrival(self) -> np.ndarray:
        return np.array([r.arrival for r in self.requests], dtype=np.float64)

    @cached_property
    def prompt(self) -> np.ndarray:
        return np.array([r.prompt for r in self.requests], dtype=np.int64)

    @cached_property
    def output(self) -> np.ndarray:
        return np.array([r.output for r in self.requests], dtype=np.int64)

    @property
    def n(self) -> int:
        return len(self.requests)

    @cached_property
    def prefix_index(self) -> PrefixIndex | None:
        """The requests' block ids as dense indices (docs/semantics.md section 6, "Prefix
        reuse"), or None when no request lists any: then the instance means exactly what it
        meant without prefix reuse."""
        if not any(r.prefix for r in self.requests):
            return None
        return build_index([r.prefix for r in self.requests], self.prompt,
                           self.limits.block_size)

    @property
    def has_prefix(self) -> bool:
        """Whether some request lists prefix block ids (prefix reuse is part of the instance)."""
        return self.prefix_index is not None

    def request(self, rid: str) -> Request:
        return self.requests[self.index[rid]]

    # -- engines (semantics section 6, "Clusters") ----------------------------------------
    @property
    def n_engines(self) -> int:
        """Engines serving the instance: 1 without a cluster."""
        return 1 if self.cluster is None else self.cluster.n

    @property
    def engine_ids(self) -> tuple[str, ...]:
        """The engines' ids; ``("0",)`` without a cluster (its one implicit engine)."""
        return ("0",) if self.cluster is None else self.cluster.ids

    def engine(self, k: int) -> Engine:
        """Engine ``k`` with its limits and cost model resolved (the instance's where it
        states none); without a cluster, the implicit engine ``"0"``."""
        if self.cluster is None:
            if k != 0:
                raise IndexError(f"engine {k}: the instance has one engine")
            return Engine("0", "both", self.limits, self.cost_model)
        e = self.cluster.engines[k]
        return dataclasses.replace(e, limits=e.limits or self.limits,
                                   cost_model=e.cost_model or self.cost_model)

    @property
    def single_engine(self) -> bool:
        """Whether the instance means exactly sections 2-5: no cluster, or a cluster of one
        engine of role ``both`` with the instance's own limits and cost model."""
        if self.cluster is None:
            return True
        if self.cluster.n != 1:
            return False
        e = self.cluster.engines[0]
        return e.role == "both" and (e.limits is None or e.limits == self.limits) \
            and (e.cost_model is None or e.cost_model == self.cost_model)

    def require_one_engine(self, what: str) -> None:
        """Refuse (:class:`InstanceError`, one line) an instance that is not
        :attr:`single_engine`: ``what`` (a formulation, a bound, a search) models one engine,
        and its optimum or bound would be one engine's (semantics section 6, "Clusters")."""
        if not self.single_engine:
            assert self.cluster is not None
            shape = f"a cluster of {self.cluster.n} engines" if self.cluster.n > 1 else \
                "a one-engine cluster whose engine has its own role, limits or cost model"
            raise InstanceError(f"{what} models one engine, but the instance declares {shape} "
                                "(docs/semantics.md section 6, 'Clusters'); simulate it with a "
                                "router (optsched simulate --router) and judge it with "
                                "optsched evaluate")

    def for_engine(self, k: int) -> Instance:
        """The requests on engine ``k``'s limits and cost model, without the cluster: what an
        engine's policy is bound to. Not checked again (a request may not fit this engine:
        whoever routes must not send it there)."""
        e = self.engine(k)
        inst = object.__new__(Instance)
        inst.__dict__.update({k2: v for k2, v in self.__dict__.items()
                              if k2 not in ("content_hash", "prefix_index")})
        object.__setattr__(inst, "limits", e.limits)
        object.__setattr__(inst, "cost_model", e.cost_model)
        object.__setattr__(inst, "cluster", None)
        return inst

    def replace(self, **changes) -> Instance:
        """A copy with fields replaced (validated again)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(changes)
        return Instance(**d)

    def with_default_slos(self, ttft_slo: float | None = None,
                          tpot_slo: float | None = None) -> Instance:
        """A copy in which every request lacking ``ttft_slo`` / ``tpot_slo`` gets the given
        default (``None``: leave the field alone); a request's own SLO is never overridden
        (docs/semantics.md section 4, SLO attainment)."""
        for flag, v in (("--ttft-slo", ttft_slo), ("--tpot-slo", tpot_slo)):
            if v is not None and (not _is_num(v) or not math.isfinite(v) or v <= 0):
                raise InstanceError(f"{flag} must be a finite number > 0, got {v!r}")
        if ttft_slo is None and tpot_slo is None:
            return self
        reqs = tuple(dataclasses.replace(
            r, ttft_slo=r.ttft_slo if r.ttft_slo is not None else ttft_slo,
            tpot_slo=r.tpot_slo if r.tpot_slo is not None else tpot_slo) for r in self.requests)
        return self.replace(requests=reqs)

    # -- JSON -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = {
            "name": self.name,
            "limits": self.limits.to_dict(),
            "cost_model": self.cost_model.to_dict(),
            "requests": [r.to_dict() for r in self.requests],
        }
        if self.cluster is not None:  # without one the JSON is unchanged
            d["cluster"] = self.cluster.to_dict()
        return d

    @cached_property
    def content_hash(self) -> str:
        """SHA-256 of everything that changes a result: limits, cost model (its coefficients,
        not its preset label) and requests, not the name. Schedule files carry it, so a
        schedule replayed on another instance is noticed (:func:`optsched.schedule.instance_check`)."""
        reqs = _plain_requests_json(self.requests)
        d: dict[str, Any] = {
            "limits": self.limits.to_dict(), "cost_model": self.cost_model.to_dict(),
            "requests": [] if reqs is not None else [r.to_dict() for r in self.requests]}
        d["cost_model"].pop("preset", None)
        if self.cluster is not None:  # sorts before "requests", which stays the last key
            d["cluster"] = self.cluster.to_dict()
            for e in d["cluster"]["engines"]:
                e.get("cost_model", {}).pop("preset", None)
        text = json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False)
        if reqs is not None:  # "requests" is the last key: '..."requests":[]}'
            text = text[:-3] + reqs + "}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: Any) -> Instance:
        if not isinstance(d, dict):
            raise InstanceError(f"instance: expected a JSON object, got {type(d).__name__}")
        extra = set(d) - {"name", "limits", "cost_model", "requests", "cluster"}
        if extra:
            raise InstanceError(f"instance: unknown fields {sorted(extra)}")
        for k in ("limits", "cost_model", "requests"):
            if k not in d:
                raise InstanceError(f"instance: missing field {k!r}")
        if not isinstance(d["requests"], list):
            raise InstanceError("instance: field 'requests' must be a list")
        name, limits = d.get("name", "instance"), Limits.from_dict(d["limits"])
        cost_model = cost_model_from_dict(d["cost_model"])
        cluster = None if d.get("cluster") is None else Cluster.from_dict(d["cluster"])
        cols = _plain_columns(d["requests"])
        if cols is not None:  # every request plain: the same checks, on whole columns
            inst = cls.from_columns(name, limits, cost_model, *cols[:4], prefix=cols[4])
            inst._attach_cluster(cluster)
            return inst
        return cls(name=name, limits=limits, cost_model=cost_model,
                   requests=tuple(Request.from_dict(r, i) for i, r in enumerate(d["requests"])),
                   cluster=cluster)

    @classmethod
    def from_json(cls, text: str) -> Instance:
        return cls.from_dict(jsonio.loads(text, InstanceError, "instance"))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Instance:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise InputFileError(f"{p}: cannot read instance file: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise InputFileError(f"{p}: not a UTF-8 JSON instance ({e.reason} at byte {e.start})") from None
        try:
            return cls.from_json(text)
        except InstanceError as e:
            raise InstanceError(f"{p}: {e}") from None

