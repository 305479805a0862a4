"""Noise parameters and moments: rational scales rounded up, exact variances.

Floats enter the samplers only here: a float variance or scale is rounded *up* to a
rational, so rounding can only add noise. `gaussian_sigma2_upper` and
`laplace_scale_upper` pick the rational so the batched samplers' integers stay in
int64 (a relative increase below 2**-25 for sigma >= 1).
"""

from __future__ import annotations

import math
from fractions import Fraction

from mechanisms.noise.batched import gaussian_fits
from mechanisms.noise.exact import GaussianParams

__all__ = [
    "to_fraction_upper",
    "gaussian_sigma2_upper",
    "laplace_scale_upper",
    "discrete_gaussian_variance",
    "discrete_laplace_variance",
]

# The batched samplers keep their integers below 2**62; these bounds leave room for the
# series index and the tails (see mechanisms.noise.batched).
_GAUSSIAN_RESOLUTION = 2**27  # r * sigma for sigma2 = t c / r
_LAPLACE_NUMERATOR = 2**40  # t for scale = t / s


# ---------------------------------------------------------------------------


def to_fraction_upper(x: float, max_denominator_bits: int = 32) -> Fraction:
    """Smallest rational >= x with denominator <= 2**max_denominator_bits.

    x itself when its exact binary value already fits. Otherwise the best upper
    approximation (a convergent or semiconvergent of x's continued fraction, as in
    `Fraction.limit_denominator`); for x >= 2**-max_denominator_bits the relative
    error is below 2**(1 - max_denominator_bits). Rounding a noise variance or scale up
    keeps the privacy guarantee valid.
    """
    if not math.isfinite(x):
        raise ValueError(f"to_fraction_upper needs a finite number, got {x!r}")
    if max_denominator_bits < 0:
        raise ValueError(f"max_denominator_bits must be >= 0, got {max_denominator_bits}")
    exact = Fraction(x)
    bound = 1 << max_denominator_bits
    if exact.denominator <= bound:
        return exact
    p0, q0, p1, q1 = 0, 1, 1, 0
    n, d = exact.numerator, exact.denominator
    while True:
        a = n // d
        q2 = q0 + a * q1
        if q2 > bound:
            break
        p0, q0, p1, q1 = p1, q1, p0 + a * p1, q2
        n, d = d, n - a * d
    k = (bound - q0) // q1
    # The best lower and upper approximations; they lie strictly on either side of x.
    return max(Fraction(p0 + k * p1, q0 + k * q1), Fraction(p1, q1))


def gaussian_sigma2_upper(x: float) -> Fraction:
    """`to_fraction_upper(x)` when the batched sampler takes it, else the smallest multiple
    of t/r that is >= x, with t = floor(sqrt(result)) + 1.

    Written so, sigma2 = t c / r and the discrete Gaussian's acceptance test needs only
    integers of size (r sigma)^2: r is the power of two with r sigma in (2**26, 2**27]
    (r >= 1). The relative increase over x is at most t / (r x): below 2**-25 for
    sigma >= 1, below 2**-26 / sigma for sigma < 1, and below 2 / sigma once r = 1.
    """
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"a variance must be finite and >= 0, got {x!r}")
    if x == 0:
        return Fraction(0)
    closest = to_fraction_upper(x)
    if gaussian_fits(GaussianParams.of(closest)):
        return closest
    exact = Fraction(x)
    r = 1 << max(0, math.floor(math.log2(_GAUSSIAN_RESOLUTION / math.sqrt(x))))
    t = math.isqrt(math.floor(exact)) + 1  # the sampler's t for any result in [x, t^2)
    sigma2 = t * Fraction(math.ceil(exact * r / t), r)
    if sigma2 >= t * t:  # x was within t/r below t^2: the next t, from t^2 up
        t += 1
        sigma2 = t * Fraction(math.ceil(Fraction((t - 1) ** 2 * r, t)), r)
    return sigma2


def laplace_scale_upper(x: float) -> Fraction:
    """The smallest rational >= x whose numerator stays near or below 2**40 (scale = t/s)."""
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"a scale must be finite and >= 0, got {x!r}")
    if x == 0:
        return Fraction(0)
    bits = max(0, min(32, _LAPLACE_NUMERATOR.bit_length() - 1 - math.ceil(math.log2(x)) - 1))
    return to_fraction_upper(x, bits)


def discrete_gaussian_variance(sigma2: Fraction | float) -> float:
    """Exact variance sum_x x^2 P(x) of the discrete Gaussian(sigma2), to double precision.

    Slightly below sigma2 (by about 8 pi^2 sigma2^2 exp(-2 pi^2 sigma2)); equal to it in
    double precision once sigma2 >= 2.
    """
    s2 = float(sigma2)
    if s2 < 0:
        raise ValueError(f"sigma2 must be >= 0, got {s2}")
    if s2 == 0:
        return 0.0
    if s2 <= 1:
        # Direct series; terms with x^2 / (2 sigma2) > 750 underflow to zero.
        num, den = 0.0, 0.0
        for x in range(1, math.isqrt(int(1500 * s2)) + 2):
            w = math.exp(-x * x / (2 * s2))
            num += x * x * w
            den += w
        return 2 * num / (1 + 2 * den)
    # Poisson summation: Z = sqrt(2 pi sigma2) * theta with theta = 1 + 2 sum_k e^{-2 pi^2 sigma2 k^2},
    # and Var = sigma^3 d/dsigma log Z = sigma2 - 8 pi^2 sigma2^2 sum_k k^2 e^{-2 pi^2 sigma2 k^2} / theta.
    c = 2 * math.pi**2 * s2
    terms = [(k * k, math.exp(-c * k * k)) for k in range(1, 6)]
    theta = 1 + 2 * sum(w for _, w in terms)
    return s2 - 4 * c * s2 * sum(k2 * w for k2, w in terms) / theta


def discrete_laplace_variance(scale: Fraction | float) -> float:
    """Exact variance 2 e^{-1/scale} / (1 - e^{-1/scale})^2 of the discrete Laplace(scale)."""
    b = float(scale)
    if b < 0:
        raise ValueError(f"scale must be >= 0, got {b}")
    if b == 0:
        return 0.0
    a = 1 / b
    one_minus = -math.expm1(-a)
    # Divide twice so a tiny (1 - e^{-a})^2 cannot underflow to zero.
    return 2 * math.exp(-a) / one_minus / one_minus
