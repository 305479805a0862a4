"""Partition selection: release only the keys whose noisy count clears a threshold.

This is the primitive behind an open-domain GROUP BY, where the keys are not declared in
advance. Every key k in the contribution-bounded data has a count n_k ≥ 1. It gets
independent integer noise Z_k, and (k, n_k + Z_k) is released iff n_k + Z_k > τ. A key
absent from the data gets no noise and is never released.

**Sensitivity.** Each privacy unit contributes to at most m keys (`max_keys`, an L0 bound) and
at most c rows to each key (`max_per_key`, an L∞ bound). The bounding is done per unit, so
adding one unit changes no other unit's rows. Neighbours differ by adding or removing one
unit (dpsql's convention, shared DESIGN §4). Where only a total-rows cap k is enforced,
m = c = k is valid but loose.

**Privacy** (the standard argument, after Korolova et al. 2009). Let D' be D plus one unit u.
u's keys are *shared* (present in D) or *new* (absent from D, count ≤ c in D'). Let A be the
event that some new key is released on D'. Then P[A] ≤ m · P[c + Z > τ] =: δ_τ (union bound).
Off A, the output on D' is the thresholded noisy counts of the shared keys. That is
post-processing of a noisy count vector whose sensitivity between D and D' is L1 ≤ m c and
L2 ≤ c √m, and the new keys' noise is independent of it. Suppose that vector's noise gives
(ε, δ_N)-DP. Then P_D'[S] ≤ P[A] + e^ε P_D[S] + δ_N. In the other direction,
P_D[S] ≤ min(1, e^ε P_D'[S] / (1 − δ_τ) + δ_N) ≤ e^ε P_D'[S] + δ_τ + δ_N. So the release is
(ε, δ_N + δ_τ)-DP. In zCDP terms it is δ_τ-approximately ρ-zCDP (Bun & Steinke 2016,
"approximate zCDP", with the events "always" on D and "not A" on D'). A ledger can therefore charge ρ
(or a pure ε) as usual and add δ_τ to an additive δ account, since approximate zCDP composes
by adding both. A query given as (ε, δ) spends δ_τ on the threshold and converts
(ε, δ − δ_τ) to ρ for the noise.

**Thresholds.**

- *Seed (continuous Laplace)*, S000 Alg. 2.2 `DiscoverHeadList` (L520–546): b = 2m/ε (L536),
  τ = max{b (ln(e^{ε/2} + m − 1) − ln δ), 1} (L537), release iff N + Lap(b) > τ (L540).
  Its neighbours *replace* one user's records (L516). The L1 sensitivity is then 2m, hence
  b = 2m/ε. Lemma 2.2.1 (L514) proves only m = 1, ε > ln 2, τ ≥ 1. Our own reading of the
  general m (not in the seed): τ > m always, so the chance that a user's new records release
  anything is ½ e^{−τ/b} Σ_i e^{c_i/b} over its record counts c_i (Σ c_i ≤ m). That sum
  is at most max(e^{ε/2}, m e^{ε/(2m)}) ≤ e^{ε/2} + m − 1 (Jensen), so the chance is ≤ δ/2.
  Replacement has such an event on each side, which makes δ in total. `seed_threshold`
  reproduces this threshold; it is not used on discrete noise.
- *Discrete Laplace* (dpsql samples this): P(z) ∝ q^{|z|} with q = e^{−1/b}. Its exact tail
  is P[Z ≥ k] = q^k / (1 + q) for k ≥ 1. This is larger than the continuous ½ q^k, so the
  seed's τ does not carry over. τ is the smallest integer with m q^{τ+1−c} / (1 + q) ≤ δ,
  i.e. τ = c − 1 + ⌈b ln(m / (δ (1 + q)))⌉ (closed form, then checked), with b = m c / ε
  (add/remove: L1 = m c; ε is pure).
- *Discrete Gaussian*: σ² = c² m / (2ρ) (L2 = c √m; ρ-zCDP by CKS 2020's multivariate discrete Gaussian). τ is
  the smallest integer with m P[Z ≥ τ + 1 − c] ≤ δ_τ. The tail is the exact sum of the
  discrete Gaussian's pmf (normalizer by Poisson summation), searched from a normal-quantile
  start. The continuous tail P[N(0, σ²) ≥ k] is *not* an upper bound: the discrete tail
  exceeds it (in the far tail by the factor ≈ k / (σ² (1 − e^{−k/σ²})) > 1; the tests check
  a grid). P[N(0, σ²) ≥ k − 1] is an upper bound (CKS 2020's tail bound), but the exact sum
  is used instead.

**A total row bound.** dpsql bounds a privacy unit to k rows in total (`max_rows`), over any keys.
Then m = c = k is valid, but the unit's rows are split among its keys: counts c_i with
Σ c_i ≤ k. The noise is calibrated to the exact worst case, L1 = k and L2 = k (all rows on one
key), and δ_τ is the exact worst case of the union bound, max Σ_i P[c_i + Z > τ] over such
splits (a small knapsack; `_worst_new_key_chance`).

**Exact vs bound.** The tails and release probabilities are exact sums, evaluated in double
precision. A threshold's defining inequality is tested with a 1e-9 relative margin, on the
safe side. δ_τ is the union bound m · p, which is above the exact worst case 1 − (1 − p)^m.
The ε of the Laplace noise and the ρ of the Gaussian are exact for the rounded-up scales.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from statistics import NormalDist
from typing import ClassVar

import numpy as np

from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.measurement import GAUSSIAN, LAPLACE
from mechanisms.noise import (
    RandomSource,
    discrete_gaussian_variance,
    discrete_gaussian_vector,
    discrete_laplace_variance,
    discrete_laplace_vector,
    gaussian_sigma2_upper,
    laplace_scale_upper,
)

__all__ = [
    "DiscreteLaplace",
    "DiscreteGaussian",
    "PartitionSelection",
    "seed_threshold",
    "sensitivities",
    "threshold",
    "laplace_selection",
    "gaussian_selection",
    "release_probability",
    "count_released_with",
    "select_partitions",
]

# A threshold's inequality log P <= log(delta/m) is tested against log(delta/m) minus this:
# double-precision rounding of the tail can then only raise the threshold.
_LOG_MARGIN = 1e-9


def _positive_fraction(value: Fraction | int, name: str) -> Fraction:
    if isinstance(value, float):
        raise TypeError(f"{name} must be a Fraction or int (round floats up with mechanisms.noise), not {value!r}")
    frac = Fraction(value)
    if frac <= 0:
        raise ValueError(f"{name} must be > 0, got {frac}")
    return frac


def _check_bounds(delta: float, max_keys: int, max_per_key: int) -> None:
    if not 0 < delta < 0.5:
        raise ValueError(f"delta must be in (0, 1/2), got {delta}")
    for name, value in (("max_keys", max_keys), ("max_per_key", max_per_key)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class DiscreteLaplace:
    """Noise with P(z) ∝ exp(−|z| / scale) on the integers (the geometric mechanism's)."""

    scale: Fraction
    kind: ClassVar[str] = LAPLACE

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _positive_fraction(self.scale, "scale"))

    @cached_property
    def _log_one_plus_q(self) -> float:
        return math.log1p(math.exp(-float(1 / self.scale)))

    def log_tail(self, k: int) -> float:
        """log P[Z ≥ k], exactly: P[Z ≥ k] = q^k / (1 + q) for k ≥ 1 (q = e^{−1/scale}).

        For k ≤ 0 it is 1 − P[Z ≥ 1 − k].
        """
        if k <= 0:
            return math.log1p(-math.exp(self.log_tail(1 - k)))
        return -float(k / self.scale) - self._log_one_plus_q

    @property
    def variance(self) -> float:
        """The exact variance of one draw."""
        return discrete_laplace_variance(self.scale)

    def first_guess(self, log_p: float) -> int:
        """The closed form ⌈−scale (log_p + ln(1 + q))⌉ for the smallest k with P[Z ≥ k] ≤ e^{log_p}."""
        return max(1, math.ceil(-float(self.scale) * (log_p + self._log_one_plus_q)))

    def sample(self, size: int, rng: RandomSource | None = None) -> np.ndarray:
        """`size` exact draws (the batched CKS sampler)."""
        return discrete_laplace_vector(self.scale, size, rng)


