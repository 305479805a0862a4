"""Graph sequences arriving online, their node neighbours, and declared degree bounds.

A graph sequence (S004 §6.2.1, L1205–1213) is G_1 ⊆ G_2 ⊆ … ⊆ G_T: node v arrives in
window v.time, and an edge arrives with its *later* endpoint (∂E_t holds the edges with
an endpoint in ∂V_t and the other in V_t), so its window is max(t_src, t_dst); nothing
ever leaves. Node DP (S004 §6.2.2, L1215–1221): two sequences are neighbours when one
is the other with one node and all its edges removed, in every G_t (`without`).

A `DegreeBound` is the public bound of Def 6.2.1 (L1233–1239): every node's degree ≤ D
in every G_t (undirected), or in-degree ≤ D_in and out-degree ≤ D_out (directed). The
seed assumes the domain holds only such sequences (L1241); `DegreeBound.check` is how a
caller refuses one that does not (`projection` is the other way: force the bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["DEGREE", "IN", "KINDS", "OUT", "DegreeBound", "GraphSequence"]

DEGREE, OUT, IN = "degree", "out", "in"
KINDS = (DEGREE, OUT, IN)


@dataclass(frozen=True, eq=False)
class GraphSequence:
    """Nodes 0..n−1 with arrival windows `times` (1..horizon) and edges `src` → `dst`.

    Undirected unless `directed`: an undirected edge is stored once, in either orientation.
    Self-loops and repeated edges are refused.
    """

    times: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    horizon: int
    directed: bool = False

    def __post_init__(self):
        for name in ("times", "src", "dst"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64).ravel())
        n = self.times.size
        if self.src.size != self.dst.size:
            raise ValueError("src and dst must have the same length")
        if n and (self.times.min() < 1 or self.times.max() > self.horizon):
            raise ValueError(f"arrival windows must lie in 1..{self.horizon}")
        if self.src.size:
            if min(self.src.min(), self.dst.min()) < 0 or max(self.src.max(), self.dst.max()) >= n:
                raise ValueError("edges must join nodes 0..n−1")
            if np.any(self.src == self.dst):
                raise ValueError("self-loops are not allowed")
            pairs = self._pairs()
            keys = np.sort(pairs[:, 0] * n + pairs[:, 1])  # one integer per edge: a sort, not a row-wise unique
            if np.any(keys[1:] == keys[:-1]):
                raise ValueError("repeated edges are not allowed")

    def _pairs(self) -> np.ndarray:
        pairs = np.stack([self.src, self.dst], axis=1)
        return pairs if self.directed else np.sort(pairs, axis=1)

    @property
    def nodes(self) -> int:
        return self.times.size

    @cached_property
    def edge_times(self) -> np.ndarray:
        """Each edge's window: that of its later endpoint (∂E_t)."""
        return np.maximum(self.times[self.src], self.times[self.dst])

    @cached_property
    def present(self) -> np.ndarray:
        """(horizon, nodes): whether node x is in G_t."""
        return self.times[None, :] <= np.arange(1, self.horizon + 1)[:, None]

    def degrees(self, kind: str) -> np.ndarray:
        """(horizon, nodes): each node's degree of `kind` in G_t (0 before it arrives).

        `DEGREE` for undirected sequences; `OUT` or `IN` for directed ones.
        """
        if (kind == DEGREE) == self.directed or kind not in KINDS:
            raise ValueError(f"a {'directed' if self.directed else 'undirected'} sequence has no {kind!r} degree")
        ends = {DEGREE: [self.src, self.dst], OUT: [self.src], IN: [self.dst]}[kind]
        counts = np.zeros((self.horizon, self.nodes), dtype=np.int64)
        for end in ends:
            np.add.at(counts, (self.edge_times - 1, end), 1)
        return np.cumsum(counts, axis=0)

    def without(self, node: int) -> "GraphSequence":
        """The node neighbour: `node` and its edges removed; later nodes renumbered down by one."""
        keep = (self.src != node) & (self.dst != node)
        shift = lambda ids: ids - (ids > node)  # noqa: E731
        return GraphSequence(np.delete(self.times, node), shift(self.src[keep]), shift(self.dst[keep]),
                             self.horizon, self.directed)

    def coarsened(self, every: int) -> "GraphSequence":
        """Windows merged `every` at a time (window t becomes ⌈t/every⌉): one release per `every` windows."""
        return GraphSequence(-(-self.times // every), self.src, self.dst, -(-self.horizon // every), self.directed)

    def undirected(self) -> "GraphSequence":
        """The same nodes with edge directions ignored (a reciprocal pair becomes one edge)."""
        pairs = np.unique(np.sort(np.stack([self.src, self.dst], axis=1), axis=1), axis=0)
        return GraphSequence(self.times, pairs[:, 0], pairs[:, 1], self.horizon, directed=False)


@dataclass(frozen=True)
class DegreeBound:
    """Def 6.2.1's public bound: `DegreeBound(D)`, or `DegreeBound(in_degree=D_in, out_degree=D_out)`.

    For a statistic counting degrees of one kind, `own(kind)` bounds the counted degree of
    a node, and `neighbours(kind)` how many *other* nodes' counted degrees one node's edges
    touch: D and D (undirected); D_out and D_in for out-degrees (a node's in-neighbours'
    out-degrees); D_in and D_out for in-degrees. `edges` bounds a node's edges: D, or D_in + D_out.
    """

    degree: int | None = None
    in_degree: int | None = None
    out_degree: int | None = None

    def __post_init__(self):
        undirected = self.degree is not None and self.in_degree is None and self.out_degree is None
        directed = self.degree is None and self.in_degree is not None and self.out_degree is not None
        if not (undirected or directed) or min(v for v in (self.degree, self.in_degree, self.out_degree)
                                               if v is not None) < 0:
            raise ValueError("declare D ≥ 0 (undirected) or both D_in, D_out ≥ 0 (directed)")

    @property
    def directed(self) -> bool:
        return self.degree is None

    @property
    def edges(self) -> int:
        return self.degree if not self.directed else self.in_degree + self.out_degree

    def own(self, kind: str) -> int:
        return {DEGREE: self.degree, OUT: self.out_degree, IN: self.in_degree}[self._kind(kind)]

    def neighbours(self, kind: str) -> int:
        return {DEGREE: self.degree, OUT: self.in_degree, IN: self.out_degree}[self._kind(kind)]

    def _kind(self, kind: str) -> str:
        if (kind == DEGREE) == self.directed or kind not in KINDS:
            raise ValueError(f"a {'directed' if self.directed else 'undirected'} bound has no {kind!r} degree")
        return kind

    def check(self, sequence: GraphSequence) -> None:
        """Raise unless every G_t of `sequence` meets the bound (its final graph suffices: degrees only grow)."""
        if sequence.directed != self.directed:
            raise ValueError("the bound and the sequence disagree on being directed")
        for kind in (OUT, IN) if self.directed else (DEGREE,):
            found = int(sequence.degrees(kind)[-1].max(initial=0)) if sequence.horizon else 0
            if found > self.own(kind):
                raise ValueError(f"a node has {kind} degree {found} > the declared bound {self.own(kind)}")
