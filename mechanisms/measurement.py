"""Noisy measurement of a linear query on a marginal, on an exact integer lattice.

A strategy row's entries are public numbers; we read each as the exact decimal
it prints as, find the lattice step γ they are all multiples of, and compute
the true answer as an exact integer number of steps. Discrete Gaussian or
discrete Laplace noise (exact samplers) is added in the same units, and the
released value is γ·(answer + noise): a deterministic function of an integer,
so no floating-point artefact of the true value survives in the output.

`calibrate` is shared with the planner, so planned and realized noise
variances are the same number (the exact variance of the discrete noise).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from math import gcd, prod

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.matrices import DecimalDense, Dense, Diagonal, Identity, Matrix, Ones
from mechanisms.noise import (
    RandomSource,
    discrete_gaussian_variance,
    discrete_gaussian_vector,
    discrete_laplace_variance,
    discrete_laplace_vector,
    gaussian_sigma2_upper,
    laplace_scale_upper,
)

GAUSSIAN = "gaussian"
LAPLACE = "laplace"
NOISE_KINDS = (GAUSSIAN, LAPLACE)

# Sensitivities computed in floating point are inflated by this relative margin
# before calibration, so rounding can only add noise, never remove it.
_SENSITIVITY_MARGIN = 1e-9
# Variances below this (noise so small it underflows) are reported as this, so
# that least squares can still weigh the measurement (by a huge precision).
_VARIANCE_FLOOR = 1e-200


@dataclass(frozen=True)
class Calibration:
    """Noise for one measurement: kind, exact scale in lattice units, per-entry variance."""

    kind: str
    scale: Fraction  # σ² (gaussian) or the Laplace scale b, in lattice units
    granularity: Fraction
    variance: float  # variance of one released entry, in answer units


def calibrate(kind: str, sensitivity: float, share: float, granularity: Fraction = Fraction(1)) -> Calibration:
    """Noise for a query of the given sensitivity and budget share.

    `share` is ρ (zCDP) for Gaussian noise and ε (pure DP) for Laplace noise.
    """
    if share <= 0:
        raise ValueError("a measurement needs a positive budget share")
    units = sensitivity * (1.0 + _SENSITIVITY_MARGIN) / float(granularity)
    g2 = float(granularity) ** 2
    if kind == GAUSSIAN:
        scale = gaussian_sigma2_upper(units**2 / (2.0 * share))
        variance = discrete_gaussian_variance(scale)
    elif kind == LAPLACE:
        scale = laplace_scale_upper(units / share)
        variance = discrete_laplace_variance(scale)
    else:
        raise ValueError(f"unknown noise kind {kind!r}")
    if sensitivity == 0:
        return Calibration(kind, scale, granularity, 0.0)
    return Calibration(kind, scale, granularity, max(g2 * variance, _VARIANCE_FLOOR))


@dataclass
class Measurement:
    """Noisy answers on a clique's marginal x_C.

    Three kinds: the marginal itself (the identity; `key` and `strategy` None),
    a strategy matrix A (`strategy`, answers A·x_C), or one block measured
    directly (`key` is its fingerprint). `cost` is ρ for Gaussian noise and ε
    for Laplace noise; `variance` is the exact per-entry noise variance.
    """

    clique: tuple[str, ...]
    noise: str
    cost: float
    variance: float
    values: np.ndarray
    key: str | None = None
    strategy: Matrix | None = None

    @property
    def is_marginal(self) -> bool:
        return self.key is None and self.strategy is None


@dataclass(frozen=True)
class ExactAnswer:
    """`query @ counts` as exact integers in units of the lattice step, and the query's sensitivity."""

    step: Fraction
    units: list[int]
    sensitivity: float  # L2 for Gaussian noise, L1 for Laplace noise


def exact_answer(counts: np.ndarray, query: Matrix | None, kind: str) -> ExactAnswer:
    """The exact answer of `query` (the marginal itself if None) on integer cell counts (no noise yet)."""
    counts = np.asarray(counts)
    if not np.issubdtype(counts.dtype, np.integer):
        raise TypeError("marginal counts must be integers")
    if query is None:
        return ExactAnswer(Fraction(1), [int(c) for c in counts.ravel()], 1.0)
    step, units = _exact_answer(query, counts.ravel())
    return ExactAnswer(step, units, query.sensitivity(2 if kind == GAUSSIAN else 1))


def release(
    answer: ExactAnswer, kind: str, share: float, rng: RandomSource, contribution_bound: int = 1
) -> tuple[np.ndarray, Calibration]:
    """The exact answer plus exact discrete noise calibrated to its sensitivity: (values, calibration)."""
    cal = calibrate(kind, answer.sensitivity * contribution_bound, share, answer.step)
    if kind == GAUSSIAN:
        noise = discrete_gaussian_vector(cal.scale, len(answer.units), rng)
    else:
        noise = discrete_laplace_vector(cal.scale, len(answer.units), rng)
    released = [float(answer.step * (a + int(z))) for a, z in zip(answer.units, noise)]
    return np.asarray(released, dtype=float), cal


