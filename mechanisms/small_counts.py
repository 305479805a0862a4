"""Count mechanisms for small groups of public size (the LDP thesis, S001 ch. 6).

A group of public size n holds a private count j in {0..n}; a mechanism is a column-stochastic
matrix P, P[i][j] = Pr[output i | count j], with outputs in {0..n} too. It is ε-DP (one row changing
the count by one) when every row holds P[i][j] >= α P[i][j+1] and P[i][j+1] >= α P[i][j], α = e^{-ε}.

- `GEOMETRIC` (GM, Ghosh et al.; thesis Thm 12): the count plus two-sided geometric noise, clamped to
  [0, n]: P[i][j] = y_i α^|i-j|, y_0 = y_n = 1/(1+α), y_i = (1-α)/(1+α) inside. L₀-optimal, but for
  small n and α > 1/2 it piles its mass on 0 and n.
- `FAIR` (EM, thesis §6.6.2, (6.15)): P[i][j] = y α^e, e = |i-j| when |i-j| <= m_j = min(j, n-j), else
  ⌈(|i-j| + m_j)/2⌉; the diagonal is one constant y (fair: every count is reported truthfully with the
  same probability), the best y any fair mechanism has (Thm 13).
- `UNIFORM` (UM): 1/(n+1) everywhere, the baseline every property holds for.

α is an exact rational (`alpha_for`: the smallest multiple of 2^-20 at least e^{-ε}, so the mechanism
is at most ε-DP), every column is a list of integer weights over one common denominator, and a release
is one exact draw from it (`mechanisms.noise.sample_weighted`): no floating point decides an output.
Expected errors (`rmse_by_count`, `standard_error`) are computed from the same exact distributions
(in floats: they are reported, not sampled from). `properties` and `l0` check the thesis' structural
properties (its Fig. 6.5) on any matrix, exactly on Fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

import numpy as np

from mechanisms.noise import RandomSource, sample_weighted

GEOMETRIC, FAIR, UNIFORM = "geometric", "fair", "uniform"
MECHANISMS = (GEOMETRIC, FAIR, UNIFORM)
ALPHA_BITS = 20  # α's denominator: 2^20 (α overstates e^{-ε} by less than 2^-19: ε loses under 2^-19/α)
MAX_SIZE = 1000  # the largest group released exactly (its weights have up to 20·n bits each)
PROPERTIES = ("DP", "S", "RM", "CM", "F", "WH")

__all__ = ["FAIR", "GEOMETRIC", "MAX_SIZE", "MECHANISMS", "PROPERTIES", "UNIFORM", "alpha_for", "column_weights",
           "epsilon_of", "l0", "matrix", "properties", "release", "rmse_by_count", "sample", "standard_error"]


def alpha_for(epsilon: float) -> Fraction:
    """The rational α the mechanisms use at ε: the least multiple of 2^-20 at least e^{-ε} (the one ulp
    of slack covers `math.exp`'s rounding), so -ln α <= ε."""
    if not epsilon > 0 or not math.isfinite(epsilon):
        raise ValueError(f"ε must be a positive finite number, got {epsilon!r}")
    scale = 1 << ALPHA_BITS
    numerator = math.ceil(math.exp(-epsilon) * scale) + 1
    if numerator >= scale:
        raise ValueError(f"ε = {epsilon:g} is too small for α = e^-ε on a 2^-{ALPHA_BITS} grid; use ε >= 2e-6")
    return Fraction(numerator, scale)


def epsilon_of(alpha: Fraction) -> float:
    """The ε a mechanism of parameter α is DP with: -ln α."""
    return -math.log(alpha)


def _check(kind: str, n: int, alpha: Fraction) -> None:
    if kind not in MECHANISMS:
        raise ValueError(f"unknown small-count mechanism {kind!r}; one of {', '.join(MECHANISMS)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"a group size is a non-negative integer, got {n!r}")
    if not isinstance(alpha, Fraction) or not 0 < alpha < 1:
        raise ValueError(f"α must be a Fraction strictly between 0 and 1, got {alpha!r}")


def _exponent(kind: str, n: int, i: int, j: int) -> int:
    """The power of α in P[i][j] (`GEOMETRIC`, `FAIR`; 0 for `UNIFORM`)."""
    d = abs(i - j)
    if kind == GEOMETRIC:
        return d
    if kind == FAIR:
        m = min(j, n - j)
        return d if d <= m else (d + m + 1) // 2
    return 0


def column_weights(kind: str, n: int, alpha: Fraction, j: int) -> list[int]:
    """Integer weights w_0..w_n with P[i][j] = w_i / sum(w), exactly (α = p/q; every weight is scaled by
    q^(n+1), so the powers of α become integers)."""
    _check(kind, n, alpha)
    if not 0 <= j <= n:
        raise ValueError(f"the count {j} is outside 0..{n}")
    p, q = alpha.numerator, alpha.denominator
    weights = []
    for i in range(n + 1):
        e = _exponent(kind, n, i, j)
        w = p ** e * q ** (n - e)
        if kind == GEOMETRIC:  # y_i (1 + α) q: q at the ends, (1 - α) q = q - p inside
            w *= q if i in (0, n) else q - p
        weights.append(w)
    return weights


def matrix(kind: str, n: int, alpha: Fraction) -> list[list[Fraction]]:
    """The mechanism's matrix, P[i][j] = Pr[i | j], in exact rationals."""
    columns = []
    for j in range(n + 1):
        w = column_weights(kind, n, alpha, j)
        total = sum(w)
        columns.append([Fraction(x, total) for x in w])
    return [[columns[j][i] for j in range(n + 1)] for i in range(n + 1)]


def sample(kind: str, n: int, alpha: Fraction, count: int, rng: RandomSource) -> int:
    """One exact draw of the mechanism on a group of size n holding `count` (clamped to 0..n: a count
    moves by at most one when a row changes, and so does its clamp)."""
    if n > MAX_SIZE:
        raise ValueError(f"a group of {n} rows is above the {MAX_SIZE} the small-count mechanisms release")
    j = min(max(int(count), 0), n)
    return sample_weighted(column_weights(kind, n, alpha, j), rng)


def release(kind: str, sizes: Sequence[int], counts: Sequence[int], alpha: Fraction,
            rng: RandomSource) -> list[int]:
    """One draw per group: group g of public size sizes[g] holding counts[g]."""
    if len(sizes) != len(counts):
        raise ValueError(f"{len(sizes)} sizes for {len(counts)} counts")
    return [sample(kind, int(n), alpha, c, rng) for n, c in zip(sizes, counts)]


@lru_cache(maxsize=256)
def rmse_by_count(kind: str, n: int, alpha: Fraction) -> np.ndarray:
    """Root mean squared error of the output at each true count 0..n, from the exact distribution
    (each column's powers of α in floats, normalized)."""
    _check(kind, n, alpha)
    i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    d = np.abs(i - j)
    if kind == GEOMETRIC:
        e = d
    elif kind == FAIR:
        m = np.minimum(j, n - j)
        e = np.where(d <= m, d, (d + m + 1) // 2)
    else:
        e = np.zeros_like(d)
    p = float(alpha) ** e
    if kind == GEOMETRIC and n > 0:
        p[1:n] *= 1 - float(alpha)
    p /= p.sum(axis=0, keepdims=True)
    return np.sqrt((p * d.astype(float) ** 2).sum(axis=0))


def standard_error(kind: str, n: int, alpha: Fraction) -> float:
    """A released count's standard error: the largest RMSE over the true counts 0..n (public: it depends
    on n and α only)."""
    return float(rmse_by_count(kind, n, alpha).max())


def l0(p: Sequence[Sequence]) -> Fraction | float:
    """The thesis' L₀ (6.1): (n+1)/n - trace/n, the chance of a wrong answer scaled so UM scores 1."""
    n = len(p) - 1
    return Fraction(n + 1, n) - sum(p[i][i] for i in range(n + 1)) / n


def properties(p: Sequence[Sequence], alpha: Fraction, tol: float = 0) -> dict[str, bool]:
    """Which of the thesis' properties the matrix P[i][j] has: DP (at α), symmetry S, row and column
    monotone RM and CM, fairness F, weak honesty WH (exact on Fractions with tol = 0)."""
    n = len(p) - 1
    cells = range(n + 1)

    def le(a, b) -> bool:
        return a <= b + tol

    dp = all(le(alpha * p[i][j + 1], p[i][j]) and le(alpha * p[i][j], p[i][j + 1]) for i in cells for j in range(n))
    rm = all(le(p[i][j - 1], p[i][j]) for i in cells for j in range(1, i + 1)) and \
        all(le(p[i][j + 1], p[i][j]) for i in cells for j in range(i, n))
    cm = all(le(p[i - 1][j], p[i][j]) for j in cells for i in range(1, j + 1)) and \
        all(le(p[i + 1][j], p[i][j]) for j in cells for i in range(j, n))
    return {
        "DP": dp,
        "S": all(le(abs(p[i][j] - p[n - i][n - j]), 0) for i in cells for j in cells),
        "RM": rm,
        "CM": cm,
        "F": all(le(abs(p[i][i] - p[0][0]), 0) for i in cells),
        "WH": all(le(Fraction(1, n + 1), p[i][i]) for i in cells),
    }
