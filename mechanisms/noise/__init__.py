"""Exact noise: the discrete Gaussian and discrete Laplace on the integers.

- `random_source`: `RandomSource`, uniform integers and 64-bit words (cryptographic
  unless seeded for a test).
- `exact`: Canonne-Kamath-Steinke's samplers, one draw at a time, in Python integers.
- `batched`: the same algorithms on whole arrays in int64 numpy kernels.
- `parameters`: floats rounded up to the rationals the samplers take; exact variances.

`discrete_gaussian_vector` and `discrete_laplace_vector` pick the batched kernels when
the vector is long enough and the parameters fit int64, the scalar code otherwise; the
distribution is the same exact one either way.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mechanisms.noise.batched import (
    discrete_gaussian_batch,
    discrete_laplace_batch,
    gaussian_fits,
    laplace_fits,
)
from mechanisms.noise.exact import (
    GaussianParams,
    _as_fraction,
    _discrete_gaussian,
    _discrete_laplace,
    _source,
    bernoulli_exp,
    sample_discrete_gaussian,
    sample_discrete_laplace,
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
    "discrete_laplace_vector",
    "discrete_gaussian_vector",
    "to_fraction_upper",
    "gaussian_sigma2_upper",
    "laplace_scale_upper",
    "discrete_gaussian_variance",
    "discrete_laplace_variance",
]

# Below this many draws the scalar code is as fast as the batched kernels' fixed cost.
MIN_BATCH = 32
_INT64 = 2**63


def _check_size(size: int) -> None:
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")


def _integer_array(values: list[int]) -> np.ndarray:
    """int64 when every value fits, else exact Python integers (dtype object): never wraps."""
    if all(-_INT64 <= v < _INT64 for v in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=object)


def discrete_laplace_vector(scale: Fraction | int, size: int, rng: RandomSource | None = None) -> np.ndarray:
    """`size` independent discrete Laplace(scale) samples (int64, or exact integers beyond its range)."""
    b = _as_fraction(scale, "scale")
    _check_size(size)
    if b == 0:
        return np.zeros(size, dtype=np.int64)
    t, s, source = b.numerator, b.denominator, _source(rng)
    if size >= MIN_BATCH and laplace_fits(t, s):
        return discrete_laplace_batch(t, s, size, source)
    return _integer_array([_discrete_laplace(t, s, source.randbelow) for _ in range(size)])


def discrete_gaussian_vector(sigma2: Fraction | int, size: int, rng: RandomSource | None = None) -> np.ndarray:
    """`size` independent discrete Gaussian(sigma2) samples (int64, or exact integers beyond its range)."""
    s2 = _as_fraction(sigma2, "sigma2")
    _check_size(size)
    if s2 == 0:
        return np.zeros(size, dtype=np.int64)
    params, source = GaussianParams.of(s2), _source(rng)
    if size >= MIN_BATCH and gaussian_fits(params):
        return discrete_gaussian_batch(params, size, source)
    return _integer_array([_discrete_gaussian(params, source.randbelow) for _ in range(size)])
