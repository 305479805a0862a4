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
    return _on_lattice(answer.step, answer.units, noise), cal


_EXACT_DOUBLE = 2**53  # integers up to this are doubles exactly
_SAFE_INT64 = 2**62  # two int64 values below this add without overflow


def _below(values: np.ndarray, bound: int) -> bool:
    """Every |value| < bound (min and max compared, so int64's most negative value cannot wrap)."""
    return -bound < int(values.min()) and int(values.max()) < bound


def _on_lattice(step: Fraction, units: list[int], noise) -> np.ndarray:
    """γ·(unit + noise) per entry as the double nearest the exact value (what float(Fraction) gives).

    With γ = p/q, that double is p·(unit + noise) / q correctly rounded. When p·|unit + noise| and q
    are at most 2^53 (doubles exactly), one IEEE division of the two doubles is that correctly
    rounded quotient, so the array is computed in numpy; otherwise by Python integers'
    true division (also correctly rounded)."""
    p, q = step.numerator, step.denominator
    try:
        a, z = np.asarray(units, dtype=np.int64), np.asarray(noise, dtype=np.int64)
    except OverflowError:  # entries past int64: Python integers
        a = z = None
    if a is not None and a.size and q <= _EXACT_DOUBLE and _below(a, _SAFE_INT64) and _below(z, _SAFE_INT64):
        total = a + z
        if _below(total, _EXACT_DOUBLE // p + 1):
            return (total * p).astype(np.float64) / float(q)
    return np.asarray([p * (u + int(v)) / q for u, v in zip(units, noise)], dtype=float)


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
    """Apply factor f (in units of `step`) along `axis` of an integer tensor: exactly, in int64 while every
    partial sum provably fits (`_fits`), else in Python integers (an object array)."""
    if isinstance(f, Identity):
        return t
    if isinstance(f, Ones):
        if not _fits(t, 1, t.shape[axis]):
            t = t.astype(object)
        summed = t.sum(axis=axis, keepdims=True)
        return np.repeat(summed, f.shape[0], axis=axis)
    if isinstance(f, Diagonal):
        units = _exact_ints(_integer_units(np.asarray(to_numpy(f.values), dtype=float), step), t)
        shape = [1] * t.ndim
        shape[axis] = -1
        return t.astype(object) * units.reshape(shape) if units.dtype == object else t * units.reshape(shape)
    own, units = _dense_lattice(f)
    if own != step:  # applied in another term's units
        units = _integer_units(np.asarray(to_numpy(f.dense()), dtype=float), step)
    return np.moveaxis(_exact_dot(units, t, axis), 0, axis)


_LIMB_BITS_MIN = 16  # units whose rows need narrower limbs than this are multiplied as Python integers


def _exact_dot(units: np.ndarray, t: np.ndarray, axis: int) -> np.ndarray:
    """units · t along `axis`, exactly: U (integers, r × n) times t (int64, or Python integers).

    In int64 when every partial sum fits (each row's Σ|U_ij| times max|t| below 2^63). Otherwise t is cut
    into limbs of L bits, t = Σ_k t_k·2^(kL) with 0 ≤ t_k < 2^L below the top limb (floor shifts), L chosen so
    that each limb's products sum within int64: each limb is one int64 tensordot, and only the r-row results
    are combined in Python integers. Units past int64 (or rows too wide for 16-bit limbs): Python integers."""
    small = _as_int64(units)
    if small.dtype == object:
        return np.tensordot(units, t.astype(object), axes=([1], [axis]))
    rows = small.reshape(-1, small.shape[-1])
    if _largest_int(small) * rows.shape[1] < _INT64_BOUND:
        row_sum = int(np.abs(rows).sum(axis=1).max()) if rows.size else 0
    else:
        row_sum = max(sum(abs(int(u)) for u in row) for row in rows)
    largest = _largest_int(t)
    if row_sum * largest < _INT64_BOUND:
        return np.tensordot(small, t.astype(np.int64, copy=False), axes=([1], [axis]))
    bits = 62 - row_sum.bit_length()  # row_sum · 2^bits < 2^63
    if bits < _LIMB_BITS_MIN:
        return np.tensordot(units, t.astype(object), axes=([1], [axis]))
    rest, mask, out, shift = t, (1 << bits) - 1, None, 0
    while True:
        top = largest >> shift < 1 << bits  # this limb holds the rest, sign included
        limb = rest if top else rest & mask
        part = np.tensordot(small, limb.astype(np.int64), axes=([1], [axis])).astype(object)
        out = part if out is None else out + (part << shift)
        if top:
            return out
        rest, shift = rest >> bits, shift + bits


_INT64_BOUND = 2**63  # |partial sums| below this fit in int64


def _largest_int(a: np.ndarray) -> int:
    """max |a| as a Python integer (int64 or Python-integer arrays)."""
    return max(-int(a.min()), int(a.max()), 0) if a.size else 0


def _fits(t: np.ndarray, largest_unit: int, terms: int) -> bool:
    """Sums of `terms` products of an entry of t and a unit of |unit| ≤ largest_unit fit in int64 (t int64)."""
    return t.dtype != object and largest_unit * terms * _largest_int(t) < _INT64_BOUND


def _as_int64(a: np.ndarray) -> np.ndarray:
    """Integers as int64, or as Python integers (an object array) when some is past int64."""
    try:
        return np.asarray(a).astype(object).astype(np.int64)
    except OverflowError:
        return np.asarray(a).astype(object)


def _exact_ints(units: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Integer units (Python integers) as int64 when t is int64 and every product of a unit and an entry of t
    fits in int64, else as they are."""
    if t.dtype == object:
        return units
    small = _as_int64(units)
    return small if small.dtype != object and _fits(t, _largest_int(small), 1) else units


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
    total = np.zeros(query.shape[0], dtype=np.int64)
    start = _as_int64(counts)
    for term_step, factors, steps in terms:
        if term_step == 0:
            continue
        multiplier = np.asarray([(term_step / step).numerator], dtype=object)
        t = start.reshape([f.shape[1] for f in factors])
        for axis, (f, s) in enumerate(zip(factors, steps)):
            t = _apply_exact(f, s, t, axis)
        part = t.ravel()
        multiplier = _exact_ints(multiplier, part)
        part = part.astype(object) * multiplier if multiplier.dtype == object else part * multiplier
        total = total + part if _fits(total, 1, 2) and _fits(part, 1, 2) else total.astype(object) + part
    return step, total.tolist()
