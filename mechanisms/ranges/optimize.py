"""Choosing a range strategy: exact workload errors, per-depth budget split, branching factor,
and Kronecker products of 1-D strategies for k-D boxes.

`range_error` sums the exact least-squares variance of a set of queries under a
range strategy without materializing either (AllRange and Prefix via prefix
sums, contiguous ranges in O(depth) each, other predicates row by row).

`choose_range_strategy` picks, for one attribute and a workload given as an
error function, the best of: the identity, padded H_b trees for a range of
branching factors, and the Haar wavelet — each with its per-depth weights
(the budget split across levels) optimized for the noise kind: the objective
is Δ_p² × Σ variances, p = 2 for Gaussian noise (ρ-zCDP) and p = 1 for Laplace
(ε-DP), since noise variance scales as Δ₂² or Δ₁². Choices are screened with
even weights, then the best few (`OPTIMIZED_CANDIDATES`) are optimized (BFGS on
log-weights, with exact gradients through a dense kernel up to `KERNEL_LIMIT` bins).

`choose_kronecker` plans a box workload over several attributes as a
Kronecker product of per-attribute choices (coordinate descent: each
attribute's choice is optimal given the others'), with the exact error
Σ_{t,t'} c_t c_t' Π_a q_{t,a}ᵀ G_a⁻¹ q_{t',a} of every block.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from math import prod
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import minimize

from mechanisms.arrays import to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.matrices import AllRange, Diagonal, Identity, Matrix, Ones, Prefix
from mechanisms.ranges.tree_layouts import balanced_tree, padded_tree
from mechanisms.ranges.trees import HierarchicalStrategy, RangeStrategy, rounded_weights
from mechanisms.ranges.wavelet import HaarStrategy
from mechanisms.workload import Block
from mechanisms.interruption import checkpoint
from mechanisms.work_cache import WorkCache

# Branching factors tried for padded H_b trees (those below n, plus one tree of height 1);
# optimized level weights can switch levels off, which fills in the factors between.
BRANCHINGS = (2, 3, 4, 8, 16, 32, 64, 128)
# How many screened candidates get their per-level weights optimized, by the norm of
# the noise's sensitivity (2: Gaussian, 1: Laplace). Even weights predict the optimum
# well for Gaussian noise (it gains at most ~1.5x, so candidates more than
# GAUSSIAN_REACH behind the best are skipped) but poorly for Laplace noise, whose
# optimum switches whole levels off.
OPTIMIZED_CANDIDATES = {2: 2, 1: 4}
GAUSSIAN_REACH = 3.0
# Coordinate-descent sweeps over the attributes of a k-D box workload.
SWEEPS = 2
# Attributes of at most this many bins are optimized with a dense kernel and exact gradients.
KERNEL_LIMIT = 1024
_LOG_WEIGHT_BOUNDS = (-7.0, 3.0)


class Ranges(Matrix):
    """Rows 1_[lo_i, hi_i): an explicit list of contiguous ranges over n bins."""

    def __init__(self, n: int, lo, hi):
        self.n = n
        self.lo, self.hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
        if np.any(self.lo < 0) or np.any(self.hi > n) or np.any(self.lo >= self.hi):
            raise ValueError("ranges must satisfy 0 <= lo < hi <= n")
        self.shape = (self.lo.size, n)

    def _matmat(self, x):
        x = to_numpy(x)
        cs = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
        return xp().asarray(cs[self.hi] - cs[self.lo])

    def transpose(self) -> Matrix:
        return _RangesT(self)

    def column_norms(self, p: int):
        return xp().asarray(self._cover(np.ones((self.lo.size, 1)))[:, 0])

    def _cover(self, y: np.ndarray) -> np.ndarray:
        """Σ_i y_i 1_[lo_i, hi_i) (bins × k)."""
        diff = np.zeros((self.n + 1, y.shape[1]))
        np.add.at(diff, self.lo, y)
        np.add.at(diff, self.hi, -y)
        return np.cumsum(diff, axis=0)[:-1]


class _RangesT(Matrix):
    def __init__(self, base: Ranges):
        self.base = base
        self.shape = (base.shape[1], base.shape[0])

    def _matmat(self, y):
        return xp().asarray(self.base._cover(np.asarray(to_numpy(y), dtype=float)))

    def transpose(self) -> Matrix:
        return self.base


def width_k(n: int, k: int) -> Ranges:
    """All n − k + 1 ranges of width k."""
    start = np.arange(n - k + 1)
    return Ranges(n, start, start + k)


def as_intervals(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(lo, hi, scale) when every row is scale·1_[lo, hi), else None."""
    rows = np.atleast_2d(rows)
    nz = rows != 0
    if not np.all(nz.any(axis=1)):
        return None
    lo = nz.argmax(axis=1)
    hi = rows.shape[1] - nz[:, ::-1].argmax(axis=1)
    scale = rows[np.arange(rows.shape[0]), lo]
    pos = np.arange(rows.shape[1])
    inside = (pos >= lo[:, None]) & (pos < hi[:, None])
    if np.any(rows != np.where(inside, scale[:, None], 0.0)):
        return None
    return lo, hi, scale