def measure(
    counts: np.ndarray,
    query: Matrix | None,
    kind: str,
    share: float,
    rng: RandomSource,
    contribution_bound: int = 1,
) -> tuple[np.ndarray, Calibration]:
    """Release `query @ counts` (the marginal itself if query is None) with exact discrete noise.

    `counts` are the exact integer cell counts of the clique marginal. Returns
    the noisy values and the calibration used.
    """
    return release(exact_answer(counts, query, kind), kind, share, rng, contribution_bound)


def _decimal_ratio(value: float) -> tuple[int, int]:
    """(numerator, denominator) of the value's printed decimal, in lowest terms (as Fraction(repr(value)),
    through the C decimal module: several times faster)."""
    return Decimal(repr(value)).as_integer_ratio()


def lattice_step(values) -> Fraction:
    """The largest γ such that every value (read as its printed decimal) is a multiple of γ."""
    ratios = [_decimal_ratio(v) for v in np.unique(np.asarray(values, dtype=float)).tolist() if v != 0]
    if not ratios:
        return Fraction(1)
    num = 0
    den = 1
    for n, d in ratios:
        num = gcd(num, n)
        den = den * d // gcd(den, d)
    return Fraction(num, den)


def _integer_units(values: np.ndarray, step: Fraction) -> np.ndarray:
    """values / step as exact Python integers."""
    flat = np.asarray(values, dtype=float)
    uniq, inverse = np.unique(flat, return_inverse=True)
    ints = []
    for u in uniq.tolist():
        n, d = _decimal_ratio(u)
        whole, left = divmod(n * step.denominator, d * step.numerator)  # u / step = (n/d) / (p/q)
        if left:
            raise ArithmeticError("query entries are not multiples of the lattice step")
        ints.append(whole)
    return np.asarray(ints, dtype=object)[inverse].reshape(flat.shape)


def _product_terms(query: Matrix) -> list[tuple[float, list[Matrix]]]:
    """(coefficient, factors) of a sum of weighted Kronecker products."""
    from mechanisms.matrices import Kronecker, Sum, Weighted

    out = []
    for t in query.terms if isinstance(query, Sum) else [query]:
        coef, base = (t.weight, t.base) if isinstance(t, Weighted) else (1.0, t)
        out.append((coef, list(base.factors) if isinstance(base, Kronecker) else [base]))
    return out


def support(query: Matrix | None, sizes: tuple[int, ...]) -> list[np.ndarray]:
    """Per axis of a clique marginal of `sizes`, which of its bins a query reads (a bounding box of
    the cells it reads: the query's answers depend on the counts inside it only). The marginal
    itself (None) reads every bin. A query is a (sum of weighted) Kronecker product, a factor
    per axis; a structured factor (not dense or diagonal) counts as reading every bin."""
    if query is None:
        return [np.ones(n, dtype=bool) for n in sizes]
    out = [np.zeros(n, dtype=bool) for n in sizes]
    for coef, factors in _product_terms(query):
        if coef == 0:
            continue
        if len(factors) != len(sizes):  # not one factor per axis: assume every bin is read
            return [np.ones(n, dtype=bool) for n in sizes]
        for axis, f in enumerate(factors):
            if f.shape[1] != sizes[axis]:
                raise ValueError(f"a factor of {f.shape[1]} columns on an axis of {sizes[axis]} bins")
            if isinstance(f, Diagonal):
                out[axis] |= np.asarray(to_numpy(f.values)) != 0
            elif isinstance(f, Dense):
                out[axis] |= np.any(np.asarray(to_numpy(f.array)) != 0, axis=0)
            else:  # the identity, all-ones and structured (prefix, range) factors: every bin, say
                out[axis][:] = True
    return out


def _kronecker_terms(query: Matrix) -> list[tuple[Fraction, list[Matrix], list[Fraction]]]:
    """(term step, factors, factor steps) of a sum of weighted Kronecker products."""
    out = []
    for coef, factors in _product_terms(query):
        steps = [_factor_step(f) for f in factors]
        out.append((Fraction(repr(float(coef))) * prod(steps, start=Fraction(1)), factors, steps))
    return out


