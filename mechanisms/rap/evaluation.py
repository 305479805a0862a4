"""Streamed evaluation of every consistent query of a threshold, on D' and on the data.

The consistent queries of a threshold over attributes (f_1..f_k) form a tensor
A[y_1..y_k]. Split the attributes into a left part L and a right part R and tile
the tensor into (left index range) x (right index range) blocks no larger than
a memory budget. With f = sum_S g_S prod_{j in S} w_j (the multilinear expansion
in w = z or w = 1 - z, see `multilinear`), grouping the terms by a = S ∩ L:

    A[l, r] = (1/n') sum_rows sum_a U_a[row, l] * (sum_{S: S∩L=a} g_S V_{S∩R}[row, r]),

U_a and V_b being products of the columns W_j[:, y_j] of the relaxed data (or of
1 - W_j). Each group is one matrix product over the n' synthetic rows, so a tile
costs a few GEMMs: the all-queries pass that adaptive selection needs every
round, without ever holding more than one tile.

On the data the same polynomial in plain atoms (inclusion-exclusion) reads
A[y] = sum_S g_S M_S[y_S], M_S the marginal over S: exact integer counts, from
the sparse k-way marginal (at most n nonzero cells) and its dense projections.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Iterator

import numpy as np

from mechanisms.arrays import xp
from mechanisms.rap.counts import SparseCounts
from mechanisms.rap.encoding import OneHot
from mechanisms.rap.workloads import Threshold

# Working memory for one tile (about 128 bytes per answer, factors included), and
# bounds on the dense marginals read for exact answers.
DEFAULT_MEMORY = 1 << 28
DENSE_LIMIT = 1 << 22
SUBMARGINAL_LIMIT = 1 << 26


def positions(mask: int, k: int) -> tuple[int, ...]:
    """The atom positions set in a bitmask."""
    return tuple(j for j in range(k) if mask >> j & 1)


def _balanced_split(shape: tuple[int, ...]) -> int:
    """Number of leading attributes forming L, balancing prod(L) against prod(R)."""
    if len(shape) == 1:
        return 1
    return min(range(1, len(shape)), key=lambda p: abs(np.log(prod(shape[:p])) - np.log(prod(shape[p:]))))


def _subindex(coords: list[np.ndarray], shape: tuple[int, ...], which: tuple[int, ...], length: int) -> np.ndarray:
    """Flat index over `which` (positions within coords/shape) of each column of coords."""
    if not which:
        return np.zeros(length, dtype=np.int64)
    return np.ravel_multi_index(tuple(coords[j] for j in which), tuple(shape[j] for j in which))


@dataclass(frozen=True)
class Tile:
    """Block [l0, l1) x [r0, r1) of a threshold's answer tensor (flattened as l * R + r)."""

    l0: int
    l1: int
    r0: int
    r1: int
    right: int  # R, the size of the right index space

    def local_ids(self) -> np.ndarray:
        l = np.arange(self.l0, self.l1, dtype=np.int64)[:, None]
        r = np.arange(self.r0, self.r1, dtype=np.int64)[None, :]
        return (l * self.right + r).ravel()


