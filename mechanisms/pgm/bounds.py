"""A-posteriori confidence bounds on the L1 error of marginals (McKenna's thesis §5.5).

Supported marginals (r inside a measured clique): Theorem 14's unbiased
estimate μ̄_r — every identity measurement r_j ⊇ r summed down to r, averaged
with inverse-variance weights — has i.i.d. cell noise of variance
σ̄_r² = [Σ_j n_r / (n_{r_j} σ_j²)]⁻¹. Corollary 1 then bounds, with probability
≥ 1 − e^{−λ²}, the error of any estimate x̂ (a model or synthetic data):

    ‖M_r(D) − x̂‖₁ ≤ ‖x̂ − μ̄_r‖₁ + √(2 log 2)·σ̄_r·n_r + λ·σ̄_r·√(2 n_r).

Unsupported marginals that were candidates in an AIM round t: the exponential
mechanism preferred r_t, so (Corollary 2, with the factor w_{r_t} on the λ₁ term
that the printed Theorem 16 omits), with probability ≥ 1 − e^{−λ₁²/2} − e^{−λ₂},

    ‖M_r(D) − x̂‖₁ ≤ ‖x̂ − M_r(p_{t−1})‖₁ + (B_r + λ₁ w_{r_t} σ_t √n_{r_t} + λ₂ 2Δ_t/ε_t) / w_r,
    B_r = w_{r_t}‖M_{r_t}(p_{t−1}) − ỹ_{r_t}‖₁ + √(2/π) σ_t (w_r n_r − w_{r_t} n_{r_t}) + (2Δ_t/ε_t) log|C_t|.

The defaults λ = 1.7 and (λ₁, λ₂) = (2.7, 3.7) are the thesis' "95%" settings
(exact levels 0.944 and 0.949). The lemmas are stated for Gaussian noise; the
discrete Gaussian used here has slightly smaller variance and is σ-subgaussian,
which is what the half-normal tail argument of Lemma 1 needs. Choose the round
before looking at the bounds (AIM's default: the last round).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.pgm.estimation import LinearMeasurement
from mechanisms.pgm.inference import sum_to


def supported_variance(domain: Domain, measurements: Sequence[LinearMeasurement], clique: Sequence[str]) -> float | None:
    """σ̄_r² of Theorem 14, or None when no identity measurement contains r."""
    r = domain.canonical(clique)
    precision = sum(
        domain.size(r) / (domain.size(m.clique) * m.variance)
        for m in measurements
        if m.query is None and set(r) <= set(m.clique)
    )
    return 1.0 / precision if precision > 0 else None


def supported_marginal(
    domain: Domain, measurements: Sequence[LinearMeasurement], clique: Sequence[str]
) -> tuple[np.ndarray, float] | None:
    """(μ̄_r, σ̄_r²): the inverse-variance average of the supporting measurements, summed to r."""
    r = domain.canonical(clique)
    variance = supported_variance(domain, measurements, r)
    if variance is None:
        return None
    total = np.zeros(domain.shape(r))
    for m in measurements:
        if m.query is None and set(r) <= set(m.clique):
            c = domain.canonical(m.clique)
            weight = domain.size(r) / (domain.size(c) * m.variance)
            table = xp().asarray(m.values, dtype=float).reshape(domain.shape(c))  # sum_to works in xp()
            total += weight * to_numpy(sum_to(table, c, r))
    return (variance * total).ravel(), variance


def supported_bound(
    domain: Domain,
    measurements: Sequence[LinearMeasurement],
    clique: Sequence[str],
    estimate: np.ndarray,
    lam: float = 1.7,
) -> float | None:
    """Corollary 1: an upper bound on ‖M_r(D) − estimate‖₁ (probability ≥ 1 − e^{−λ²})."""
    found = supported_marginal(domain, measurements, clique)
    if found is None:
        return None
    mean, variance = found
    sigma, n = math.sqrt(variance), mean.size
    gap = float(np.abs(np.ravel(estimate) - mean).sum())
    return gap + math.sqrt(2 * math.log(2)) * sigma * n + lam * sigma * math.sqrt(2 * n)


def selection_bound(
    estimate: np.ndarray,
    previous_r: np.ndarray,
    weight_r: float,
    cells_r: int,
    previous_chosen: np.ndarray,
    noisy_chosen: np.ndarray,
    weight_chosen: float,
    sigma: float,
    epsilon: float,
    sensitivity: float,
    candidates: int,
    lam1: float = 2.7,
    lam2: float = 3.7,
) -> float:
    """Corollary 2 for an unselected candidate r of one AIM round (see the module doc).

    `previous_*` are the round's prior model marginals (on r and on the chosen
    clique r_t), `noisy_chosen` is ỹ_{r_t}; probability ≥ 1 − e^{−λ₁²/2} − e^{−λ₂}.
    """
    n_chosen = np.size(noisy_chosen)
    spread = 2.0 * sensitivity / epsilon
    b_r = (
        weight_chosen * float(np.abs(np.ravel(previous_chosen) - np.ravel(noisy_chosen)).sum())
        + math.sqrt(2 / math.pi) * sigma * (weight_r * cells_r - weight_chosen * n_chosen)
        + spread * math.log(candidates)
    )
    slack = lam1 * weight_chosen * sigma * math.sqrt(n_chosen) + lam2 * spread
    return float(np.abs(np.ravel(estimate) - np.ravel(previous_r)).sum()) + (b_r + slack) / weight_r


def confidence_level(lam: float | None = None, lam1: float | None = None, lam2: float | None = None) -> float:
    """Coverage of Corollary 1 (λ) or Corollary 2 (λ₁, λ₂)."""
    if lam is not None:
        return 1.0 - math.exp(-lam * lam)
    return 1.0 - math.exp(-lam1 * lam1 / 2) - math.exp(-lam2)


__all__ = [
    "confidence_level",
    "selection_bound",
    "supported_bound",
    "supported_marginal",
    "supported_variance",
]
