"""Analytic Gaussian mechanism: the smallest σ giving (ε, δ)-DP for one Gaussian release.

Balle & Wang (ICML 2018), Theorem 8: adding N(0, σ²) noise to a query of L2
sensitivity Δ is (ε, δ)-DP if and only if

    Φ(Δ/(2σ) − εσ/Δ) − e^ε · Φ(−Δ/(2σ) − εσ/Δ) ≤ δ.

The left side decreases in σ, so the exact calibration is a one-dimensional
root find. It is tighter than the classical σ = Δ·sqrt(2 ln(1.25/δ))/ε and,
for a single release, than going through zCDP; HDMM's published Gaussian
tables (ε = 1, δ = 1e-6, σ ≈ 4.2247) use it, which is why it lives here: the benchmark
reproducing them calibrates as they did (dpsql's ledger composes in zCDP).
"""

from __future__ import annotations

import math

from scipy.special import log_ndtr, ndtr

__all__ = ["gaussian_delta", "analytic_gaussian_sigma"]

_REL_TOL = 1e-13


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """The smallest δ for which N(0, σ²) noise on an L2-sensitivity-Δ query is (ε, δ)-DP."""
    if not (sigma > 0 and sensitivity > 0 and epsilon >= 0):
        raise ValueError("need sigma > 0, sensitivity > 0 and epsilon >= 0")
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    # e^ε Φ(−a − b) evaluated in log space: it underflows long before it matters.
    second = math.exp(epsilon + float(log_ndtr(-a - b)))
    return max(float(ndtr(a - b)) - second, 0.0)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest σ with gaussian_delta(σ, ε, Δ) ≤ δ, rounded towards the private side."""
    if not (epsilon > 0 and 0 < delta < 1 and sensitivity > 0):
        raise ValueError("need epsilon > 0, 0 < delta < 1 and sensitivity > 0")
    lo, hi = sensitivity * 1e-3, sensitivity
    while gaussian_delta(hi, epsilon, sensitivity) > delta:
        lo, hi = hi, 2.0 * hi
    while gaussian_delta(lo, epsilon, sensitivity) <= delta:
        lo /= 2.0
    while hi - lo > _REL_TOL * hi:
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mid, epsilon, sensitivity) <= delta:
            hi = mid
        else:
            lo = mid
    return hi
