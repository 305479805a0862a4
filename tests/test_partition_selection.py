"""Tests for mechanisms.partition_selection.

Tails are checked against sums of the pmf in 40-digit decimal arithmetic. Statistical
tests use fixed seeds, so they are deterministic. Each z-test allows 4 standard errors,
so a correct sampler would fail it with probability 6e-5 under a random seed (about 3e-3
over the ~50 levels tested here).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import norm

from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.noise import RandomSource
from mechanisms.partition_selection import (
    DiscreteGaussian,
    DiscreteLaplace,
    gaussian_selection,
    laplace_selection,
    release_probability,
    seed_threshold,
    select_partitions,
    threshold,
)

Z_MAX = 4.0


# --- reference tails: the pmf summed in decimal ------------------------------------------------


def _decimal(x: Fraction) -> Decimal:
    return Decimal(x.numerator) / Decimal(x.denominator)


def reference_tail(noise, k: int) -> Decimal:
    """P[Z ≥ k] summed term by term in 40 digits, far enough out that the rest is below 1e-45 of it."""
    with localcontext() as ctx:
        ctx.prec = 40
        if isinstance(noise, DiscreteLaplace):
            b = _decimal(noise.scale)
            reach = abs(k) + math.ceil(110 * noise.scale)
            weight = lambda z: (-Decimal(abs(z)) / b).exp()  # noqa: E731
        else:
            s2 = _decimal(noise.sigma2)
            reach = math.isqrt(k * k + math.ceil(240 * noise.sigma2)) + 2
            weight = lambda z: (-Decimal(z * z) / (2 * s2)).exp()  # noqa: E731
        weights = {z: weight(z) for z in range(-reach, reach + 1)}
        return sum(w for z, w in weights.items() if z >= k) / sum(weights.values())


NOISES = [DiscreteLaplace(Fraction(1, 4)), DiscreteLaplace(Fraction(1, 2)), DiscreteLaplace(Fraction(7, 3)),
          DiscreteGaussian(Fraction(3, 10)), DiscreteGaussian(1), DiscreteGaussian(10),
          DiscreteGaussian(Fraction(1011, 20))]


# --- the seed's continuous-Laplace threshold ---------------------------------------------------


def test_seed_thresholds():
    """S000 Alg. 2.2 line 8 (L537): τ = 6.76 at ε = 4, δ = 1e-5, m = 1 and 9.06 at δ = 1e-7; b = 2m/ε = 0.5."""
    b, tau = seed_threshold(4.0, 1e-5, 1)
    assert b == 0.5 and round(tau, 2) == 6.76
    assert round(seed_threshold(4.0, 1e-7, 1)[1], 2) == 9.06
    assert seed_threshold(1.0, 1e-6, 5)[0] == 10.0


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("m", [1, 2, 5, 20])
def test_seed_threshold_keeps_new_records_below_half_delta(epsilon, m):
    """Our reading of the seed's τ (replacement neighbours, δ/2 for each side): m new records, held as one key
    of count m or m keys of count 1, are released with continuous-Laplace probability ≤ δ/2."""
    delta = 1e-6
    b, tau = seed_threshold(epsilon, delta, m)
    one_key = 0.5 * math.exp(-(tau - m) / b)
    unique_keys = m * 0.5 * math.exp(-(tau - 1) / b)
    assert max(one_key, unique_keys) <= delta / 2 * (1 + 1e-12)
    if m == 1:
        assert one_key == pytest.approx(delta / 2, rel=1e-12)  # tight at m = 1


# --- exact tails -------------------------------------------------------------------------------


@pytest.mark.parametrize("noise", NOISES, ids=repr)
def test_tails_are_the_sums_of_the_pmf(noise):
    for k in (-7, -1, 0, 1, 2, 5, 12, 40):
        exact = reference_tail(noise, k)
        if exact > Decimal("1e-300"):
            assert noise.log_tail(k) == pytest.approx(float(exact.ln()), rel=1e-12, abs=1e-12)


def test_continuous_gaussian_tail_is_not_an_upper_bound():
    """P[N_Z(0, σ²) ≥ k] > P[N(0, σ²) ≥ k], but ≤ P[N(0, σ²) ≥ k − 1] (CKS 2020's bound), on a grid."""
    for s2 in (Fraction(1, 2), 1, 10, 100):
        noise = DiscreteGaussian(s2)
        sigma = math.sqrt(s2)
        for k in (1, 2, 3, 10, 30):
            log_tail = noise.log_tail(k)
            assert log_tail > norm.logsf(k, scale=sigma)
            assert log_tail <= norm.logsf(k - 1, scale=sigma)


# --- thresholds: the defining inequality, and the smallest integer satisfying it ---------------


@pytest.mark.parametrize("noise", NOISES, ids=repr)
@pytest.mark.parametrize("delta,m,c", [(1e-5, 1, 1), (1e-7, 1, 1), (1e-9, 5, 1), (1e-6, 3, 4), (0.1, 1, 2)])
def test_threshold_is_the_smallest_satisfying_the_tail_inequality(noise, delta, m, c):
    tau = threshold(noise, delta, m, c)
    assert m * reference_tail(noise, tau + 1 - c) <= Decimal(delta)
    assert m * reference_tail(noise, tau - c) > Decimal(delta)


def test_laplace_threshold_is_its_closed_form():
    """τ = c − 1 + ⌈b ln(m / (δ (1 + q)))⌉, q = e^{−1/b}: the search never moves from the closed form here."""
    for b in (Fraction(1, 4), Fraction(1, 2), Fraction(3), Fraction(40, 7)):
        noise, q = DiscreteLaplace(b), math.exp(-1 / float(b))
        for delta, m, c in ((1e-5, 1, 1), (1e-7, 2, 3), (1e-9, 10, 1)):
            closed = c - 1 + math.ceil(float(b) * math.log(m / (delta * (1 + q))))
            assert threshold(noise, delta, m, c) == closed


def test_seed_settings_with_discrete_laplace():
    """The seed's ε = 4 with dpsql's discrete noise: b = 1/4 under add/remove (L1 = 1); at the seed's b = 1/2,
    the discrete thresholds for δ and δ/2 (replacement: a new key on each side) stay close to the seed's τ."""
    assert laplace_selection(4.0, 1e-5).threshold == 3
    assert laplace_selection(4.0, 1e-7).threshold == 5
    half = DiscreteLaplace(Fraction(1, 2))
    assert [threshold(half, d) for d in (1e-5, 1e-5 / 2, 1e-7, 1e-7 / 2)] == [6, 7, 8, 9]


def test_gaussian_thresholds():
    """ρ = 0.05: σ² = m/(2ρ) = 10m; τ for δ_τ = 1e-6 and 1e-9, m = 1 and 5."""
    got = {(d, m): gaussian_selection(0.05, d, m).threshold for d in (1e-6, 1e-9) for m in (1, 5)}
    assert got == {(1e-6, 1): 16, (1e-9, 1): 20, (1e-6, 5): 37, (1e-9, 5): 45}


def test_selections_state_their_guarantee():
    lap = laplace_selection(1.0, 1e-6, max_keys=3, max_per_key=2)
    assert lap.noise.scale == 6 and lap.cost == 1.0 and lap.epsilon_delta() == (1.0, 1e-6)
    rho, delta_noise = 0.05, 1e-6
    gauss = gaussian_selection(rho, 1e-7, max_keys=4, max_per_key=3)
    assert gauss.noise.sigma2 >= Fraction(4 * 9) / (2 * Fraction(rho)) and gauss.cost == pytest.approx(rho, rel=1e-7)
    assert gauss.cost <= rho
    epsilon, delta = gauss.epsilon_delta(delta_noise)
    assert epsilon == zcdp_to_epsilon(gauss.cost, delta_noise) and delta == pytest.approx(1e-7 + delta_noise)


def test_bad_arguments_are_refused():
    noise = DiscreteLaplace(1)
    for delta in (0.0, 0.5, -1e-6):
        with pytest.raises(ValueError, match="delta"):
            threshold(noise, delta)
    with pytest.raises(ValueError, match="max_keys"):
        threshold(noise, 1e-6, 0)
    with pytest.raises(TypeError):
        DiscreteGaussian(1.5)
    with pytest.raises(ValueError):
        DiscreteLaplace(0)
    with pytest.raises(ValueError, match=">= 1"):
        select_partitions(np.array([3, 0, 2]), 5, noise, RandomSource(1))
    with pytest.raises(ValueError, match="integers"):
        select_partitions(np.array([3.0, 2.0]), 5, noise, RandomSource(1))
    with pytest.raises(ValueError):
        release_probability(0, 5, noise)


# --- release probabilities against the samplers ------------------------------------------------


def _within(hits: int, trials: int, p: float) -> bool:
    return abs(hits / trials - p) <= Z_MAX * math.sqrt(p * (1 - p) / trials) + 1e-12


@pytest.mark.parametrize("noise,tau,counts", [
    (DiscreteLaplace(Fraction(1, 4)), 3, (1, 3, 4)),
    (DiscreteLaplace(Fraction(5, 2)), 13, (6, 10, 13, 16)),
    (DiscreteGaussian(10), 16, (9, 14, 16, 19)),
    (DiscreteGaussian(Fraction(1, 2)), 4, (3, 4, 5)),
], ids=repr)
def test_release_probability_matches_monte_carlo(noise, tau, counts):
    trials = 20_000
    rng = RandomSource(7)
    for count in counts:
        p = release_probability(count, tau, noise)
        kept, noisy = select_partitions(np.full(trials, count), tau, noise, rng)
        assert _within(kept.size, trials, p), (count, kept.size / trials, p)
        assert np.all(noisy > tau)


def test_select_partitions_keeps_positions_and_values():
    counts = np.array([1, 500, 2, 800, 3], dtype=np.uint64)
    kept, noisy = select_partitions(counts, 10, DiscreteLaplace(1), RandomSource(3))
    assert kept.tolist() == [1, 3]
    assert np.all(np.abs(noisy - counts[kept].astype(np.int64)) < 60) and noisy.dtype == np.int64
    empty_kept, empty_noisy = select_partitions(np.array([], dtype=np.int64), 10, DiscreteLaplace(1), RandomSource(3))
    assert empty_kept.size == 0 and empty_noisy.size == 0


@pytest.mark.parametrize("selection", [laplace_selection(1.0, 1e-6), gaussian_selection(0.05, 1e-6)],
                         ids=["laplace", "gaussian"])
def test_zipf_stream_release_fractions(selection):
    """10^5 units, one key each from a Zipf(1.1) law on 10^4 keys; 20 independent releases of its counts.
    Per count level, the fraction released matches release_probability, and so does the total."""
    gen = np.random.default_rng(11)
    weights = np.arange(1, 10_001) ** -1.1
    counts = np.bincount(gen.choice(10_000, size=100_000, p=weights / weights.sum()), minlength=10_000)
    counts = counts[counts > 0]
    runs = 20
    tiled = np.tile(counts, runs)
    kept, _ = select_partitions(tiled, selection.threshold, selection.noise, RandomSource(5))
    released = np.bincount(tiled[kept], minlength=counts.max() + 1)
    trials = np.bincount(tiled, minlength=counts.max() + 1)
    probability = {c: release_probability(c, selection.threshold, selection.noise) for c in np.unique(counts)}
    tested = 0
    for c, p in probability.items():
        if trials[c] >= 100 and 1e-4 < p < 1 - 1e-4:
            assert _within(int(released[c]), int(trials[c]), p), (c, released[c] / trials[c], p)
            tested += 1
    assert tested >= 10
    expected = sum(probability[c] * trials[c] for c in probability)
    spread = math.sqrt(sum(probability[c] * (1 - probability[c]) * trials[c] for c in probability))
    assert abs(kept.size - expected) <= Z_MAX * spread
    assert released[1] == 0  # keys of count 1 (thousands of them) released with probability < 1e-6
