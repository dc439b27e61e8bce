"""Response-length predictors (EcoServe section 2.3; docs/semantics.md section 6, "predicted output
lengths").

A predictor stands for the external length model (EcoServe's fine-tuned OPT-13B): it is
held by the *simulator*, which knows the true output lengths, and a policy only sees what
the predictor answers through :meth:`SimView.predict_remaining`. A policy that carries a
``predictor`` attribute gets that hook; nothing else about the truth reaches it.

* ``exact`` -- the oracle: the true remaining length. It reads the truth, so a policy
  using it is *hypothetical* (the registry marks it so, and the simulator refuses it on a
  policy that is not).
* ``noisy`` -- the true remaining length times ``exp(eps)``, ``eps ~ N(0, sigma^2)``, drawn
  from a seeded generator at every query (a re-prediction after an under-prediction is a
  fresh draw, as a new query to the length model would be). ``sigma`` follows from the
  *accuracy* as EcoServe measures it -- the share of requests whose padded prediction
  covers the true length (section 2.3: 73.2% on ShareGPT at its sweet-spot padding 15%) --
  taken at the reference padding :data:`REFERENCE_PADDING` = 15%:
  ``P(exp(eps) * 1.15 >= 1) = accuracy``, i.e. ``sigma = ln(1.15) / Phi^-1(accuracy)``
  (see :func:`sigma_for_accuracy`). The predictor's quality is thus fixed by ``accuracy``
  and the policy's own padding moves the share of under-provisioned requests, as in the
  paper's Figure 4c.

Predictors register by name in :data:`PREDICTORS` (one new class = one new predictor).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .registry import PolicyError

PREDICTORS: dict[str, type[Predictor]] = {}
#: padding at which a noisy predictor's ``accuracy`` is stated (EcoServe section 2.3, ShareGPT)
REFERENCE_PADDING = 0.15


def register_predictor(cls):
    """Class decorator: register a predictor class under its ``name``."""
    if cls.name in PREDICTORS:
        raise ValueError(f"predictor {cls.name!r} is already registered")
    PREDICTORS[cls.name] = cls
    return cls


def sigma_for_accuracy(accuracy: float, padding: float) -> float:
    """Log-normal spread ``sigma`` at which a prediction padded by ``padding`` covers the
    true length with probability ``accuracy``: ``Phi(ln(1 + padding) / sigma) = accuracy``.

    ``accuracy = 1`` gives 0 (exact); ``accuracy <= 0.5`` needs ``padding == 0`` (then any
    symmetric noise covers half of the requests) and is refused otherwise.
    """
    if not 0 < accuracy <= 1:
        raise PolicyError(f"accuracy must be in (0, 1], got {accuracy!r}")
    if padding < 0:
        raise PolicyError(f"padding must be >= 0, got {padding!r}")
    if accuracy == 1:
        return 0.0
    z = NormalDist().inv_cdf(accuracy)
    if z <= 0 or padding == 0:
        raise PolicyError(
            f"accuracy {accuracy:g} with padding {padding:g} has no log-normal spread: "
            "accuracy must be above 0.5 and padding above 0"
        )
    return math.log1p(padding) / z


@dataclass(frozen=True)
class Predictor(ABC):
    """Base class: ``bind(output, g)`` returns ``predict(idx) -> remaining lengths``.

    ``output`` holds the true lengths and ``g`` the live generated counts (read-only); the
    returned function answers, for request indices ``idx``, a predicted number of tokens
    still to generate (``>= 1``).
    """

    name = ""
    #: True when the answers are the truth itself (the policy must be hypothetical)
    exact = False

    @abstractmethod
    def bind(self, output: np.ndarray, g: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The prediction function for this run (see the class docstring)."""


@register_predictor
@dataclass(frozen=True)
class ExactPredictor(Predictor):
    """The oracle: the true remaining length ``O - g``."""

    name = "exact"
    exact = True

    def bind(self, output, g):
        def predict(idx):
            idx = np.asarray(idx, np.int64)
            return np.maximum(output[idx] - g[idx], 1)

        return predict


@register_predictor
@dataclass(frozen=True)
class NoisyPredictor(Predictor):
    """``round((O - g) * exp(eps))``, ``eps ~ N(0, sigma^2)``, seeded; at least 1."""

    name = "noisy"
    sigma: float = 0.2
    seed: int = 0

    def __post_init__(self):
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise PolicyError(f"predictor 'noisy': sigma must be a finite number >= 0, "
                              f"got {self.sigma!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise PolicyError(f"predictor 'noisy': seed must be an integer >= 0, got {self.seed!r}")

    def bind(self, output, g):
        rng = np.random.default_rng(self.seed)
        sigma = self.sigma

        def predict(idx):
            idx = np.asarray(idx, np.int64)
            true = output[idx] - g[idx]
            noise = np.exp(rng.normal(0.0, sigma, size=idx.size)) if sigma > 0 else 1.0
            return np.maximum(np.rint(true * noise).astype(np.int64), 1)

        return predict


def make_predictor(name: str, *, accuracy: float, seed: int) -> Predictor:
    """The predictor a policy parameter set names (``accuracy`` at the reference padding
    calibrates the noisy one, see :func:`sigma_for_accuracy`)."""
    if name == "exact":
        return ExactPredictor()
    if name == "noisy":
        return NoisyPredictor(sigma=sigma_for_accuracy(accuracy, REFERENCE_PADDING), seed=seed)
    if name in PREDICTORS:
        return PREDICTORS[name]()
    raise PolicyError(f"unknown predictor {name!r}; known: {', '.join(sorted(PREDICTORS))}")


__all__ = ["Predictor", "ExactPredictor", "NoisyPredictor", "PREDICTORS", "register_predictor",
           "sigma_for_accuracy", "make_predictor", "REFERENCE_PADDING"]
