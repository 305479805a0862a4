"""Closed-form marginal strategies in the residual basis (ResidualPlanner-style), at scale.

In the residual basis (`mechanisms.marginals`) a clique's marginal splits into
orthogonal residuals u_S, S ⊆ C; a strategy whose noise is isotropic inside
each V_S gives u_S an estimate with covariance v_S·Π_S, and the total squared
error of any workload is Σ_S A_S v_S with A_S = Σ_blocks weight·a_S (for a
marginal on Q with weight c: a_S = c·m_S/n(Q\\S), m_S = Π_{a∈S}(n_a − 1)).

Measuring u_S directly — Gaussian noise of variance v_S confined to V_S — costs
ρ_S = p_S/(2 v_S) with p_S = Π_{a∈S}(n_a − 1)/n_a (the squared norm of one
person's contribution to u_S). Minimizing Σ A_S v_S subject to Σ ρ_S = ρ is a
Cauchy–Schwarz problem with the closed form

    v_S = T·√(p_S/A_S)/(2ρ),   ρ_S/ρ = √(p_S A_S)/T,   error = T²/(2ρ),   T = Σ_S √(p_S A_S),

which attains the SVD lower bound of a marginal workload (T² = SVDB). Nothing
ranges over 2^d parameters or touches the full domain: one pass over the
workload's residuals. Max-variance (the worst per-cell variance over the
workload's marginals) is solved through its dual, a weighting of the
marginals, by multiplicative updates with a duality-gap certificate.

A residual is measured on its own clique with the integer strategy
⊗_{a∈S}(n_a·I − J) (`residual_strategy`): with i.i.d. noise σ² per entry,
Π_S y / Π n_a estimates u_S with v_S = σ²/Π n_a², and its L2 sensitivity is
√Π n_a(n_a − 1), so the cost is exactly p_S/(2 v_S). `ResidualModel`
reconstructs any marginal from such measurements, vectorized over many
marginals at once. `marginal_bundle_plan` optimizes the alternative of
measuring whole marginals (each a fixed bundle of residuals), which is what
HDMM's OPT_M optimizes when given every subset.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from math import prod
from typing import Iterable, Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import minimize

from mechanisms.domain import Domain
from mechanisms.marginals import Clique, residual_weights
from mechanisms.matrices import Identity, Kronecker, Matrix, Weighted
from mechanisms.measurement import Measurement
from mechanisms.workload import Block
from mechanisms.interruption import checkpoint

_MAX_VARIANCE_ROUNDS = 500
_MAX_VARIANCE_GAP = 1e-4


# ---------------------------------------------------------------------------
# The workload in the residual basis


@dataclass
class ResidualTable:
    """The residuals a workload needs: S, A_S (error weight), p_S (cost), m_S (dimension).

    Cliques are stored as rows of attribute indices (ascending, padded with −1)
    so that workloads of many marginals stay vectorized; `residuals` and
    `marginals` give their names. For marginal workloads, `marginal_codes`
    are the cliques Q with weights c_Q and n(Q) `cells`, and `per_cell` maps
    residuals to marginals: entry c_Q·p_S/n(Q\\S)² is Q's weighted per-cell
    variance per unit of v_S.

    A row may stand for a class of `count` residuals that share A_S, p_S and m_S (and a marginal row for
    `marginal_count` marginals): `mechanisms.marginal_classes` describes all k-way marginals so, by size
    class rather than by rows. None: one each.
    """

    domain: Domain
    codes: np.ndarray
    weight: np.ndarray
    cost: np.ndarray
    dims: np.ndarray
    marginal_codes: np.ndarray | None = None
    marginal_weights: np.ndarray | None = None
    cells: np.ndarray | None = None
    count: np.ndarray | None = None
    marginal_count: np.ndarray | None = None

    @cached_property
    def residuals(self) -> list[Clique]:
        return _names(self.domain, self.codes)

    @cached_property
    def marginals(self) -> list[Clique]:
        return _names(self.domain, self.marginal_codes)

    @classmethod
    def from_blocks(cls, domain: Domain, blocks: Iterable[Block]) -> "ResidualTable":
        """Any blocks (ranges, predicates, SUMs): A_S = Σ weight·a_S from `marginals.residual_weights`."""
        total: dict[Clique, float] = {}
        for b in blocks:
            for s, a in residual_weights(b, domain).items():
                total[s] = total.get(s, 0.0) + b.weight * a
        residuals = [s for s, a in total.items() if a > 0 and _dim(domain, s) > 0]
        return cls(
            domain,
            _codes(domain, residuals),
            np.asarray([total[s] for s in residuals]),
            np.asarray([_cost(domain, s) for s in residuals]),
            np.asarray([_dim(domain, s) for s in residuals], dtype=float),
        )

    @classmethod
    def from_marginals(cls, domain: Domain, marginals: Sequence[tuple[Clique, float]]) -> "ResidualTable":
        """Weighted marginals given by attribute names."""
        return cls.from_codes(domain, _codes(domain, [q for q, _ in marginals]), [w for _, w in marginals])

    @classmethod
    def from_codes(cls, domain: Domain, codes: np.ndarray, weights) -> "ResidualTable":
        """Weighted marginals given as rows of attribute indices (ascending, −1 padded),
        vectorized: every subset of every marginal, a chunk of marginals at a time, each chunk's
        residuals summed before the next (memory: the residuals and one chunk, not every
        (marginal, subset) pair at once; `per_cell` is built only when asked)."""
        codes = np.asarray(codes, dtype=np.int64).reshape(len(weights), -1)
        weights = np.asarray(weights, dtype=float)
        base = len(domain) + 1
        if float(base) ** codes.shape[1] >= 2.0**62:
            raise ValueError("too many attributes for the residual key encoding")
        cells = _cells(domain, codes)
        sizes = np.asarray(domain.sizes, dtype=float)
        found: dict[int, tuple[list, list]] = {}  # |S| -> per chunk: its keys, its part of A_S
        for members, key, size, per in _subsets(domain, codes, weights):
            unique, part = _summed(key, per * cells[members])
            keys, parts = found.setdefault(size, ([], []))
            keys.append(unique)
            parts.append(part)
        summed = []  # per |S|, ascending: the keys with A_S > 0 and their A_S
        for size in sorted(found):  # keys of fewer attributes are smaller: the result is sorted by key
            keys, parts = found.pop(size)
            unique, a = _summed(np.concatenate(keys), np.concatenate(parts))  # A_S = Σ_Q c_Q m_S/n(Q\S)
            del keys, parts
            positive = a > 0
            summed.append((size, unique[positive], a[positive]))
            del unique, a
        total = sum(len(keys) for _, keys, _ in summed)
        residuals = np.full((total, codes.shape[1]), -1, dtype=np.int64)
        weight, cost, dim = np.empty(total), np.ones(total), np.ones(total)
        at = 0
        while summed:  # written in place, a column at a time: no copy of the largest array
            size, keys, a = summed.pop(0)
            rows = slice(at, at + keys.size)
            _decode(keys, base, size, residuals[rows])
            weight[rows] = a
            for c in range(size):  # p_S = Π (n_a − 1)/n_a, m_S = Π (n_a − 1), in the attributes' order
                n = sizes[residuals[rows, c]]
                cost[rows] *= (n - 1) / n
                dim[rows] *= n - 1
            at += keys.size
        keep = dim > 0
        if not keep.all():
            residuals, weight, cost, dim = residuals[keep], weight[keep], cost[keep], dim[keep]
        return cls(domain, residuals, weight, cost, dim, codes, weights, cells)

    @cached_property
    def per_cell(self) -> sparse.csr_matrix | None:
        """Marginals × residuals: c_Q·p_S/n(Q\\S)², Q's weighted per-cell variance per unit of v_S (None
        unless a marginal workload). Built when first asked (max-variance, per-cell variances): it holds an
        entry per (marginal, subset)."""
        if self.marginal_codes is None:
            return None
        base = len(self.domain) + 1
        residual_keys = np.zeros(len(self.codes), dtype=np.int64)
        for c in range(self.codes.shape[1]):
            present = self.codes[:, c] >= 0
            residual_keys = np.where(present, residual_keys * base + self.codes[:, c] + 1, residual_keys)
        rows, columns, values = [], [], []
        for members, key, _, per in _subsets(self.domain, self.marginal_codes, self.marginal_weights):
            at = np.minimum(np.searchsorted(residual_keys, key), max(len(residual_keys) - 1, 0))
            kept = residual_keys[at] == key if len(residual_keys) else np.zeros(key.size, dtype=bool)
            rows.append(members[kept])
            columns.append(at[kept])
            values.append(per[kept])
        return sparse.csr_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(columns))),
                                 shape=(len(self.marginal_codes), len(self.codes)))

    @property
    def per_cell_dual(self) -> sparse.csr_matrix | None:
        """Marginals × residuals: the weight a marginal's dual variable puts on each residual per unit
        (max-variance's Aᵀλ). With a row per marginal and per residual it is `per_cell`."""
        return self.per_cell

    def queries(self) -> float:
        """Number of workload queries (cells of the workload's marginals)."""
        if self.cells is None:
            raise ValueError("query counts are known for marginal workloads only")
        return float(_counted(self.marginal_count, self.cells).sum())


_CHUNK = 1 << 19  # marginals whose subsets are enumerated at once (`_subsets`)


def _cells(domain: Domain, codes: np.ndarray) -> np.ndarray:
    """n(Q) of each marginal (rows of attribute indices, −1 padded), a column at a time."""
    sizes = np.append(np.asarray(domain.sizes, dtype=float), 1.0)  # index −1: no attribute
    out = np.ones(len(codes))
    for c in range(codes.shape[1]):
        out *= sizes[codes[:, c]]
    return out


def _summed(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys, ascending, and the values summed per key (no sort where the keys are distinct and
    ascending already, as rows listed in order give them)."""
    if np.all(keys[1:] > keys[:-1]):
        return keys, values
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, np.bincount(inverse, values, minlength=unique.size)


def _subsets(domain: Domain, codes: np.ndarray, weights: np.ndarray):
    """Every (marginal Q, subset S ⊆ Q), a chunk of marginals of one width at a time: yields (the chunk's
    rows, S's key (attribute index + 1 digits in base d + 1), |S|, c_Q·p_S/n(Q\\S)²)."""
    sizes = np.asarray(domain.sizes, dtype=float)
    base = len(domain) + 1
    width = (codes >= 0).sum(axis=1)
    for k in np.unique(width):
        every = np.flatnonzero(width == k)
        for start in range(0, every.size, _CHUNK):
            checkpoint(float(2**k * min(_CHUNK, every.size - start)))
            members = every[start:start + _CHUNK]
            attrs = codes[members, :k]
            n = [sizes[attrs[:, c]] for c in range(k)]
            ratio = [(x - 1) / x for x in n]
            weight = weights[members]
            for j in range(k + 1):
                for cols in combinations(range(k), j):
                    p, rest = np.ones(members.size), np.ones(members.size)  # products in the columns' order
                    key = np.zeros(members.size, dtype=np.int64)
                    for c in range(k):
                        if c in cols:
                            p *= ratio[c]
                            key = key * base + attrs[:, c] + 1
                        else:
                            rest *= n[c]
                    yield members, key, j, weight * p / rest**2


def _counted(count: np.ndarray | None, values: np.ndarray) -> np.ndarray:
    """`values` per row times the rows' multiplicities (None: one each)."""
    return values if count is None else count * values


def _dim(domain: Domain, s: Clique) -> int:
    return prod(domain.size_of(a) - 1 for a in s)


def _cost(domain: Domain, s: Clique) -> float:
    return prod((domain.size_of(a) - 1) / domain.size_of(a) for a in s)


def _codes(domain: Domain, cliques: Sequence[Clique]) -> np.ndarray:
    """Rows of ascending attribute indices, padded with −1."""
    index = {a: i for i, a in enumerate(domain.attributes)}
    width = max((len(set(q)) for q in cliques), default=0)
    out = np.full((len(cliques), width), -1, dtype=np.int64)
    for r, q in enumerate(cliques):
        ids = sorted(index[a] for a in set(q))
        out[r, : len(ids)] = ids
    return out


def _names(domain: Domain, codes: np.ndarray) -> list[Clique]:
    names = domain.attributes
    return [tuple(names[i] for i in row if i >= 0) for row in codes.tolist()]


def _decode(keys: np.ndarray, base: int, size: int, out: np.ndarray) -> None:
    """Write the attribute-index rows of encoded residual keys of `size` attributes each (digits 1..d in
    base d + 1) into the first `size` columns of `out`."""
    for pos in range(size - 1, -1, -1):
        keys, digit = np.divmod(keys, base)
        out[:, pos] = digit - 1


# ---------------------------------------------------------------------------
# Closed-form plans


@dataclass
class ResidualPlan:
    """Per-residual variances v_S and budget shares ρ_S at total budget ρ (Gaussian, zCDP); a row of a class
    table gives each of its residuals' v_S and ρ_S (the shares sum to ρ with the counts)."""

    table: ResidualTable
    rho: float
    variance: np.ndarray
    share: np.ndarray  # ρ_S, summing to rho

    @property
    def total_squared_error(self) -> float:
        return float(_counted(self.table.count, self.table.weight) @ self.variance)

    def cell_variances(self) -> np.ndarray:
        """Per-cell variance of every workload marginal (marginal workloads)."""
        if self.table.per_cell is None:
            raise ValueError("per-cell variances need a marginal workload (ResidualTable.from_marginals)")
        return np.asarray(self.table.per_cell @ self.variance) / self.table.marginal_weights

    def rmse(self) -> float:
        """√(total squared error / number of queries) (ResidualPlanner's reported RMSE)."""
        return float(np.sqrt(self.total_squared_error / self.table.queries()))


def sum_variance_plan(table: ResidualTable, rho: float = 1.0) -> ResidualPlan:
    """The closed form: minimize Σ A_S v_S subject to Σ p_S/(2 v_S) = ρ."""
    if rho <= 0:
        raise ValueError("the budget must be positive")
    root = np.sqrt(table.cost * table.weight)
    t = float(_counted(table.count, root).sum())
    variance = t * np.sqrt(table.cost / table.weight) / (2.0 * rho)
    return ResidualPlan(table, rho, variance, rho * root / t)


def svd_bound(table: ResidualTable) -> float:
    """HDMM's SVD bound of a marginal workload at unit noise per unit L2 sensitivity:
    (Σ_S m_S √κ_S)²/N = (Σ_S √(p_S A_S))²; the sum-of-variance plan attains it."""
    return float(_counted(table.count, np.sqrt(table.cost * table.weight)).sum() ** 2)


def max_variance_plan(table: ResidualTable, rho: float = 1.0) -> tuple[ResidualPlan, float]:
    """Minimize the largest per-cell variance over the workload's marginals (weighted by c_Q).

    By duality this is the sum-of-variance plan for the worst weighting λ of
    the marginals; λ is found by multiplicative updates (the gradient of the
    dual is the vector of per-cell variances). Returns the plan and the
    certified relative duality gap.
    """
    if table.per_cell is None:
        raise ValueError("max-variance needs a marginal workload (ResidualTable.from_marginals)")
    per_cell, dual_weight = table.per_cell, table.per_cell_dual  # c_Q p_S / n(Q\S)² (times class counts)
    lam = np.full(per_cell.shape[0], 1.0 / _counted(table.marginal_count, np.ones(per_cell.shape[0])).sum())
    best: tuple[float, np.ndarray] | None = None
    gap = np.inf
    for step in range(_MAX_VARIANCE_ROUNDS):
        checkpoint(4.0 * per_cell.size)
        weight = dual_weight.T @ lam
        ok = weight > 0
        root = np.sqrt(table.cost * np.where(ok, weight, 0.0))
        t = float(_counted(table.count, root).sum())
        variance = np.where(ok, t * np.sqrt(table.cost / np.where(ok, weight, 1.0)) / (2.0 * rho), 0.0)
        # residuals no marginal weights yet still need measuring: give them the largest scale
        variance = np.where(ok, variance, variance.max(initial=0.0))
        cell = per_cell @ variance
        worst, dual = float(cell.max()), float(_counted(table.marginal_count, lam) @ cell)
        if best is None or worst < best[0]:
            best = (worst, variance)
        gap = (best[0] - dual) / best[0]
        if gap < _MAX_VARIANCE_GAP:
            break
        lam = lam * (cell / cell.max()) ** (2.0 / np.sqrt(step + 1.0))
        lam /= _counted(table.marginal_count, lam).sum()
    variance = best[1]
    share = table.cost / (2.0 * variance)
    scale = _counted(table.count, share).sum() / rho  # renormalize the budget exactly
    plan = ResidualPlan(table, rho, variance * scale, share / scale)
    return plan, gap


# ---------------------------------------------------------------------------
# Measuring residuals


class Centering(Matrix):
    """n·I − J: the integer-valued centring matrix of one attribute (n times the projector on V_a)."""

    def __init__(self, n: int):
        self.shape = (n, n)

    def _matmat(self, x):
        return self.shape[0] * x - x.sum(axis=0, keepdims=True)

    def transpose(self) -> Matrix:
        return self

    def gram(self) -> Matrix:
        return Weighted(self, float(self.shape[0]))

    def column_norms(self, p: int):
        n = self.shape[0]
        return np.full(n, (n - 1.0) ** p + (n - 1.0))

    def pinv(self) -> Matrix:
        """(n·I − J)⁺ = (I − J/n)/n: the centring projector scaled by 1/n."""
        n = self.shape[0]
        return Weighted(Centering(n), 1.0 / (n * n))

    def spec(self) -> dict:
        return {"n": self.shape[0]}

    @classmethod
    def from_spec(cls, spec: dict) -> "Centering":
        return cls(int(spec["n"]))


def residual_strategy(domain: Domain, s: Clique) -> Matrix:
    """⊗_{a∈S}(n_a·I − J) on the S-marginal: measures exactly the residual u_S (the total for S = ∅)."""
    if not s:
        return Identity(1)
    return Kronecker([Centering(domain.size_of(a)) for a in s])


def is_residual_measurement(m: Measurement) -> bool:
    """Whether a measurement applied `residual_strategy` to its clique (so it estimates u_S alone)."""
    s = m.strategy
    return (
        isinstance(s, Kronecker)
        and len(s.factors) == len(m.clique) > 0
        and all(isinstance(f, Centering) for f in s.factors)
    )


def residual_scale(domain: Domain, s: Clique) -> int:
    """Π_{a∈S} n_a: the residual strategy's answers are this multiple of u_S (plus noise)."""
    return prod(domain.size_of(a) for a in s)


def center(values: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """Subtract the mean along each of `axes` (apply Π_S)."""
    for axis in axes:
        values = values - values.mean(axis=axis, keepdims=True)
    return values


class ResidualModel:
    """Least squares from residual measurements: û_S = Π_S y_S / Π n_a with variance σ²/Π n_a².

    Several measurements of one residual are combined by precision. Any
    marginal whose subsets are all measured is x̂_Q = Σ_{S⊆Q} û_S ⊗ 1/n(Q\\S),
    with per-cell variance Σ_S v_S p_S / n(Q\\S)².
    """

    def __init__(self, domain: Domain):
        self.domain = domain
        self._sum: dict[Clique, np.ndarray] = {}
        self._precision: dict[Clique, float] = {}

    def add(self, s: Clique, values: np.ndarray, variance: float) -> None:
        """One measurement of `residual_strategy(domain, s)` with i.i.d. noise of `variance`."""
        shape = self.domain.shape(s)
        scale = residual_scale(self.domain, s)
        estimate = center(np.asarray(values, dtype=float).reshape(shape), range(len(s))) / scale
        precision = scale**2 / variance
        self._sum[s] = self._sum.get(s, 0.0) + precision * estimate
        self._precision[s] = self._precision.get(s, 0.0) + precision

    def residual(self, s: Clique) -> tuple[np.ndarray, float]:
        """(û_S, v_S)."""
        if s not in self._precision:
            raise LookupError(f"residual {s} was not measured")
        return self._sum[s] / self._precision[s], 1.0 / self._precision[s]

    def marginal(self, q: Clique) -> tuple[np.ndarray, float]:
        """(x̂_Q flattened, per-cell variance)."""
        q = self.domain.canonical(q)
        shape = self.domain.shape(q)
        out = np.zeros(shape)
        variance = 0.0
        for k in range(len(q) + 1):
            for s in combinations(q, k):
                u, v = self.residual(s)
                rest = self.domain.size(q) // self.domain.size(s)
                out = out + u[tuple(slice(None) if a in s else None for a in q)] / rest
                variance += v * _cost(self.domain, s) / rest**2
        return out.ravel(), variance


def reconstruct_batch(shape: Sequence[int], residuals: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
    """Many marginals of one shape at once: Σ_{S⊆Q} û_S ⊗ 1/n(Q\\S).

    `residuals[cols]` stacks, for every marginal, û of its subset at positions
    `cols` (shape (m, *sizes of those positions)). Returns (m, *shape).
    """
    k = len(shape)
    m = residuals[()].shape[0]
    out = np.zeros((m, *shape))
    for j in range(k + 1):
        for cols in combinations(range(k), j):
            rest = prod(shape[c] for c in range(k) if c not in cols)
            idx = (slice(None),) + tuple(slice(None) if c in cols else None for c in range(k))
            out += residuals[cols][idx] / rest
    return out


# ---------------------------------------------------------------------------
# Measuring whole marginals instead (bundles of residuals)


@dataclass
class BundlePlan:
    """Budget shares of identity-marginal measurements and the exact error they achieve."""

    cliques: list[Clique]
    share: np.ndarray  # fractions of the budget, summing to 1
    unit_error: float  # total squared error at ρ = 1 (Gaussian) or ε = 1 (Laplace)


def marginal_bundle_plan(table: ResidualTable, cliques: Sequence[Clique], gaussian: bool = True) -> BundlePlan:
    """Shares s_C of the identity measurements of `cliques` minimizing Σ_S A_S / prec_S(s),
    prec_S = Σ_{C⊇S} s_C^k·κ/n(C\\S) (Gaussian: k = 1, κ = 2; Laplace: k = 2, κ = 1/2).

    Convex for Gaussian noise. Started from the residual closed form (marginal C
    gets the share the optimum gives residual C), solved by L-BFGS-B on the
    scale-free objective with a sparse residual × clique matrix.
    """
    if table.count is not None:
        raise ValueError("measuring whole marginals needs a row per residual (not residual classes)")
    domain = table.domain
    position = {s: i for i, s in enumerate(table.residuals)}
    rows, cols, vals = [], [], []
    top = max((len(s) for s in table.residuals), default=0)
    for j, c in enumerate(cliques):
        size = domain.size(c)
        for k in range(min(len(c), top) + 1):
            for s in combinations(c, k):
                i = position.get(s)
                if i is not None:
                    rows.append(i)
                    cols.append(j)
                    vals.append(domain.size(s) / size)
    kappa = sparse.csr_matrix((vals, (rows, cols)), shape=(len(table.residuals), len(cliques)))
    if np.any(np.asarray(kappa.sum(axis=1)).ravel() == 0):
        raise ValueError("some needed residual lies in none of the cliques")
    power, unit = (1, 2.0) if gaussian else (2, 0.5)
    a = table.weight
    kt = kappa.T.tocsr()

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        checkpoint(8.0 * kappa.nnz)
        s = np.maximum(x, 0.0)
        total = s.sum()
        prec = unit * (kappa @ s**power)
        err = float(a @ (1.0 / prec))
        value = err * total**power
        grad_err = -(kt @ (a / prec**2)) * unit * power * s ** (power - 1)
        return value, grad_err * total**power + err * power * total ** (power - 1)

    own = {c: position.get(c) for c in cliques}
    start = np.asarray(
        [np.sqrt(table.cost[own[c]] * a[own[c]]) if own[c] is not None else 0.0 for c in cliques]
    )
    start = np.maximum(start, start.max() * 1e-3) if start.max() > 0 else np.ones(len(cliques))
    start = start / start.sum()
    result = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[(1e-12, None)] * len(cliques))
    share = np.maximum(result.x, 0.0)
    share = share / share.sum()
    return BundlePlan(list(cliques), share, objective(share)[0])


def downward_closure(cliques: Iterable[Clique]) -> list[Clique]:
    """Every subset of every clique, each once (larger first)."""
    seen: dict[Clique, None] = {}
    for c in cliques:
        for k in range(len(c), -1, -1):
            for s in combinations(c, k):
                seen.setdefault(s, None)
    return sorted(seen, key=len, reverse=True)


__all__ = [
    "ResidualTable",
    "ResidualPlan",
    "sum_variance_plan",
    "max_variance_plan",
    "svd_bound",
    "Centering",
    "residual_strategy",
    "is_residual_measurement",
    "residual_scale",
    "center",
    "ResidualModel",
    "reconstruct_batch",
    "BundlePlan",
    "marginal_bundle_plan",
    "downward_closure",
]
