"""Private selection (mechanisms.rap.top_k): Gumbel noise and one-shot top-K.

Statistical tests use fixed seeds; each states its false-alarm rate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mechanisms.noise import RandomSource
from mechanisms.rap.top_k import NoisyTopK, exact_scores, gumbel_scale, standard_gumbel


def test_gumbel_distribution():
    """KS test against the standard Gumbel (false-alarm rate 1e-3 at this threshold)."""
    g = standard_gumbel(200_000, RandomSource(7))
    assert np.all(np.isfinite(g))
    assert stats.kstest(g, stats.gumbel_r.cdf).pvalue > 1e-3
    assert g.mean() == pytest.approx(np.euler_gamma, abs=0.01)
    assert g.var() == pytest.approx(math.pi**2 / 6, rel=0.02)


def test_gumbel_tails_are_resolved():
    """Upper tail P(G > 10) = 4.54e-5 and lower tail P(G < -1.5) = 1.13e-2 (binomial 5-sigma bands)."""
    g = standard_gumbel(1_000_000, RandomSource(11))
    for frac, p in [(np.mean(g > 10), 1 - math.exp(-math.exp(-10))), (np.mean(g < -1.5), math.exp(-math.exp(1.5)))]:
        assert abs(frac - p) < 5 * math.sqrt(p / 1_000_000)


def test_secure_source_is_used_without_seed():
    a, b = standard_gumbel(4, RandomSource()), standard_gumbel(4, RandomSource())
    assert not np.array_equal(a, b)


def test_scale_is_bounded_range_calibrated():
    """beta = Δ / sqrt(2 rho_pick): RAP's sqrt(K / rho_t) for rho_pick = rho_t / (2K)."""
    rho_t, k = 0.02, 8
    assert gumbel_scale(rho_t / (2 * k)) == pytest.approx(math.sqrt(k / rho_t), rel=1e-8)
    assert gumbel_scale(rho_t / (2 * k)) > math.sqrt(k / rho_t)  # rounding can only add noise


def test_one_shot_top_k_picks_the_clear_winners_across_chunks():
    top = NoisyTopK(3, 1.0, RandomSource(1))
    scores = np.zeros(1000)
    scores[[17, 503, 998]] = [100.0, 90.0, 80.0]
    for start in range(0, 1000, 128):
        top.add(np.arange(start, min(start + 128, 1000)), scores[start : start + 128])
    assert top.winners().tolist() == [17, 503, 998]


def test_selection_probabilities_follow_the_exponential_mechanism():
    """Two candidates with scores differing by Δ: the first wins with e^{Δ/β} / (1 + e^{Δ/β}).

    4000 trials; the band is 5 binomial standard deviations (false-alarm rate ~6e-7).
    """
    beta, delta, trials = 2.0, 1.5, 4000
    rng = RandomSource(3)
    wins = 0
    for _ in range(trials):
        top = NoisyTopK(1, beta, rng)
        top.add(np.asarray([0, 1]), np.asarray([delta, 0.0]))
        wins += int(top.winners()[0] == 0)
    p = 1 / (1 + math.exp(-delta / beta))
    assert abs(wins / trials - p) < 5 * math.sqrt(p * (1 - p) / trials)


def test_exact_scores():
    counts = np.asarray([5, 0, 1000])
    synthetic = np.asarray([4.3, 0.1 + 0.2, 1000.0])
    got = exact_scores(counts, synthetic)
    grid = 2.0**-20
    assert np.array_equal(got, np.abs(counts - np.round(synthetic / grid) * grid))
    # sensitivity 1 holds exactly: a count one higher moves each score by at most one
    change = exact_scores(counts + 1, synthetic) - got
    assert np.all(np.abs(change) <= 1.0) and change[0] == 1.0