def tile_for_memory(budget_bytes: int) -> int:
    """Answers per tile such that one tile's working set fits in `budget_bytes`."""
    return max(1 << 12, budget_bytes // 128)


DEFAULT_TILE = tile_for_memory(DEFAULT_MEMORY)


class ThresholdEvaluator:
    """Tiles of the answers of all consistent queries of one threshold."""

    def __init__(self, threshold: Threshold, shape: tuple[int, ...], tile: int = DEFAULT_TILE):
        self.threshold, self.shape, self.k = threshold, tuple(shape), threshold.k
        self.split = _balanced_split(self.shape)
        self.left_shape, self.right_shape = self.shape[: self.split], self.shape[self.split :]
        self.left, self.right = prod(self.left_shape), prod(self.right_shape)
        self.tile = tile
        self.negated, coefficients = threshold.function.expansion()
        left_mask = (1 << self.split) - 1
        self.groups: dict[int, list[tuple[int, int]]] = {}
        for mask, c in coefficients.items():
            self.groups.setdefault(mask & left_mask, []).append((mask >> self.split, c))
        self._data_terms: list[tuple[int, int]] | None = None
        self._dense: dict[int, np.ndarray] = {}
        self._sparse: SparseCounts | None = None

    # --- tiling and the relaxed data ----------------------------------------------
    def _blocks(self, rows: int) -> tuple[int, int]:
        """(left, right) block lengths: a tile holds <= `tile` answers, each side's factors <= 8 tiles."""
        factors = max(1, (8 * self.tile) // max(1, rows * sum(1 for a in self.groups if a)))
        r_block = max(1, min(self.right, factors, self.tile))
        return max(1, min(self.left, self.tile // r_block, factors)), r_block

    def tiles(self, rows: int) -> Iterator[Tile]:
        """Tiles in right-major order (consecutive tiles share their right factors)."""
        l_block, r_block = self._blocks(rows)
        for r0 in range(0, self.right, r_block):
            for l0 in range(0, self.left, l_block):
                yield Tile(l0, min(l0 + l_block, self.left), r0, min(r0 + r_block, self.right), self.right)

    def _coords(self, start: int, stop: int, shape: tuple[int, ...]) -> list[np.ndarray]:
        return list(np.unravel_index(np.arange(start, stop), shape)) if shape else []

    def synthetic(self, relaxed, encoding: OneHot) -> Iterator[tuple[Tile, object]]:
        """(tile, normalized answers lb x rb in the array module) for every tile, on the relaxed data."""
        x = xp()
        blocks = [relaxed[:, encoding.block(a)] for a in self.threshold.attributes]
        factors = [1 - w for w in blocks] if self.negated else blocks
        n_rows = relaxed.shape[0]

        def product(mask: int, offset: int, coords: list[np.ndarray]):
            out = None
            for j in positions(mask, self.k):
                col = factors[offset + j][:, x.asarray(coords[j])]
                out = col if out is None else out * col
            return out

        right = None
        for tile in self.tiles(n_rows):
            if right is None or right[0] != (tile.r0, tile.r1):
                coords = self._coords(tile.r0, tile.r1, self.right_shape)
                products = {b: product(b, self.split, coords) for terms in self.groups.values() for b, _ in terms if b}
                combined = {}
                for a, terms in self.groups.items():
                    total = x.zeros((n_rows, tile.r1 - tile.r0), dtype=relaxed.dtype)
                    for b, c in terms:
                        total += c * products[b] if b else c
                    combined[a] = total
                right = ((tile.r0, tile.r1), combined)
            combined = right[1]
            left = self._coords(tile.l0, tile.l1, self.left_shape)
            out = x.zeros((tile.l1 - tile.l0, tile.r1 - tile.r0), dtype=relaxed.dtype)
            ups, downs = [], []
            for a, terms in self.groups.items():
                if not a:
                    out += combined[a].mean(axis=0)[None, :]
                elif all(b == 0 for b, _ in terms):
                    out += (product(a, 0, left).mean(axis=0) * sum(c for _, c in terms))[:, None]
                else:
                    ups.append(product(a, 0, left))
                    downs.append(combined[a])
            if ups:
                out += x.concatenate(ups, axis=0).T @ x.concatenate(downs, axis=0) / n_rows
            yield tile, out

    # --- on the data --------------------------------------------------------------
    def attach(self, counts: SparseCounts) -> None:
        """Use these exact counts (the threshold's k-way marginal) for `exact` answers."""
        if counts.clique != self.threshold.attributes:
            raise ValueError("counts are for another clique")
        full = (1 << self.k) - 1
        self._data_terms = sorted(self.threshold.function.moebius().items())
        self._sparse = counts
        for mask, _ in self._data_terms:
            size = prod(self.shape[j] for j in positions(mask, self.k))
            if mask == full and size > DENSE_LIMIT:
                continue  # the top term is read from the sparse cells
            if size > SUBMARGINAL_LIMIT:
                raise MemoryError(f"a {size}-cell sub-marginal of {self.threshold.attributes} is too large")
            self._dense[mask] = counts.project(positions(mask, self.k))

    def exact_tile(self, tile: Tile) -> np.ndarray:
        """Exact integer answers (lb x rb) of the tile."""
        if self._data_terms is None or self._sparse is None:
            raise RuntimeError("attach the data counts first")
        left = self._coords(tile.l0, tile.l1, self.left_shape)
        right = self._coords(tile.r0, tile.r1, self.right_shape)
        lb, rb = tile.l1 - tile.l0, tile.r1 - tile.r0
        out = np.zeros((lb, rb), dtype=np.int64)
        for mask, c in self._data_terms:
            if mask not in self._dense:
                self._add_sparse(out, tile, c)
                continue
            a, b = mask & ((1 << self.split) - 1), mask >> self.split
            la = positions(a, self.k)
            rbp = positions(b, self.k)
            rows = _subindex(left, self.left_shape, la, lb)
            cols = _subindex(right, self.right_shape, rbp, rb)
            table = self._dense[mask].reshape(
                prod(self.left_shape[j] for j in la), prod(self.right_shape[j] for j in rbp)
            )
            out += c * table[np.ix_(rows, cols)]
        return out

    def _add_sparse(self, out: np.ndarray, tile: Tile, c: int) -> None:
        cells, counts = self._sparse.cells, self._sparse.counts
        lo, hi = np.searchsorted(cells, [tile.l0 * self.right, tile.l1 * self.right])
        l, r = np.divmod(cells[lo:hi], self.right)
        keep = (r >= tile.r0) & (r < tile.r1)
        out[l[keep] - tile.l0, r[keep] - tile.r0] += c * counts[lo:hi][keep]

    def exact(self, local: np.ndarray) -> np.ndarray:
        """Exact integer answers of the given consistent queries (local ids)."""
        if self._data_terms is None or self._sparse is None:
            raise RuntimeError("attach the data counts first")
        local = np.asarray(local, dtype=np.int64)
        coords = np.unravel_index(local, self.shape)
        out = np.zeros(local.shape, dtype=np.int64)
        for mask, c in self._data_terms:
            which = positions(mask, self.k)
            if mask not in self._dense:
                out += c * self._sparse.lookup(local)
            else:
                out += c * self._dense[mask][_subindex(list(coords), self.shape, which, local.size)]
        return out

