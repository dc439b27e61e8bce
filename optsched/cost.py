"""Batch-time cost models (semantics section 5).

A cost model prices one batch from its entries. Every consumer (the evaluator,
the simulator, the formulations) prices batches through :meth:`CostModel.batch_times`
or :meth:`CostModel.batch_time`, so there is one definition of a batch's time.

* :class:`UnitCost` -- every non-empty batch takes 1 (the online-scheduling paper).
* :class:`LinearCost` -- InferMax section 3.2::

      t = k0 + k1*sum c
          + kpq*sum_prefill c^2 + kpm*sum_prefill c*m + kpl*sum_prefill m + kpr*#prefill
          + kdm*sum_decode m + kdr*#decode
          + kpb*[batch has a prefill entry] + kdb*[batch has a decode entry]

  ``m`` is the request's cached tokens *before* the batch. The first seven
  coefficients are semantics section 5's model; ``kpl`` (InferMax's ``m_p`` term,
  prefill attention reading the cached KVs), ``kpb`` and ``kdb`` (the prefill and
  decode attention kernels' launch biases ``b_p``, ``b_d``) are optional
  extensions, zero by default, needed to price the InferMax reference
  coefficients exactly (``shared/data/README.md``).

Times are in **seconds** (trace arrivals are in seconds); the published
coefficients are per-layer milliseconds and are converted in :data:`PRESETS`.

Swap transfers (semantics: swap preemption) are priced separately by
:meth:`CostModel.swap_times`: ``kswap`` seconds per KV token moved between GPU and host
memory, in either direction, added to the batch's compute time (the transfer is not
overlapped with compute; BROS overlaps it asynchronously, so this model charges BROS's
swaps at most what BROS pays, never less). See :data:`KSWAP_DEFAULT` for the default.

Hidden cache (semantics: hidden cache; Apt-Serve eq. 6) is priced by
:meth:`CostModel.hidden_times`: an entry whose request holds its cache as hidden states
re-projects its ``m`` cached tokens to keys and values, ``rho * m`` seconds more, in every
batch it joins. ``rho`` is **fitted** from the profiling data (:func:`optsched.workloads.fit.fit_rho`
on the QKV projection timings; the paper profiles it in about 30 s) for each preset, stated
in :data:`RHO_FITTED`; a linear model without a stated ``rho`` takes :data:`RHO_DEFAULT`
(Llama-2-7B on one A100, the default preset's model); unit time takes 0 (a parameter).
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .errors import InstanceError


def kswap_from_hardware(layers: int, kv_dims: int, link_bytes_per_second: float,
                        dtype_bytes: int = 2, links: int = 1) -> float:
    """Seconds to move one token's KV over PCIe: ``2 * layers * kv_dims * dtype_bytes`` bytes
    (a key and a value vector of ``kv_dims`` per layer), split over ``links`` GPUs' links
    (tensor parallelism shards the KV), at ``link_bytes_per_second`` each."""
    return 2 * layers * kv_dims * dtype_bytes / links / link_bytes_per_second


#: Effective host<->GPU bandwidth of a PCIe 4.0 x16 link with pinned memory: 16 GT/s x 16
#: lanes x 128/130 encoding = 31.5 GB/s peak per direction; cudaMemcpy reaches about 25 GB/s.
PCIE4_BYTES_PER_SECOND = 25e9
#: Default ``kswap`` (seconds per token moved): Llama-2-7B in fp16 (the default preset's model),
#: 2 x 32 layers x 4096 dims x 2 bytes = 524,288 bytes per token over one PCIe 4.0 link:
#: 524,288 / 25e9 = 2.10e-5 s per token (a 1,000-token KV takes 21 ms to swap).
KSWAP_DEFAULT = kswap_from_hardware(32, 4096, PCIE4_BYTES_PER_SECOND)


#: ``rho`` (seconds per cached hidden token per batch) fitted by :func:`optsched.workloads.fit.fit_rho`
#: on ``shared/data/profiling`` (``attn_pre_proj`` median slope x K/V share x layers):
#: Llama-2-7B A100 TP1 (0.000440 ms/token/layer x 2/3 x 32), Llama-2-70B A100 TP4
#: (0.000180 x 0.2 x 80), Llama-3-8B A100 TP1 (0.000236 x 1/3 x 32). The data has no
#: Llama-3-8B H100 profile: that one is the A100 value scaled by Llama-2-7B's H100/A100 ratio
#: of the same fit (2.694e-6 / 9.390e-6), an estimate, not a fit.
RHO_FITTED = {
    "llama2-7b-a100": 9.390e-6,
    "llama2-70b-4xa100": 2.887e-6,
    "llama3-8b-a100": 2.516e-6,
    "llama3-8b-h100": 2.516e-6 * 2.694 / 9.390,
}
#: ``rho`` of a linear model that states none: the default preset's model (Llama-2-7B, A100)
RHO_DEFAULT = RHO_FITTED["llama2-7b-a100"]


def _check_rho(v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or not 0 <= v <= MAX_COEFFICIENT:
        raise InstanceError(f"cost_model: rho must be a finite number in [0, {MAX_COEFFICIENT:g}] "
                            f"(seconds per cached hidden token per batch), got {v!r}")
    return float(v)


def _check_kswap(v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or not 0 <= v <= MAX_COEFFICIENT:
        raise InstanceError(f"cost_model: kswap must be a finite number in [0, {MAX_COEFFICIENT:g}] "
                            f"(seconds per KV token swapped), got {v!r}")
    return float(v)


class CostModel(ABC):
    """Interface: price batches from per-entry arrays."""

    kind: ClassVar[str]
    #: seconds per KV token moved between GPU and host (swap preemption); see subclasses
    kswap: float = 0.0
    #: seconds per cached token of a hidden-cache entry, per batch (Apt-Serve eq. 6)
    rho: float = 0.0

    def hidden_times(self, batch_of_entry: np.ndarray, cached: np.ndarray, hidden: np.ndarray,
                     n_batches: int) -> np.ndarray:
        """Hidden-cache extra time per batch: ``rho * sum m`` over the batch's entries whose
        request holds hidden cache, ``m`` their cached tokens before the batch (semantics:
        hidden cache, rule "extra compute"; Apt-Serve eq. 6 ``t = rho m``)."""
        w = np.where(hidden, cached, 0).astype(np.float64)
        return self.rho * np.bincount(batch_of_entry, weights=w, minlength=n_batches)

    def swap_times(self, batch_of_swap: np.ndarray, tokens: np.ndarray, n_batches: int
                   ) -> np.ndarray:
        """Transfer time per batch: ``kswap * (tokens swapped out + tokens swapped in)``
        (semantics: swap preemption, rule "transfer time"). Linear in tokens."""
        moved = np.bincount(batch_of_swap, weights=tokens, minlength=n_batches)
        return self.kswap * moved.astype(np.float64)

    @abstractmethod
    def batch_times(
        self,
        batch_of_entry: np.ndarray,
        tokens: np.ndarray,
        cached: np.ndarray,
        decode: np.ndarray,
        n_batches: int,
    ) -> np.ndarray:
        """Durations of ``n_batches`` batches, vectorised over all entries.

        ``batch_of_entry[k]`` is entry k's 0-based batch index, ``tokens[k]`` its
        ``c``, ``cached[k]`` its ``m`` before the batch, ``decode[k]`` whether it is a
        decode entry (semantics section 3). A batch without entries takes 0.
        """
        ...

    def batch_time(self, tokens, cached, decode) -> float:
        """Duration of one batch given its entries' ``c``, ``m`` and decode flags."""
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.size == 0:
            return 0.0
        b = np.zeros(tokens.size, dtype=np.int64)
        return float(
            self.batch_times(b, tokens, np.asarray(cached, np.int64), np.asarray(decode, bool), 1)[
                0
            ]
        )

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        ...


