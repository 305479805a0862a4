"""Noisy measurement on the exact lattice: steps, calibration and released values.

Statistical checks use fixed seeds, so they are deterministic; each one is a
two-sided z-test at |z| <= 5, i.e. a false-alarm rate of about 6e-7 per check
for a correct implementation were the seed changed (normal approximation; the
sample sizes are in the thousands).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mechanisms.matrices import (
    Dense,
    Diagonal,
    Identity,
    Kronecker,
    Ones,
    Prefix,
    Sum,
    Total,
    Weighted,
)
from mechanisms.measurement import (
    GAUSSIAN,
    LAPLACE,
    Calibration,
    calibrate,
    lattice_step,
    measure,
    query_step,
)
from mechanisms.noise import RandomSource, discrete_gaussian_variance, discrete_laplace_variance

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
Z = 5.0  # two-sided z threshold: false-alarm rate ~5.7e-7 per check


def dec(x: float) -> Fraction:
    """A float read as the decimal it prints as."""
    return Fraction(repr(float(x)))


# ---------------------------------------------------------------------------
# lattice_step


@pytest.mark.parametrize(
    "values, step",
    [
        ([1, 2, 3], Fraction(1)),
        ([2, 4, -6], Fraction(2)),
        ([0, 0], Fraction(1)),
        ([], Fraction(1)),
        ([0.1, 0.2, 0.0], Fraction(1, 10)),
        ([0.1], Fraction(1, 10)),
        ([2500, 5000], Fraction(2500)),
        ([2500.0], Fraction(2500)),
        ([0.25, 0.5, 0.75], Fraction(1, 4)),
        ([0.1, 0.25], Fraction(1, 20)),  # mixed denominators: lcm
        ([2500, 0.1], Fraction(1, 10)),
        ([2500, 0.25], Fraction(1, 4)),
        ([0.1, 2500, 0.25, 1.5], Fraction(1, 20)),
        ([-0.3, 0.6], Fraction(3, 10)),
        ([1.5, 2500], Fraction(1, 2)),
        ([1, 0.5, 0.1], Fraction(1, 10)),
        ([1e20, 3e20], Fraction(10**20)),
        ([1e-6, 4e-6], Fraction(1, 10**6)),
        (np.array([[0.1, 0.0], [0.2, 0.3]]), Fraction(1, 10)),
    ],
)
def test_lattice_step_examples(values, step):
    assert lattice_step(values) == step


@PROPERTY
@given(
    st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=8),
    st.integers(0, 6),
)
def test_lattice_step_is_the_largest_common_step_of_decimals(ks, digits):
    values = [k / 10**digits for k in ks]
    step = lattice_step(values)
    g = math.gcd(*ks)
    assert step == (Fraction(g, 10**digits) if g else Fraction(1))
    units = [dec(v) / step for v in values]
    assert all(u.denominator == 1 for u in units)
    if g:
        assert math.gcd(*(u.numerator for u in units)) == 1  # no larger step works


# ---------------------------------------------------------------------------
# query_step

ROW = [0.1, 2500.0, 0.25, 1.5]


@pytest.mark.parametrize(
    "query, step",
    [
        (None, Fraction(1)),
        (Identity(4), Fraction(1)),
        (Total(4), Fraction(1)),
        (Ones(2, 3), Fraction(1)),
        (Prefix(3), Fraction(1)),
        (Diagonal([0.5, 1.0, 0.0]), Fraction(1, 2)),
        (Dense([[2500.0, 5000.0]]), Fraction(2500)),
        (Kronecker([Identity(3), Dense([ROW])]), Fraction(1, 20)),
        (Kronecker([Identity(3), Total(2), Dense([[0.1, 0.2]])]), Fraction(1, 10)),
        (Weighted(Kronecker([Identity(2), Dense([[2500.0, 5000.0]])]), 0.25), Fraction(625)),
        (Weighted(Kronecker([Diagonal([0.5, 1.0]), Dense([[0.1, 0.0]])]), -3.0), Fraction(3, 20)),
        (
            Sum(
                [
                    Weighted(Kronecker([Diagonal([0.5, 1.0]), Total(2)]), 1.0),
                    Weighted(Kronecker([Identity(2), Dense([[0.1, 0.0]])]), -1.0),
                ]
            ),
            Fraction(1, 10),
        ),
        (
            Sum(
                [
                    Weighted(Kronecker([Identity(2), Dense([[0.1, 0.3]])]), 0.0),  # ignored
                    Weighted(Kronecker([Identity(2), Dense([[2.0, 4.0]])]), 0.5),
                ]
            ),
            Fraction(1),
        ),
        (Weighted(Kronecker([Identity(2), Dense([[0.1, 0.3]])]), 0.0), Fraction(1)),
        (Kronecker([]), Fraction(1)),
    ],
)
def test_query_step_examples(query, step):
    assert query_step(query) == step
    if query is not None:
        # Every entry of the query is a whole number of steps.
        units = np.asarray(query.dense()) / float(step)
        np.testing.assert_allclose(units, np.rint(units), atol=1e-6)


# ---------------------------------------------------------------------------
# calibrate


def test_calibrate_refuses_bad_arguments():
    for share in (0.0, -1.0):
        with pytest.raises(ValueError):
            calibrate(GAUSSIAN, 1.0, share)
        with pytest.raises(ValueError):
            calibrate(LAPLACE, 1.0, share)
    with pytest.raises(ValueError):
        calibrate("uniform", 1.0, 1.0)


@pytest.mark.parametrize(
    "sensitivity, rho", [(1.0, 0.01), (1.0, 0.1), (10.0, 0.5), (2500.0, 1.0), (3.0, 0.001), (1.0, 0.25)]
)
def test_gaussian_variance_is_delta_squared_over_two_rho(sensitivity, rho):
    cal = calibrate(GAUSSIAN, sensitivity, rho)
    assert isinstance(cal, Calibration) and cal.kind == GAUSSIAN
    assert isinstance(cal.scale, Fraction) and cal.granularity == 1
    target = sensitivity**2 / (2 * rho)
    assert target >= 2  # where the discrete and continuous variances agree
    assert cal.variance == pytest.approx(target, rel=2**-24)  # the sampler-friendly rounding (mechanisms.noise.parameters)
    assert cal.variance == discrete_gaussian_variance(cal.scale)
    assert cal.scale >= Fraction(sensitivity) ** 2 / (2 * Fraction(rho))


@pytest.mark.parametrize("sensitivity, eps", [(1.0, 0.1), (10.0, 0.5), (2500.0, 1.0), (1.0, 0.01), (4.0, 0.2)])
def test_laplace_variance_is_two_b_squared(sensitivity, eps):
    cal = calibrate(LAPLACE, sensitivity, eps)
    assert cal.kind == LAPLACE
    b = sensitivity / eps
    assert b >= 10
    # Discrete Laplace variance is 2b² - 1/6 + O(1/b²).
    assert cal.variance == pytest.approx(2 * b**2, rel=1e-3)
    assert cal.variance == pytest.approx(2 * b**2 - 1 / 6, rel=1e-6)
    assert cal.variance == discrete_laplace_variance(cal.scale)
    assert cal.scale >= Fraction(sensitivity) / Fraction(eps)


def test_small_scales_use_the_exact_discrete_variance():
    # sigma² = 0.1: the discrete Gaussian is much tighter than its continuous namesake.
    cal = calibrate(GAUSSIAN, 1.0, 5.0)
    assert cal.scale >= Fraction(1, 10)
    assert cal.variance == pytest.approx(discrete_gaussian_variance(Fraction(1, 10)), rel=1e-6)
    assert cal.variance < 0.02
    lap = calibrate(LAPLACE, 1.0, 2.0)
    assert lap.variance == pytest.approx(2 * math.exp(-2) / (1 - math.exp(-2)) ** 2, rel=1e-6)


def test_zero_sensitivity_means_no_noise():
    for kind in (GAUSSIAN, LAPLACE):
        cal = calibrate(kind, 0.0, 1.0)
        assert cal.scale == 0 and cal.variance == 0.0


@pytest.mark.parametrize(
    "sensitivity, granularity, units",
    [
        (0.3, Fraction(1, 10), 3),
        (2500.0, Fraction(1, 20), 50000),
        (2500.0, Fraction(2500), 1),
        (0.25, Fraction(1, 4), 1),
        (7.5, Fraction(1, 2), 15),
    ],
)
@pytest.mark.parametrize("kind, share", [(GAUSSIAN, 0.5), (GAUSSIAN, 0.01), (LAPLACE, 0.5), (LAPLACE, 0.05)])
def test_granularity_sets_the_lattice_units(sensitivity, granularity, units, kind, share):
    cal = calibrate(kind, sensitivity, share, granularity)
    assert cal.granularity == granularity
    lattice = Fraction(units**2) / (2 * Fraction(share)) if kind == GAUSSIAN else Fraction(units) / Fraction(share)
    assert cal.scale >= lattice
    assert float(cal.scale) == pytest.approx(float(lattice), rel=2**-24)
    kernel = discrete_gaussian_variance if kind == GAUSSIAN else discrete_laplace_variance
    assert cal.variance == pytest.approx(float(granularity) ** 2 * kernel(cal.scale), rel=1e-12)
    # The same noise as the unit-lattice calibration of sensitivity / granularity.
    plain = calibrate(kind, units, share)
    assert float(cal.scale) == pytest.approx(float(plain.scale), rel=2**-24)


GRANULARITIES = [Fraction(1), Fraction(1, 10), Fraction(1, 4), Fraction(1, 20), Fraction(2500), Fraction(3, 1000)]


@PROPERTY
@given(
    st.floats(1e-3, 1e4, allow_nan=False),
    st.floats(1e-3, 10.0, allow_nan=False),
    st.sampled_from(GRANULARITIES),
    st.sampled_from([GAUSSIAN, LAPLACE]),
)
def test_calibration_never_rounds_noise_down(sensitivity, share, granularity, kind):
    cal = calibrate(kind, sensitivity, share, granularity)
    # The strictest reading of the request: the larger of the float's binary and
    # decimal values for the sensitivity, the smaller for the share.
    delta = max(Fraction(sensitivity), dec(sensitivity)) / granularity
    budget = min(Fraction(share), dec(share))
    asked = delta**2 / (2 * budget) if kind == GAUSSIAN else delta / budget
    assert cal.scale >= asked
    # ... and not much more (mechanisms.noise.parameters states the bounds: a relative
    # excess below 2**-25 for sigma >= 1 and 2**-26 / sigma below; 2**-32 absolute for a tiny scale).
    if kind == GAUSSIAN and asked >= 1:
        assert cal.scale <= asked * (1 + Fraction(1, 2**25))
    elif asked >= Fraction(1, 2**20):
        sigma = math.sqrt(asked) if kind == GAUSSIAN else 1
        assert cal.scale <= asked * (1 + Fraction(2**-26 / sigma))
    else:
        assert cal.scale <= asked + Fraction(1, 2**32)


# ---------------------------------------------------------------------------
# measure


def test_non_integer_counts_are_refused():
    rng = RandomSource(0)
    for counts in (np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.5, 2.0]), np.array([True, False, True])):
        with pytest.raises(TypeError):
            measure(counts, None, GAUSSIAN, 1.0, rng)
        with pytest.raises(TypeError):
            measure(counts, Total(3), LAPLACE, 1.0, rng)


def test_measure_is_reproducible_with_a_seed():
    counts = np.arange(50)
    q = Kronecker([Identity(10), Dense([ROW + [0.0]])])
    a, cal_a = measure(counts, q, GAUSSIAN, 0.5, RandomSource(3))
    b, cal_b = measure(counts, q, GAUSSIAN, 0.5, RandomSource(3))
    c, _ = measure(counts, q, GAUSSIAN, 0.5, RandomSource(4))
    np.testing.assert_array_equal(a, b)
    assert cal_a == cal_b
    assert not np.array_equal(a, c)


def check_noise(noise_units: np.ndarray, step: Fraction, variance: float) -> None:
    """Noise in answer units has mean 0 and variance `variance` (z-tests at Z)."""
    x = noise_units.astype(float) * float(step)
    n = x.size
    assert abs(x.mean()) <= Z * math.sqrt(variance / n), (x.mean(), variance)
    s2 = (x**2).mean()  # the mean is known to be 0
    se = math.sqrt(max((x**4).mean() - s2**2, 1e-300) / n)
    assert abs(s2 - variance) <= Z * se, (s2, variance, se)
    assert abs(s2 - variance) <= 0.25 * variance  # and the test has power


def lattice_noise(released: np.ndarray, exact: list[Fraction], step: Fraction) -> np.ndarray:
    """(released - exact) / step, asserting it is a whole number of steps."""
    out = []
    for r, a in zip(released, exact):
        z = (dec(r) - a) / step
        assert z.denominator == 1, (r, a, step)
        out.append(z.numerator)
    return np.asarray(out)


@pytest.mark.parametrize(
    "kind, share",
    [(GAUSSIAN, 0.5), (GAUSSIAN, 0.02), (GAUSSIAN, 5.0), (LAPLACE, 0.5), (LAPLACE, 0.05), (LAPLACE, 3.0)],
)
def test_measure_identity_marginal(kind, share):
    counts = np.random.default_rng(1).integers(0, 1000, size=20000).reshape(100, 200)
    released, cal = measure(counts, None, kind, share, RandomSource(11))
    assert released.shape == (20000,) and released.dtype == float
    assert cal.granularity == 1
    assert cal == calibrate(kind, 1.0, share)
    noise = lattice_noise(released, [Fraction(int(c)) for c in counts.ravel()], Fraction(1))
    check_noise(noise, Fraction(1), cal.variance)
    # Identity as an explicit query (or as a Kronecker of Identities) is the same measurement.
    small = counts[:10, :30]
    base, cal1 = measure(small, None, kind, share, RandomSource(11))
    for q in (Identity(300), Kronecker([Identity(10), Identity(30)])):
        again, cal2 = measure(small, q, kind, share, RandomSource(11))
        assert cal2 == cal1
        np.testing.assert_array_equal(again, base)


def test_contribution_bound_scales_the_sensitivity():
    counts = np.arange(30)
    q = Kronecker([Identity(6), Dense([[0.1, 2500.0, 0.25, 1.5, 0.0]])])
    for kind, p in ((GAUSSIAN, 2), (LAPLACE, 1)):
        _, cal = measure(counts, q, kind, 0.7, RandomSource(0), contribution_bound=3)
        assert cal == calibrate(kind, 3 * q.sensitivity(p), 0.7, Fraction(1, 20))
        _, none = measure(counts, None, kind, 0.7, RandomSource(0), contribution_bound=4)
        assert none == calibrate(kind, 4.0, 0.7)


# SUM(v) GROUP BY g1, g2 where v's bins carry the decimal values of ROW.
G1, G2 = 60, 50
SUM_INT, SUM_K = np.array([[2, 50000, 5, 30]]), 20  # ROW = SUM_INT / SUM_K, exactly as decimals


def exact_answers(int_terms, k: int, counts) -> list[Fraction]:
    """Σ_t ⊗(integer factors) @ counts / k, exactly (float is exact for these small integers)."""
    total = sum(Kronecker(f).matvec(counts.ravel().astype(float)) for f in int_terms)
    assert np.all(np.abs(total) < 2**52)
    return [Fraction(int(v), k) for v in np.rint(total)]


@pytest.mark.parametrize("kind, share", [(GAUSSIAN, 1.0), (LAPLACE, 1.0), (GAUSSIAN, 0.05)])
def test_measure_kronecker_sum_query_with_decimal_values(kind, share):
    row = SUM_INT / SUM_K
    assert [repr(float(v)) for v in row[0]] == ["0.1", "2500.0", "0.25", "1.5"]
    q = Kronecker([Identity(G1), Identity(G2), Dense(row)])
    counts = np.random.default_rng(2).integers(0, 40, size=(G1, G2, 4))
    released, cal = measure(counts, q, kind, share, RandomSource(5))
    step = Fraction(1, 20)
    assert query_step(q) == step and cal.granularity == step
    # Planned and realized calibrations are the same object.
    assert cal == calibrate(kind, q.sensitivity(2 if kind == GAUSSIAN else 1), share, query_step(q))
    assert q.sensitivity(2) == q.sensitivity(1) == 2500.0
    exact = exact_answers([[Identity(G1), Identity(G2), Dense(SUM_INT)]], SUM_K, counts)
    noise = lattice_noise(released, exact, step)
    check_noise(noise, step, cal.variance)
    expected = 2500.0**2 / (2 * share) if kind == GAUSSIAN else 2 * (2500.0 / share) ** 2
    assert cal.variance == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("kind, share", [(GAUSSIAN, 0.3), (LAPLACE, 0.4)])
def test_measure_multi_term_sum(kind, share):
    # (Σ over v of [1, 0.5, 0, 0]) − 2·(diag d on g1) ⊗ [0, 0, 0.25, 2500], plus a zero term.
    d_int = np.array([2, 0, 1] * (G1 // 3))  # diag values 1, 0, 0.5 (= d_int / 2)
    a_int = np.array([[2, 1, 0, 0]])  # / 2
    b_int = np.array([[0, 0, 1, 10000]])  # / 4
    q = Sum(
        [
            Weighted(Kronecker([Identity(G1), Identity(G2), Dense(a_int / 2)]), 1.0),
            Weighted(Kronecker([Diagonal(d_int / 2), Identity(G2), Dense(b_int / 4)]), -2.0),
            Weighted(Kronecker([Identity(G1), Identity(G2), Dense([[0.1, 0.2, 0.3, 0.7]])]), 0.0),
        ]
    )
    step = Fraction(1, 4)  # gcd(1/2, 2 · 1/2 · 1/4)
    assert query_step(q) == step
    counts = np.random.default_rng(3).integers(0, 30, size=G1 * G2 * 4)
    released, cal = measure(counts, q, kind, share, RandomSource(9))
    assert cal.granularity == step
    assert cal == calibrate(kind, q.sensitivity(2 if kind == GAUSSIAN else 1), share, step)
    # In units of 1/16: term 1 is ⊗(I, I, a_int)·8/16, term 2 is −2·(d_int/2)·(b_int/4) = −4·⊗(diag d_int, I, b_int)/16.
    exact = exact_answers(
        [
            [Identity(G1), Identity(G2), Dense(8 * a_int)],
            [Diagonal(-4 * d_int), Identity(G2), Dense(b_int)],
        ],
        16,
        counts,
    )
    np.testing.assert_allclose([float(e) for e in exact], q.matvec(counts.astype(float)))
    noise = lattice_noise(released, exact, step)
    check_noise(noise, step, cal.variance)


def test_a_very_fine_lattice_releases_exactly():
    # Entries 10^-24 apart put the noise ~10^24 lattice units wide, beyond int64 (a
    # regression: HDMM strategies with many rounded Kronecker factors overflowed here).
    counts = np.array([3, 5], dtype=np.int64)
    q = Dense(np.array([[1.0, 1e-24], [0.5, 1.0]]))
    released, cal = measure(counts, q, GAUSSIAN, 0.5, RandomSource(8))
    assert cal.granularity == Fraction(1, 10**24)
    assert np.all(np.isfinite(released)) and np.all(np.abs(released - q.matvec(counts)) < 50)


# ---------------------------------------------------------------------------
# int64 fast paths: the same exact answers and released doubles as Python integers give


def _answers_in_python_integers(query, counts) -> tuple[Fraction, list[int]]:
    """The exact answers in units of the query's step, every product and sum a Python integer."""
    from mechanisms.measurement import _dense_lattice, _factor_step, _kronecker_terms

    step = query_step(query)
    total = [0] * query.shape[0]
    for term_step, factors, _ in _kronecker_terms(query):
        if term_step == 0:
            continue
        # Each factor in units of its own step; the term's step is their product times the coefficient.
        dense = [np.asarray(f.dense()) for f in factors]
        units = []
        for f, d in zip(factors, dense):
            s = _factor_step(f)
            units.append(np.asarray([[Fraction(repr(float(v))) / s for v in row] for row in np.atleast_2d(d)],
                                    dtype=object))
        matrix = units[0]
        for u in units[1:]:
            matrix = np.kron(matrix, u)
        multiplier = term_step / step
        for i, row in enumerate(matrix):
            total[i] += int(sum(int(v) * int(c) for v, c in zip(row, counts.ravel()))) * multiplier
    assert all(Fraction(t).denominator == 1 for t in total)
    return step, [int(t) for t in total]


