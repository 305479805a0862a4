"""Exact data access for RAP: sparse marginal counts, never released.

RAP needs the exact answers of its workload queries inside its DP primitives
(selection scores and the measured answers). Every threshold and block query is
a function of the marginal over its attributes, and a marginal of n records has
at most n nonzero cells, so counts travel as `SparseCounts` (sorted flat cell ids
and their counts) even when the dense marginal would not fit in memory.

Two sources: `RecordCounts` (integer-encoded records, for benchmarks and tests)
and `MarginalCounts` (a callback returning dense count vectors per clique, such
as `DuckDBBackend.marginals` bound to a table: GROUP BY in the database).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from mechanisms.domain import Domain

Clique = tuple[str, ...]


@dataclass(frozen=True)
class SparseCounts:
    """Exact counts of the nonzero cells of one marginal (flat ids in C order, sorted)."""

    clique: Clique
    shape: tuple[int, ...]
    cells: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_dense(cls, clique: Clique, shape: tuple[int, ...], dense: np.ndarray) -> "SparseCounts":
        dense = np.asarray(dense).ravel()
        if not np.issubdtype(dense.dtype, np.integer):
            raise TypeError("marginal counts must be integers")
        cells = np.flatnonzero(dense)
        return cls(clique, shape, cells.astype(np.int64), dense[cells].astype(np.int64))

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def project(self, positions: tuple[int, ...]) -> np.ndarray:
        """The dense marginal (flat, C order) over the attributes at `positions` of the clique."""
        sub = tuple(self.shape[p] for p in positions)
        if positions:
            full = np.unravel_index(self.cells, self.shape)
            flat = np.ravel_multi_index(tuple(full[p] for p in positions), sub)
        else:
            flat = np.zeros(self.cells.size, dtype=np.int64)
        out = np.zeros(int(np.prod(sub, dtype=np.int64)), dtype=np.int64)
        np.add.at(out, flat, self.counts)
        return out

    def lookup(self, flat: np.ndarray) -> np.ndarray:
        """Counts of the given flat cell ids (0 for empty cells)."""
        flat = np.asarray(flat, dtype=np.int64)
        if self.cells.size == 0:
            return np.zeros(flat.shape, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.cells, flat), self.cells.size - 1)
        return np.where(self.cells[pos] == flat, self.counts[pos], 0)


class CountSource(Protocol):
    """Exact sparse marginals of the protected data (used only inside DP primitives)."""

    domain: Domain

    def marginals(self, cliques: list[Clique]) -> dict[Clique, SparseCounts]: ...


class RecordCounts:
    """Marginals of integer-encoded records (n x len(domain), columns in domain order)."""

    def __init__(self, domain: Domain, records: np.ndarray):
        self.domain = domain
        self.records = np.asarray(records, dtype=np.int64)
        if self.records.ndim != 2 or self.records.shape[1] != len(domain):
            raise ValueError("records must be an (n x number of attributes) integer array")
        if np.any(self.records < 0) or np.any(self.records >= np.asarray(domain.sizes)):
            raise ValueError("a record holds a bin index outside the domain")

    def marginals(self, cliques: list[Clique]) -> dict[Clique, SparseCounts]:
        out = {}
        for clique in cliques:
            shape = self.domain.shape(clique)
            columns = [self.domain.attributes.index(a) for a in clique]
            flat = np.ravel_multi_index(tuple(self.records[:, c] for c in columns), shape) if clique else (
                np.zeros(len(self.records), dtype=np.int64)
            )
            cells, counts = np.unique(flat, return_counts=True)
            out[clique] = SparseCounts(clique, shape, cells.astype(np.int64), counts.astype(np.int64))
        return out


class MarginalCounts:
    """Marginals from a callback giving dense integer count vectors per clique (one scan for all)."""

    def __init__(self, domain: Domain, fetch: Callable[[list[Clique]], dict[Clique, np.ndarray]]):
        self.domain = domain
        self.fetch = fetch

    def marginals(self, cliques: list[Clique]) -> dict[Clique, SparseCounts]:
        dense = self.fetch(list(dict.fromkeys(cliques)))
        return {c: SparseCounts.from_dense(c, self.domain.shape(c), dense[c]) for c in cliques}
