"""Implicit query matrices: linear operators that only materialize when asked.

Every class offers `shape`, `matvec`/`rmatvec` (on a vector or on a matrix of
column vectors), `gram()` (AᵀA, itself implicit where structure allows),
`dense()`, `transpose()`, and the sensitivities used by the mechanisms:
`sensitivity(1)` is the largest column L1 norm, `sensitivity(2)` the largest
column L2 norm (add/remove one individual changes one histogram cell by one).

Kronecker products never form the full matrix: a matvec applies one factor per
tensor axis, which is how workloads over large domains stay cheap.
"""

from __future__ import annotations

import importlib
from fractions import Fraction
from functools import cached_property, reduce
from math import prod

import numpy as np

from mechanisms.arrays import kron, pinv, to_numpy, xp

# Largest number of entries the default `Matrix.pinv` densifies.
PINV_DENSE_LIMIT = 1 << 24


class Matrix:
    """Base class of implicit matrices. Subclasses define `shape` and `_matmat`."""

    shape: tuple[int, int]

    # --- products -------------------------------------------------------
    def matvec(self, x):
        """A @ x for a vector (n,) or a matrix of columns (n, k)."""
        x = xp().asarray(x)
        if x.shape[0] != self.shape[1]:
            raise ValueError(f"matvec: expected {self.shape[1]} rows, got {x.shape[0]}")
        if x.ndim == 1:
            return self._matmat(x[:, None])[:, 0]
        return self._matmat(x)

    def rmatvec(self, y):
        """Aᵀ @ y."""
        return self.transpose().matvec(y)

    def _matmat(self, x):
        raise NotImplementedError

    def __matmul__(self, other):
        if isinstance(other, Matrix):
            return Product(self, other)
        return self.matvec(other)

    # --- structure -------------------------------------------------------
    def transpose(self) -> "Matrix":
        return Dense(self.dense().T)

    @property
    def T(self) -> "Matrix":
        return self.transpose()

    def dense(self):
        """The explicit matrix (only sensible for small shapes)."""
        return self._matmat(xp().eye(self.shape[1]))

    def gram(self) -> "Matrix":
        """AᵀA."""
        d = self.dense()
        return Dense(d.T @ d)

    def column_norms(self, p: int):
        """Vector of column Lp norms raised to the power p (sum_i |A_ij|^p)."""
        return (xp().abs(self.dense()) ** p).sum(axis=0)

    def sensitivity(self, p: int) -> float:
        """Largest column Lp norm: the Lp sensitivity under add/remove one cell count."""
        return float(self.column_norms(p).max()) ** (1.0 / p)

    def pinv(self) -> "Matrix":
        """The Moore–Penrose pseudo-inverse A⁺ (shape transposed), itself a Matrix.

        Contract (least squares in `mechanisms.reconstruction.clique` relies on it): the
        result P satisfies APA = A, PAP = P with AP and PA symmetric, and offers
        `matvec`/`rmatvec`/`transpose`; then A⁺y is the least-squares solution,
        A⁺A the projector onto the row space, and (AᵀA)⁺ = A⁺A⁺ᵀ. Structured
        subclasses override it with an implicit form (⊗ of pinvs for Kronecker,
        1/w for Weighted, ...); this default densifies, which is refused beyond
        `PINV_DENSE_LIMIT` entries.
        """
        if self.shape[0] * self.shape[1] > PINV_DENSE_LIMIT:
            raise NotImplementedError(
                f"{type(self).__name__}{self.shape} has no structured pinv and is too large to densify"
            )
        return Dense(pinv(self.dense()))

    def __mul__(self, c: float) -> "Matrix":
        return Weighted(self, float(c))

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.shape}"


class Dense(Matrix):
    """An explicit matrix."""

    def __init__(self, array):
        a = xp().asarray(array, dtype=float)
        if a.ndim == 1:
            a = a[None, :]
        self.array = a
        self.shape = a.shape

    def _matmat(self, x):
        return self.array @ x

    def dense(self):
        return self.array

    def transpose(self) -> Matrix:
        return Dense(self.array.T)


