"""Quantiles from noisy prefix counts: post-processing of a measured CDF (free, no data read).

Given estimates P̂(j) of the prefix counts #{rows with bin ≤ j} of an ordered column (one row
per group) and their exact variances, the q-quantile is the first bin where the CDF reaches
q·N̂, N̂ = P̂(last) (S001 §5.4.4, "Prefix and Quantile Queries"): the prefix estimates are first
made non-decreasing (a running maximum: post-processing), then searched. The uncertainty is
a rank interval mapped to bins: the first bins where P̂(j) ± z·s(j) reaches q·N̂, s(j)² the
variance of P̂(j) − q·N̂ (its two parts' variances added: an upper bound when their covariance
is positive, as for nested prefixes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QuantileBins:
    """Per group: the quantile's bin, where in it the target rank falls (0..1), the bins of the
    interval's ends, and the estimated total; `bin` is -1 where the total is below 1 (no answer)."""

    bin: np.ndarray
    within: np.ndarray
    low: np.ndarray
    high: np.ndarray
    total: np.ndarray


def quantile_bins(prefix: np.ndarray, variance: np.ndarray, q: float, z: float) -> QuantileBins:
    """The q-quantile bins of each row of `prefix` (groups × bins), with a ±z rank interval."""
    prefix = np.maximum.accumulate(np.asarray(prefix, dtype=float), axis=-1)
    variance = np.maximum(np.asarray(variance, dtype=float), 0.0)
    total = prefix[..., -1]
    target = q * total
    spread = np.sqrt(variance + q * q * variance[..., -1:])
    last = prefix.shape[-1] - 1
    found = _first_at_least(prefix, target)
    below = np.take_along_axis(prefix, np.maximum(found - 1, 0)[..., None], -1)[..., 0]
    below = np.where(found > 0, below, 0.0)
    at = np.take_along_axis(prefix, found[..., None], -1)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.clip(np.where(at > below, (target - below) / (at - below), 0.5), 0.0, 1.0)
    low = _first_at_least(prefix + z * spread, target)
    high = np.minimum(_first_at_least(prefix - z * spread, target), last)
    empty = total < 1.0
    return QuantileBins(np.where(empty, -1, found), within, low, high, total)


def _first_at_least(values: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per row, the first index where `values` ≥ `target` (the last index if none)."""
    reached = values >= target[..., None]
    return np.where(reached.any(axis=-1), reached.argmax(axis=-1), values.shape[-1] - 1)