@pytest.mark.parametrize("scale", [1, 10**6, 10**12, 10**17])
def test_exact_answers_in_int64_equal_python_integers(scale):
    """Counts and entries up to where int64 would overflow (10^17 × 10^3 sums): the int64 path must give
    the Python integers' answers, and leave them where a partial sum could overflow."""
    from mechanisms.measurement import _exact_answer

    rng = np.random.default_rng(scale % 1000)
    counts = rng.integers(0, 50, size=(4, 6)) * scale
    queries = [
        Kronecker([Identity(4), Dense(rng.integers(-3, 4, size=(3, 6)) / 4)]),
        Kronecker([Diagonal(np.array([0.5, 1.0, 1.5, 2500.0])), Dense(np.triu(np.ones((6, 6))))]),
        Kronecker([Ones(2, 4), Dense(rng.integers(0, 10**6, size=(2, 6)) / 1000)]),
        Sum([Weighted(Kronecker([Identity(4), Dense(np.ones((1, 6)) * 0.1)]), 3.0),
             Weighted(Kronecker([Diagonal(np.array([1.0, 0.0, 2.0, 0.25])), Dense(np.arange(6.0)[None, :])]), -0.5)]),
    ]
    for q in queries:
        assert _exact_answer(q, counts.ravel()) == _answers_in_python_integers(q, counts)


