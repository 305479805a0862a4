"""The L1 loss of a Laplace measurement: its negative log-likelihood, for pure-DP ledgers.

A measurement y = Q·μ + z with i.i.d. Laplace noise z of scale b (variance 2b²) has
the negative log-likelihood ‖Q·μ − y‖₁ / b + const, so the maximum-likelihood model
minimizes the L1 loss Σ_j ‖Q_j μ − y_j‖₁ / b_j for such measurements (McKenna's
thesis §4.2: "the L1 loss for Laplace noise"; the L2 loss is the Gaussian one). The
median-like fit weighs a cell's repeated or overlapping Laplace measurements better
than least squares: the median of Laplace samples has asymptotic variance b²/k
against the mean's 2b²/k.

The L1 loss is not differentiable where a residual is 0, which the Armijo line
search and the accelerated method of `mechanisms.pgm.estimation` need. The loss
is therefore minimized through its Huber (Moreau) smoothing with radius h = κ·b,
κ = `SMOOTHING`: |r|/b where |r| > h, r²/(2bh) + h/(2b) inside, so each entry's
smoothed loss lies within κ/2 of |r|/b, never below it (Nesterov's smoothing of a
non-smooth convex loss), reached by continuation over κ (`CONTINUATION`, `GraphicalModel.fit`):
the fitted model's L1 loss is within 0.002 per measured entry of the linear-programming minimum,
against an expected loss of about 1 per entry at the truth (tests/test_pgm_laplace.py). b is read
from a measurement's variance as √(variance / 2), the continuous Laplace's relation (the discrete
Laplace of `mechanisms.measurement` at the scales used has nearly the same).
"""

from __future__ import annotations

import math

from mechanisms.arrays import xp

SMOOTHING = 1e-3  # the Huber radius as a fraction of the Laplace scale b
CONTINUATION = (1.0, 0.1, 0.01, SMOOTHING)  # the radii of successive fits (`GraphicalModel.fit`)


def laplace_scale(variance: float) -> float:
    """The Laplace scale b of noise with this per-entry variance (2b²)."""
    return math.sqrt(variance / 2.0)


def absolute_term(query, values, variance: float, mu, smoothing: float = SMOOTHING):
    """(loss, gradient) of ‖Q·μ − y‖₁ / b, smoothed within `smoothing`·b, at the flat marginal μ (Q None: I)."""
    m = xp()
    b = laplace_scale(variance)
    radius = smoothing * b
    fitted = mu if query is None else query.matvec(mu)
    residual = fitted - m.asarray(values)
    size = m.abs(residual)
    inside = size <= radius
    loss = float(m.where(inside, residual * residual / (2.0 * radius) + radius / 2.0, size).sum()) / b
    slope = m.clip(residual / radius, -1.0, 1.0) / b
    return loss, slope if query is None else query.rmatvec(slope)


def absolute_curvature(norm2: float, variance: float, smoothing: float = SMOOTHING) -> float:
    """The smoothed term's curvature bound ‖Q‖₂² / (b·h) for ‖Q‖₂² = `norm2`."""
    b = laplace_scale(variance)
    return norm2 / (b * smoothing * b)
