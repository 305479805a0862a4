"""P, the marginals on a few cliques of a clique's cells stacked, and matrices written on it (X·P).

Rows made of a few marginals (ranges, boxes and group-bys each on a small
clique) are X·P: X their coefficients on the marginals' cells (m = Σ|dom C| of
them, ≪ the n cells) and P the stacked marginal operators. Their products,
pseudo-inverse and sensitivities are computed on the m coordinates (P·x is a
few sums over axes, y·P a few broadcasts), never through an explicit matrix
over the n cells. `MarginalStrategy` is such a matrix with exact decimal
coefficients: the optimal factorization's strategy (`mechanisms.factorization_marginals`),
measured (`mechanisms.measurement`), stored in ledgers and solved by least
squares (`mechanisms.reconstruction.on_marginals`) in that form.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cached_property
from math import gcd, prod

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.matrices import Matrix, Product

# Relative size below which an eigenvalue of P Pᵀ counts as zero (marginals that overlap share their totals).
GRAM_TOLERANCE = 1e-9
# Entries of a cell range written out at once by the exact passes over the cells (rows × cells).
_CHUNK_ENTRIES = 1 << 21
# Decimal coefficients: every entry on the cells is below this in magnitude (as `DecimalDense`).
_DECIMAL_LIMIT = 10**15


class MarginalStack:
    """P: the marginals on `cliques` (tuples of axes of `shape`) stacked, an m × n operator on the cells."""

    def __init__(self, shape: tuple[int, ...], cliques: list[tuple[int, ...]]):
        self.shape = tuple(int(s) for s in shape)
        self.cliques = [tuple(sorted(c)) for c in cliques]
        sizes = [prod(self.shape[a] for a in c) for c in self.cliques]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.cells, self.rows = prod(self.shape), int(self.offsets[-1])
        self.pairs = [(b, c) for b in range(len(cliques)) for c in range(b, len(cliques))]
        self._indices: dict[tuple[int, int], tuple[tuple[int, ...], np.ndarray]] = {}

    def block(self, b: int) -> slice:
        return slice(self.offsets[b], self.offsets[b + 1])

    def _pair(self, b: int, c: int) -> tuple[tuple[int, ...], np.ndarray]:
        """(the axes of C_b ∪ C_c, for each of its cells the flat index into block (b, c) of an m×m matrix)."""
        if (b, c) not in self._indices:
            union = tuple(sorted(set(self.cliques[b]) | set(self.cliques[c])))
            grid = np.indices([self.shape[a] for a in union]).reshape(len(union), -1) if union \
                else np.zeros((0, 1), dtype=int)
            ib, ic = (self._flat(grid, union, self.cliques[x]) for x in (b, c))
            width = self.offsets[c + 1] - self.offsets[c]
            self._indices[(b, c)] = (union, ib * width + ic)
        return self._indices[(b, c)]

    def _flat(self, grid: np.ndarray, axes: tuple[int, ...], clique: tuple[int, ...]) -> np.ndarray:
        """Each column of `grid` (indices on `axes`) as the flat index of its cell in `clique`'s marginal."""
        if not clique:
            return np.zeros(grid.shape[1], dtype=np.intp)
        return np.ravel_multi_index([grid[axes.index(a)] for a in clique], [self.shape[a] for a in clique])

    def _broadcast(self, axes: tuple[int, ...]) -> list[int]:
        return [self.shape[a] if a in axes else 1 for a in range(len(self.shape))]

    def weighted_gram(self, d: np.ndarray | None = None) -> np.ndarray:
        """P D Pᵀ (m×m) for cell weights d (None: all ones, the gram P Pᵀ)."""
        g = np.zeros((self.rows, self.rows))
        cells = None if d is None else np.asarray(d, dtype=float).reshape(self.shape)
        marginals: dict[tuple[int, ...], np.ndarray] = {}
        for b, c in self.pairs:
            union, flat = self._pair(b, c)
            if union not in marginals:
                if cells is None:
                    marginals[union] = np.full(flat.size, float(self.cells // max(flat.size, 1)))
                else:
                    rest = tuple(a for a in range(len(self.shape)) if a not in union)
                    marginals[union] = (cells.sum(axis=rest) if rest else cells).ravel()
            rb, rc = self.block(b), self.block(c)
            size = (rb.stop - rb.start) * (rc.stop - rc.start)
            part = np.bincount(flat, weights=marginals[union], minlength=size).reshape(rb.stop - rb.start, -1)
            g[rb, rc] = part
            g[rc, rb] = part.T
        return g

    @cached_property
    def isometry(self) -> tuple[np.ndarray, np.ndarray]:
        """(E S^½, E S^-½) for P Pᵀ = E S Eᵀ (zero eigenvalues left out): the rows of S^-½ Eᵀ P are
        orthonormal, so rows X·P have the inner products of X·E S^½, and (X·E S^½)·S^-½ Eᵀ P = X·P on P's
        row space."""
        vals, vecs = np.linalg.eigh(self.weighted_gram())
        keep = vals > GRAM_TOLERANCE * max(float(vals.max()), 1.0)
        return vecs[:, keep] * np.sqrt(vals[keep]), vecs[:, keep] / np.sqrt(vals[keep])

    def diagonal(self, k: np.ndarray) -> np.ndarray:
        """diag(Pᵀ k P) for a symmetric m×m k: Σ over pairs of cliques of k_bc[j_b, j_c], for every cell j."""
        out = np.zeros(self.shape)
        for b, c in self.pairs:
            union, flat = self._pair(b, c)
            values = k[self.block(b), self.block(c)].ravel()[flat]
            out += (values if b == c else 2.0 * values).reshape(self._broadcast(union))
        return out.ravel()

    def marginals(self, x: np.ndarray) -> np.ndarray:
        """P·x (m × k) for x (n × k), in x's dtype (exact for integers)."""
        t = np.asarray(x).reshape(*self.shape, -1)
        parts = []
        for clique in self.cliques:
            rest = tuple(a for a in range(len(self.shape)) if a not in clique)
            parts.append((t.sum(axis=rest) if rest else t).reshape(-1, t.shape[-1]))
        return np.concatenate(parts, axis=0)

    def expand(self, x: np.ndarray) -> np.ndarray:
        """x·P (rows × n) for x (rows × m), in x's dtype (exact for integers that fit)."""
        out = np.zeros((x.shape[0], *self.shape), dtype=x.dtype)
        for b, clique in enumerate(self.cliques):
            out += x[:, self.block(b)].reshape(x.shape[0], *self._broadcast(clique))
        return out.reshape(x.shape[0], -1)

    def column_ranges(self, x: np.ndarray):
        """x·P a range of cells at a time: (the cells' range, x·P on them) for consecutive ranges of at most
        `_CHUNK_ENTRIES` entries (at least one cell), covering every cell in order."""
        step = max(1, _CHUNK_ENTRIES // max(x.shape[0], 1))
        columns = np.ascontiguousarray(x.T)  # gathering its rows copies contiguous runs
        axes = tuple(range(len(self.shape)))
        for start in range(0, self.cells, step):
            cells = np.arange(start, min(start + step, self.cells))
            grid = np.stack(np.unravel_index(cells, self.shape)) if self.shape else np.zeros((0, cells.size), int)
            out = np.zeros((cells.size, x.shape[0]), dtype=x.dtype)
            for b, clique in enumerate(self.cliques):
                out += columns[self.offsets[b] + self._flat(grid, axes, clique)]
            yield slice(start, start + cells.size), np.ascontiguousarray(out.T)

    def spec(self) -> dict:
        return {"shape": list(self.shape), "cliques": [list(c) for c in self.cliques]}


class OnMarginals(Matrix):
    """X·P: rows with coefficients X (rows × m) on the stacked marginals P (m × n)."""

    def __init__(self, coefficients: np.ndarray, stack: MarginalStack):
        self.coefficients, self.stack = np.asarray(coefficients, dtype=float), stack
        if self.coefficients.ndim != 2 or self.coefficients.shape[1] != stack.rows:
            raise ValueError(f"coefficients of shape {self.coefficients.shape} on {stack.rows} marginal cells")
        self.shape = (self.coefficients.shape[0], stack.cells)
        self._norms: dict[int, np.ndarray] = {}

    def _matmat(self, x):
        return xp().asarray(self.coefficients @ self.stack.marginals(np.asarray(to_numpy(x), dtype=float)))

    def transpose(self) -> Matrix:
        return _Columns(self)

    def dense(self):
        return xp().asarray(self.stack.expand(self.coefficients))

    def gram(self) -> Matrix:
        return Product(self.transpose(), self)

    def _on_cells(self):
        """(a range of cells, the entries on them), range by range (`MarginalStack.column_ranges`)."""
        yield from self.stack.column_ranges(self.coefficients)

    def column_norms(self, p: int):
        """Σ_i |A_ij|^p, one pass over the cells a range at a time, kept."""
        if p not in self._norms:
            out = np.empty(self.shape[1])
            for cells, part in self._on_cells():
                out[cells] = (np.abs(part) ** p).sum(axis=0)
            self._norms[p] = out
        return self._norms[p]

    def pinv(self) -> Matrix:
        """A⁺ = Pᵀ·E S^-½·(X E S^½)⁺: the SVD of the rows in orthonormal coordinates of P's row space (the
        same inner products), nothing over the cells."""
        lift = self.stack.isometry[1] @ np.linalg.pinv(self.coefficients @ self.stack.isometry[0])  # m × rows
        return OnMarginals(lift.T, self.stack).transpose()


class _Columns(Matrix):
    """(X·P)ᵀ = Pᵀ·Xᵀ."""

    def __init__(self, rows: OnMarginals):
        self.rows, self.shape = rows, (rows.shape[1], rows.shape[0])

    def _matmat(self, y):
        on_marginals = self.rows.coefficients.T @ np.asarray(to_numpy(y), dtype=float)
        return xp().asarray(self.rows.stack.expand(on_marginals.T).T)

    def transpose(self) -> Matrix:
        return self.rows


class MarginalStrategy(OnMarginals):
    """X·P with X = `units` / 10^`exponent` (integers): on the cells, the entries of a `DecimalDense` (each
    the double nearest its ≤15-digit decimal), without writing them out.

    Its sensitivity and lattice are exact passes over the cells, a range of them at a time, computed
    once: the same column norms, bit for bit, and the same lattice step as the matrix written out."""

    def __init__(self, stack: MarginalStack, units: np.ndarray, exponent: int):
        units = np.asarray(units, dtype=np.int64)
        reach = sum((np.abs(units[:, stack.block(b)]).max(axis=1, initial=0) for b in range(len(stack.cliques))),
                    np.zeros(units.shape[0], dtype=np.int64))
        if units.size and int(reach.max()) >= _DECIMAL_LIMIT:
            raise ValueError("decimal entries need integers below 10^15 on every cell")
        self.units, self.exponent = units, int(exponent)
        super().__init__(units / 10.0**exponent, stack)

    def dense(self):
        """The entries on the cells: each the double nearest its decimal (the integers summed, then scaled)."""
        return xp().asarray(self.stack.expand(self.units) / 10.0**self.exponent)

    def _on_cells(self):
        for cells, part in self.stack.column_ranges(self.units):
            yield cells, part / 10.0**self.exponent

    @cached_property
    def lattice(self) -> tuple[Fraction, int]:
        """(γ, g): γ = g / 10^exponent, g the gcd of the integers on every cell (0 when all are 0)."""
        common = 0
        for _, part in self.stack.column_ranges(self.units):
            common = gcd(common, int(np.gcd.reduce(np.abs(part), axis=None)))
            if common == 1:
                break
        return (Fraction(common, 10**self.exponent) if common else Fraction(1)), common

    def exact_work(self) -> int:
        """Integer multiply-adds of an exact answer: the marginals of the counts, then the units on them."""
        return self.stack.cells * len(self.stack.cliques) + self.units.size

    def spec(self) -> dict:
        return {**self.stack.spec(), "units": self.units.tolist(), "exponent": self.exponent}

    @classmethod
    def from_spec(cls, spec: dict) -> "MarginalStrategy":
        stack = MarginalStack(tuple(spec["shape"]), [tuple(c) for c in spec["cliques"]])
        return cls(stack, np.asarray(spec["units"], dtype=np.int64).reshape(-1, stack.rows), spec["exponent"])


__all__ = ["GRAM_TOLERANCE", "MarginalStack", "MarginalStrategy", "OnMarginals"]
