"""Time strategies for continual release: matrices over the T per-window differences.

The data of a continual count is the difference sequence (S004 §6.3, Algorithm 5):
Δ_t = f(D_t) − f(D_{t−1}), which for counts over an append-only table is the vector of
cell counts of the rows that arrived in window t. A time strategy is a matrix A over
the T windows; measured as A ⊗ A_cells (`mechanisms.continual.choice` shows the error
factorises), each of its rows is a node total Σ_{s∈[lo, hi)} Δ_s of a `Tree`:

- `identity(T)`: every window once — SENSDIFF (S004 Algorithm 5), whose prefix sums are
  the running totals;
- `tree(T, b, root)`: the b-ary hierarchical strategy (H_b of `mechanisms.ranges.trees`;
  the binary-tree mechanism of Chan–Shi–Song [25] and Dwork et al. [47], cited in S004
  §6.1) over `padded_tree(T, b)`, every depth measured once (the root optionally not).

A row is released at emit `hi`, the end of its time support (`due`): it covers the
newest window and closed ones, never a later window. Measuring every depth once with
the same noise is the even budget split over levels (G3 §3; seed_song §2.4).

Neighbours and sensitivity. Two streams are neighbours when one privacy unit's rows
are added or removed. Under the online-stable bound (each unit keeps its first k rows
*by arrival*, so a kept row is never evicted later; seed_gaps G3 "design trap"), a unit
contributes at most k rows over the whole horizon, in any windows and cells, so the
change u = Δ − Δ′ is non-negative with ‖u‖₁ ≤ k (S004 §6.3: the global sensitivity of
the *whole* difference sequence). For any strategy M, ‖Mu‖_p ≤ Σ_j u_j‖M_{:,j}‖_p
≤ k·max_j ‖M_{:,j}‖_p, with equality at u = k·e_j (all k rows in one window and cell):
the L1 (Laplace) and L2 (Gaussian) sensitivities are k times the largest column norm —
k·L and k·√L for a tree whose every window lies in L measured nodes, k for SENSDIFF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mechanisms.matrices import from_spec, to_spec
from mechanisms.measurement import GAUSSIAN
from mechanisms.ranges.tree_layouts import Tree, padded_tree
from mechanisms.ranges.trees import HierarchicalStrategy

__all__ = ["Node", "TimeStrategy", "identity", "tree"]


@dataclass(frozen=True)
class Node:
    """A node of the time tree: its depth, index at that depth, and windows [lo, hi)."""

    depth: int
    index: int
    lo: int
    hi: int


@dataclass(frozen=True, eq=False)
class TimeStrategy:
    """A hierarchical strategy over the T windows of a horizon, with its release schedule.

    `matrix` is a `HierarchicalStrategy` on a padded tree (every window a leaf at the last
    depth; a stored matrix kind, so the ledger keeps it as `spec()`); its rows are ordered
    by depth, then by position.
    """

    label: str
    matrix: HierarchicalStrategy
    _subtrees: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        if self.tree.recipe is None or self.tree.recipe[0] != "padded":
            raise ValueError("a time strategy lives on a padded tree (`padded_tree`)")

    @property
    def horizon(self) -> int:
        return self.matrix.tree.n

    @property
    def tree(self) -> Tree:
        return self.matrix.tree

    @property
    def weights(self) -> np.ndarray:
        return self.matrix.weights

    def sensitivity(self, noise: str, bound: int = 1) -> float:
        """L2 (Gaussian) or L1 (Laplace) sensitivity when a unit adds at most `bound` rows in all."""
        return bound * self.matrix.sensitivity(2 if noise == GAUSSIAN else 1)

    @cached_property
    def row_start(self) -> np.ndarray:
        """First row of each depth (−1 for an unmeasured depth)."""
        sizes = [lo.size if w > 0 else 0 for lo, w in zip(self.tree.lo, self.weights)]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        return np.where(self.weights > 0, starts, -1)

    def row(self, node: Node) -> int:
        """The row measuring `node` (which must be at a measured depth)."""
        return int(self.row_start[node.depth]) + node.index

    def nodes(self, depth: int, first: int, stop: int) -> list[Node]:
        """The nodes first..stop−1 of one depth."""
        lo, hi = self.tree.lo[depth], self.tree.hi[depth]
        return [Node(depth, i, int(lo[i]), int(hi[i])) for i in range(first, stop)]

    def due(self, t: int) -> list[Node]:
        """The measured nodes released at emit t (1 ≤ t ≤ T): those whose windows end at t."""
        if not 1 <= t <= self.horizon:
            raise ValueError(f"emits run from 1 to {self.horizon}, got {t}")
        return [node for d, hi in enumerate(self.tree.hi) if self.weights[d] > 0
                for i in np.flatnonzero(hi == t) for node in self.nodes(d, int(i), int(i) + 1)]

    def is_full(self, node: Node) -> bool:
        """Whether the node spans b^(height) windows (a padded tree truncates only nodes ending at T)."""
        branching = self.tree.recipe[1]
        return node.hi - node.lo == branching ** (self.tree.depth - node.depth)

    def _decompose(self, now: int, keep) -> list[Node]:
        """[0, now) cut greedily, coarsest depth first, into consecutive nodes accepted by `keep`."""
        out, pos = [], 0
        for d in range(self.tree.depth + 1):
            lo, hi = self.tree.lo[d], self.tree.hi[d]
            first, stop = int(np.searchsorted(lo, pos)), int(np.searchsorted(hi, now, side="right"))
            for node in self.nodes(d, first, stop):
                if not keep(node):
                    break
                out.append(node)
                pos = node.hi
        return out

    def forest(self, now: int) -> list[Node]:
        """The maximal nodes completed by emit `now`: their subtrees hold every release so far."""
        return self._decompose(now, lambda node: True)

    def binary(self, now: int) -> list[Node]:
        """The standard online decomposition of [0, now): the largest full measured nodes
        (the base-b digits of `now`; Chan–Shi–Song's p-sums)."""
        return self._decompose(now, lambda node: self.weights[node.depth] > 0 and self.is_full(node))

    def _spans(self, node: Node) -> list[tuple[int, int, int]]:
        """(depth, first, stop): the nodes of each depth inside `node`."""
        lo = self.tree.lo
        return [(d, int(np.searchsorted(lo[d], node.lo)), int(np.searchsorted(lo[d], node.hi)))
                for d in range(node.depth, self.tree.depth + 1)]

    def subtree(self, node: Node) -> HierarchicalStrategy:
        """The strategy restricted to `node`'s subtree, its windows shifted to start at 0.

        Subtrees of a padded tree with the same depth and width have the same shape, so
        their strategies (and exact solvers) are built once.
        """
        key = (node.depth, node.hi - node.lo)
        if key not in self._subtrees:
            spans = self._spans(node)
            lo = tuple(self.tree.lo[d][a:b] - node.lo for d, a, b in spans)
            hi = tuple(self.tree.hi[d][a:b] - node.lo for d, a, b in spans)
            self._subtrees[key] = HierarchicalStrategy(Tree(node.hi - node.lo, lo, hi), self.weights[node.depth :])
        return self._subtrees[key]

    def subtree_rows(self, node: Node) -> np.ndarray:
        """The rows of `node`'s subtree, in the order of `subtree(node)`'s rows."""
        return np.concatenate([self.row_start[d] + np.arange(a, b) for d, a, b in self._spans(node)
                               if self.weights[d] > 0])

    def spec(self) -> dict:
        return {"label": self.label, "matrix": to_spec(self.matrix)}

    @classmethod
    def from_spec(cls, spec: dict) -> "TimeStrategy":
        return cls(spec["label"], from_spec(spec["matrix"]))


def identity(horizon: int) -> TimeStrategy:
    """SENSDIFF: each window's differences measured once (a root over the leaves, not measured)."""
    t = padded_tree(horizon, max(horizon, 2))
    return TimeStrategy("identity", HierarchicalStrategy(t, [0.0, 1.0] if t.depth else [1.0]))


def tree(horizon: int, branching: int = 2, root: bool = True) -> TimeStrategy:
    """The b-ary tree over the horizon, every depth measured once (the root only if `root`)."""
    t = padded_tree(horizon, branching)
    weights = np.ones(t.depth + 1)
    weights[0] = 1.0 if root or not t.depth else 0.0
    label = f"tree b={branching}" + ("" if root else " (no root)")
    return TimeStrategy(label, HierarchicalStrategy(t, weights))