@pytest.mark.parametrize("digits", [4, 13])
def test_exact_answers_past_int64_equal_python_integers(digits):
    """Two dense factors whose products pass int64 (10^12 counts, 10^digits units over 30 columns): the
    answers are cut into int64 limbs (4 digits) or taken in Python integers (13 digits), and exact."""
    from mechanisms.measurement import _exact_answer

    rng = np.random.default_rng(digits)
    counts = rng.integers(0, 10**12, size=(30, 20))
    unit = 10**digits
    q = Kronecker([Dense(rng.integers(-unit, unit, size=(5, 30)) / unit),
                   Dense(rng.integers(-unit, unit, size=(4, 20)) / unit)])
    assert _exact_answer(q, counts.ravel()) == _answers_in_python_integers(q, counts)


@pytest.mark.parametrize("step", [Fraction(1), Fraction(1, 20), Fraction(3, 7), Fraction(2500), Fraction(1, 10**24),
                                  Fraction(10**20, 3)])
def test_released_doubles_are_the_nearest_to_the_exact_values(step):
    """γ·(unit + noise) as doubles: the numpy path (p·total and q exact doubles, one IEEE division) gives
    float(Fraction) bit for bit, and huge values (past int64 or 2^53) take Python integers."""
    from mechanisms.measurement import _on_lattice

    rng = np.random.default_rng(11)
    for magnitude in (10, 10**9, 10**15, 2**62, 10**30):
        units = [int(u) for u in rng.integers(-1000, 1000, size=200)] + [magnitude, -magnitude]
        noise = [int(z) for z in rng.integers(-10**6, 10**6, size=len(units))]
        noise_array = np.asarray(noise, dtype=object if magnitude > 2**61 else np.int64)
        expected = [float(step * (u + z)) for u, z in zip(units, noise)]
        got = _on_lattice(step, units, noise_array)
        assert got.dtype == np.float64 and got.tolist() == expected