@dataclass(frozen=True)
class DiscreteGaussian:
    """Noise with P(z) ∝ exp(−z² / (2 sigma2)) on the integers (Canonne, Kamath, Steinke 2020)."""

    sigma2: Fraction
    kind: ClassVar[str] = GAUSSIAN

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma2", _positive_fraction(self.sigma2, "sigma2"))

    @cached_property
    def _log_normalizer(self) -> float:
        """log Σ_z exp(−z²/(2σ²)).

        For σ² ≥ 1 by Poisson summation, √(2πσ²) (1 + 2 Σ_k e^{−2π²σ²k²}); below that, directly.
        """
        s2 = float(self.sigma2)
        if s2 >= 1:
            dual = sum(math.exp(-2 * math.pi**2 * s2 * k * k) for k in range(1, 6))  # k = 6 is below e^-700
            return 0.5 * math.log(2 * math.pi * s2) + math.log1p(2 * dual)
        z = np.arange(1, math.isqrt(math.ceil(1500 * s2)) + 2, dtype=float)  # beyond, terms are below e^-750
        return math.log1p(2 * np.exp(-z * z / (2 * s2)).sum())

    def log_tail(self, k: int) -> float:
        """log P[Z ≥ k] as the exact sum of the pmf (1 − P[Z ≥ 1 − k] for k ≤ 0).

        For k ≥ 1 it is e^{−k²/(2σ²)} Σ_{j ≥ 0} e^{−j(2k + j)/(2σ²)} over the normalizer. The sum is cut
        where j(2k + j)/(2σ²) reaches 60: the terms left over add below e^{−60}(1 + σ) relative to the sum.
        """
        if k <= 0:
            return math.log1p(-math.exp(self.log_tail(1 - k)))
        s2 = float(self.sigma2)
        terms = math.ceil(math.sqrt(k * k + 120 * s2) - k) + 1
        j = np.arange(terms, dtype=float)
        rest = np.exp(-j * (2.0 * k + j) / (2 * s2)).sum()
        return -(k * k) / (2 * s2) + math.log(rest) - self._log_normalizer

    @property
    def variance(self) -> float:
        """The exact variance of one draw."""
        return discrete_gaussian_variance(self.sigma2)

    def first_guess(self, log_p: float) -> int:
        """The continuous normal quantile σ z_{1−p}, rounded up (the search then walks to the exact answer)."""
        return max(1, math.ceil(-math.sqrt(self.sigma2) * NormalDist().inv_cdf(math.exp(log_p))))

    def sample(self, size: int, rng: RandomSource | None = None) -> np.ndarray:
        """`size` exact draws (the batched CKS sampler)."""
        return discrete_gaussian_vector(self.sigma2, size, rng)


