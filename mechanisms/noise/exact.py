"""Exact noise samplers on the integer lattice, one draw at a time.

Implements the samplers of Canonne, Kamath and Steinke (2020), "The Discrete Gaussian
for Differential Privacy" (CKS): Bernoulli(exp(-gamma)) (Algorithm 1), the discrete
Laplace (Algorithm 2) and the discrete Gaussian (Algorithm 3). Every sampling decision
uses exact integer arithmetic on rational parameters and uniform integers from a
`RandomSource`; no floating point is involved. `mechanisms.noise.batched` runs the
same algorithms on whole arrays (every vector of noise is drawn there) and comes back
here only for an acceptance test whose exponent is 2**40 or more.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Sequence

from mechanisms.noise.random_source import RandomSource

__all__ = ["bernoulli_exp", "sample_discrete_laplace", "sample_discrete_gaussian", "sample_weighted"]

_RandBelow = Callable[[int], int]


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


@dataclass(frozen=True)
class GaussianParams:
    """CKS Algorithm 3 for sigma2 = p/q in integers: Y ~ discrete Laplace(t), accepted with
    probability exp(-(|Y| - sigma2/t)^2 / (2 sigma2)) = exp(-(a |Y| - b)^2 / d).

    t = floor(sqrt(sigma2)) + 1. With g = gcd(p, t) the fraction is kept in lowest terms:
    a = q t/g, b = p/g, d = 2 p q t^2 / g, so a sigma2 that is a multiple of t/q' (as
    `gaussian_sigma2_upper` makes it) gives small a and d.
    """

    t: int
    a: int
    b: int
    d: int

    @classmethod
    def of(cls, sigma2: Fraction) -> "GaussianParams":
        p, q = sigma2.numerator, sigma2.denominator
        # floor(sqrt(p/q)) = floor(sqrt(p*q) / q) = isqrt(p*q) // q, exactly.
        t = math.isqrt(p * q) // q + 1
        g = math.gcd(p, t)
        return cls(t, q * (t // g), p // g, 2 * p * q * t * t // (g * g))

    def accept(self, y: int, rb: _RandBelow) -> bool:
        """The acceptance draw for a discrete Laplace(t) proposal y."""
        a = self.a * abs(y) - self.b
        return _bern_exp(a * a, self.d, rb)


def _discrete_gaussian(params: GaussianParams, rb: _RandBelow) -> int:
    """P(x) ∝ exp(-x^2 / (2 sigma2)): CKS Algorithm 3 with precomputed parameters."""
    while True:
        y = _discrete_laplace(params.t, 1, rb)
        if params.accept(y, rb):
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
    return _discrete_gaussian(GaussianParams.of(s2), _source(rng).randbelow)


def sample_weighted(weights: Sequence[int], rng: RandomSource | None = None) -> int:
    """Index i with probability weights[i] / sum(weights), exactly: a finite distribution with rational
    probabilities given as integer weights over a common denominator (one uniform integer below the total,
    then the first index whose cumulative weight exceeds it)."""
    if not weights or any(isinstance(w, bool) or not isinstance(w, int) or w < 0 for w in weights):
        raise ValueError("weights must be a non-empty sequence of non-negative integers")
    total = sum(weights)
    if total == 0:
        raise ValueError("weights must not all be zero")
    return bisect.bisect_right(list(itertools.accumulate(weights)), _source(rng).randbelow(total))