@dataclass(frozen=True)
class UnitCost(CostModel):
    """Every non-empty batch takes one time unit (online-scheduling paper, section 2).

    ``kswap`` (time units per KV token swapped) is 0 by default: the unit-time model has no
    notion of bandwidth, so swaps are free unless an instance states a price."""

    kind: ClassVar[str] = "unit"
    kswap: float = 0.0
    rho: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "kswap", _check_kswap(self.kswap))
        object.__setattr__(self, "rho", _check_rho(self.rho))

    def batch_times(self, batch_of_entry, tokens, cached, decode, n_batches):
        counts = np.bincount(batch_of_entry, minlength=n_batches)
        return (counts > 0).astype(np.float64)

    def to_dict(self):
        return {"kind": "unit", "kswap": self.kswap, "rho": self.rho}


_LINEAR_KEYS = ("k0", "k1", "kpq", "kpm", "kdm", "kpr", "kdr", "kpl", "kpb", "kdb")
#: largest coefficient size accepted: real ones are below 1 (seconds per token); with token
#: counts up to ``instance.MAX_COUNT`` every batch time stays finite
MAX_COEFFICIENT = 1e9


@dataclass(frozen=True)
class LinearCost(CostModel):
    """InferMax's linear batch-time model (section 3.2; semantics section 5). Seconds."""

    kind: ClassVar[str] = "linear"
    k0: float = 0.0
    k1: float = 0.0
    kpq: float = 0.0
    kpm: float = 0.0
    kdm: float = 0.0
    kpr: float = 0.0
    kdr: float = 0.0
    kpl: float = 0.0
    kpb: float = 0.0
    kdb: float = 0.0
    #: seconds per KV token swapped (not a batch-time coefficient: see :meth:`swap_times`)
    kswap: float = KSWAP_DEFAULT
    #: seconds per cached hidden token per batch (not a batch-time coefficient: see
    #: :meth:`hidden_times`); fitted, see :data:`RHO_FITTED`
    rho: float = RHO_DEFAULT
    preset: str | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "kswap", _check_kswap(self.kswap))
        object.__setattr__(self, "rho", _check_rho(self.rho))
        for key in _LINEAR_KEYS:
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or abs(v) > MAX_COEFFICIENT:
                raise InstanceError(f"cost_model: coefficient {key} must be a finite number of at "
                                    f"most {MAX_COEFFICIENT:g} in size, got {v!r}")
            object.__setattr__(self, key, float(v))
            if key != "kdr" and v < 0:
                raise InstanceError(f"cost_model: coefficient {key} must be >= 0, got {v}")
        if self.preset is not None:
            if not isinstance(self.preset, str):
                raise InstanceError(f"cost_model: 'preset' must be a preset name, got {self.preset!r}")
            built = "PRESETS" in globals()  # False while the presets themselves are built
            if built and self.preset not in PRESETS:
                raise InstanceError(f"cost_model: unknown preset label {self.preset!r}; known presets: "
                                    f"{', '.join(sorted(PRESETS))}")
            if built and PRESETS[self.preset] != self:
                raise InstanceError(
                    f"cost_model: the coefficients differ from preset {self.preset!r}'s; drop the "
                    "'preset' label or the coefficients")
        if self.k1 + self.kdr < 0:
            raise InstanceError(
                f"cost_model: a decode token would cost k1 + kdr = {self.k1 + self.kdr} < 0"
            )

    def decode_batch_time(self, n: int, sum_cached: float) -> float:
        """Time of a batch of ``n >= 1`` decode entries holding ``sum_cached`` cached tokens:
        the model above with every prefill term zero (``c = 1`` per entry). A fast path for
        simulators; equal to :meth:`batch_times` up to float rounding."""
        return self.k0 + self.kdb + n * (self.k1 + self.kdr) + self.kdm * sum_cached

    @property
    def coefficients(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in _LINEAR_KEYS}

    def batch_times(self, batch_of_entry, tokens, cached, decode, n_batches):
        c = tokens.astype(np.float64)
        m = cached.astype(np.float64)
        pre = ~decode
        per_entry = self.k1 * c + np.where(
            pre,
            self.kpq * c * c + self.kpm * c * m + self.kpl * m + self.kpr,
            self.kdm * m + self.kdr,
        )
        # float64 even without entries: bincount of an empty array is int64, and the float
        # terms added below could not be cast into it
        t = np.bincount(batch_of_entry, weights=per_entry, minlength=n_batches).astype(np.float64)
        n_entries = np.bincount(batch_of_entry, minlength=n_batches)
        t += np.where(n_entries > 0, self.k0, 0.0)
        if self.kpb:
            t += self.kpb * (np.bincount(batch_of_entry, weights=pre, minlength=n_batches) > 0)
        if self.kdb:
            t += self.kdb * (np.bincount(batch_of_entry, weights=decode, minlength=n_batches) > 0)
        return t

    def to_dict(self):
        # kswap and rho are written even at their defaults: a saved instance's swap and
        # hidden-cache numbers must not depend on the defaults of the version that reads it
        d: dict[str, Any] = {"kind": "linear", **self.coefficients, "kswap": self.kswap,
                             "rho": self.rho}
        if self.preset:
            d["preset"] = self.preset
        return d