def prefix_error(strategy: RangeStrategy) -> float:
    """Σ_k Var(x̂_0 + … + x̂_k) over the n prefixes."""
    n = strategy.tree.n
    return float(strategy.interval_variances(np.zeros(n, dtype=np.int64), np.arange(1, n + 1)).sum())


def all_range_error(strategy: RangeStrategy) -> float:
    """Σ over all n(n+1)/2 ranges: with prefix sums S_0 = 0, S_1..S_n of x̂,
    Σ_{a<b} Var(S_b − S_a) = (n+1)·Σ_k Var(S_k) − Var(Σ_k S_k)."""
    n = strategy.tree.n
    u = (n - np.arange(n, dtype=float))[None, :]
    return float((n + 1) * prefix_error(strategy) - strategy.row_cross(u)[0])


def range_error(strategy: RangeStrategy, queries: Matrix) -> float:
    """Σ over the rows of `queries` of their least-squares variance (unit noise per strategy row)."""
    n = strategy.tree.n
    if queries.shape[1] != n:
        raise ValueError(f"queries have {queries.shape[1]} columns, the strategy {n}")
    if isinstance(queries, Identity):
        return float(strategy.leaf_variances().sum())
    if isinstance(queries, Diagonal):
        v = to_numpy(queries.values)
        return float((strategy.leaf_variances() * v * v).sum())
    if isinstance(queries, Ones):
        whole = strategy.interval_variances(np.zeros(1, dtype=np.int64), np.full(1, n))[0]
        return queries.shape[0] * float(whole)
    if isinstance(queries, Prefix):
        return prefix_error(strategy)
    if isinstance(queries, AllRange):
        return all_range_error(strategy)
    if isinstance(queries, Ranges):
        return float(strategy.interval_variances(queries.lo, queries.hi).sum())
    rows = np.asarray(to_numpy(queries.dense()), dtype=float)
    found = as_intervals(rows)
    if found is not None:
        lo, hi, scale = found
        return float((strategy.interval_variances(lo, hi) * scale * scale).sum())
    return float(strategy.row_cross(rows).sum())




# ---------------------------------------------------------------------------
# One attribute


@dataclass(frozen=True)
class RangeChoice:
    """A 1-D strategy, how EXPLAIN names it, and its error Δ_p² × Σ variances (unit budget scale)."""

    strategy: RangeStrategy
    label: str
    error: float

    @property
    def is_identity(self) -> bool:
        return self.label == IDENTITY


IDENTITY = "identity"


def identity_strategy(n: int) -> HierarchicalStrategy:
    """The identity as a range strategy (leaves measured, nothing else)."""
    tree = padded_tree(n, max(n, 2))
    return HierarchicalStrategy(tree, [0.0, 1.0] if tree.depth else [1.0])


