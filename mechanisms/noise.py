"""Exact noise samplers on the integer lattice.

Implements the samplers of Canonne, Kamath and Steinke (2020), "The Discrete Gaussian
for Differential Privacy" (CKS): Bernoulli(exp(-gamma)) (Algorithm 1), the discrete
Laplace (Algorithm 2) and the discrete Gaussian (Algorithm 3). Every sampling decision
uses exact integer arithmetic on rational parameters and uniform integers from a
`RandomSource`; no floating point is involved. Floats enter only through
`to_fraction_upper`, which rounds a float variance or scale up to a rational.
"""

from __future__ import annotations

import math
import random
import secrets
from fractions import Fraction
from typing import Callable

import numpy as np

__all__ = [
    "RandomSource",
    "bernoulli_exp",
    "sample_discrete_laplace",
    "sample_discrete_gaussian",
    "discrete_laplace_vector",
    "discrete_gaussian_vector",
    "to_fraction_upper",
    "discrete_gaussian_variance",
    "discrete_laplace_variance",
]

_RandBelow = Callable[[int], int]


class RandomSource:
    """Uniform integers from `secrets.SystemRandom` (default) or a seeded `random.Random`.

    The seeded form is for tests and reproducible experiments only: it is not
    cryptographically secure and must not protect released values. `seeded` says which.
    """

    def __init__(self, seed: int | None = None) -> None:
        rng = secrets.SystemRandom() if seed is None else random.Random(seed)
        self._getrandbits = rng.getrandbits
        self.seeded = seed is not None

    def randbelow(self, n: int) -> int:
        """Uniform integer in [0, n), by rejection from (n-1).bit_length() random bits."""
        if n <= 0:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        k = (n - 1).bit_length()
        getrandbits = self._getrandbits
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return r


def _as_fraction(value: Fraction | int, name: str) -> Fraction:
    """Exact non-negative rational parameter; floats are refused (use `to_fraction_upper`)."""
    if isinstance(value, float):
        raise TypeError(
            f"{name} must be a Fraction or int, not float {value!r}; "
            "convert it with to_fraction_upper() so it is rounded up exactly"
        )
    frac = Fraction(value)
    if frac < 0:
        raise ValueError(f"{name} must be >= 0, got {frac}")
    return frac


# ---------------------------------------------------------------------------
# Integer kernels. `rb` is a bound RandomSource.randbelow; rationals are passed as
# (numerator, denominator) pairs so the hot loops touch only ints.
# ---------------------------------------------------------------------------


def _bern_exp_frac(n: int, d: int, rb: _RandBelow) -> bool:
    """Bernoulli(exp(-n/d)) for 0 <= n <= d: CKS Algorithm 1, case gamma in [0, 1].

    Draw A_k ~ Bernoulli(gamma/k) for k = 1, 2, ... until the first failure; the result
    is 1 iff that first failure has odd index (P = sum of the series of exp(-gamma)).
    """
    k = 1
    while rb(d * k) < n:
        k += 1
    return k & 1 == 1


def _bern_exp_one(rb: _RandBelow) -> bool:
    """Bernoulli(exp(-1)): Algorithm 1 with gamma = 1 (A_1 = 1 always, so start at k = 2)."""
    k = 2
    while rb(k) == 0:
        k += 1
    return k & 1 == 1


def _bern_exp(n: int, d: int, rb: _RandBelow) -> bool:
    """Bernoulli(exp(-n/d)) for n/d >= 0: CKS Algorithm 1, case gamma > 1.

    floor(gamma) independent Bernoulli(exp(-1)) trials, then the fractional part.
    """
    whole, rest = divmod(n, d)
    for _ in range(whole):
        if not _bern_exp_one(rb):
            return False
    return _bern_exp_frac(rest, d, rb)


def _discrete_laplace(t: int, s: int, rb: _RandBelow) -> int:
    """P(x) ∝ exp(-|x| s / t) for integers t, s >= 1: CKS Algorithm 2."""
    while True:
        u = rb(t)
        if not _bern_exp_frac(u, t, rb):
            continue
        v = 0
        while _bern_exp_one(rb):
            v += 1
        y = (u + t * v) // s
        if rb(2):
            if y:
                return -y
        else:
            return y


