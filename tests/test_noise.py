"""Tests for mechanisms.noise.

Statistical tests use fixed seeds, so they are deterministic; the thresholds state how
often a correct sampler would fail them under a random seed: each chi-square
goodness-of-fit test fails with probability 1e-4 (p-value < 1e-4) and each z-test with
probability 1e-5 (|z| > 4.42), about 2e-3 for the whole file.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from mechanisms.noise import (
    RandomSource,
    bernoulli_exp,
    discrete_gaussian_variance,
    discrete_gaussian_vector,
    discrete_laplace_variance,
    discrete_laplace_vector,
    gaussian_sigma2_upper,
    laplace_scale_upper,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    to_fraction_upper,
)
from mechanisms.noise import batched, exact
from mechanisms.noise.exact import GaussianParams

CHI2_ALPHA = 1e-4
Z_MAX = 4.42  # two-sided normal tail 1e-5
N = 50_000


def _scalar_vector(scalar):
    """A vector of the scalar sampler's draws, one at a time (the scalar samplers' own tests)."""
    return lambda param, size, rng: np.array([scalar(param, rng) for _ in range(size)], dtype=np.int64)


@pytest.fixture(params=["batched", "scalar"])
def path(request) -> str:
    """Run a distribution test through the vector functions (the batched kernels), then through the scalar samplers."""
    return request.param


@pytest.fixture
def tiny_int64(monkeypatch) -> None:
    """Shrink the batched kernels' integer bounds so every exact fallback runs on ordinary draws: uniform draws and
    Bernoulli ratios in Python integers, top-bit ties settled one by one, acceptance exponents split through a
    floating-point guess or in Python integers, far exponents finished by the scalar code, and Algorithm 1's runs
    past the steps one draw holds."""
    monkeypatch.setattr(batched, "_LIMIT", 64)
    monkeypatch.setattr(batched, "_FACTORIAL_RUN", 3)
    monkeypatch.setattr(batched, "_HIGH_BITS", 3)
    monkeypatch.setattr(batched, "_SQUARE_LIMIT", 2**20)
    monkeypatch.setattr(batched, "_DIRECT_ROOT", 2**3)
    monkeypatch.setattr(batched, "_EXPONENT_LIMIT", 3)


def gaussian_pmf(sigma2: float) -> tuple[np.ndarray, np.ndarray]:
    half = int(60 * math.sqrt(sigma2)) + 60
    xs = np.arange(-half, half + 1)
    w = np.exp(-(xs.astype(float) ** 2) / (2 * sigma2))
    return xs, w / w.sum()


def laplace_pmf(scale: float) -> tuple[np.ndarray, np.ndarray]:
    half = int(60 * scale) + 60
    xs = np.arange(-half, half + 1)
    a = 1 / scale
    return xs, math.tanh(a / 2) * np.exp(-a * np.abs(xs))


def assert_fits(samples: np.ndarray, xs: np.ndarray, pmf: np.ndarray) -> None:
    """Chi-square goodness of fit; bins are single integers, tails pooled to >= 5 expected."""
    n = len(samples)
    inner = np.flatnonzero(n * pmf >= 5)
    lo, hi = xs[inner[0]], xs[inner[-1]]
    counts = np.bincount(np.clip(samples, lo, hi) - lo, minlength=hi - lo + 1)
    expected = n * pmf[inner[0] : inner[-1] + 1].copy()
    expected[0] = n * pmf[: inner[0] + 1].sum()
    expected[-1] = n * pmf[inner[-1] :].sum()
    statistic = ((counts - expected) ** 2 / expected).sum()
    p_value = stats.chi2.sf(statistic, len(expected) - 1)
    assert p_value > CHI2_ALPHA, f"chi-square p = {p_value:.2e} over {len(expected)} bins"


def assert_moments(samples: np.ndarray, variance: float) -> None:
    """Mean 0 and E[x^2] = variance, by z-tests (studentized for the second moment)."""
    n = len(samples)
    x = samples.astype(float)
    z_mean = x.mean() / math.sqrt(variance / n)
    assert abs(z_mean) < Z_MAX, f"mean z = {z_mean:.2f}"
    sq = x**2
    z_var = (sq.mean() - variance) / (sq.std() / math.sqrt(n))
    assert abs(z_var) < Z_MAX, f"variance z = {z_var:.2f}"


# --- RandomSource ----------------------------------------------------------------------


def test_random_source_seeded_is_reproducible() -> None:
    a, b = RandomSource(7), RandomSource(7)
    assert [a.randbelow(1000) for _ in range(50)] == [b.randbelow(1000) for _ in range(50)]
    assert a.seeded


def test_random_source_default_is_cryptographic_and_unseeded() -> None:
    a, b = RandomSource(), RandomSource()
    assert not a.seeded
    assert [a.randbelow(2**64) for _ in range(4)] != [b.randbelow(2**64) for _ in range(4)]


@pytest.mark.parametrize("n", [2, 7, 8, 1000])
def test_randbelow_is_uniform(n: int) -> None:
    rng = RandomSource(n)
    m = 2_000 * min(n, 8)
    draws = np.array([rng.randbelow(n) for _ in range(m)])
    assert draws.min() >= 0 and draws.max() < n
    if n <= 8:
        assert stats.chisquare(np.bincount(draws, minlength=n)).pvalue > CHI2_ALPHA


def test_randbelow_edge_cases() -> None:
    rng = RandomSource(0)
    assert rng.randbelow(1) == 0
    assert 0 <= rng.randbelow(3**200) < 3**200
    with pytest.raises(ValueError):
        rng.randbelow(0)


# --- bernoulli_exp ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "gamma",
    [Fraction(1, 10), Fraction(1, 2), Fraction(1), Fraction(3, 2), Fraction(7, 3), Fraction(5),
     Fraction(10**20 + 1, 10**20)],
)
def test_bernoulli_exp_frequency(gamma: Fraction) -> None:
    rng = RandomSource(gamma.numerator % 1000 + gamma.denominator)
    n = 20_000
    hits = sum(bernoulli_exp(gamma, rng) for _ in range(n))
    p = math.exp(-gamma)
    z = (hits - n * p) / math.sqrt(n * p * (1 - p))
    assert abs(z) < Z_MAX, f"z = {z:.2f}"


def test_bernoulli_exp_zero_is_certain() -> None:
    rng = RandomSource(1)
    assert all(bernoulli_exp(0, rng) for _ in range(1000))


def test_bernoulli_exp_rejects_bad_gamma() -> None:
    with pytest.raises(TypeError):
        bernoulli_exp(0.5, RandomSource(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        bernoulli_exp(Fraction(-1, 2), RandomSource(0))


# --- discrete Gaussian -----------------------------------------------------------------


@pytest.mark.parametrize(
    "sigma2",
    [Fraction(1, 4), Fraction(4), Fraction(100), to_fraction_upper(2.3**2), gaussian_sigma2_upper(2.3**2)],
    ids=["sigma=0.5", "sigma=2", "sigma=10", "sigma=2.3-rational", "sigma=2.3-calibrated"],
)
def test_discrete_gaussian_distribution(sigma2: Fraction, path: str) -> None:
    draw = discrete_gaussian_vector if path == "batched" else _scalar_vector(sample_discrete_gaussian)
    samples = draw(sigma2, N, RandomSource(int(sigma2 * 1000)))
    assert_fits(samples, *gaussian_pmf(float(sigma2)))
    assert_moments(samples, discrete_gaussian_variance(sigma2))


def test_discrete_gaussian_large_sigma() -> None:
    sigma2 = Fraction(10**12)
    samples = discrete_gaussian_vector(sigma2, 20_000, RandomSource(3))
    assert_moments(samples, discrete_gaussian_variance(sigma2))


def test_noise_beyond_int64_stays_exact() -> None:
    # A strategy with a very fine lattice step (e.g. a Kronecker product of many rounded
    # factors) needs noise far beyond 2^63 lattice units: it must not wrap or fail.
    samples = discrete_gaussian_vector(Fraction(10**40), 200, RandomSource(5))
    assert samples.dtype == object and all(isinstance(int(v), int) for v in samples)
    assert 0.5 < np.std(samples.astype(float)) / 1e20 < 1.5
    assert discrete_laplace_vector(Fraction(10**30), 5, RandomSource(6)).dtype == object
    assert discrete_gaussian_vector(Fraction(4), 5, RandomSource(7)).dtype == np.int64


def test_discrete_gaussian_degenerate_and_invalid() -> None:
    rng = RandomSource(0)
    assert sample_discrete_gaussian(0, rng) == 0
    assert not discrete_gaussian_vector(Fraction(0), 5, rng).any()
    with pytest.raises(TypeError):
        sample_discrete_gaussian(1.0, rng)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        sample_discrete_gaussian(Fraction(-1), rng)
    with pytest.raises(ValueError):
        discrete_gaussian_vector(1, -1, rng)


# --- discrete Laplace ------------------------------------------------------------------


@pytest.mark.parametrize(
    "scale",
    [Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(10), to_fraction_upper(0.7)],
    ids=["1/3", "1", "5/2", "10", "0.7-rational"],
)
def test_discrete_laplace_distribution(scale: Fraction, path: str) -> None:
    draw = discrete_laplace_vector if path == "batched" else _scalar_vector(sample_discrete_laplace)
    samples = draw(scale, N, RandomSource(int(scale * 1000)))
    assert_fits(samples, *laplace_pmf(float(scale)))
    assert_moments(samples, discrete_laplace_variance(scale))


def test_discrete_laplace_large_scale() -> None:
    scale = Fraction(10**6)
    samples = discrete_laplace_vector(scale, 20_000, RandomSource(4))
    assert_moments(samples, discrete_laplace_variance(scale))


def test_discrete_laplace_degenerate_and_invalid() -> None:
    rng = RandomSource(0)
    assert sample_discrete_laplace(0, rng) == 0
    assert not discrete_laplace_vector(0, 5, rng).any()
    with pytest.raises(TypeError):
        discrete_laplace_vector(2.0, 5, rng)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        sample_discrete_laplace(Fraction(-2), rng)


# --- vectors and determinism -----------------------------------------------------------


@pytest.mark.parametrize(
    "vector, scalar, param",
    [
        (discrete_gaussian_vector, sample_discrete_gaussian, Fraction(9, 2)),
        (discrete_laplace_vector, sample_discrete_laplace, Fraction(7, 3)),
    ],
)
def test_vectors_are_deterministic_and_match_scalars(vector, scalar, param) -> None:
    a = vector(param, 500, RandomSource(11))
    assert a.dtype == np.int64 and a.shape == (500,)
    assert np.array_equal(a, vector(param, 500, RandomSource(11)))
    assert not np.array_equal(a, vector(param, 500, RandomSource(12)))
    for size in (1, 2, 31):  # short vectors too: reproducible for a seed
        assert vector(param, size, RandomSource(13)).tolist() == vector(param, size, RandomSource(13)).tolist()
    assert vector(param, 0, RandomSource(11)).shape == (0,)


@pytest.mark.parametrize("seed", [None, 5])
def test_vectors_never_take_the_scalar_path(monkeypatch, seed) -> None:
    """Every vector, of any length, at any scale (sigma up to 1e12 lattice units), seeded or not, is drawn by
    the batched kernels: the scalar samplers and one-at-a-time uniform draws are never called."""

    def scalar(*args, **kwargs):
        raise AssertionError("the scalar sampler ran for a vector")

    for name in ("_discrete_gaussian", "_discrete_laplace", "_bern_exp", "_bern_exp_frac", "_bern_exp_one"):
        monkeypatch.setattr(exact, name, scalar)
    monkeypatch.setattr(RandomSource, "randbelow", scalar)
    for sigma in (0.5, 3.0, 50.0, 1e6, 1e9, 1e12):
        for size in (1, 2, 7, 1000):
            rng = RandomSource(seed)
            g = discrete_gaussian_vector(gaussian_sigma2_upper(sigma**2), size, rng)
            lap = discrete_laplace_vector(laplace_scale_upper(sigma), size, rng)
            assert g.shape == lap.shape == (size,) and g.dtype == lap.dtype == np.int64


def test_batched_fallbacks_keep_the_distribution(tiny_int64, monkeypatch) -> None:
    calls = {"tie": 0, "accept": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(batched, "_settle_tie", counted("tie", batched._settle_tie))
    monkeypatch.setattr(GaussianParams, "accept", counted("accept", GaussianParams.accept))
    for sigma2, seed in ((Fraction(50), 21), (Fraction(9, 2), 24), (Fraction(1000), 25)):
        # sigma2 = 50: t = 8, acceptance test (4|y| - 25)^2 / 1600: every bound is crossed
        samples = discrete_gaussian_vector(sigma2, 20_000, RandomSource(seed)).astype(np.int64)
        assert_fits(samples, *gaussian_pmf(float(sigma2)))
        assert_moments(samples, discrete_gaussian_variance(sigma2))
    assert calls["tie"] > 1000 and calls["accept"] > 1000  # the fallbacks ran, often
    for scale, seed in ((Fraction(5, 2), 22), (Fraction(200, 3), 26)):
        samples = discrete_laplace_vector(scale, 20_000, RandomSource(seed)).astype(np.int64)
        assert_fits(samples, *laplace_pmf(float(scale)))


@pytest.mark.parametrize("d", [2**61, 2**62 + 1, 2**100 + 7])
def test_batched_series_is_exact_for_any_denominator(d: int) -> None:
    n = np.full(20_000, d // 2, dtype=np.int64 if d <= 2**62 else object)
    hits = int(batched._bern_exp_frac(n, d, RandomSource(23)).sum())
    p = math.exp(-(d // 2) / d)
    assert abs(hits - 20_000 * p) / math.sqrt(20_000 * p * (1 - p)) < Z_MAX


@pytest.mark.parametrize("root", [3, 2**31 + 5, 2**40 + 3, 2**61 - 1])
def test_acceptance_exponent_splits_exactly(root: int) -> None:
    d = 2**61 - 1
    roots = np.array([root, -root, root - 1], dtype=np.int64)
    whole, rest, far = batched._square_parts(roots, d)
    for r, w, q, f in zip(roots.tolist(), whole.tolist(), rest.tolist(), far.tolist()):
        assert f == (r * r // d >= 2**40) and (f or (w, q) == divmod(r * r, d))


@pytest.mark.parametrize("m", [2, 3, 200, 2**16 + 1, 2**40 + 3])
def test_uniform_below_is_uniform(m: int) -> None:
    draws = batched._below(m, 40_000, RandomSource(m % 1000))
    assert draws.min() >= 0 and draws.max() < m
    bins = min(m, 64)
    counts = np.bincount((draws * bins // m).astype(np.int64), minlength=bins)
    expected = np.array([(-(-(k + 1) * m // bins)) - (-(-k * m // bins)) for k in range(bins)]) * 40_000 / m
    assert stats.chisquare(counts, expected).pvalue > CHI2_ALPHA


@pytest.mark.parametrize("x", [1e-9, 0.3, 2.3**2, 49.99999, 50.0, 1e4, 1234567.89, 2.0**50, 2.0**60])
def test_gaussian_sigma2_upper_rounds_up_into_the_batched_kernels(x: float) -> None:
    sigma2 = gaussian_sigma2_upper(x)
    assert sigma2 >= Fraction(x)
    sigma = math.sqrt(x)
    assert float(sigma2 - Fraction(x)) / x <= (2.0**-25 if sigma >= 1 else 2.0**-26 / sigma) or sigma >= 2**26
    if x < 2.0**48:  # sigma < 2**24: the int64 kernels apply
        assert batched.gaussian_fits(GaussianParams.of(sigma2))


@pytest.mark.parametrize("x", [1e-9, 0.7, 13.3333, 1e6, 2.0**45])
def test_laplace_scale_upper_rounds_up_into_the_batched_kernels(x: float) -> None:
    scale = laplace_scale_upper(x)
    assert scale >= Fraction(x)
    assert float(scale - Fraction(x)) / x <= 2.0**-28
    if x < 2.0**38:
        assert scale.numerator < 2**41


def test_samplers_default_to_system_randomness() -> None:
    assert isinstance(sample_discrete_gaussian(Fraction(4)), int)
    assert discrete_laplace_vector(Fraction(3), 10).shape == (10,)


# --- to_fraction_upper -----------------------------------------------------------------


@pytest.mark.parametrize("x", [0.0, 0.5, 3.0, 1e6, 2.0**-20, -0.25, 2.0**60])
def test_to_fraction_upper_keeps_representable_values(x: float) -> None:
    assert to_fraction_upper(x) == Fraction(x)


@pytest.mark.parametrize("x", [math.pi, 0.1, 2.0 / 3, 1e-3, -math.e, 123.456])
def test_to_fraction_upper_is_smallest_upper_bound(x: float) -> None:
    bits = 8
    brute = min(Fraction(math.ceil(Fraction(x) * q), q) for q in range(1, 2**bits + 1))
    assert to_fraction_upper(x, bits) == brute


def test_to_fraction_upper_bounds_and_accuracy() -> None:
    rng = random.Random(5)
    for _ in range(2_000):
        x = 10 ** rng.uniform(-6, 12)
        f = to_fraction_upper(x)
        assert f >= Fraction(x)
        assert f.denominator <= 2**32
        assert (f - Fraction(x)) / Fraction(x) <= Fraction(1, 2**31)


def test_to_fraction_upper_rejects_non_finite() -> None:
    for x in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError):
            to_fraction_upper(x)


# --- variances -------------------------------------------------------------------------


@pytest.mark.parametrize("sigma2", [1e-3, 0.1, 0.5, 1.0, math.nextafter(1.0, 2.0), 1.5, 2.0, 10.0, 1e4])
def test_discrete_gaussian_variance_matches_series(sigma2: float) -> None:
    xs, pmf = gaussian_pmf(sigma2)
    assert discrete_gaussian_variance(sigma2) == pytest.approx(float((xs**2 * pmf).sum()), rel=1e-12)


def test_discrete_gaussian_variance_shape() -> None:
    for sigma2 in (0.05, 0.5, 1.0, 1.2):
        assert discrete_gaussian_variance(sigma2) < sigma2
    assert discrete_gaussian_variance(Fraction(10**12)) == 1e12
    assert discrete_gaussian_variance(0) == 0.0
    with pytest.raises(ValueError):
        discrete_gaussian_variance(-1.0)


@pytest.mark.parametrize("scale", [0.05, 0.3, 1.0, 2.5, 40.0])
def test_discrete_laplace_variance_matches_series(scale: float) -> None:
    xs, pmf = laplace_pmf(scale)
    assert discrete_laplace_variance(scale) == pytest.approx(float((xs**2 * pmf).sum()), rel=1e-12)


def test_discrete_laplace_variance_limits() -> None:
    assert discrete_laplace_variance(1e8) == pytest.approx(2e16 - 1 / 6, rel=1e-15)
    assert discrete_laplace_variance(1e-4) == 0.0
    assert discrete_laplace_variance(0) == 0.0
    with pytest.raises(ValueError):
        discrete_laplace_variance(-1.0)