def _candidates(n: int, branchings: Sequence[int]) -> list[tuple[str, Callable[[np.ndarray], RangeStrategy], int]]:
    """(label, weights -> strategy, number of weights) for every candidate shape."""
    out = []
    for b in sorted(set(branchings)):
        tree = padded_tree(n, b)
        out.append((f"H_{b} tree", lambda w, t=tree: HierarchicalStrategy(t, w), tree.depth + 1))
        if b >= n:  # one tree of height 1 (total + bins) is enough
            break
    tree = balanced_tree(n, 2)
    out.append(("Haar wavelet", lambda w, t=tree: HaarStrategy(t, w), tree.depth + 1))
    return out


class KernelObjective:
    """E(A) = Σ_ij K_ij (AᵀA)⁻¹_ij = Σ_rows q₁ᵀ(AᵀA)⁻¹q₂ for a symmetric n × n kernel K, with its
    gradient in the level weights: with M = G⁻¹KG⁻¹ and rows a_r = w_k·h_r of level k,
    ∂E/∂w_k = −(2/w_k)·Σ_{r in level k} a_rᵀ M a_r (block sums of M over the rows' pieces)."""

    def __init__(self, kernel: np.ndarray):
        self.kernel = (kernel + kernel.T) / 2.0

    def __call__(self, strategy: RangeStrategy) -> float:
        inverse = strategy.solver.inverse_gram(np.eye(strategy.tree.n))
        return float((self.kernel * inverse).sum())

    def value_and_gradient(self, strategy: RangeStrategy) -> tuple[float, np.ndarray]:
        n = strategy.tree.n
        checkpoint(4.0 * n**3)  # the inverse Gram and two n × n products
        inverse = strategy.solver.inverse_gram(np.eye(n))
        value = float((self.kernel * inverse).sum())
        m = inverse @ self.kernel @ inverse
        cs = np.zeros((n + 1, n + 1))
        cs[1:, 1:] = m.cumsum(axis=0).cumsum(axis=1)
        row, lo, hi, coef = strategy._pieces
        level = strategy.shape_pieces[4]

        def block(i: np.ndarray, j: np.ndarray) -> np.ndarray:
            return cs[hi[i], hi[j]] - cs[lo[i], hi[j]] - cs[hi[i], lo[j]] + cs[lo[i], lo[j]]

        pieces = np.arange(row.size)
        quad = coef * coef * block(pieces, pieces)
        order = np.argsort(row, kind="stable")  # pieces of one row (at most two) become adjacent
        pair = np.flatnonzero(row[order][1:] == row[order][:-1])
        i, j = order[pair], order[pair + 1]
        per_level = np.bincount(level, quad, minlength=strategy.weights.size)
        per_level += np.bincount(level[i], 2.0 * coef[i] * coef[j] * block(i, j), minlength=strategy.weights.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            gradient = np.where(strategy.weights > 0, -2.0 * per_level / strategy.weights, 0.0)
        return value, gradient


RangeObjective = Callable[[RangeStrategy], float]


def _score(strategy: RangeStrategy, error: RangeObjective, norm: int) -> float:
    return strategy.sensitivity(norm) ** 2 * error(strategy)


def _descend(
    make: Callable[[np.ndarray], RangeStrategy], active: np.ndarray, error: RangeObjective, norm: int
) -> RangeStrategy:
    """BFGS on the log-weights of the active levels (the last active one fixed to 1, the
    objective being scale-invariant); inactive levels stay unmeasured. Rounded weights."""
    levels = np.flatnonzero(active)
    low, high = _LOG_WEIGHT_BOUNDS
    if levels.size == 1:
        return make(active.astype(float))

    def weights(theta: np.ndarray) -> np.ndarray:
        w = np.zeros(active.size)
        w[levels] = np.exp(np.append(np.clip(theta, low, high), 0.0))
        return w

    def objective(theta: np.ndarray) -> float:
        strategy = make(weights(theta))
        checkpoint(2.0 * strategy.tree.n**3)
        return float(np.log(_score(strategy, error, norm)))

    def with_gradient(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w = weights(theta)
        strategy = make(w)
        value, grad_e = error.value_and_gradient(strategy)
        norms = strategy.level_norms(norm)
        column = w**norm @ norms
        worst = int(np.argmax(column))
        grad_sens = 2.0 * w ** (norm - 1) * norms[:, worst] / column[worst]  # ∂ log Δ² / ∂w
        grad = (w * (grad_sens + grad_e / value))[levels[:-1]]
        inside = (theta > low) & (theta < high)
        return float(np.log(column[worst] ** (2.0 / norm) * value)), grad * inside

    theta0 = np.zeros(levels.size - 1)
    options = {"gtol": 1e-2, "maxiter": 60}  # weights are rounded to 3 decimals anyway
    if isinstance(error, KernelObjective):
        result = minimize(with_gradient, theta0, jac=True, method="BFGS", options=options)
    else:
        result = minimize(objective, theta0, method="BFGS", options=options)
    return make(rounded_weights(weights(result.x)))


def optimize_weights(
    make: Callable[[np.ndarray], RangeStrategy],
    count: int,
    error: RangeObjective,
    norm: int,
) -> RangeStrategy:
    """Per-level weights minimizing Δ_norm² × error, rounded (`rounded_weights`).

    A `KernelObjective` supplies exact gradients; otherwise they are numerical.
    For trees, a level whose best weight is 0 lies at −∞ in log-weights, out of
    the descent's reach: levels are then switched off greedily while that lowers
    the error (never a level holding leaves), and the rest refitted.
    """
    even = make(np.ones(count))
    if count == 1:
        return even

    def score(s: RangeStrategy) -> float:
        return _score(s, error, norm)

    best = min([even, _descend(make, np.ones(count, dtype=bool), error, norm)], key=score)
    if not isinstance(best, HierarchicalStrategy):
        return best
    optional = set(range(count)) - {d for d, _, _ in best.tree.leaf_nodes}
    active = best.weights > 0
    pruned = best
    while True:
        trials = []
        for level in sorted(optional & set(np.flatnonzero(active))):
            trial = active.copy()
            trial[level] = False
            trials.append((make(np.where(trial, pruned.weights, 0.0)), trial))
        if not trials:
            break
        candidate, trial = min(trials, key=lambda t: score(t[0]))
        if score(candidate) >= score(pruned):
            break
        pruned, active = candidate, trial
    if pruned is best:
        return best
    return min([pruned, _descend(make, active, error, norm)], key=score)


def choose_range_strategy(
    n: int,
    error: RangeObjective,
    norm: int,
    branchings: Sequence[int] = BRANCHINGS,
    optimize: int | None = None,
) -> RangeChoice:
    """The best 1-D strategy for the workload whose unit-noise error is `error(strategy)`."""
    flat = identity_strategy(n)
    best = RangeChoice(flat, IDENTITY, _score(flat, error, norm))
    if n < 2:
        return best
    screened = []
    for label, make, count in _candidates(n, branchings):
        even = make(np.ones(count))
        screened.append((_score(even, error, norm), label, make, count))
    screened.sort(key=lambda s: s[0])
    for plain_score, label, make, count in screened[: optimize or OPTIMIZED_CANDIDATES[norm]]:
        if norm == 2 and plain_score > GAUSSIAN_REACH * best.error:
            break
        strategy = optimize_weights(make, count, error, norm)
        score = _score(strategy, error, norm)
        if score < best.error:
            best = RangeChoice(strategy, label, score)
    return best


# ---------------------------------------------------------------------------
# Several attributes: Kronecker products


def _join(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


class _CrossPlan:
    """Σ_rows f1ᵢᵀ(AᵀA)⁻¹f2ᵢ for many factor pairs of one attribute, batched per strategy:
    contiguous ranges in one `interval_variances` call, diagonal factors from the leaf
    variances, other rows in one `row_cross` call."""

    def __init__(self, pairs: list[tuple[Matrix, Matrix]]):
        self.count = len(pairs)
        self.n = pairs[0][0].shape[1] if pairs else 0
        self.whole: list[tuple[int, Matrix]] = []  # structured workloads summed by range_error
        lo, hi, scale, owner = [], [], [], []
        self.diag: list[tuple[int, np.ndarray]] = []
        rows1, rows2, row_owner = [], [], []
        diagonal = (Identity, Diagonal)
        for k, (f1, f2) in enumerate(pairs):
            if f1 is f2 and isinstance(f1, (Prefix, AllRange, Ranges, Ones)):
                self.whole.append((k, f1))
            elif isinstance(f1, diagonal) and isinstance(f2, diagonal):
                d1 = np.ones(f1.shape[0]) if isinstance(f1, Identity) else to_numpy(f1.values)
                d2 = np.ones(f2.shape[0]) if isinstance(f2, Identity) else to_numpy(f2.values)
                self.diag.append((k, d1 * d2))
            else:
                r1 = np.atleast_2d(np.asarray(to_numpy(f1.dense()), dtype=float))
                found = as_intervals(r1) if f1 is f2 else None
                if found is not None:
                    lo.append(found[0])
                    hi.append(found[1])
                    scale.append(found[2] ** 2)
                    owner.append(np.full(found[0].size, k))
                else:
                    rows1.append(r1)
                    rows2.append(r1 if f1 is f2 else np.atleast_2d(np.asarray(to_numpy(f2.dense()), dtype=float)))
                    row_owner.append(np.full(r1.shape[0], k))
        self.lo, self.hi = _join(lo, np.int64), _join(hi, np.int64)
        self.scale, self.owner = _join(scale, float), _join(owner, np.int64)
        self.rows1 = np.concatenate(rows1) if rows1 else None
        self.rows2 = np.concatenate(rows2) if rows2 else None
        self.row_owner = _join(row_owner, np.int64)

    def kernel(self, weights: np.ndarray) -> np.ndarray:
        """K = Σ_k weights_k·Σ_rows f1 f2ᵀ (n × n), so that Σ_k weights_k·X_k = Σ K ∘ (AᵀA)⁻¹."""
        k = np.zeros((self.n, self.n))
        if self.lo.size:
            r = to_numpy(Ranges(self.n, self.lo, self.hi).dense())
            k += r.T @ ((weights[self.owner] * self.scale)[:, None] * r)
        for item, d in self.diag:
            k[np.diag_indices(self.n)] += weights[item] * d
        if self.rows1 is not None:
            k += self.rows1.T @ (weights[self.row_owner][:, None] * self.rows2)
        for item, f in self.whole:
            k += weights[item] * np.asarray(to_numpy(f.gram().dense()), dtype=float)
        return k

    def __call__(self, strategy: RangeStrategy) -> np.ndarray:
        out = np.zeros(self.count)
        if self.lo.size:
            v = strategy.interval_variances(self.lo, self.hi) * self.scale
            out += np.bincount(self.owner, v, minlength=self.count)
        if self.diag:
            leaves = strategy.leaf_variances()
            for k, d in self.diag:
                out[k] += float(leaves @ d)
        if self.rows1 is not None:
            out += np.bincount(self.row_owner, strategy.row_cross(self.rows1, self.rows2), minlength=self.count)
        for k, f in self.whole:
            out[k] += range_error(strategy, f)
        return out


class KroneckerWorkload:
    """Blocks over one clique, ready for exact errors under products of 1-D strategies.

    A block Σ_t c_t ⊗_a F_{t,a} of weight w has total variance
    w·Σ_{t,t'} c_t c_t' Π_a X_a[t, t'] with X_a[t, t'] = Σ_rows F_{t,a}ᵀ G_a⁻¹ F_{t',a}
    (block rows are products of factor rows, so sums over rows multiply). The
    pairs t ≤ t' of all blocks are flattened into one vector per attribute.
    """

    def __init__(self, blocks: list[Block], domain: Domain, clique: tuple[str, ...]):
        self.clique, self.domain = clique, domain
        pairs, mult = [], []
        for b in blocks:
            factors = [b.term_factors(t, domain, clique) for t in b.terms]
            for t, first in enumerate(b.terms):
                for u in range(t, len(b.terms)):
                    pairs.append((factors[t], factors[u]))
                    mult.append(b.weight * first.coef * b.terms[u].coef * (1.0 if t == u else 2.0))
        self.mult = np.asarray(mult)
        self.plans = [_CrossPlan([(f[a], g[a]) for f, g in pairs]) for a in range(len(clique))]

    def error(self, strategies: Sequence[RangeStrategy], norm: int) -> float:
        """Σ_pairs mult·Π_a X_a, times Π_a Δ_a²: the error at unit noise per unit sensitivity."""
        values = prod((plan(s) for plan, s in zip(self.plans, strategies)), start=self.mult)
        return float(values.sum()) * prod(s.sensitivity(norm) ** 2 for s in strategies)

    def attribute_error(self, a: int, strategies: Sequence[RangeStrategy], norm: int) -> RangeObjective:
        """Attribute a's error function (without its own Δ²) with the other strategies fixed."""
        kernel = self.mult.copy()
        for i, (plan, s) in enumerate(zip(self.plans, strategies)):
            if i != a:
                kernel = kernel * plan(s) * s.sensitivity(norm) ** 2
        plan = self.plans[a]
        if plan.n <= KERNEL_LIMIT:
            return KernelObjective(plan.kernel(kernel))
        return lambda strategy: float(kernel @ plan(strategy))


_CHOICES = WorkCache(256)  # 1-D choices by (n, norm, branchings, kernel digest), across planning calls


def choose_kronecker(
    blocks: list[Block],
    domain: Domain,
    clique: tuple[str, ...],
    norm: int,
    branchings: Sequence[int] = BRANCHINGS,
    memo: dict | None = None,
) -> tuple[list[RangeChoice], float]:
    """Per-attribute choices for the blocks of one clique and their exact total error
    (Δ_norm² × Σ weighted variances, unit noise per strategy row).

    `memo` (owned by the caller, e.g. one planning call) remembers 1-D choices by
    their exact kernel, so a sub-problem met again is not optimized again; with it,
    a choice is also kept for later calls in this process (`_CHOICES`: its first use
    in a memo announces the work of computing it, so budgets see no difference).
    """
    work = KroneckerWorkload(blocks, domain, clique)
    choices = [RangeChoice(identity_strategy(domain.size_of(a)), IDENTITY, float("nan")) for a in clique]
    for _ in range(SWEEPS if len(clique) > 1 else 1):
        for a, name in enumerate(clique):
            error = work.attribute_error(a, [c.strategy for c in choices], norm)
            key = None
            if memo is not None and isinstance(error, KernelObjective):
                key = (norm, tuple(branchings), hashlib.sha256(error.kernel.tobytes()).hexdigest())
            if key is not None and key in memo:
                choices[a] = memo[key]
                continue
            n = domain.size_of(name)
            if key is None:
                choices[a] = choose_range_strategy(n, error, norm, branchings)
                continue
            choices[a] = memo[key] = _CHOICES.get((n, *key), lambda: choose_range_strategy(n, error, norm, branchings))
    return choices, work.error([c.strategy for c in choices], norm)


__all__ = [
    "Ranges",
    "width_k",
    "as_intervals",
    "prefix_error",
    "all_range_error",
    "range_error",
    "RangeChoice",
    "IDENTITY",
    "identity_strategy",
    "optimize_weights",
    "choose_range_strategy",
    "KroneckerWorkload",
    "choose_kronecker",
]