def _gaussian_params(sigma2: Fraction) -> tuple[int, int, int, int]:
    """(p, q, t, 2 p q t^2) for sigma2 = p/q and t = floor(sqrt(sigma2)) + 1."""
    p, q = sigma2.numerator, sigma2.denominator
    # floor(sqrt(p/q)) = floor(sqrt(p*q) / q) = isqrt(p*q) // q, exactly.
    t = math.isqrt(p * q) // q + 1
    return p, q, t, 2 * p * q * t * t


def _discrete_gaussian(p: int, q: int, t: int, d: int, rb: _RandBelow) -> int:
    """P(x) ∝ exp(-x^2 / (2 p/q)): CKS Algorithm 3 with precomputed t and d = 2 p q t^2.

    Y ~ discrete Laplace(t), accepted with probability exp(-(|Y| - sigma2/t)^2 / (2 sigma2))
    = exp(-(q t |Y| - p)^2 / d).
    """
    while True:
        y = _discrete_laplace(t, 1, rb)
        a = q * t * abs(y) - p
        if _bern_exp(a * a, d, rb):
            return y


# ---------------------------------------------------------------------------
# Public samplers
# ---------------------------------------------------------------------------


def _source(rng: RandomSource | None) -> RandomSource:
    return RandomSource() if rng is None else rng


def bernoulli_exp(gamma: Fraction | int, rng: RandomSource | None = None) -> bool:
    """Exact Bernoulli(exp(-gamma)) for rational gamma >= 0 (CKS Algorithm 1)."""
    g = _as_fraction(gamma, "gamma")
    return _bern_exp(g.numerator, g.denominator, _source(rng).randbelow)


def sample_discrete_laplace(scale: Fraction | int, rng: RandomSource | None = None) -> int:
    """Exact discrete Laplace: P(x) ∝ exp(-|x| / scale) on the integers (CKS Algorithm 2).

    scale = t/s in lowest terms; scale = 0 gives the point mass at 0.
    """
    b = _as_fraction(scale, "scale")
    if b == 0:
        return 0
    return _discrete_laplace(b.numerator, b.denominator, _source(rng).randbelow)


def sample_discrete_gaussian(sigma2: Fraction | int, rng: RandomSource | None = None) -> int:
    """Exact discrete Gaussian: P(x) ∝ exp(-x^2 / (2 sigma2)) on the integers (CKS Algorithm 3).

    sigma2 = 0 gives the point mass at 0.
    """
    s2 = _as_fraction(sigma2, "sigma2")
    if s2 == 0:
        return 0
    return _discrete_gaussian(*_gaussian_params(s2), _source(rng).randbelow)


def _check_size(size: int) -> None:
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")


_INT64 = 2**63


def _integer_array(values: list[int]) -> np.ndarray:
    """int64 when every value fits, else exact Python integers (dtype object): never wraps."""
    if all(-_INT64 <= v < _INT64 for v in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=object)


def discrete_laplace_vector(
    scale: Fraction | int, size: int, rng: RandomSource | None = None
) -> np.ndarray:
    """`size` independent discrete Laplace(scale) samples (int64, or exact integers beyond its range)."""
    b = _as_fraction(scale, "scale")
    _check_size(size)
    if b == 0:
        return np.zeros(size, dtype=np.int64)
    t, s, rb = b.numerator, b.denominator, _source(rng).randbelow
    return _integer_array([_discrete_laplace(t, s, rb) for _ in range(size)])


def discrete_gaussian_vector(
    sigma2: Fraction | int, size: int, rng: RandomSource | None = None
) -> np.ndarray:
    """`size` independent discrete Gaussian(sigma2) samples (int64, or exact integers beyond its range)."""
    s2 = _as_fraction(sigma2, "sigma2")
    _check_size(size)
    if s2 == 0:
        return np.zeros(size, dtype=np.int64)
    p, q, t, d = _gaussian_params(s2)
    rb = _source(rng).randbelow
    return _integer_array([_discrete_gaussian(p, q, t, d, rb) for _ in range(size)])


# ---------------------------------------------------------------------------
# Parameters and moments
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
