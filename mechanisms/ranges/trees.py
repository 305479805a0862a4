"""Hierarchical range strategies over one ordered attribute, with exact least squares.

A range strategy is a set of weighted rows over an ordered attribute of n
bins, each row a weighted sum of intervals. Its rows hang off a `Tree` of
nested intervals of [0, n) (`mechanisms.ranges.tree_layouts`).

`HierarchicalStrategy` measures each node's total (Hay et al.'s H_b, Qardaji
et al.'s HB), the nodes at depth d weighted by w_d; its least-squares
estimate is computed exactly in O(n) by the two-pass tree smoother
(`_TreeSolver`), which is Hay's consistency with arbitrary per-node variances.
The Haar wavelet lives in `mechanisms.ranges.wavelet` on the same base class.

Weights are one per depth; measuring every row with one noise scale is the
same as splitting the budget across levels (Gaussian: ρ_d ∝ w_d², Laplace:
ε_d ∝ w_d). Weights are short decimals so the measurement lattice stays coarse.

Variances are exact and never need a dense matrix: for query rows q (unit
noise per strategy row) `row_cross` gives q₁ᵀ(AᵀA)⁻¹q₂ in O(n·depth) per row,
`interval_variances` the variance of any contiguous range in O(depth); workload
totals are in `mechanisms.ranges.optimize`. The tree recursions run in NumPy; results cross the Matrix
boundary through the array-module switch.
"""

from __future__ import annotations

from functools import cached_property
from typing import Protocol

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.matrices import Matrix
from mechanisms.ranges.tree_layouts import Tree, balanced_tree, padded_tree, tree_from_spec

# Per-depth weights are rounded to this many decimals (after scaling the largest to 1).
WEIGHT_DECIMALS = 3


# ---------------------------------------------------------------------------
# Strategies: weighted rows made of interval pieces


