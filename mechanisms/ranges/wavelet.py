"""The Haar wavelet strategy (Privelet), generalized to any number of bins.

Rows: the total, and for each internal node v of a binary `balanced_tree`
with halves L and R the difference (|R|·1_L − |L|·1_R)/gcd(|L|, |R|). With n
a power of two and unit weights this is Xiao et al.'s unnormalized Haar matrix
(±1 entries); for any n the rows are orthogonal, so least squares needs no
consistency step: x̂ = Σ_r y_r h_r/(w_r‖h_r‖²) and Var(qᵀx̂) = Σ_r (qᵀh_r / w_r‖h_r‖²)².
Weights: weights[0] for the total, weights[d + 1] for the nodes at depth d.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from mechanisms.ranges.tree_layouts import Tree, balanced_tree
from mechanisms.ranges.trees import RangeSolver, RangeStrategy


class HaarStrategy(RangeStrategy):
    """The total and the (generalized) Haar differences of a binary tree, weighted per depth."""

    def __init__(self, tree: Tree, weights):
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (tree.depth + 1,) or np.any(weights <= 0):
            raise ValueError(f"need {tree.depth + 1} positive weights (total, then one per depth)")
        if any(np.any((c != 0) & (c != 2)) for c in tree.children):
            raise ValueError("a Haar strategy needs a binary tree")
        self.tree, self.weights = tree, weights
        self.shape = (tree.n, tree.n)

    @cached_property
    def internal(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """(lo, mid, hi, gcd of the halves) of the internal nodes at each depth."""
        out = []
        for d in range(self.tree.depth):
            inner = np.flatnonzero(self.tree.children[d] == 2)
            lo, hi = self.tree.lo[d][inner], self.tree.hi[d][inner]
            mid = self.tree.hi[d + 1][np.searchsorted(self.tree.lo[d + 1], lo)]
            out.append((lo, mid, hi, np.gcd(mid - lo, hi - mid)))
        return out

    @cached_property
    def shape_pieces(self):
        rows, lo, hi = [np.zeros(1, dtype=np.int64)], [np.zeros(1, dtype=np.int64)], [np.full(1, self.tree.n)]
        shape, level, start = [np.ones(1)], [np.zeros(1, dtype=np.int64)], 1
        for d, (a, m, b, g) in enumerate(self.internal):
            r = np.arange(start, start + a.size)
            rows += [r, r]
            lo += [a, m]
            hi += [m, b]
            shape += [(b - m) / g, -(m - a) / g]
            level += [np.full(2 * a.size, d + 1)]
            start += a.size
        return tuple(np.concatenate(v) for v in (rows, lo, hi, shape, level))

    @cached_property
    def solver(self) -> RangeSolver:
        return _HaarSolver(self)

    def __repr__(self) -> str:
        return f"HaarStrategy(n={self.tree.n}, weights={self.weights.tolist()})"


def haar(n: int, weights=None) -> HaarStrategy:
    """The Haar wavelet over n bins; unit weights (Privelet) by default."""
    tree = balanced_tree(n, 2)
    return HaarStrategy(tree, np.ones(tree.depth + 1) if weights is None else weights)


class _HaarSolver:
    def __init__(self, strategy: HaarStrategy):
        self.strategy, self.n = strategy, strategy.tree.n
        self.levels = []
        for d, (lo, mid, hi, g) in enumerate(strategy.internal):
            left, right = (mid - lo) / g, (hi - mid) / g  # h = right·1_L − left·1_R
            norm2 = right**2 * (mid - lo) + left**2 * (hi - mid)
            self.levels.append((lo, mid, hi, right, left, strategy.weights[d + 1] * norm2))
        self.total_scale = strategy.weights[0] * self.n

    def _coefficients(self, x: np.ndarray) -> list[np.ndarray]:
        """hᵀx/(w‖h‖²) for the total and every internal node (x: n × k)."""
        cs = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
        out = [cs[-1:] / self.total_scale]
        for lo, mid, hi, right, left, scale in self.levels:
            diff = right[:, None] * (cs[mid] - cs[lo]) - left[:, None] * (cs[hi] - cs[mid])
            out.append(diff / scale[:, None])
        return out

    def _expand(self, coefficients: list[np.ndarray], k: int) -> np.ndarray:
        """Σ_r c_r h_r for per-row coefficients c."""
        diff = np.zeros((self.n + 1, k))
        diff[0] += coefficients[0][0]
        diff[self.n] -= coefficients[0][0]
        for (lo, mid, hi, right, left, _), c in zip(self.levels, coefficients[1:]):
            np.add.at(diff, lo, right[:, None] * c)
            np.add.at(diff, mid, -(right + left)[:, None] * c)
            np.add.at(diff, hi, left[:, None] * c)
        return np.cumsum(diff, axis=0)[:-1]

    def solve(self, y: np.ndarray) -> np.ndarray:
        coefficients, start = [y[:1] / self.total_scale], 1
        for lo, _, _, _, _, scale in self.levels:
            coefficients.append(y[start : start + lo.size] / scale[:, None])
            start += lo.size
        return self._expand(coefficients, y.shape[1])

    def inverse_gram(self, x: np.ndarray) -> np.ndarray:
        coefficients = self._coefficients(x)
        scaled = [coefficients[0] / self.total_scale]
        scaled += [c / level[5][:, None] for c, level in zip(coefficients[1:], self.levels)]
        return self._expand(scaled, x.shape[1])

    def row_cross(self, q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
        c1, c2 = self._coefficients(q1.T), self._coefficients(q2.T)
        return sum((u * v).sum(axis=0) for u, v in zip(c1, c2))

    def interval_variances(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Only the nodes holding a or b − 1 can be cut by [a, b): at most two per depth."""
        out = ((b - a) / self.total_scale) ** 2
        tree = self.strategy.tree
        for d, (lo, mid, hi, right, left, scale) in enumerate(self.levels):
            index = np.full(tree.lo[d].size, -1)
            index[tree.children[d] == 2] = np.arange(lo.size)
            ends = [tree.node_at[d][a], tree.node_at[d][b - 1]]
            for k, node in enumerate(ends):
                j = np.where(node >= 0, index[np.maximum(node, 0)], -1)
                ok = j >= 0
                if k == 1:
                    ok &= ends[1] != ends[0]  # the same node counts once
                jj, aa, bb = j[ok], a[ok], b[ok]
                in_left = np.clip(np.minimum(bb, mid[jj]) - np.maximum(aa, lo[jj]), 0, None)
                in_right = np.clip(np.minimum(bb, hi[jj]) - np.maximum(aa, mid[jj]), 0, None)
                out[ok] += ((right[jj] * in_left - left[jj] * in_right) / scale[jj]) ** 2
        return out


__all__ = ["HaarStrategy", "haar"]
