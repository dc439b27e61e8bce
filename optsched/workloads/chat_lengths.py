"""Synthetic ShareGPT / LMSYS-like request lengths: the workloads EcoServe, BROS and Apt-Serve
ran, rebuilt from the statistics their papers print.

**Synthetic.** We do not have the ShareGPT or LMSYS-Chat-1M conversations; each length is
drawn from a log-normal whose mean and standard deviation are the ones a paper reports,
truncated to the range it reports where it reports one (a truncated draw is redrawn; the
log-normal's location is solved so that the *truncated* mean is the reported one, its shape
keeps the reported coefficient of variation). Prompt and output lengths are drawn
independently (no paper reports their correlation). The sources, per dataset:

* ``sharegpt`` -- BROS (paper 003) section 7.1, Table 2, "RT-SharedGPT": prompt mean 222.76,
  std 256.36; output mean 234.51, std 268.50. No range is reported: lengths are >= 1.
* ``lmsys`` -- BROS Table 2, "RT-LMSYS-CHAT-1M": prompt 90.50 / 148.52; output 237.04 /
  228.21 (mean / std). Lengths >= 1.
* ``sharegpt-ecoserve`` -- EcoServe (paper 002) section 2, Table 2, ShareGPT: prompt mean
  161.31, min 16, max 3.2K (3,200); output mean 337.99, min 19, max 991. EcoServe reports no
  spread, so the coefficient of variation is BROS's ShareGPT one (256.36 / 222.76 for
  prompts, 268.50 / 234.51 for outputs).

Apt-Serve (paper 004) shows its ShareGPT sample only as a histogram (Fig. 7), with no
number to match; its claims are run on ``sharegpt``. For scale: the Azure conversation
trace's prompts average 1,155 tokens (``shared/data/README.md``), 5-7x these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InstanceError


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@dataclass(frozen=True)
class LengthSpec:
    """A reported length distribution: mean, standard deviation, optional range, its source."""

    mean: float
    std: float
    source: str
    lo: int = 1
    hi: int | None = None

    def __post_init__(self):
        if not (self.mean > 0 and self.std > 0):
            raise InstanceError(f"length spec {self.source}: mean and std must be > 0")
        if self.lo < 1 or (self.hi is not None and not self.lo < self.mean < self.hi):
            raise InstanceError(f"length spec {self.source}: need 1 <= lo < mean < hi")

    @property
    def sigma(self) -> float:
        """Log-normal shape from the coefficient of variation: sigma^2 = ln(1 + (std/mean)^2)."""
        return math.sqrt(math.log1p((self.std / self.mean) ** 2))

    def truncated_mean(self, mu: float) -> float:
        """Mean of LogNormal(mu, sigma) truncated to [lo - 1/2, hi + 1/2) (rounding to integers):
        exp(mu + s^2/2) [Phi(b - s) - Phi(a - s)] / [Phi(b) - Phi(a)], a, b the standardised
        log bounds."""
        s = self.sigma
        a = (math.log(self.lo - 0.5) - mu) / s if self.lo > 1 else -math.inf
        b = (math.log(self.hi + 0.5) - mu) / s if self.hi is not None else math.inf
        return math.exp(mu + s * s / 2) * (_phi(b - s) - _phi(a - s)) / (_phi(b) - _phi(a))

    def location(self) -> float:
        """The ``mu`` whose truncated mean is :attr:`mean` (bisection; the truncated mean is
        increasing in ``mu``)."""
        lo, hi = math.log(self.mean) - 10.0, math.log(self.mean) + 10.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.truncated_mean(mid) < self.mean else (lo, mid)
        return (lo + hi) / 2

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` integer lengths in [lo, hi], rounded log-normal draws, out-of-range ones redrawn."""
        mu, s = self.location(), self.sigma
        out = np.rint(rng.lognormal(mu, s, size=n)).astype(np.int64)
        bad = self._outside(out)
        while bad.any():
            out[bad] = np.rint(rng.lognormal(mu, s, size=int(bad.sum()))).astype(np.int64)
            bad = self._outside(out)
        return out

    def _outside(self, x: np.ndarray) -> np.ndarray:
        return (x < self.lo) | (x > self.hi if self.hi is not None else False)


_B, _E = "BROS Table 2", "EcoServe Table 2"
#: dataset -> (prompt spec, output spec); sources in the module docstring
CHAT_DATASETS: dict[str, tuple[LengthSpec, LengthSpec]] = {
    "sharegpt": (LengthSpec(222.76, 256.36, f"{_B} RT-SharedGPT prompt"),
                 LengthSpec(234.51, 268.50, f"{_B} RT-SharedGPT output")),
    "lmsys": (LengthSpec(90.50, 148.52, f"{_B} RT-LMSYS-CHAT-1M prompt"),
              LengthSpec(237.04, 228.21, f"{_B} RT-LMSYS-CHAT-1M output")),
    "sharegpt-ecoserve": (
        LengthSpec(161.31, 161.31 * 256.36 / 222.76, f"{_E} ShareGPT prompt", 16, 3200),
        LengthSpec(337.99, 337.99 * 268.50 / 234.51, f"{_E} ShareGPT output", 19, 991)),
}


def chat_lengths(dataset: str, n: int, rng: np.random.Generator,
                 max_tokens: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (prompt, output) pairs of ``dataset`` (:data:`CHAT_DATASETS`); pairs with
    prompt + output - 1 > ``max_tokens`` (the KV capacity) are redrawn."""
    if dataset not in CHAT_DATASETS:
        raise InstanceError(f"generator 'chat-like': unknown dataset {dataset!r}; known: "
                            f"{', '.join(CHAT_DATASETS)}")
    ps, os_ = CHAT_DATASETS[dataset]
    if max_tokens is not None and ps.lo + os_.lo - 1 > max_tokens:
        raise InstanceError(f"generator 'chat-like': no {dataset} request fits M = {max_tokens}")
    P, O = ps.draw(rng, n), os_.draw(rng, n)
    while max_tokens is not None and (bad := P + O - 1 > max_tokens).any():
        k = int(bad.sum())
        P[bad], O[bad] = ps.draw(rng, k), os_.draw(rng, k)
    return P, O


__all__ = ["LengthSpec", "CHAT_DATASETS", "chat_lengths"]
