"""The optimal factorization in marginal coordinates: the same optimum without O(n r²) steps.

Every block of a workload reads one clique C_b of attributes, so W = X·P with P
the stacked marginal operators M_C (one per clique, cliques inside another
folded into it) and X the blocks' rows on their cliques' marginals (R×m, m =
Σ|dom C| ≪ n cells). The optimal strategy lies in W's row space, which lies in
P's: with G = P Pᵀ = E S Eᵀ (block (b, c) counts the cells of C_b ∪ C_c, times
the sizes of the attributes in neither) the rows of Ũ = S^-½ Eᵀ P are
orthonormal, and X·P ↦ X·E S^½ keeps every inner product. So the basis, its QR
and the workload gram are computed on m coordinates, and of the n cells the
dual step needs only

- U D Uᵀ = Lᵀ (P D Pᵀ) L, P D Pᵀ built from d's marginals on the unions of two
  cliques (L = E S^-½ Q, m×r), and
- each cell's sensitivity g_j = (P e_j)ᵀ K' (P e_j), K' = L k Lᵀ: a sum over
  pairs of cliques of K'_bc[j_b, j_c], for all cells at once by broadcasting,

O(n·cliques² + m·r² + r³) per step instead of O(n r²). The multiplicative update
of d stays on the n cells; the strategy C·B = C·V·P is written out on the cells
only once, at the end (`mechanisms.factorization` does the rest unchanged).
"""

from __future__ import annotations

import math
from math import prod

import numpy as np

from mechanisms.domain import Domain
from mechanisms.factorization import MAX_INTEGER, SPAN_TOLERANCE, Factorization, RowSpace, basis_rows, factorize
from mechanisms.interruption import checkpoint
from mechanisms.workload import Block

Clique = tuple[str, ...]

# Relative size below which an eigenvalue of P Pᵀ counts as zero (marginals that overlap share their totals).
_GRAM_TOLERANCE = 1e-9
# Rows of W written out at once when checking the span (rows × cells doubles).
_CHUNK_ENTRIES = 1 << 22


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

    def _flat(self, grid: np.ndarray, union: tuple[int, ...], clique: tuple[int, ...]) -> np.ndarray:
        if not clique:
            return np.zeros(grid.shape[1], dtype=np.intp)
        return np.ravel_multi_index([grid[union.index(a)] for a in clique], [self.shape[a] for a in clique])

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

    def diagonal(self, k: np.ndarray) -> np.ndarray:
        """diag(Pᵀ k P) for a symmetric m×m k: Σ over pairs of cliques of k_bc[j_b, j_c], for every cell j."""
        out = np.zeros(self.shape)
        for b, c in self.pairs:
            union, flat = self._pair(b, c)
            values = k[self.block(b), self.block(c)].ravel()[flat]
            out += (values if b == c else 2.0 * values).reshape(self._broadcast(union))
        return out.ravel()

    def expand(self, x: np.ndarray) -> np.ndarray:
        """x·P (rows × n) for x (rows × m), in x's dtype (exact for integers that fit)."""
        out = np.zeros((x.shape[0], *self.shape), dtype=x.dtype)
        for b, clique in enumerate(self.cliques):
            out += x[:, self.block(b)].reshape(x.shape[0], *self._broadcast(clique))
        return out.reshape(x.shape[0], -1)


