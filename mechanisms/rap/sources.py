"""The workloads RAP answers, behind one interface: implicit thresholds or explicit blocks.

A `QuerySource` gives RAP what it needs of a workload, in normalized units
(answers divided by the row count) for the relaxed data and in exact integer
counts for the data: a streamed scan of all queries (for private selection), the
exact answers of chosen queries (to measure them), and their surrogates (to fit
them). Query ids are global ints; exact answers never leave RAP's DP primitives.
"""

from __future__ import annotations

from typing import Iterator, Protocol

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.measurement import query_step
from mechanisms.rap.counts import CountSource
from mechanisms.rap.encoding import OneHot
from mechanisms.rap.evaluation import DEFAULT_MEMORY, ThresholdEvaluator, tile_for_memory
from mechanisms.rap.queries import QuerySet
from mechanisms.rap.relaxed import block_answers
from mechanisms.rap.workloads import ThresholdWorkload
from mechanisms.workload import Block

# (global ids, exact integer counts, normalized answers on D') of one chunk of queries.
Chunk = tuple[np.ndarray, np.ndarray, np.ndarray]


def segments(offsets: np.ndarray, ids: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(segment, positions in ids, ids local to the segment) for ids grouped by offsets."""
    ids = np.asarray(ids, dtype=np.int64)
    which = np.searchsorted(offsets, ids, side="right") - 1
    for w in np.unique(which):
        pick = np.flatnonzero(which == w)
        yield int(w), pick, ids[pick] - offsets[w]


class QuerySource(Protocol):
    domain: Domain
    n_queries: int
    attributes: tuple[str, ...]
    bounded: bool  # every query is a 0/1 indicator, so normalized answers lie in [0, 1]

    def prepare(self, counts: CountSource) -> None: ...
    def scan(self, relaxed, encoding: OneHot) -> Iterator[Chunk]: ...
    def exact(self, ids: np.ndarray) -> np.ndarray: ...
    def add_to(self, queries: QuerySet, ids: np.ndarray) -> np.ndarray: ...


class ThresholdQueries:
    """All consistent queries of a `ThresholdWorkload`, scanned in tiles sized to `memory_bytes`."""

    bounded = True

    def __init__(self, workload: ThresholdWorkload, memory_bytes: int = DEFAULT_MEMORY):
        tile = tile_for_memory(memory_bytes)
        self.workload = workload
        self.domain = workload.domain
        self.n_queries = workload.n_queries
        self.attributes = self.domain.canonical(a for t in workload.thresholds for a in t.attributes)
        self.evaluators = [ThresholdEvaluator(t, s, tile) for t, s in zip(workload.thresholds, workload.shapes)]

    def prepare(self, counts: CountSource) -> None:
        cliques = [t.attributes for t in self.workload.thresholds]
        marginals = counts.marginals(cliques)
        for ev, clique in zip(self.evaluators, cliques):
            ev.attach(marginals[clique])

    def scan(self, relaxed, encoding: OneHot) -> Iterator[Chunk]:
        for i, ev in enumerate(self.evaluators):
            offset = int(self.workload.offsets[i])
            for tile, synthetic in ev.synthetic(relaxed, encoding):
                yield offset + tile.local_ids(), ev.exact_tile(tile).ravel(), to_numpy(synthetic).ravel()

    def exact(self, ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=np.int64)
        for i, pick, local in segments(self.workload.offsets, ids):
            out[pick] = self.evaluators[i].exact(local)
        return out

    def add_to(self, queries: QuerySet, ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=np.int64)
        for i, pick, local in segments(self.workload.offsets, ids):
            out[pick] = queries.add_threshold(self.workload.thresholds[i], self.workload.targets(i, local))
        return out


class BlockQueries:
    """Every row of a list of count blocks (each row a query of sensitivity <= 1)."""

    bounded = False

    def __init__(self, domain: Domain, blocks: list[Block]):
        for b in blocks:
            if b.sensitivity(domain, 2) > 1.0 + 1e-9:
                raise ValueError(f"block {b.name!r} has sensitivity above 1: RAP answers counting queries")
            step = query_step(b.matrix(domain))
            if step.denominator != 1:
                raise ValueError(f"block {b.name!r} has non-integer answers: RAP answers counting queries")
        self.domain, self.blocks = domain, list(blocks)
        sizes = [b.num_rows(domain) for b in self.blocks]
        self.offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.n_queries = int(self.offsets[-1])
        self.attributes = domain.canonical(a for b in self.blocks for a in b.attributes(domain))
        self._exact: list[np.ndarray] = []

    def prepare(self, counts: CountSource) -> None:
        cliques = [b.attributes(self.domain) for b in self.blocks]
        marginals = counts.marginals(cliques)
        self._exact = []
        for b, clique in zip(self.blocks, cliques):
            dense = marginals[clique].project(tuple(range(len(clique)))).astype(np.float64)
            # integer entries and counts below 2^53: the float product is the exact integer
            self._exact.append(np.rint(to_numpy(b.matrix(self.domain, clique).matvec(dense))).astype(np.int64))

    def scan(self, relaxed, encoding: OneHot) -> Iterator[Chunk]:
        for i, b in enumerate(self.blocks):
            ids = np.arange(self.offsets[i], self.offsets[i + 1], dtype=np.int64)
            yield ids, self._exact[i], to_numpy(block_answers(relaxed, encoding, b))

    def exact(self, ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=np.int64)
        for w, pick, rows in segments(self.offsets, ids):
            out[pick] = self._exact[w][rows]
        return out

    def add_to(self, queries: QuerySet, ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=np.int64)
        for w, pick, rows in segments(self.offsets, ids):
            out[pick] = queries.add_block(self.blocks[w], rows)
        return out
