"""Workload grams for HDMM: WᵀW of a union of Kronecker products, kept factored.

HDMM's expected error depends on the workload W only through its gram WᵀW
(McKenna's thesis, Prop. 9). For a union — or a weighted, signed sum, as SQL
OR/NOT produce — of Kronecker products the gram is a sum of Kronecker products

    WᵀW = Σ_k c_k · B_1[k] ⊗ B_2[k] ⊗ ... ⊗ B_d[k],

and everything the optimizers need reduces to per-axis traces: against a
Kronecker strategy gram X = ⊗ X_i, tr[X WᵀW] = Σ_k c_k Π_i tr[X_i B_i[k]].
Factor matrices repeat across terms (I, 11ᵀ, PᵀP, ...), so each axis keeps a
tuple of distinct bases and each term an index into it.

Bases may be non-symmetric (the cross terms F_sᵀF_t of a signed sum); every
trace against a symmetric X, and the sum of all terms, are still exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Callable, Iterable, Sequence

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.matrices import Diagonal, Identity, Matrix, Ones
from mechanisms.workload import Block

# A base counts as "I and 11ᵀ only" (resp. "11ᵀ only") below this relative residual.
_STRUCTURE_TOL = 1e-10


@dataclass(frozen=True, eq=False)
class KronGram:
    """Σ_k coefs[k] · ⊗_i bases[i][index[k, i]], the gram of a workload over `sizes`.

    `queries` is the number of workload rows m (for RMSE = sqrt(error / m)).
    """

    sizes: tuple[int, ...]
    bases: tuple[tuple[np.ndarray, ...], ...]
    coefs: np.ndarray
    index: np.ndarray
    queries: int

    # --- construction --------------------------------------------------------
    @staticmethod
    def from_terms(
        sizes: Sequence[int], terms: Iterable[tuple[float, Sequence[np.ndarray]]], queries: int
    ) -> "KronGram":
        """Build from (coef, [B_1 .. B_d]) terms, deduplicating equal bases per axis."""
        sizes = tuple(int(n) for n in sizes)
        bases: list[list[np.ndarray]] = [[] for _ in sizes]
        keys: list[dict[bytes, int]] = [{} for _ in sizes]
        coefs, index = [], []
        for coef, factors in terms:
            if coef == 0.0:
                continue
            if len(factors) != len(sizes):
                raise ValueError("every term needs one factor per axis")
            row = []
            for axis, b in enumerate(factors):
                b = np.ascontiguousarray(b, dtype=float)
                if b.shape != (sizes[axis], sizes[axis]):
                    raise ValueError(f"axis {axis}: expected {sizes[axis]}x{sizes[axis]}, got {b.shape}")
                key = b.tobytes()
                if key not in keys[axis]:
                    keys[axis][key] = len(bases[axis])
                    bases[axis].append(b)
                row.append(keys[axis][key])
            coefs.append(float(coef))
            index.append(row)
        return KronGram(
            sizes,
            tuple(tuple(b) for b in bases),
            np.asarray(coefs, dtype=float),
            np.asarray(index, dtype=np.int64).reshape(len(coefs), len(sizes)),
            int(queries),
        )

    @staticmethod
    def product(factors: Sequence[np.ndarray], queries: int, coef: float = 1.0) -> "KronGram":
        """The gram of one Kronecker product: coef · ⊗ factors."""
        return KronGram.from_terms([f.shape[0] for f in factors], [(coef, factors)], queries)

    @staticmethod
    def from_blocks(blocks: Sequence[Block], domain: Domain, clique: Sequence[str]) -> "KronGram":
        """Σ_b weight_b · W_bᵀW_b over the marginal of `clique` (blocks must lie inside it)."""
        clique = tuple(clique)
        terms = []
        for block in blocks:
            factors = [block.term_factors(t, domain, clique) for t in block.terms]
            for t, ft in zip(block.terms, factors):
                for s, fs in zip(block.terms, factors):
                    grams = [_cross_gram(a, b) for a, b in zip(ft, fs)]
                    terms.append((block.weight * t.coef * s.coef, grams))
        rows = sum(b.num_rows(domain) for b in blocks)
        return KronGram.from_terms(domain.shape(clique), terms, rows)

    def terms(self) -> list[tuple[float, list[np.ndarray]]]:
        """The (coef, factors) terms."""
        return [
            (float(c), [self.bases[i][j] for i, j in enumerate(row)])
            for c, row in zip(self.coefs, self.index)
        ]

    # --- traces against Kronecker strategies ---------------------------------
    def traces(self, axis: int, x: np.ndarray) -> np.ndarray:
        """tr[X B] for every base B of `axis` (X symmetric)."""
        return np.asarray([float(np.sum(x * b)) for b in self.bases[axis]])

    def total(self, traces: Sequence[np.ndarray]) -> float:
        """Σ_k c_k Π_i traces[i][index[k, i]]: tr[(⊗X_i) WᵀW] from per-axis traces."""
        product = np.ones(len(self.coefs))
        for axis, t in enumerate(traces):
            product = product * t[self.index[:, axis]]
        return float(self.coefs @ product)

    def surrogate(self, axis: int, traces: Sequence[np.ndarray]) -> np.ndarray:
        """The partial trace Σ_k c_k Π_{i≠axis} traces[i][k] · B_axis[k] (symmetrized).

        It is the gram of the one-axis workload whose error under a factor X_axis
        equals the error of the whole workload with the other factors fixed.
        """
        weight = self.coefs.copy()
        for i, t in enumerate(traces):
            if i != axis:
                weight = weight * t[self.index[:, i]]
        per_base = np.bincount(self.index[:, axis], weights=weight, minlength=len(self.bases[axis]))
        out = np.zeros((self.sizes[axis], self.sizes[axis]))
        for w, b in zip(per_base, self.bases[axis]):
            if w != 0.0:
                out += w * b
        return 0.5 * (out + out.T)

    # --- structure -------------------------------------------------------------
    def axis_kind(self, axis: int) -> str:
        """'total' if every base is ∝ 11ᵀ, 'identity-total' if in span{I, 11ᵀ}, else 'general'."""
        n = self.sizes[axis]
        kind = "total"
        for b in self.bases[axis]:
            bi, ci = _identity_total_coefficients(b)
            fit = bi * np.eye(n) + ci * np.ones((n, n))
            scale = max(float(np.abs(b).max()), 1e-300)
            if float(np.abs(b - fit).max()) > _STRUCTURE_TOL * scale:
                return "general"
            if abs(bi) > _STRUCTURE_TOL * scale and n > 1:
                kind = "identity-total"
        return kind

    def marginal_weights(self) -> np.ndarray:
        """The marginal-gram weights w over the 2^d attribute subsets (thesis Thm 8).

        Each base B is replaced by bI + c11ᵀ with the same trace and sum; the
        expansion of Σ_k c_k ⊗(b_i I + c_i 11ᵀ) gives w(a) for every subset a
        (bit i from the left set when attribute i is in a). Against any marginal
        strategy the error of W and of this marginal workload coincide exactly.
        """
        pairs = []
        for axis in range(len(self.sizes)):
            pairs.append(np.asarray([_identity_total_coefficients(b)[::-1] for b in self.bases[axis]]))
        u = self.coefs[:, None]
        for axis, p in enumerate(pairs):
            u = (u[:, :, None] * p[self.index[:, axis]][:, None, :]).reshape(len(self.coefs), -1)
        return u.sum(axis=0)

    def dense(self) -> np.ndarray:
        """The full gram (small domains only)."""
        cells = prod(self.sizes)
        if cells > 8192:
            raise ValueError(f"refusing to densify a gram over {cells} cells")
        out = np.zeros((cells, cells))
        for c, factors in self.terms():
            k = np.ones((1, 1))
            for f in factors:
                k = np.kron(k, f)
            out += c * k
        return 0.5 * (out + out.T)


def _identity_total_coefficients(b: np.ndarray) -> tuple[float, float]:
    """(β, γ) with βI + γ11ᵀ matching the trace and the sum of b."""
    n = b.shape[0]
    trace, total = float(np.trace(b)), float(b.sum())
    if n == 1:
        return 0.0, total  # I and 11ᵀ coincide: count it as the smaller marginal
    gamma = (total - trace) / (n * (n - 1))
    return trace / n - gamma, gamma


def _cross_gram(f: Matrix, g: Matrix) -> np.ndarray:
    """fᵀg for two factors with the same rows, without densifying structured ones."""
    n = f.shape[1]
    if isinstance(f, Identity) and isinstance(g, Identity):
        return np.eye(n)
    if isinstance(f, (Identity, Diagonal)) and isinstance(g, (Identity, Diagonal)):
        fv = np.ones(n) if isinstance(f, Identity) else np.asarray(to_numpy(f.values), dtype=float)
        gv = np.ones(n) if isinstance(g, Identity) else np.asarray(to_numpy(g.values), dtype=float)
        return np.diag(fv * gv)
    if isinstance(f, Ones) and isinstance(g, Ones):
        return np.full((n, n), float(f.shape[0]))
    return np.asarray(to_numpy(f.dense()), dtype=float).T @ np.asarray(to_numpy(g.dense()), dtype=float)


# ---------------------------------------------------------------------------
# Implicit grams of one-dimensional workloads (OPT₀ on large n needs only V·x)


@dataclass(frozen=True, eq=False)
class GramOperator:
    """A gram V = WᵀW (n × n, symmetric) given by `right(x) = x @ V` for rows x (k × n)."""

    n: int
    right: Callable[[np.ndarray], np.ndarray]
    diagonal: np.ndarray

    @staticmethod
    def of_matrix(w: Matrix) -> "GramOperator":
        """Through an implicit workload matrix: x @ V = (Wᵀ(W xᵀ))ᵀ, O(cost of W) per row."""
        return GramOperator(
            w.shape[1],
            lambda x: xp().asarray(w.rmatvec(w.matvec(xp().asarray(x).T)), dtype=float).T,
            np.asarray(to_numpy(w.column_norms(2)), dtype=float),
        )

    @staticmethod
    def all_range(n: int) -> "GramOperator":
        """All n(n+1)/2 ranges in O(n) per row: (xV)_j = (n − j) Σ_{i≤j} (i+1)x_i + (j+1) Σ_{i>j} (n−i)x_i."""
        k = np.arange(n, dtype=float)

        def right(x):
            m = xp()
            x = m.asarray(x, dtype=float)
            kk = m.asarray(k)
            low = m.cumsum(x * (kk + 1), axis=1)
            high = m.cumsum((x * (n - kk))[:, ::-1], axis=1)[:, ::-1]
            above = m.concatenate([high[:, 1:], m.zeros((x.shape[0], 1))], axis=1)
            return (n - kk) * low + (kk + 1) * above

        return GramOperator(n, right, (k + 1) * (n - k))

    def permuted(self, seed: int) -> "GramOperator":
        """The gram of W·Π for the seeded permutation of `permuted` (same cell order)."""
        order = np.random.default_rng(seed).permutation(self.n)

        def right(x):
            m = xp()
            x = m.asarray(x, dtype=float)
            idx = m.asarray(order)
            z = m.empty_like(x)
            z[:, idx] = x
            return self.right(z)[:, idx]

        return GramOperator(self.n, right, self.diagonal[order])

    def dense(self) -> np.ndarray:
        return to_numpy(self.right(xp().eye(self.n)))


# ---------------------------------------------------------------------------
# Standard workloads (closed-form grams; nothing with O(n²) rows is built)


def identity_gram(n: int) -> np.ndarray:
    return np.eye(n)


def total_gram(n: int) -> np.ndarray:
    return np.ones((n, n))


def prefix_gram(n: int) -> np.ndarray:
    """PᵀP for the n prefix (CDF) queries: n − max(i, j)."""
    k = np.arange(n)
    return (n - np.maximum.outer(k, k)).astype(float)


def all_range_gram(n: int) -> np.ndarray:
    """WᵀW for all n(n+1)/2 ranges: (min(i, j) + 1)(n − max(i, j))."""
    k = np.arange(n)
    return ((np.minimum.outer(k, k) + 1) * (n - np.maximum.outer(k, k))).astype(float)


def width_range_gram(n: int, width: int) -> np.ndarray:
    """WᵀW for the n − width + 1 ranges [a, a + width − 1]."""
    k = np.arange(n)
    lo, hi = np.minimum.outer(k, k), np.maximum.outer(k, k)
    return np.maximum(0, np.minimum(lo, n - width) - np.maximum(0, hi - width + 1) + 1).astype(float)


def permuted(gram: np.ndarray, seed: int) -> np.ndarray:
    """The gram of W·Π for a seeded random permutation Π of the cells."""
    order = np.random.default_rng(seed).permutation(gram.shape[0])
    return gram[np.ix_(order, order)]


def marginals_workload(
    sizes: Sequence[int],
    subsets: Iterable[Sequence[int]],
    prefix_axes: Iterable[int] = (),
    weights: Sequence[float] | None = None,
) -> KronGram:
    """The union of (prefix-)marginals: one term per subset of axes.

    An axis in the subset gets I (or the prefix matrix P when it is in
    `prefix_axes`), every other axis T. Each marginal has Π_{i∈S} n_i rows.
    """
    prefix_axes = set(prefix_axes)
    subsets = [tuple(sorted(s)) for s in subsets]
    weights = [1.0] * len(subsets) if weights is None else list(weights)
    terms, rows = [], 0
    for s, w in zip(subsets, weights):
        factors = []
        for axis, n in enumerate(sizes):
            if axis not in s:
                factors.append(total_gram(n))
            elif axis in prefix_axes:
                factors.append(prefix_gram(n))
            else:
                factors.append(identity_gram(n))
        terms.append((w * w, factors))
        rows += prod(sizes[i] for i in s)
    return KronGram.from_terms(sizes, terms, rows)