class DecimalDense(Dense):
    """An explicit matrix of exact decimals: entry (i, j) is the double nearest `units[i, j] / 10**exponent`,
    `units` integers below 10^15 in magnitude (so each entry reads back as that decimal). Exact
    releases take its lattice from the integers instead of reading every entry as a decimal."""

    def __init__(self, units: np.ndarray, exponent: int):
        units = np.asarray(units, dtype=np.int64)
        if units.size and int(np.abs(units).max()) >= 10**15:
            raise ValueError("decimal entries need integers below 10^15")
        super().__init__(units / 10.0**exponent)
        self.units, self.exponent = units if units.ndim == 2 else units[None, :], int(exponent)

    @cached_property
    def lattice(self) -> tuple[Fraction, np.ndarray]:
        """(γ, the entries in units of γ as Python integers): γ the largest rational dividing every entry,
        computed once (a strategy is costed and released several times)."""
        common = int(np.gcd.reduce(np.abs(self.units), axis=None)) if self.units.size else 0
        if common == 0:
            return Fraction(1), np.zeros(self.shape, dtype=object)
        return Fraction(common, 10**self.exponent), (self.units // common).astype(object)


class Identity(Matrix):
    def __init__(self, n: int):
        self.shape = (n, n)

    def _matmat(self, x):
        return x

    def transpose(self) -> Matrix:
        return self

    def gram(self) -> Matrix:
        return self

    def column_norms(self, p: int):
        return xp().ones(self.shape[1])

    def pinv(self) -> Matrix:
        return self


class Diagonal(Matrix):
    """diag(values): a GROUP BY factor restricted by a predicate, or weighted by SUM values."""

    def __init__(self, values):
        self.values = xp().asarray(values, dtype=float)
        self.shape = (self.values.size, self.values.size)

    def _matmat(self, x):
        return self.values[:, None] * x

    def transpose(self) -> Matrix:
        return self

    def dense(self):
        return xp().diag(self.values)

    def gram(self) -> Matrix:
        return Diagonal(self.values**2)

    def column_norms(self, p: int):
        return xp().abs(self.values) ** p

    def pinv(self) -> Matrix:
        v = self.values
        return Diagonal(xp().where(v != 0, 1.0 / xp().where(v != 0, v, 1.0), 0.0))


class Ones(Matrix):
    """The m x n all-ones matrix; `Total(n)` is its single-row case."""

    def __init__(self, m: int, n: int):
        self.shape = (m, n)

    def _matmat(self, x):
        return xp().repeat(x.sum(axis=0, keepdims=True), self.shape[0], axis=0)

    def transpose(self) -> Matrix:
        return Ones(self.shape[1], self.shape[0])

    def gram(self) -> Matrix:
        return Weighted(Ones(self.shape[1], self.shape[1]), float(self.shape[0]))

    def column_norms(self, p: int):
        return xp().full(self.shape[1], float(self.shape[0]))

    def pinv(self) -> Matrix:
        m, n = self.shape
        return Weighted(Ones(n, m), 1.0 / (m * n))


def Total(n: int) -> Ones:
    """The single query summing all n cells."""
    return Ones(1, n)


class Prefix(Matrix):
    """Lower-triangular ones: row i sums cells 0..i (CDF queries)."""

    def __init__(self, n: int):
        self.shape = (n, n)

    def _matmat(self, x):
        return xp().cumsum(x, axis=0)

    def transpose(self) -> Matrix:
        return _Suffix(self.shape[0])

    def gram(self) -> Matrix:
        i = xp().arange(self.shape[0])
        return Dense(self.shape[0] - xp().maximum(i[:, None], i[None, :]))

    def column_norms(self, p: int):
        return (self.shape[0] - xp().arange(self.shape[0])).astype(float)


class _Suffix(Matrix):
    """Transpose of Prefix: row j sums cells j..n-1."""

    def __init__(self, n: int):
        self.shape = (n, n)

    def _matmat(self, x):
        return xp().cumsum(x[::-1], axis=0)[::-1]

    def transpose(self) -> Matrix:
        return Prefix(self.shape[0])


class AllRange(Matrix):
    """All n(n+1)/2 contiguous ranges [i, j], i <= j, in row-major order of (i, j)."""

    def __init__(self, n: int):
        self.n = n
        self.shape = (n * (n + 1) // 2, n)

    @cached_property
    def _pairs(self):
        """Row indices (i, j) of every range; built on first use (n(n+1) integers)."""
        return np.triu_indices(self.n)

    def _matmat(self, x):
        m = xp()
        s = m.concatenate([m.zeros((1, x.shape[1])), m.cumsum(x, axis=0)])
        i, j = self._pairs
        return s[m.asarray(j) + 1] - s[m.asarray(i)]

    def transpose(self) -> Matrix:
        return _AllRangeT(self)

    def gram(self) -> Matrix:
        k = xp().arange(self.n)
        lo = xp().minimum(k[:, None], k[None, :])
        hi = xp().maximum(k[:, None], k[None, :])
        return Dense((lo + 1) * (self.n - hi))

    def column_norms(self, p: int):
        k = xp().arange(self.n)
        return ((k + 1) * (self.n - k)).astype(float)


class _AllRangeT(Matrix):
    def __init__(self, base: AllRange):
        self.base = base
        self.shape = (base.shape[1], base.shape[0])

    def _matmat(self, y):
        m = xp()
        n = self.base.n
        # cell c receives every range (i, j) with i <= c <= j: difference arrays.
        diff = m.zeros((n + 1, y.shape[1]))
        i, j = (m.asarray(a) for a in self.base._pairs)
        m.add.at(diff, i, y)  # CuPy has ufunc.at since v12 (cupyx.scatter_add is deprecated)
        m.add.at(diff, j + 1, -y)
        return m.cumsum(diff, axis=0)[:n]

    def transpose(self) -> Matrix:
        return self.base


class Weighted(Matrix):
    """c * A."""

    def __init__(self, base: Matrix, weight: float):
        self.base, self.weight = base, float(weight)
        self.shape = base.shape

    def _matmat(self, x):
        return self.weight * self.base._matmat(x)

    def dense(self):
        return self.weight * self.base.dense()

    def transpose(self) -> Matrix:
        return Weighted(self.base.transpose(), self.weight)

    def gram(self) -> Matrix:
        return Weighted(self.base.gram(), self.weight**2)

    def column_norms(self, p: int):
        return abs(self.weight) ** p * self.base.column_norms(p)

    def pinv(self) -> Matrix:
        if self.weight == 0.0:
            return Weighted(self.base.transpose(), 0.0)
        return Weighted(self.base.pinv(), 1.0 / self.weight)


class Product(Matrix):
    """A @ B."""

    def __init__(self, left: Matrix, right: Matrix):
        if left.shape[1] != right.shape[0]:
            raise ValueError(f"cannot multiply {left.shape} by {right.shape}")
        self.left, self.right = left, right
        self.shape = (left.shape[0], right.shape[1])

    def _matmat(self, x):
        return self.left._matmat(self.right._matmat(x))

    def transpose(self) -> Matrix:
        return Product(self.right.transpose(), self.left.transpose())


class Sum(Matrix):
    """A sum of same-shape matrices (signed sums of Kronecker terms)."""

    def __init__(self, terms: list[Matrix]):
        shapes = {t.shape for t in terms}
        if len(shapes) != 1:
            raise ValueError(f"Sum of differently shaped matrices: {shapes}")
        self.terms = list(terms)
        self.shape = terms[0].shape

    def _matmat(self, x):
        return reduce(lambda a, b: a + b, (t._matmat(x) for t in self.terms))

    def dense(self):
        return reduce(lambda a, b: a + b, (t.dense() for t in self.terms))

    def transpose(self) -> Matrix:
        return Sum([t.transpose() for t in self.terms])

    def column_norms(self, p: int):
        """Upper bounds on the column Lp norms (to the power p), tight up to rounding.

        Terms may cancel, and a query's coefficients are the analyst's: a cancelling sum
        computed in floating point can lose the true norm entirely. Each exact form here
        therefore adds a certified margin for its rounding, relative to the norms the
        terms would have without cancelling (B_j = Σ_t |c_t| ‖column j of term t‖):
        tiny when nothing cancels, as large as needed when something does.
        For p=2 on aligned Kronecker terms: pairwise column inner products; for small
        matrices: the dense sum; otherwise the triangle-inequality bound.
        """
        m = xp()
        eps = float(m.finfo(float).eps)
        products = [_as_weighted_kronecker(t) for t in self.terms]
        aligned = all(k is not None for k in products) and len(
            {tuple(f.shape for f in k[1]) for k in products}
        ) == 1
        if p == 2 and aligned:
            total, bound = 0, 0
            for c1, f1 in products:
                norms = reduce(kron, [(f.dense() ** 2).sum(axis=0) for f in f1], m.ones(1))
                bound = bound + abs(c1) * m.sqrt(norms)
                for c2, f2 in products:
                    cols = [(a.dense() * b.dense()).sum(axis=0) for a, b in zip(f1, f2)]
                    total = total + c1 * c2 * reduce(kron, cols, m.ones(1))
            rows = max((f.shape[0] for _, fs in products for f in fs), default=1)
            margin = 2 * (len(products) ** 2 + len(products[0][1]) + rows) * eps * bound**2
            return m.maximum(total, 0.0) + margin
        if self.shape[0] * self.shape[1] <= 10_000_000:
            dense = m.abs(self.dense())
            scale = reduce(lambda a, b: a + b, (m.abs(t.dense()) for t in self.terms))
            slack = 2 * len(self.terms) * eps * scale  # the rounding of each entry of the sum
            if p == 1:
                return (dense + slack).sum(axis=0)
            return (m.sqrt((dense**2).sum(axis=0)) + m.sqrt((slack**2).sum(axis=0))) ** 2
        bound = reduce(lambda a, b: a + b, (t.column_norms(p) ** (1.0 / p) for t in self.terms))
        return (bound * (1 + 4 * len(self.terms) * eps)) ** p


class VStack(Matrix):
    """Rows of several matrices over the same columns, stacked."""

    def __init__(self, blocks: list[Matrix]):
        if len({b.shape[1] for b in blocks}) != 1:
            raise ValueError("VStack blocks must have the same number of columns")
        self.blocks = list(blocks)
        self.shape = (sum(b.shape[0] for b in blocks), blocks[0].shape[1])

    def _matmat(self, x):
        return xp().concatenate([b._matmat(x) for b in self.blocks], axis=0)

    def transpose(self) -> Matrix:
        return _HStack([b.transpose() for b in self.blocks])

    def gram(self) -> Matrix:
        return Sum([b.gram() for b in self.blocks])

    def column_norms(self, p: int):
        return reduce(lambda a, b: a + b, (b.column_norms(p) for b in self.blocks))


class _HStack(Matrix):
    def __init__(self, blocks: list[Matrix]):
        self.blocks = blocks
        self.shape = (blocks[0].shape[0], sum(b.shape[1] for b in blocks))

    def _matmat(self, x):
        out, start = 0, 0
        for b in self.blocks:
            out = out + b._matmat(x[start : start + b.shape[1]])
            start += b.shape[1]
        return out

    def transpose(self) -> Matrix:
        return VStack([b.transpose() for b in self.blocks])


class Kronecker(Matrix):
    """A1 ⊗ A2 ⊗ ... applied one factor per axis of the reshaped input."""

    def __init__(self, factors: list[Matrix]):
        self.factors = list(factors)
        self.shape = (
            prod(f.shape[0] for f in self.factors),
            prod(f.shape[1] for f in self.factors),
        )

    def _matmat(self, x):
        k = x.shape[1]
        t = x.reshape(*(f.shape[1] for f in self.factors), k)
        for axis, f in enumerate(self.factors):
            t = xp().moveaxis(t, axis, 0)
            moved = t.shape
            t = f._matmat(t.reshape(moved[0], -1)).reshape(f.shape[0], *moved[1:])
            t = xp().moveaxis(t, 0, axis)
        return t.reshape(self.shape[0], k)

    def transpose(self) -> Matrix:
        return Kronecker([f.transpose() for f in self.factors])

    def dense(self):
        return reduce(kron, (f.dense() for f in self.factors), xp().ones((1, 1)))

    def gram(self) -> Matrix:
        return Kronecker([f.gram() for f in self.factors])

    def column_norms(self, p: int):
        return reduce(kron, (f.column_norms(p) for f in self.factors), xp().ones(1))

    def sensitivity(self, p: int) -> float:
        return float(prod(f.sensitivity(p) for f in self.factors))

    def pinv(self) -> Matrix:
        return Kronecker([f.pinv() for f in self.factors])


def _as_weighted_kronecker(m: Matrix) -> tuple[float, list[Matrix]] | None:
    """(c, factors) when m is c * Kronecker(factors) or a Kronecker product."""
    if isinstance(m, Weighted) and isinstance(m.base, Kronecker):
        return m.weight, m.base.factors
    if isinstance(m, Kronecker):
        return 1.0, m.factors
    return None


# ---------------------------------------------------------------------------
# Serialization: strategies are stored with their measurements in the ledger.

_SIMPLE = {"Identity": Identity, "Prefix": Prefix, "AllRange": AllRange}


# Structured strategies stored in ledgers, by kind name -> the module that defines them now.
# A spec is rebuilt by its kind name alone: ledgers of dpsql 0.1 also name the module the
# class lived in then (mechanisms.range_trees, mechanisms.wavelet, mechanisms.residual_planner),
# which is ignored, so moving a module never makes a ledger unreadable. A new structured
# strategy adds a line here (and `spec()` / `from_spec()` on its class).
STORED_KINDS = {
    "RangeStrategy": "mechanisms.ranges.trees",
    "HierarchicalStrategy": "mechanisms.ranges.trees",
    "HaarStrategy": "mechanisms.ranges.wavelet",
    "Centering": "mechanisms.residual",
}


def to_spec(m: Matrix) -> dict:
    """A JSON-able description of an implicit matrix (inverse: `from_spec`).

    Structured matrices defined in other `mechanisms` modules (range trees,
    wavelets, residual strategies; `STORED_KINDS`) describe themselves with
    `spec()` and are rebuilt by their class's `from_spec`.
    """
    name = type(m).__name__
    if name in STORED_KINDS:
        return {**m.spec(), "type": name}
    if name in _SIMPLE:
        return {"type": name, "n": m.shape[1]}
    if isinstance(m, Ones):
        return {"type": "Ones", "m": m.shape[0], "n": m.shape[1]}
    if isinstance(m, Dense):
        return {"type": "Dense", "array": np.asarray(to_numpy(m.array), dtype=float).tolist()}
    if isinstance(m, Diagonal):
        return {"type": "Diagonal", "values": np.asarray(to_numpy(m.values), dtype=float).tolist()}
    if isinstance(m, Weighted):
        return {"type": "Weighted", "weight": m.weight, "base": to_spec(m.base)}
    if isinstance(m, Product):
        return {"type": "Product", "left": to_spec(m.left), "right": to_spec(m.right)}
    if isinstance(m, Kronecker):
        return {"type": "Kronecker", "factors": [to_spec(f) for f in m.factors]}
    if isinstance(m, (Sum, VStack)):
        parts = m.terms if isinstance(m, Sum) else m.blocks
        return {"type": name, "parts": [to_spec(p) for p in parts]}
    return {"type": "Dense", "array": np.asarray(to_numpy(m.dense()), dtype=float).tolist()}


def from_spec(spec: dict) -> Matrix:
    """Rebuild a matrix from `to_spec` output."""
    kind = spec["type"]
    if kind in STORED_KINDS:
        return getattr(importlib.import_module(STORED_KINDS[kind]), kind).from_spec(spec)
    if kind in _SIMPLE:
        return _SIMPLE[kind](spec["n"])
    if kind == "Ones":
        return Ones(spec["m"], spec["n"])
    if kind == "Dense":
        return Dense(spec["array"])
    if kind == "Diagonal":
        return Diagonal(spec["values"])
    if kind == "Weighted":
        return Weighted(from_spec(spec["base"]), spec["weight"])
    if kind == "Product":
        return Product(from_spec(spec["left"]), from_spec(spec["right"]))
    if kind == "Kronecker":
        return Kronecker([from_spec(f) for f in spec["factors"]])
    if kind == "Sum":
        return Sum([from_spec(p) for p in spec["parts"]])
    if kind == "VStack":
        return VStack([from_spec(p) for p in spec["parts"]])
    raise ValueError(f"unknown matrix spec type {kind!r}")