def exact_work(query: Matrix | None) -> tuple[int, int]:
    """(distinct entries read as exact decimals, integer multiply-adds) that `measure` spends on `query`.

    Factors are applied one axis at a time, as `_exact_answer` does: a dense
    r×n factor on a tensor of m entries (n along its axis) costs r·m; a
    diagonal or all-ones factor costs m; the identity costs nothing. Each
    distinct entry of a dense or diagonal factor is read once. The identity
    marginal (None) costs nothing.
    """
    if query is None:
        return 0, 0
    entries = operations = 0
    for _, factors in _product_terms(query):
        shape = [f.shape[1] for f in factors]
        for axis, f in enumerate(factors):
            size = prod(shape)
            if isinstance(f, (Diagonal, Ones)):
                operations += size
            elif not isinstance(f, Identity):
                operations += f.shape[0] * size
            if not isinstance(f, (Identity, Ones)):
                entries += np.unique(_factor_entries(f)).size
            shape[axis] = f.shape[0]
    return entries, operations


# Exact lattice forms of general (dense) factors, by content: a strategy is released again on every
# draw or session, and reading its entries as exact decimals is the slow part of a release.
_DENSE_LATTICE: dict[str, tuple[Fraction, np.ndarray]] = {}
_DENSE_LATTICE_SIZE = 64


def _dense_lattice(f: Matrix) -> tuple[Fraction, np.ndarray]:
    """(lattice step, entries in integer units of it) of a general factor, cached by content; a
    `DecimalDense` factor's from its integers (the same values, without reading each entry)."""
    if isinstance(f, DecimalDense):
        return f.lattice
    dense = np.ascontiguousarray(to_numpy(f.dense()), dtype=float)
    key = hashlib.sha1(dense.tobytes()).hexdigest() + repr(dense.shape)
    if key not in _DENSE_LATTICE:
        if len(_DENSE_LATTICE) >= _DENSE_LATTICE_SIZE:
            _DENSE_LATTICE.pop(next(iter(_DENSE_LATTICE)))  # the oldest
        step = lattice_step(dense)
        _DENSE_LATTICE[key] = (step, _integer_units(dense, step))
    return _DENSE_LATTICE[key]


def forget_lattices() -> None:
    """Empty the cache of dense factors' exact lattices (to time a first release)."""
    _DENSE_LATTICE.clear()


def _factor_step(f: Matrix) -> Fraction:
    if isinstance(f, (Identity, Ones, Diagonal)):
        return lattice_step(_factor_entries(f))
    return _dense_lattice(f)[0]


def _factor_entries(f: Matrix) -> np.ndarray:
    """The distinct nonzero-relevant entries of a factor, without densifying structured ones."""
    if isinstance(f, (Identity, Ones)):
        return np.ones(1)
    if isinstance(f, Diagonal):
        return np.asarray(to_numpy(f.values), dtype=float)
    return np.asarray(to_numpy(f.dense()), dtype=float)


def _apply_exact(f: Matrix, step: Fraction, t: np.ndarray, axis: int) -> np.ndarray:
    """Apply factor f (in units of `step`) along `axis` of an object-integer tensor."""
    if isinstance(f, Identity):
        return t
    if isinstance(f, Ones):
        summed = t.sum(axis=axis, keepdims=True)
        return np.repeat(summed, f.shape[0], axis=axis)
    if isinstance(f, Diagonal):
        units = _integer_units(np.asarray(to_numpy(f.values), dtype=float), step)
        shape = [1] * t.ndim
        shape[axis] = -1
        return t * units.reshape(shape)
    own, units = _dense_lattice(f)
    if own != step:  # applied in another term's units
        units = _integer_units(np.asarray(to_numpy(f.dense()), dtype=float), step)
    return np.moveaxis(np.tensordot(units, t, axes=([1], [axis])), 0, axis)


def _fraction_gcd(values: list[Fraction]) -> Fraction:
    step = Fraction(0)
    for v in values:
        v = abs(v)
        step = Fraction(
            gcd(step.numerator * v.denominator, v.numerator * step.denominator),
            step.denominator * v.denominator,
        )
    return step or Fraction(1)


def query_step(query: Matrix | None) -> Fraction:
    """The lattice step γ of a query's answers (1 for a marginal of counts)."""
    if query is None:
        return Fraction(1)
    return _fraction_gcd([s for s, _, _ in _kronecker_terms(query) if s != 0])


def _exact_answer(query: Matrix, counts: np.ndarray) -> tuple[Fraction, list[int]]:
    """(γ, exact answers in units of γ) for a query that is a (sum of weighted) Kronecker product."""
    terms = _kronecker_terms(query)
    step = _fraction_gcd([s for s, _, _ in terms if s != 0])
    total = np.zeros(query.shape[0], dtype=object)
    for term_step, factors, steps in terms:
        if term_step == 0:
            continue
        multiplier = term_step / step
        t = counts.astype(object).reshape([f.shape[1] for f in factors])
        for axis, (f, s) in enumerate(zip(factors, steps)):
            t = _apply_exact(f, s, t, axis)
        total = total + t.ravel() * multiplier.numerator
    return step, [int(v) for v in total]