Noise = DiscreteLaplace | DiscreteGaussian


def _smallest_exceedance(noise: Noise, log_p: float) -> int:
    """The smallest integer k with log P[Z ≥ k] ≤ log_p (< log ½, so k ≥ 1), from `noise.first_guess`."""
    k = noise.first_guess(log_p)
    while noise.log_tail(k - 1) <= log_p:
        k -= 1
    while noise.log_tail(k) > log_p:
        k += 1
    return k


def threshold(noise: Noise, delta: float, max_keys: int = 1, max_per_key: int = 1, max_rows: int | None = None) -> int:
    """The smallest integer τ with which one unit's new keys appear w.p. ≤ delta (union bound).

    Without `max_rows`: max_keys · P[max_per_key + Z > τ] ≤ delta. With it (each unit's rows add up
    to at most max_rows), the worst split of the rows among keys is taken exactly."""
    _check_bounds(delta, max_keys, max_per_key)
    log_p = math.log(delta) - math.log(max_keys) - _LOG_MARGIN
    tau = max_per_key - 1 + _smallest_exceedance(noise, log_p)
    if max_rows is None or max_rows >= max_keys * max_per_key:
        return tau
    target = math.log(delta) - _LOG_MARGIN
    while tau > 0 and _worst_new_key_chance(noise, tau - 1, max_keys, max_per_key, max_rows) <= target:
        tau -= 1
    return tau