def coarsened(cost: LinearCost, q: int) -> LinearCost:
    """``cost`` with one token unit standing for ``q`` tokens (semantics section 5's terms
    rescaled): a prompt unit is ``q`` prompt tokens (the quadratic and cross terms times
    ``q**2``, the linear ones times ``q``), and a decode unit is ``q`` decode steps, each with
    ``q`` times the cached units, so a batch with a decode entry pays ``q`` decode-batch
    constants ``k0 + kdb`` and a prefill-only batch one ``k0 + kpb``. Exactly:
    ``coarsened(c, q).decode_batch_time(n, m) == q * c.decode_batch_time(n, q * m)``, and
    ``coarsened(c, 1)`` has ``c``'s coefficients. Used to draw small exact-solvable windows of
    a real trace (``studies/bounds/gap_attribution.py``)."""
    if isinstance(q, bool) or not isinstance(q, int) or q < 1:
        raise InstanceError(f"coarsening: q must be an integer >= 1, got {q!r}")
    c = cost
    return LinearCost(k0=c.k0, k1=q * c.k1, kpq=q * q * c.kpq, kpm=q * q * c.kpm, kpl=q * c.kpl,
                      kpr=c.kpr, kpb=c.kpb, kdm=q * q * c.kdm, kdr=q * c.kdr,
                      kdb=q * (c.k0 + c.kdb) - c.k0, kswap=c.kswap, rho=c.rho)

