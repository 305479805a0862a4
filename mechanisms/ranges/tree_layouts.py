"""Trees of nested intervals over an ordered attribute of n bins, the layout range strategies hang off.

Depth 0 is the root [0, n), every node's children partition it, and every bin is a leaf (a node of
one bin) at some depth. `padded_tree` pads n up to a power of the branching (Hay et al.'s H_b),
`balanced_tree` splits each node as evenly as it can; `tree_from_spec` rebuilds a stored layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

@dataclass(frozen=True, eq=False)
class Tree:
    """Nested intervals of [0, n) by depth: `lo[d]`, `hi[d]` are the sorted nodes at depth d.

    `recipe` is (layout, branching) for trees built by `padded_tree` or `balanced_tree`.
    """

    n: int
    lo: tuple[np.ndarray, ...]
    hi: tuple[np.ndarray, ...]
    recipe: tuple[str, int] | None = None

    def spec(self) -> dict:
        """A JSON-able description (inverse: `tree_from_spec`)."""
        if self.recipe is not None:
            return {"n": self.n, "layout": self.recipe[0], "branching": self.recipe[1]}
        return {"n": self.n, "lo": [a.tolist() for a in self.lo], "hi": [a.tolist() for a in self.hi]}

    @property
    def depth(self) -> int:
        """Number of levels below the root."""
        return len(self.lo) - 1

    @cached_property
    def parent(self) -> tuple[np.ndarray, ...]:
        """parent[d][i]: index at depth d−1 of node i at depth d (parent[0] is empty)."""
        out = [np.zeros(0, dtype=np.int64)]
        for d in range(1, len(self.lo)):
            out.append(np.searchsorted(self.lo[d - 1], self.lo[d], side="right") - 1)
        return tuple(out)

    @cached_property
    def children(self) -> tuple[np.ndarray, ...]:
        """children[d][i]: number of children of node i at depth d."""
        out = []
        for d in range(len(self.lo)):
            if d + 1 < len(self.lo):
                out.append(np.bincount(self.parent[d + 1], minlength=self.lo[d].size))
            else:
                out.append(np.zeros(self.lo[d].size, dtype=np.int64))
        return tuple(out)

    @cached_property
    def node_at(self) -> tuple[np.ndarray, ...]:
        """node_at[d][t]: index of the depth-d node containing bin t, or −1."""
        out = []
        for lo, hi in zip(self.lo, self.hi):
            arr = np.full(self.n, -1, dtype=np.int64)
            sizes = hi - lo
            idx = np.repeat(np.arange(lo.size), sizes)
            arr[np.arange(idx.size) - np.repeat(np.cumsum(sizes) - sizes, sizes) + np.repeat(lo, sizes)] = idx
            out.append(arr)
        return tuple(out)

    @cached_property
    def inner(self) -> tuple[np.ndarray, ...]:
        """inner[d]: mask of the depth-d nodes that have children."""
        return tuple(c > 0 for c in self.children)

    @cached_property
    def _groups(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
        """Per depth d ≥ 1: (first index of each sibling group, its parent, first sibling of each node)."""
        out = [(np.zeros(0, dtype=np.int64),) * 3]
        for d in range(1, len(self.lo)):
            par = self.parent[d]
            starts = np.flatnonzero(np.concatenate([[True], par[1:] != par[:-1]]))
            first = np.repeat(starts, np.diff(np.append(starts, par.size)))
            out.append((starts, par[starts], first))
        return tuple(out)

    def child_sums(self, values: np.ndarray, d: int) -> np.ndarray:
        """Σ over the children (depth d + 1, along the last axis) into the depth-d nodes."""
        starts, owners, _ = self._groups[d + 1]
        out = np.zeros(values.shape[:-1] + (self.lo[d].size,))
        if starts.size:
            out[..., owners] = np.add.reduceat(values, starts, axis=-1)
        return out

    def sibling_cumsum(self, values: np.ndarray, d: int) -> np.ndarray:
        """Exclusive cumulative sums of `values` over each depth-d node's earlier siblings."""
        cs = np.cumsum(values) - values
        return cs - cs[self._groups[d][2]]

    @cached_property
    def inner_positions(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
        """Per depth d < depth: bins t inside inner depth-d nodes, their child c and node v."""
        out = []
        for d in range(len(self.lo) - 1):
            node = self.node_at[d]
            t = np.flatnonzero(node >= 0)
            t = t[self.inner[d][node[t]]]
            c = self.node_at[d + 1][t]
            out.append((t, c, self.parent[d + 1][c]))
        return tuple(out)

    @cached_property
    def coverage(self) -> np.ndarray:
        """(depth + 1) × n: 1 where a depth-d node contains bin t."""
        return np.stack([(a >= 0).astype(float) for a in self.node_at])

    def intervals(self, a: np.ndarray, b: np.ndarray) -> list[_IntervalGroup]:
        """The weight-independent part of `interval_variances`, cached for repeated workloads."""
        key = (a.tobytes(), b.tobytes())
        cache = self.__dict__.setdefault("_interval_cache", {})
        if key not in cache:
            if len(cache) >= 16:
                cache.pop(next(iter(cache)))
            cache[key] = _interval_groups(self, a, b)
        return cache[key]

    @cached_property
    def leaf_nodes(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(depth, node indices, bins) of the leaves at each depth."""
        out = []
        for d in range(len(self.lo)):
            leaf = np.flatnonzero(self.children[d] == 0)
            if leaf.size:
                out.append((d, leaf, self.lo[d][leaf]))
        return out

    def _check(self) -> "Tree":
        for d, (lo, hi) in enumerate(zip(self.lo, self.hi)):
            leaves = self.children[d] == 0
            if np.any(hi[leaves] - lo[leaves] != 1):
                raise ValueError("every leaf of a range tree must be a single bin")
            if d and np.any(self.lo[d - 1][self.parent[d]] > lo) | np.any(self.hi[d - 1][self.parent[d]] < hi):
                raise ValueError("nodes must nest inside their parents")
        return self


def tree_from_spec(spec: dict) -> Tree:
    if "layout" in spec:
        build = padded_tree if spec["layout"] == "padded" else balanced_tree
        return build(int(spec["n"]), int(spec["branching"]))
    arrays = [tuple(np.asarray(v, dtype=np.int64) for v in spec[k]) for k in ("lo", "hi")]
    return Tree(int(spec["n"]), arrays[0], arrays[1])._check()


def padded_tree(n: int, branching: int) -> Tree:
    """The complete b-ary tree over b^h ≥ n bins, restricted to [0, n): every bin at depth h.

    A node that keeps a single child in [0, n) is repeated one level down, so
    every bin lies in exactly one node per depth (equal column norms).
    """
    if branching < 2:
        raise ValueError("a range tree needs a branching factor of at least 2")
    h = 0
    while branching**h < n:
        h += 1
    lo, hi = [], []
    for d in range(h + 1):
        size = branching ** (h - d)
        starts = np.arange(0, n, size, dtype=np.int64)
        lo.append(starts)
        hi.append(np.minimum(starts + size, n))
    return Tree(n, tuple(lo), tuple(hi), ("padded", branching))._check()


def balanced_tree(n: int, branching: int) -> Tree:
    """Cut every node of s > b bins at a + ⌈i·s/b⌉ (b parts whose sizes differ by at most
    one, spread evenly); a node of at most b bins has its bins as children. Leaves may sit
    at different depths. This is the layout of the H_b and HB strategies in HDMM's
    published 1-D comparisons (it reproduces their HB errors at n = 512 and 2048)."""
    if branching < 2:
        raise ValueError("a range tree needs a branching factor of at least 2")
    lo, hi = [np.zeros(1, dtype=np.int64)], [np.full(1, n, dtype=np.int64)]
    while True:
        starts, ends = [], []
        for a, b in zip(lo[-1].tolist(), hi[-1].tolist()):
            size = b - a
            if size == 1:
                continue
            parts = min(size, branching)
            edges = a - (-np.arange(parts + 1, dtype=np.int64) * size // parts)
            starts.append(edges[:-1])
            ends.append(edges[1:])
        if not starts:
            break
        lo.append(np.concatenate(starts))
        hi.append(np.concatenate(ends))
    return Tree(n, tuple(lo), tuple(hi), ("balanced", branching))._check()


@dataclass(frozen=True)
class _IntervalGroup:
    """Intervals whose lowest common node is at one depth: that node, and for inner nodes
    the children holding the two ends (ci, cj), whether the right end closes cj, and the
    position to read cj's prefix arrays at."""

    depth: int
    rows: np.ndarray
    node: np.ndarray
    inner: np.ndarray
    a: np.ndarray
    ci: np.ndarray
    cj: np.ndarray
    full: np.ndarray
    bpos: np.ndarray


def _interval_groups(tree: Tree, a: np.ndarray, b: np.ndarray) -> list[_IntervalGroup]:
    last = b - 1
    lca = np.zeros(a.size, dtype=np.int64)
    for d in range(1, tree.depth + 1):
        na, nb = tree.node_at[d][a], tree.node_at[d][last]
        lca[(na == nb) & (na >= 0)] = d
    out = []
    for d in np.unique(lca):
        rows = np.flatnonzero(lca == d)
        node = tree.node_at[d][a[rows]]
        inner = tree.inner[d][node]
        ai, bi = a[rows][inner], b[rows][inner]
        if inner.any():
            ci, cj = tree.node_at[d + 1][ai], tree.node_at[d + 1][bi - 1]
            full = bi == tree.hi[d + 1][cj]
            bpos = np.where(full, ai, bi)  # any valid index when the right end closes cj
        else:
            ci = cj = bpos = np.zeros(0, dtype=np.int64)
            full = np.zeros(0, dtype=bool)
        out.append(_IntervalGroup(int(d), rows, node, inner, ai, ci, cj, full, bpos))
    return out


__all__ = ["Tree", "balanced_tree", "padded_tree", "tree_from_spec"]
