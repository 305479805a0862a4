"""Junction trees over attribute cliques: greedy elimination, a size estimate, the tree.

A graphical model over measured cliques needs a junction tree: triangulate the
graph that links every two attributes sharing a clique, take the maximal cliques
of the triangulated graph, and join them by a maximum-weight spanning tree
(weight = separator size), which has the running-intersection property.

The triangulation eliminates attributes greedily, each time the one whose
elimination creates the smallest table (the product of the domain sizes of it
and its remaining neighbours); ties go to the first attribute in domain order,
so the tree is a deterministic function of the cliques. `model_size` runs the
same elimination on bitmasks only, so the memory a model would need is known
before any table is built (AIM asks this for hundreds of candidate cliques per
round).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property
from math import prod
from typing import Iterable, Sequence

import networkx as nx

from mechanisms.domain import Domain

Clique = tuple[str, ...]

BYTES_PER_CELL = 8


def _masks(domain: Domain, cliques: Iterable[Iterable[str]]) -> list[int]:
    """Adjacency bitmask of every attribute (bit i = attribute i of the domain)."""
    index = {a: i for i, a in enumerate(domain.attributes)}
    adjacency = [0] * len(domain)
    for clique in cliques:
        bits = 0
        for a in clique:
            bits |= 1 << index[a]
        for a in clique:
            adjacency[index[a]] |= bits & ~(1 << index[a])
    return adjacency


def _eliminate(domain: Domain, adjacency: Sequence[int]) -> tuple[list[int], list[int]]:
    """Greedy elimination: (order of attribute indices, bitmask of each elimination clique)."""
    sizes = domain.sizes
    adjacency = list(adjacency)
    alive = (1 << len(sizes)) - 1

    def cost(v: int) -> int:
        bits, total = adjacency[v] & alive, sizes[v]
        while bits:
            low = bits & -bits
            total *= sizes[low.bit_length() - 1]
            bits ^= low
        return total

    costs = [cost(v) for v in range(len(sizes))]
    order: list[int] = []
    formed: list[int] = []
    for _ in range(len(sizes)):
        best = min((v for v in range(len(sizes)) if alive >> v & 1), key=costs.__getitem__)
        neighbours = adjacency[best] & alive & ~(1 << best)
        formed.append(neighbours | (1 << best))
        alive &= ~(1 << best)
        order.append(best)
        bits = neighbours
        while bits:  # fill-in: the remaining neighbours become a clique
            low = bits & -bits
            u = low.bit_length() - 1
            adjacency[u] |= neighbours & ~low
            bits ^= low
        bits = neighbours
        while bits:
            low = bits & -bits
            u = low.bit_length() - 1
            costs[u] = cost(u)
            bits ^= low
    return order, formed


def _maximal(formed: list[int]) -> list[int]:
    """The elimination cliques not contained in another one (the maximal cliques), in order."""
    out: list[int] = []
    for i, c in enumerate(formed):
        if any(c & d == c and (c != d or j < i) for j, d in enumerate(formed) if j != i):
            continue
        out.append(c)
    return out


def _cells(domain: Domain, mask: int) -> int:
    return prod(n for i, n in enumerate(domain.sizes) if mask >> i & 1)


def model_size(domain: Domain, cliques: Iterable[Iterable[str]]) -> int:
    """Cells of the junction tree the model over `cliques` would have (no table is built)."""
    _, formed = _eliminate(domain, _masks(domain, cliques))
    return sum(_cells(domain, m) for m in _maximal(formed))


def model_sizes(
    domain: Domain,
    cliques: Iterable[Iterable[str]],
    extra: Iterable[Clique],
    cache: dict[tuple[int, ...], int] | None = None,
) -> dict[Clique, int]:
    """model_size(cliques + [r]) for every r in `extra`, sharing work between candidates.

    Sizes are keyed by the graph (its adjacency bitmasks): candidates adding the
    same edges share one elimination, and a `cache` kept across calls (AIM's
    rounds) reuses every graph seen before.
    """
    base = _masks(domain, cliques)
    index = {a: i for i, a in enumerate(domain.attributes)}
    cache = {} if cache is None else cache
    out = {}
    for r in extra:
        bits = sum(1 << index[a] for a in r)
        adjacency = tuple(m | (bits & ~(1 << i)) if bits >> i & 1 else m for i, m in enumerate(base))
        if adjacency not in cache:
            _, formed = _eliminate(domain, adjacency)
            cache[adjacency] = sum(_cells(domain, m) for m in _maximal(formed))
        out[r] = cache[adjacency]
    return out


def megabytes(cells: int) -> float:
    """Memory of `cells` float64 table entries, in MB (2^20 bytes)."""
    return cells * BYTES_PER_CELL / 2**20


@dataclass(frozen=True)
class JunctionTree:
    """Maximal cliques joined into a tree, rooted at clique 0.

    `parent[i]` is the parent of clique i (-1 for the root), `separators[i]` the
    attributes clique i shares with its parent, `order` a pre-order (parents
    before children), `elimination` the greedy elimination order of attributes.
    Cliques and separators list attributes in domain order.
    """

    domain: Domain
    cliques: tuple[Clique, ...]
    parent: tuple[int, ...]
    separators: tuple[Clique, ...]
    order: tuple[int, ...]
    elimination: tuple[str, ...]

    @classmethod
    def build(cls, domain: Domain, cliques: Iterable[Iterable[str]]) -> "JunctionTree":
        """The junction tree of the model over `cliques` (every attribute of the domain is in it)."""
        order, formed = _eliminate(domain, _masks(domain, cliques))
        names = domain.attributes
        maximal = [tuple(names[i] for i in range(len(names)) if m >> i & 1) for m in _maximal(formed)]
        root = max(range(len(maximal)), key=lambda i: (domain.size(maximal[i]), -i))
        maximal.insert(0, maximal.pop(root))
        graph = nx.Graph()
        graph.add_nodes_from(range(len(maximal)))
        for i in range(len(maximal)):
            for j in range(i + 1, len(maximal)):
                graph.add_edge(i, j, weight=len(set(maximal[i]) & set(maximal[j])))
        tree = nx.maximum_spanning_tree(graph)
        parent = [-1] * len(maximal)
        pre: list[int] = []
        queue = deque([0])
        seen = {0}
        while queue:
            i = queue.popleft()
            pre.append(i)
            for j in sorted(tree.neighbors(i)):
                if j not in seen:
                    seen.add(j)
                    parent[j] = i
                    queue.append(j)
        separators = tuple(
            () if p < 0 else tuple(a for a in maximal[i] if a in maximal[p]) for i, p in enumerate(parent)
        )
        return cls(domain, tuple(maximal), tuple(parent), separators, tuple(pre), tuple(names[i] for i in order))

    @property
    def size(self) -> int:
        """Total cells of the clique tables."""
        return sum(self.domain.size(c) for c in self.cliques)

    def children(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.cliques]
        for i in self.order[1:]:
            out[self.parent[i]].append(i)
        return out

    def containing(self, attributes: Sequence[str]) -> int | None:
        """Index of the smallest clique containing all `attributes`, or None."""
        wanted = set(attributes)
        found = [i for i, c in enumerate(self.cliques) if wanted <= set(c)]
        return min(found, key=lambda i: self.domain.size(self.cliques[i])) if found else None

    @cached_property
    def _routes(self) -> tuple[list[frozenset[str]], list[list[int]], list[list[int]]]:
        """(attribute sets, all-pairs tree distances, previous hop on the path from a source)."""
        sets = [frozenset(c) for c in self.cliques]
        neighbours: list[list[int]] = [[] for _ in self.cliques]
        for i, p in enumerate(self.parent):
            if p >= 0:
                neighbours[i].append(p)
                neighbours[p].append(i)
        dist, prev = [], []
        for source in range(len(self.cliques)):
            d, back = [-1] * len(self.cliques), [-1] * len(self.cliques)
            d[source] = 0
            queue = deque([source])
            while queue:
                i = queue.popleft()
                for j in neighbours[i]:
                    if d[j] < 0:
                        d[j], back[j] = d[i] + 1, i
                        queue.append(j)
            dist.append(d)
            prev.append(back)
        return sets, dist, prev

    def steiner(self, attributes: Iterable[str]) -> tuple[int, dict[int, int]]:
        """A small connected subtree whose cliques cover `attributes`: (its root, child -> parent).

        The root is a clique covering the most attributes (then the smallest);
        each still-uncovered attribute adds the path to the nearest clique holding one.
        """
        sets, dist, prev = self._routes
        wanted = frozenset(attributes)
        root = max(
            range(len(self.cliques)),
            key=lambda i: (len(wanted & sets[i]), -self.domain.size(self.cliques[i]), -i),
        )
        nodes, up = {root}, {}
        missing = wanted - sets[root]
        while missing:
            _, found, source = min(
                (dist[s][c], c, s) for c in range(len(sets)) if missing & sets[c] for s in nodes
            )
            i = found
            while i not in nodes:
                up[i] = prev[source][i]
                nodes.add(i)
                missing -= sets[i]
                i = prev[source][i]
        return root, up