def _infermax(name: str, layers: int, a_p, b_p, a_d, b_d, a_o, b_o, s_p, s_d, m_p,
              kswap: float, rho: float) -> LinearCost:
    ms = layers / 1000.0  # per-layer milliseconds -> whole-model seconds
    return LinearCost(
        kswap=kswap,
        rho=rho,
        k0=b_o * ms,
        k1=a_o * ms,
        kpq=a_p * ms,
        kpm=2 * a_p * ms,  # InferMax prices prefill attention as a_p*(c^2 + 2*c*m)
        kpl=m_p * ms,
        kpr=s_p * ms,
        kpb=b_p * ms,
        kdm=a_d * ms,
        kdr=s_d * ms,
        kdb=b_d * ms,
        preset=name,
    )


def _blis(name: str, b0, b1, b2, kswap: float, rho: float) -> LinearCost:
    # step = b0 + b1*prefill_tokens + b2*decode_tokens (ms); a decode entry has c = 1,
    # so decode tokens cost k1 + kdr = b2.
    return LinearCost(k0=b0 / 1000, k1=b1 / 1000, kdr=(b2 - b1) / 1000, kswap=kswap, rho=rho,
                      preset=name)


#: Named presets. Each is built from the reference coefficients in
#: ``shared/data/README.md`` ("Reference figures"), except ``vidur-llama2-7b-a100``, fitted
#: from the profiling tables by ``studies/claims/cost_preset.py`` (cost-model sensitivity).
PRESETS: dict[str, LinearCost] = {
    # InferMax authors' per-layer coefficients (ms) x 32 layers, Llama-2-7B on one A100.
    "infermax-llama2-7b-a100": _infermax(
        "infermax-llama2-7b-a100", 32,
        1.6773e-7, 0.0926, 8.513e-6, 0.01921, 0.00191, 0.06486, 0.001534, 0.00074, 9.224e-6,
        KSWAP_DEFAULT, RHO_FITTED["llama2-7b-a100"],
    ),
    # Same, per-layer coefficients x 80 layers, Llama-2-70B on four A100s.
    "infermax-llama2-70b-4xa100": _infermax(
        "infermax-llama2-70b-4xa100", 80,
        4.309e-8, 0.2112, 1.222e-6, 0.081, 0.002, 0.159, 9.03e-4, 3.92e-4, 3.805e-7,
        # GQA: 8 KV heads x 128 = 1,024 dims, 80 layers, KV sharded over 4 links: 3.3e-6 s
        kswap_from_hardware(80, 1024, PCIE4_BYTES_PER_SECOND, links=4),
        RHO_FITTED["llama2-70b-4xa100"],
    ),
    # Llama-2-7B on one A100 fitted from the shared profiling tables (Vidur's
    # mlp_a100_Llama-2-7b-hf.csv and attention_samples_a100_Llama-2-7b-hf.csv, TP 1) by
    # optsched.workloads.fit.fit_linear_cost (NNLS, relative weighting);
    # studies/claims/cost_preset.py derives and prints these values, tests/workloads/test_fit.py checks
    # them against a re-fit when the data is present. Seconds, whole model. A decode batch of
    # 8 entries holding 1,000 tokens each:
    # 9.79 ms here vs 5.55 ms under the InferMax preset (k0 alone is 6.54 ms vs 2.08 ms).
    "vidur-llama2-7b-a100": LinearCost(
        k0=0.0065436, k1=6.12856e-05, kpq=5.28627e-09, kpm=4.662e-09, kdm=2.80022e-07,
        kpr=0.0, kdr=3.17814e-05, kpl=2.21966e-07, kpb=0.00055458, kdb=0.000260981,
        kswap=KSWAP_DEFAULT, rho=RHO_FITTED["llama2-7b-a100"], preset="vidur-llama2-7b-a100"),
    # BLIS whole-step fits (ms): Llama-3.1-8B TP1.
    # Llama-3.1-8B: GQA 8 KV heads x 128 = 1,024 dims, 32 layers; PCIe 4 (A100), 5 (H100)
    "blis-llama3.1-8b-a100": _blis("blis-llama3.1-8b-a100", 16.4, 0.0478, 0.0182,
                                   kswap_from_hardware(32, 1024, PCIE4_BYTES_PER_SECOND),
                                   RHO_FITTED["llama3-8b-a100"]),
    "blis-llama3.1-8b-h100": _blis("blis-llama3.1-8b-h100", 5.75, 0.0173, 0.0060,
                                   kswap_from_hardware(32, 1024, 2 * PCIE4_BYTES_PER_SECOND),
                                   RHO_FITTED["llama3-8b-h100"]),
}