# Splits are searched exactly up to this many (keys x rows x rows-per-key) steps; beyond, the union bound is used.
_EXACT_SPLIT_WORK = 10_000_000


def _worst_new_key_chance(noise: Noise, tau: int, max_keys: int, max_per_key: int, max_rows: int) -> float:
    """log max Σ_i P[c_i + Z > τ] over at most max_keys counts 1 ≤ c_i ≤ max_per_key with Σ c_i ≤ max_rows.

    A knapsack over the rows: f(c) = P[Z ≥ τ + 1 − c] grows with c, so the best split uses every row.
    Searched exactly (by keys used, unless every split fits in max_keys keys); past `_EXACT_SPLIT_WORK`
    the union bound max_keys · f(max_per_key), which is larger.
    """
    c_max = min(max_per_key, max_rows)
    chance = [0.0] + [math.exp(noise.log_tail(tau + 1 - c)) for c in range(1, c_max + 1)]
    if max_keys >= max_rows and max_rows * c_max <= _EXACT_SPLIT_WORK:
        best = [0.0] * (max_rows + 1)  # best[s]: the largest sum over splits of s rows (keys never run out)
        for s in range(1, max_rows + 1):
            best[s] = max(chance[c] + best[s - c] for c in range(1, min(c_max, s) + 1))
        total = best[max_rows]
    elif max_keys * max_rows * c_max <= _EXACT_SPLIT_WORK:
        best = [0.0] * (max_rows + 1)  # after j rounds: the largest sum over at most j keys
        for _ in range(max_keys):
            best = [max([best[s]] + [chance[c] + best[s - c] for c in range(1, min(c_max, s) + 1)])
                    for s in range(max_rows + 1)]
        total = best[max_rows]
    else:
        total = max_keys * chance[c_max]
    return math.log(total) if total > 0 else -math.inf


def seed_threshold(epsilon: float, delta: float, max_keys: int = 1) -> tuple[float, float]:
    """The seed's (b, τ) for continuous Laplace and replacement neighbours (S000 Alg. 2.2 L536–537).

    b = 2m/ε and τ = max{b (ln(e^{ε/2} + m − 1) − ln δ), 1}. For reference and EXPLAIN only; dpsql's
    discrete noise uses `threshold`.
    """
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    _check_bounds(delta, max_keys, 1)
    b = 2 * max_keys / epsilon
    return b, max(b * (math.log(math.exp(epsilon / 2) + max_keys - 1) - math.log(delta)), 1.0)


def sensitivities(max_keys: int, max_per_key: int, max_rows: int | None = None) -> tuple[int, int]:
    """(L1, L2²) of one unit's key counts: at most max_keys keys, max_per_key rows each, max_rows in all."""
    rows = max_keys * max_per_key if max_rows is None else min(max_rows, max_keys * max_per_key)
    full, rest = divmod(rows, max_per_key)  # the largest Σ c_i²: fill keys to max_per_key, then the rest
    return rows, full * max_per_key**2 + rest**2