class RangeStrategy(Matrix):
    """Rows that are weighted sums of intervals ("pieces"), plus exact least squares.

    Subclasses define `shape_pieces` — (row, lo, hi, shape coefficient, level):
    row `row` gets weights[level]·shape·1_[lo, hi) — and a solver that knows
    the structure of the normal equations.
    """

    tree: Tree
    weights: np.ndarray  # one per level (see subclasses for their meaning)

    @cached_property
    def shape_pieces(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    @cached_property
    def _pieces(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        row, lo, hi, shape, level = self.shape_pieces
        return row, lo, hi, shape * self.weights[level]

    def level_norms(self, p: int) -> np.ndarray:
        """levels × n: Σ |shape|^p over the pieces of each level containing each bin, so that
        column norms are weights^p @ level_norms(p)."""
        _, lo, hi, shape, level = self.shape_pieces
        diff = np.zeros((self.weights.size, self.shape[1] + 1))
        np.add.at(diff, (level, lo), np.abs(shape) ** p)
        np.add.at(diff, (level, hi), -(np.abs(shape) ** p))
        return np.cumsum(diff, axis=1)[:, :-1]

    @cached_property
    def solver(self) -> "RangeSolver":
        raise NotImplementedError

    # --- products --------------------------------------------------------------
    def _matmat(self, x):
        x = to_numpy(x)
        row, lo, hi, coef = self._pieces
        cs = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
        out = np.zeros((self.shape[0], x.shape[1]))
        np.add.at(out, row, coef[:, None] * (cs[hi] - cs[lo]))
        return xp().asarray(out)

    def _scatter(self, y) -> np.ndarray:
        """Aᵀy for rows y (strategy rows × k)."""
        row, lo, hi, coef = self._pieces
        diff = np.zeros((self.shape[1] + 1, y.shape[1]))
        vals = coef[:, None] * y[row]
        np.add.at(diff, lo, vals)
        np.add.at(diff, hi, -vals)
        return np.cumsum(diff, axis=0)[:-1]

    def transpose(self) -> Matrix:
        return _Transposed(self)

    def gram(self) -> Matrix:
        return _Gram(self)

    def column_norms(self, p: int):
        return xp().asarray(self.weights**p @ self.level_norms(p))

    def pinv(self) -> Matrix:
        """A⁺ as an implicit operator: y ↦ the least-squares estimate (consistency included)."""
        return _PseudoInverse(self)

    # --- exact variances (unit noise per strategy row) --------------------------
    def row_cross(self, q1, q2=None) -> np.ndarray:
        """Row-wise q1ᵢᵀ(AᵀA)⁻¹q2ᵢ for query rows q1, q2 (k × n)."""
        q1 = np.atleast_2d(np.asarray(to_numpy(q1), dtype=float))
        q2 = q1 if q2 is None else np.atleast_2d(np.asarray(to_numpy(q2), dtype=float))
        return self.solver.row_cross(q1, q2)

    def interval_variances(self, a, b) -> np.ndarray:
        """Variance of the range sums over [a_i, b_i) (0 ≤ a < b ≤ n)."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        if np.any(a < 0) or np.any(b > self.tree.n) or np.any(a >= b):
            raise ValueError("intervals must satisfy 0 <= a < b <= n")
        return self.solver.interval_variances(a, b)

    def leaf_variances(self) -> np.ndarray:
        cells = np.arange(self.tree.n)
        return self.interval_variances(cells, cells + 1)

    # --- serialization (strategies are stored with their measurements) --------
    def spec(self) -> dict:
        """The tree and the weights: enough to rebuild this matrix (`from_spec`)."""
        return {"tree": self.tree.spec(), "weights": self.weights.tolist()}

    @classmethod
    def from_spec(cls, spec: dict) -> "RangeStrategy":
        return cls(tree_from_spec(spec["tree"]), spec["weights"])


class HierarchicalStrategy(RangeStrategy):
    """Node totals of a `Tree`, the nodes at depth d weighted by weights[d] (0: not measured).

    Rows are ordered by depth, then by position; unmeasured depths have no rows.
    """

    def __init__(self, tree: Tree, weights):
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (tree.depth + 1,) or np.any(weights < 0):
            raise ValueError(f"need {tree.depth + 1} non-negative per-depth weights")
        for d, _, _ in tree.leaf_nodes:
            if weights[d] <= 0:
                raise ValueError("every leaf must be measured (positive weight at its depth)")
        self.tree, self.weights = tree, weights
        self.shape = (sum(tree.lo[d].size for d in range(tree.depth + 1) if weights[d] > 0), tree.n)

    @cached_property
    def shape_pieces(self):
        rows, lo, hi, level, start = [], [], [], [], 0
        for d in range(self.tree.depth + 1):
            if self.weights[d] > 0:
                m = self.tree.lo[d].size
                rows.append(np.arange(start, start + m))
                lo.append(self.tree.lo[d])
                hi.append(self.tree.hi[d])
                level.append(np.full(m, d))
                start += m
        rows, lo, hi, level = (np.concatenate(v) for v in (rows, lo, hi, level))
        return rows, lo, hi, np.ones(rows.size), level

    def level_norms(self, p: int) -> np.ndarray:
        return self.tree.coverage

    @cached_property
    def solver(self) -> "_TreeSolver":
        return _TreeSolver(self)

    def __repr__(self) -> str:
        return f"HierarchicalStrategy(n={self.tree.n}, depths={self.tree.depth + 1}, weights={self.weights.tolist()})"


def hierarchical(n: int, branching: int, weights=None, layout: str = "padded", root: bool = True) -> HierarchicalStrategy:
    """An H_b tree: `layout` "padded" (all leaves at one depth) or "balanced" (Hay/ektelo splits).

    `weights` per depth default to 1 (an even budget split), with the root
    unmeasured when `root` is False (as in HB).
    """
    tree = padded_tree(n, branching) if layout == "padded" else balanced_tree(n, branching)
    w = np.ones(tree.depth + 1) if weights is None else np.asarray(weights, dtype=float)
    if not root:
        w = w.copy()
        w[0] = 0.0
    return HierarchicalStrategy(tree, w)


def qardaji_branching(n: int) -> int:
    """HB's branching factor: argmin over b of (b−1)h³ − 2(b+1)h²/3, h = ⌈log_b n⌉ (Qardaji et al.)."""

    def bound(b: int) -> float:
        h = 0
        while b**h < n:
            h += 1
        return (b - 1) * h**3 - 2 * (b + 1) * h**2 / 3

    return min(range(2, max(n, 2) + 1), key=bound)


def hb(n: int) -> HierarchicalStrategy:
    """Qardaji et al.'s HB: the balanced tree with `qardaji_branching(n)`, root not measured."""
    return hierarchical(n, qardaji_branching(n), layout="balanced", root=False)


def rounded_weights(weights) -> np.ndarray:
    """Weights scaled so the largest is 1 and rounded to WEIGHT_DECIMALS (positive stays positive)."""
    w = np.asarray(weights, dtype=float)
    w = w / w.max()
    step = 10.0**-WEIGHT_DECIMALS
    return np.where(w > 0, np.maximum(np.round(w, WEIGHT_DECIMALS), step), 0.0)


# ---------------------------------------------------------------------------
# Implicit companions


class _Transposed(Matrix):
    def __init__(self, base: RangeStrategy):
        self.base = base
        self.shape = (base.shape[1], base.shape[0])

    def _matmat(self, y):
        return xp().asarray(self.base._scatter(to_numpy(y)))

    def transpose(self) -> Matrix:
        return self.base


class _Gram(Matrix):
    """AᵀA of a range strategy, applied as Aᵀ(Ax)."""

    def __init__(self, base: RangeStrategy):
        self.base = base
        self.shape = (base.shape[1], base.shape[1])

    def _matmat(self, x):
        return xp().asarray(self.base._scatter(to_numpy(self.base._matmat(x))))

    def transpose(self) -> Matrix:
        return self


class _PseudoInverse(Matrix):
    """A⁺ = (AᵀA)⁻¹Aᵀ (the strategies have full column rank): the least-squares estimate."""

    def __init__(self, base: RangeStrategy):
        self.base = base
        self.shape = (base.shape[1], base.shape[0])

    def _matmat(self, y):
        return xp().asarray(self.base.solver.solve(np.asarray(to_numpy(y), dtype=float)))

    def transpose(self) -> Matrix:
        return _PseudoInverseT(self.base)


class _PseudoInverseT(Matrix):
    """(A⁺)ᵀ = A(AᵀA)⁻¹."""

    def __init__(self, base: RangeStrategy):
        self.base = base
        self.shape = base.shape

    def _matmat(self, x):
        z = self.base.solver.inverse_gram(np.asarray(to_numpy(x), dtype=float))
        return self.base._matmat(z)

    def transpose(self) -> Matrix:
        return _PseudoInverse(self.base)


# ---------------------------------------------------------------------------
# Solvers


class RangeSolver(Protocol):
    """The least-squares machinery of one range strategy (unit noise per row)."""

    def solve(self, y: np.ndarray) -> np.ndarray: ...  # A⁺y
    def inverse_gram(self, x: np.ndarray) -> np.ndarray: ...  # (AᵀA)⁻¹x
    def row_cross(self, q1: np.ndarray, q2: np.ndarray) -> np.ndarray: ...
    def interval_variances(self, a: np.ndarray, b: np.ndarray) -> np.ndarray: ...


class _TreeSolver:
    """Exact GLS on a tree of node-total measurements with variances s_v = 1/w_v².

    Upward, q_v is the variance of the best estimate of node v's total from its
    own subtree (Q_v = Σ_children q_c, 1/q_v = 1/s_v + 1/Q_v); downward, a
    child's total given its parent's is its subtree estimate plus the share
    q_c/Q_v of the parent's discrepancy, and P_v is the final posterior
    variance. Every variance formula below follows from that Markov structure.
    """

    def __init__(self, strategy: HierarchicalStrategy):
        tree, w = strategy.tree, strategy.weights
        self.tree, self.strategy = tree, strategy
        depth = tree.depth
        self.prec = [np.full(tree.lo[d].size, w[d] ** 2) for d in range(depth + 1)]
        q: list[np.ndarray] = [np.empty(0)] * (depth + 1)
        Q: list[np.ndarray] = [np.empty(0)] * (depth + 1)
        for d in range(depth, -1, -1):
            has = tree.inner[d]
            Qd = np.full(tree.lo[d].size, np.inf)
            if d < depth:
                Qd[has] = tree.child_sums(q[d + 1], d)[has]
            with np.errstate(divide="ignore"):
                q[d] = np.where(has, 1.0 / (self.prec[d] + 1.0 / Qd), 1.0 / self.prec[d])
            Q[d] = Qd
        self.q, self.Q = q, Q
        P = [q[0].copy()]
        for d in range(1, depth + 1):
            par = tree.parent[d]
            r = q[d] / Q[d - 1][par]
            P.append(q[d] - q[d] * r + r * r * P[d - 1][par])
        self.P = P
        self.C = [np.zeros(1)] + [tree.sibling_cumsum(q[d], d) for d in range(1, depth + 1)]

    # --- estimates -------------------------------------------------------------
    def _smooth(self, node_values: list[np.ndarray]) -> np.ndarray:
        """Leaf estimates from per-node measurements of totals (NaN-free; unmeasured: any)."""
        tree, depth = self.tree, self.tree.depth
        k = node_values[0].shape[1]
        z: list[np.ndarray] = [np.empty(0)] * (depth + 1)
        Z: list[np.ndarray] = [np.empty(0)] * (depth + 1)
        for d in range(depth, -1, -1):
            has = tree.inner[d]
            own = self.prec[d][:, None] * node_values[d]
            if d < depth:
                Zd = tree.child_sums(z[d + 1].T, d).T
                Qd = np.where(has, self.Q[d], 1.0)[:, None]
                z[d] = np.where(has[:, None], self.q[d][:, None] * (own + Zd / Qd), node_values[d])
                Z[d] = Zd
            else:
                z[d] = node_values[d].copy()
        t = z[0]  # final estimates, one depth at a time
        x = np.zeros((tree.n, k))
        for d in range(depth + 1):
            if d:
                par = tree.parent[d]
                r = (self.q[d] / self.Q[d - 1][par])[:, None]
                t = z[d] + r * (t[par] - Z[d - 1][par])
            leaf = ~tree.inner[d]
            x[tree.lo[d][leaf]] = t[leaf]
        return x

    def solve(self, y: np.ndarray) -> np.ndarray:
        values, start = [], 0
        for d in range(self.tree.depth + 1):
            m, w = self.tree.lo[d].size, self.strategy.weights[d]
            if w > 0:
                values.append(y[start : start + m] / w)
                start += m
            else:
                values.append(np.zeros((m, y.shape[1])))
        return self._smooth(values)

    def inverse_gram(self, x: np.ndarray) -> np.ndarray:
        """(AᵀA)⁻¹x: least squares on leaf 'measurements' x/w², all other nodes zero."""
        values = [np.zeros((self.tree.lo[d].size, x.shape[1])) for d in range(self.tree.depth + 1)]
        for d, nodes, bins in self.tree.leaf_nodes:
            values[d][nodes] = x[bins] / self.prec[d][nodes, None]
        return self._smooth(values)

    # --- variances --------------------------------------------------------------
    def row_cross(self, q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
        tree = self.tree
        g1 = g2 = W = None
        for d in range(tree.depth, -1, -1):
            m = tree.lo[d].size
            n1, n2, nW = np.zeros((q1.shape[0], m)), np.zeros((q1.shape[0], m)), np.zeros((q1.shape[0], m))
            leaf = ~tree.inner[d]
            n1[:, leaf] = q1[:, tree.lo[d][leaf]]
            n2[:, leaf] = q2[:, tree.lo[d][leaf]]
            if d < tree.depth:
                has = tree.inner[d]
                qc = self.q[d + 1]
                s1 = tree.child_sums(qc * g1, d)[:, has]
                s2 = tree.child_sums(qc * g2, d)[:, has]
                s12 = tree.child_sums(qc * g1 * g2, d)[:, has]
                sw = tree.child_sums(W, d)[:, has]
                Qv = self.Q[d][has]
                n1[:, has], n2[:, has] = s1 / Qv, s2 / Qv
                nW[:, has] = sw + s12 - s1 * s2 / Qv
            g1, g2, W = n1, n2, nW
        return g1[:, 0] * g2[:, 0] * self.P[0][0] + W[:, 0]

    @cached_property
    def _prefix(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Gp[d][t], Wp[d][t]: loading on, and variance given, the total of the depth-d node
        containing bin t, of that node's prefix ending before t."""
        tree = self.tree
        Gp: list[np.ndarray] = [np.empty(0)] * (tree.depth + 1)
        Wp: list[np.ndarray] = [np.empty(0)] * (tree.depth + 1)
        for d in range(tree.depth, -1, -1):
            G, Wv = np.zeros(tree.n), np.zeros(tree.n)
            if d < tree.depth:
                t, c, v = tree.inner_positions[d]
                qc, Qv, Cc, gc = self.q[d + 1][c], self.Q[d][v], self.C[d + 1][c], Gp[d + 1][t]
                mass = Cc + qc * gc
                G[t] = mass / Qv
                Wv[t] = Wp[d + 1][t] + Cc + qc * gc * gc - mass * mass / Qv
            Gp[d], Wp[d] = G, Wv
        return Gp, Wp

    def interval_variances(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        Gp, Wp = self._prefix
        out = np.empty(a.size)
        for g in self.tree.intervals(a, b):
            d = g.depth
            res = self.P[d][g.node]
            if g.inner.any():
                q, C, v = self.q[d + 1], self.C[d + 1], g.node[g.inner]
                qi, qj = q[g.ci], q[g.cj]
                alpha = 1.0 - Gp[d + 1][g.a]
                beta = np.where(g.full, 1.0, Gp[d + 1][g.bpos])
                wb = np.where(g.full, 0.0, Wp[d + 1][g.bpos])
                between = C[g.cj] - C[g.ci] - qi
                mass = qi * alpha + between + qj * beta
                Qv = self.Q[d][v]
                W = Wp[d + 1][g.a] + wb + qi * alpha**2 + between + qj * beta**2 - mass**2 / Qv
                res = res.copy()
                res[g.inner] = (mass / Qv) ** 2 * self.P[d][v] + W
            out[g.rows] = res
        return out



__all__ = [
    "RangeStrategy",
    "HierarchicalStrategy",
    "hierarchical",
    "hb",
    "qardaji_branching",
    "rounded_weights",
    "RangeSolver",
]