DEFAULT_PRESET = "infermax-llama2-7b-a100"


def preset(name: str) -> LinearCost:
    """The named preset; the error lists the known names."""
    if not isinstance(name, str):
        raise InstanceError(f"cost_model: 'preset' must be a preset name (a string), got {name!r}")
    try:
        return PRESETS[name]
    except KeyError:
        raise InstanceError(
            f"cost_model: unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}"
        ) from None


def cost_model_from_dict(d: Any) -> CostModel:
    """Parse the instance JSON's ``cost_model`` field."""
    if not isinstance(d, dict):
        raise InstanceError(f"cost_model: expected an object, got {type(d).__name__}")
    if "kind" not in d:
        if "preset" in d:
            extra = set(d) - {"preset"}
            if extra:
                raise InstanceError(f"cost_model: unknown fields {sorted(extra)} next to preset")
            return preset(d["preset"])
        raise InstanceError("cost_model: missing field 'kind' (or 'preset')")
    kind = d["kind"]
    if kind == "unit":
        extra = set(d) - {"kind", "kswap", "rho"}
        if extra:
            raise InstanceError(f"cost_model: unknown fields {sorted(extra)} for kind 'unit'")
        return UnitCost(kswap=d.get("kswap", 0.0), rho=d.get("rho", 0.0))
    if kind == "linear":
        names = {f.name for f in fields(LinearCost)}
        extra = set(d) - names - {"kind"}
        if extra:
            raise InstanceError(
                f"cost_model: unknown fields {sorted(extra)}; linear takes {', '.join(_LINEAR_KEYS)}, "
                "kswap, rho"
            )
        missing = [k for k in _LINEAR_KEYS if k not in d]
        if missing:  # a zero-filled coefficient would silently price a different engine
            raise InstanceError(
                f"cost_model: missing coefficients {', '.join(missing)}; a linear model states "
                f"all of {', '.join(_LINEAR_KEYS)} (write 0 for a term the engine does not have)")
        return LinearCost(**{k: v for k, v in d.items() if k != "kind"})
    raise InstanceError(f"cost_model: unknown kind {kind!r} (expected 'unit' or 'linear')")


def cost_model_arg(text: str) -> CostModel:
    """A ``--cost-model`` value: ``unit``, a preset name, or a JSON file holding a cost model
    (what ``optsched fit -o FILE`` writes, an instance's ``cost_model`` object) or an
    instance (its ``cost_model`` is used)."""

    if text == "unit":
        return UnitCost()
    p = Path(text)
    if not (p.suffix.lower() == ".json" or p.exists()):
        return preset(text)
    try:
        d = json.loads(p.read_text())
    except OSError as e:
        raise InstanceError(f"--cost-model {text}: cannot read it ({e.strerror or e})") from None
    except (ValueError, RecursionError) as e:
        raise InstanceError(f"--cost-model {text}: not valid JSON ({e})") from None
    if isinstance(d, dict) and "cost_model" in d:
        d = d["cost_model"]
    try:
        return cost_model_from_dict(d)
    except InstanceError as e:
        raise InstanceError(f"--cost-model {text}: {e}") from None
    except (TypeError, ValueError) as e:
        raise InstanceError(f"--cost-model {text}: cost_model: {e}") from None


__all__ = [
    "cost_model_arg",
    "KSWAP_DEFAULT",
    "RHO_DEFAULT",
    "RHO_FITTED",
    "kswap_from_hardware",
    "CostModel",
    "UnitCost",
    "LinearCost",
    "coarsened",
    "PRESETS",
    "DEFAULT_PRESET",
    "preset",
    "cost_model_from_dict",
]