@dataclass(frozen=True)
class PartitionSelection:
    """A calibrated selection: the noise, the threshold τ, and the bounds it was calibrated for.

    `delta` is δ_τ, the bound on the chance that one unit's keys absent elsewhere are released.
    """

    noise: Noise
    threshold: int
    delta: float
    max_keys: int
    max_per_key: int
    max_rows: int | None = None

    @property
    def cost(self) -> float:
        """ε of the noisy counts (Laplace: L1 / b, pure) or ρ (Gaussian: L2² / (2σ²)), besides δ_τ."""
        l1, l2_squared = sensitivities(self.max_keys, self.max_per_key, self.max_rows)
        if self.noise.kind == LAPLACE:
            return float(l1 / self.noise.scale)
        return float(Fraction(l2_squared, 2) / self.noise.sigma2)

    def epsilon_delta(self, delta_noise: float = 0.0) -> tuple[float, float]:
        """The whole release's (ε, δ): (cost, δ_τ + delta_noise) for Laplace, and
        (ε(ρ, delta_noise), δ_τ + delta_noise) for the Gaussian (CKS conversion; ε = inf at delta_noise = 0)."""
        epsilon = self.cost if self.noise.kind == LAPLACE else zcdp_to_epsilon(self.cost, delta_noise)
        return epsilon, self.delta + delta_noise


def laplace_selection(epsilon: float, delta: float, max_keys: int = 1, max_per_key: int = 1,
                      max_rows: int | None = None) -> PartitionSelection:
    """Discrete Laplace with b = L1 / ε (rounded up; L1 = m c, or max_rows) and its threshold: (ε, δ)-DP in total."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    l1, _ = sensitivities(max_keys, max_per_key, max_rows)
    noise = DiscreteLaplace(laplace_scale_upper(l1 / epsilon))
    return PartitionSelection(noise, threshold(noise, delta, max_keys, max_per_key, max_rows), delta, max_keys,
                              max_per_key, max_rows)


def gaussian_selection(rho: float, delta: float, max_keys: int = 1, max_per_key: int = 1,
                       max_rows: int | None = None) -> PartitionSelection:
    """Discrete Gaussian with σ² = L2² / (2ρ) (rounded up; L2² = m c², less under max_rows) and its
    threshold for δ_τ = delta.

    The whole release is δ-approximately ρ-zCDP; (ε, δ + δ_N)-DP with ε = ε(ρ, δ_N).
    """
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    _, l2_squared = sensitivities(max_keys, max_per_key, max_rows)
    noise = DiscreteGaussian(gaussian_sigma2_upper(l2_squared / (2 * rho)))
    return PartitionSelection(noise, threshold(noise, delta, max_keys, max_per_key, max_rows), delta, max_keys,
                              max_per_key, max_rows)


def release_probability(count: int, threshold: int, noise: Noise) -> float:
    """P[count + Z > threshold], exactly, for a key with this (bounded) count ≥ 1."""
    if count < 1:
        raise ValueError(f"a key in the data has count >= 1, got {count}")
    return math.exp(noise.log_tail(int(threshold) + 1 - int(count)))


def count_released_with(probability: float, threshold: int, noise: Noise) -> int:
    """The least true count whose key is released with at least this probability (0 < probability < 1)."""
    if not 0 < probability < 1:
        raise ValueError(f"probability must be in (0, 1), got {probability}")
    low, high = 1, max(int(threshold) + 2, 2)
    while release_probability(high, threshold, noise) < probability:
        high *= 2
    while low < high:  # the release probability grows with the count
        middle = (low + high) // 2
        if release_probability(middle, threshold, noise) >= probability:
            high = middle
        else:
            low = middle + 1
    return low


def select_partitions(
    counts: np.ndarray, threshold: int, noise: Noise, rng: RandomSource | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the keys released and their noisy counts.

    `counts` holds the contribution-bounded count of every key in the data, each ≥ 1. A key
    with count 0 must not be passed: its noise could release a key that no bounded row holds.
    The positions follow the input order. A caller should order the released keys by something
    public (the key, or the noisy count), not by the scan's order.
    """
    counts = np.asarray(counts)
    if counts.ndim != 1 or counts.dtype.kind not in "iu":
        raise ValueError("counts must be a 1-D array of integers")
    counts = counts.astype(np.int64)  # uint64 + int64 would give floats
    if counts.size and counts.min() < 1:
        raise ValueError("every count must be >= 1 (keys absent from the bounded data are never released)")
    noisy = counts + noise.sample(counts.size, rng)
    kept = np.flatnonzero(noisy > threshold)
    return kept, noisy[kept]