class MarginalRows(RowSpace):
    """The row space of W = X·P, basis V·P (V: the rows `chosen` of X), in m coordinates."""

    def __init__(self, stack: MarginalStack, x: np.ndarray, isometry: np.ndarray, inverse: np.ndarray,
                 chosen: np.ndarray, q_mat: np.ndarray):
        self.stack, self.x, self.v, self.isometry = stack, x, x[chosen], isometry
        self.lift = inverse @ q_mat  # L = E S^-½ Q: U = Lᵀ P
        self.cells = stack.cells
        m, r = stack.rows, q_mat.shape[1]
        self.step_work = 6.0 * stack.cells * len(stack.pairs) + 4.0 * m * r * (m + r) + 60.0 * r**3

    def weigh(self, d: np.ndarray) -> np.ndarray:
        return self.lift.T @ self.stack.weighted_gram(d) @ self.lift

    def sensitivities(self, k: np.ndarray) -> np.ndarray:
        return self.stack.diagonal(self.lift @ k @ self.lift.T)

    def magnitude(self, units: np.ndarray) -> float:
        partial = np.abs(units) @ np.abs(self.v)  # a cell's sum takes one entry per clique
        return float(sum(partial[:, self.stack.block(b)].max(axis=1) for b in range(len(self.stack.cliques))).max())

    def integer(self, units: np.ndarray) -> np.ndarray:
        return self.stack.expand(units.astype(np.int64) @ self.v.astype(np.int64))

    def determines(self, c: np.ndarray) -> bool:
        # In isometric coordinates; a row's residual norm bounds its largest entry on the cells.
        a = c @ self.v @ self.isometry
        rows = self.x @ self.isometry
        residual = rows - (rows @ np.linalg.pinv(a)) @ a
        return float(np.linalg.norm(residual, axis=1).max()) <= SPAN_TOLERANCE * max(self._largest(), 1.0)

    def _largest(self) -> float:
        """max |W|, written out a few rows at a time."""
        step = max(1, _CHUNK_ENTRIES // self.cells)
        return max(float(np.abs(self.stack.expand(self.x[i:i + step])).max()) for i in range(0, len(self.x), step))


def marginal_cliques(domain: Domain, blocks: list[Block]) -> list[Clique]:
    """The blocks' cliques, those inside another left out (largest first, then in order of appearance)."""
    found: list[Clique] = []
    for clique in sorted(dict.fromkeys(domain.canonical(b.attributes(domain)) for b in blocks), key=len, reverse=True):
        if not any(set(clique) <= set(kept) for kept in found):
            found.append(clique)
    return found


def marginal_coordinates(domain: Domain, blocks: list[Block]) -> tuple[Clique, MarginalStack, np.ndarray]:
    """(the union clique, P on it, X: the blocks' rows on their cliques' marginals, R×m) with W = X·P."""
    union = domain.canonical(a for b in blocks for a in b.attributes(domain))
    cliques = marginal_cliques(domain, blocks)
    stack = MarginalStack(domain.shape(union), [tuple(union.index(a) for a in c) for c in cliques])
    x = np.zeros((sum(b.num_rows(domain) for b in blocks), stack.rows))
    row = 0
    for b in blocks:
        attributes = set(b.attributes(domain))
        home = next(i for i, c in enumerate(cliques) if attributes <= set(c))
        rows = np.asarray(b.matrix(domain, cliques[home]).dense(), dtype=float)
        x[row:row + rows.shape[0], stack.block(home)] = rows
        row += rows.shape[0]
    return union, stack, x


def marginal_factorization(
    domain: Domain, blocks: list[Block], max_iter: int = 3000, gap_tol: float = 2e-3, max_work: float = math.inf,
    max_entries: float = math.inf,
) -> tuple[Clique, Factorization] | None:
    """`optimal_factorization` of the blocks' rows over their union clique (rows weighted by the blocks'
    weights), computed in marginal coordinates: (the union clique, the factorization), or None when the
    rows cannot be put on an exact integer lattice or the strategy (rank × cells) would have more than
    `max_entries` entries (checked before any step)."""
    union, stack, x = marginal_coordinates(domain, blocks)
    weights = np.concatenate([np.full(b.num_rows(domain), b.weight) for b in blocks])
    checkpoint(2.0 * stack.cells * len(stack.pairs) + 4.0 * x.size * stack.rows + 12.0 * stack.rows**3)
    vals, vecs = np.linalg.eigh(stack.weighted_gram())
    keep = vals > _GRAM_TOLERANCE * max(float(vals.max()), 1.0)
    isometry = vecs[:, keep] * np.sqrt(vals[keep])  # E S^½: ‖X·P‖ = ‖X·E S^½‖ row by row
    inverse = vecs[:, keep] / np.sqrt(vals[keep])  # E S^-½
    rows = x @ isometry
    chosen = basis_rows(rows)
    if chosen.size == 0 or chosen.size * stack.cells > max_entries:
        return None
    v = x[chosen]
    if not np.array_equal(v, np.rint(v)) or np.abs(v).max() > MAX_INTEGER:
        return None
    q_mat, r_mat = np.linalg.qr(rows[chosen].T)
    projected = (rows * np.sqrt(weights)[:, None]) @ q_mat
    space = MarginalRows(stack, x, isometry, inverse, chosen, q_mat)
    found = factorize(space, r_mat, projected, max_iter, gap_tol, max_work)
    return None if found is None else (union, found)


__all__ = ["MarginalRows", "MarginalStack", "marginal_cliques", "marginal_coordinates", "marginal_factorization"]
