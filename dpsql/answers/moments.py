"""Variance and standard deviation per group from three measured sums, with delta-method errors.

A variance aggregate (`dpsql.sql.aggregates`) measures, per group, S2 = SUM((x - c)²), S1 = SUM(x - c)
and N = COUNT(x), c the middle of x's declared range (a shift changes no variance, and keeps S2's
sensitivity at (range / 2)²). Then

    VAR_POP  = S2 / N - (S1 / N)²          (NULL where the noisy N < 1)
    VAR_SAMP = (S2 - S1² / N) / (N - 1)    (NULL where the noisy N < 2)

clamped at 0 (noise can make the difference negative), and the standard deviations their square
roots. The standard error is the delta method's: the gradient of the estimate in (S2, S1, N) around
the noisy sums, against the 3 × 3 covariance of their answers (the model's variances and covariances:
the three blocks share measurements). A standard deviation's is that of the variance through the
square root, taken as half the width of sqrt over the variance's ± one standard error, which is the
delta method's se / (2 sd) away from 0 and stays finite near it.
"""

from __future__ import annotations

import numpy as np

from dpsql.sql.aggregates import Aggregate


def moment_answer(agg: Aggregate, model) -> tuple[np.ndarray, np.ndarray]:
    """(estimate, standard error) per group of a variance or standard deviation aggregate; NaN where the
    group's noisy count is too small (below 1, or 2 for a sample's)."""
    blocks = agg.blocks
    answers = [model.answer(b) for b in blocks]
    s2, s1, n = (np.asarray(a[0], dtype=float) for a in answers)
    cov = np.empty((3, 3) + s2.shape)
    for i in range(3):
        cov[i, i] = answers[i][1]
        for j in range(i):
            cov[i, j] = cov[j, i] = model.covariance(blocks[i], blocks[j])
    least = 2.0 if agg.sample else 1.0
    enough = n >= least
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = s1 / n
        if agg.sample:
            value = (s2 - s1 * mean) / (n - 1)
            gradient = np.stack([1 / (n - 1), -2 * mean / (n - 1), (mean**2 - value) / (n - 1)])
        else:
            value = s2 / n - mean**2
            gradient = np.stack([1 / n, -2 * mean / n, (2 * mean**2 - s2 / n) / n])
        se = np.sqrt(np.maximum(np.einsum("i...,ij...,j...->...", gradient, cov, gradient), 0.0))
    value = np.maximum(value, 0.0)
    if agg.kind == "stddev":
        value, se = np.sqrt(value), (np.sqrt(value + se) - np.sqrt(np.maximum(value - se, 0.0))) / 2
    return np.where(enough, value, np.nan), np.where(enough, se, np.nan)
