"""Exact noise: the discrete Gaussian and discrete Laplace on the integers.

- `random_source`: `RandomSource`, uniform integers and 64-bit words (cryptographic
  unless seeded for a test).
- `exact`: Canonne-Kamath-Steinke's samplers, one draw at a time, in Python integers; `sample_weighted`,
  a finite distribution of rational probabilities (integer weights).
- `batched`: the same algorithms on whole arrays in int64 numpy kernels.
- `parameters`: floats rounded up to the rationals the samplers take; exact variances.

`discrete_gaussian_vector` and `discrete_laplace_vector` (what every release draws, seeded
or not, of any length and any scale) always run the batched kernels; the scalar samplers
serve single draws through `sample_discrete_*` and the batched kernels' rare far tails.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mechanisms.noise.batched import discrete_gaussian_batch, discrete_laplace_batch
from mechanisms.noise.exact import (
    GaussianParams,
    _as_fraction,
    _source,
    bernoulli_exp,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_weighted,
)
from mechanisms.noise.parameters import (
    discrete_gaussian_variance,
    discrete_laplace_variance,
    gaussian_sigma2_upper,
    laplace_scale_upper,
    to_fraction_upper,
)
from mechanisms.noise.random_source import RandomSource

__all__ = [
    "RandomSource",
    "bernoulli_exp",
    "sample_discrete_laplace",
    "sample_discrete_gaussian",
    "sample_weighted",
    "discrete_laplace_vector",
    "discrete_gaussian_vector",
    "to_fraction_upper",
    "gaussian_sigma2_upper",
    "laplace_scale_upper",
    "discrete_gaussian_variance",
    "discrete_laplace_variance",
]

def _check_size(size: int) -> None:
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")


def discrete_laplace_vector(scale: Fraction | int, size: int, rng: RandomSource | None = None) -> np.ndarray:
    """`size` independent discrete Laplace(scale) samples (int64, or exact integers beyond its range)."""
    b = _as_fraction(scale, "scale")
    _check_size(size)
    if b == 0 or size == 0:
        return np.zeros(size, dtype=np.int64)
    return discrete_laplace_batch(b.numerator, b.denominator, size, _source(rng))


def discrete_gaussian_vector(sigma2: Fraction | int, size: int, rng: RandomSource | None = None) -> np.ndarray:
    """`size` independent discrete Gaussian(sigma2) samples (int64, or exact integers beyond its range)."""
    s2 = _as_fraction(sigma2, "sigma2")
    _check_size(size)
    if s2 == 0 or size == 0:
        return np.zeros(size, dtype=np.int64)
    return discrete_gaussian_batch(GaussianParams.of(s2), size, _source(rng))
