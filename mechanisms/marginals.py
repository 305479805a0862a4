"""Marginal algebra in the residual basis: exact least squares from noisy marginals.

The space of a marginal over clique C splits into orthogonal subspaces V_S, one
per subset S of C: V_S holds vectors centred along every attribute of S and
constant along C \\ S. Its component of the data is the *residual* u_S, the
S-marginal centred along each attribute of S (u_∅ is the total count).

A marginal measured with i.i.d. noise of variance σ² per cell gives, for every
S ⊆ C, an independent unbiased estimate of u_S (marginalize the noisy counts
to S, then centre) with covariance σ²·n(C\\S)·Π_S, Π_S the centring projector.
All estimates of one u_S share the shape Π_S, so generalized least squares over
the full domain decouples: û_S is their precision-weighted mean, with
Var(û_S) = v_S·Π_S and 1/v_S = Σ_{C ⊇ S} 1 / (σ_C² n(C\\S)).

That gives exact estimates and exact variances for any linear query whose
subsets are all covered, without any full-domain object, and the same formula
with σ_C² = Δ²/(2ρ_C) is the planner's data-free expected error.
"""

from __future__ import annotations

from itertools import combinations
from math import prod
from typing import Callable, Iterable, Mapping

import numpy as np

from mechanisms.arrays import kron, to_numpy
from mechanisms.domain import Domain
from mechanisms.matrices import Diagonal, Identity, Matrix, Ones
from mechanisms.workload import Block

Clique = tuple[str, ...]


def subsets(clique: Clique) -> list[Clique]:
    """Every subset of `clique`, each in the clique's (domain) order."""
    return [s for k in range(len(clique) + 1) for s in combinations(clique, k)]


def residual_precisions(
    domain: Domain, measured: Iterable[tuple[Clique, float]]
) -> dict[Clique, float]:
    """1/v_S for every residual S covered by the measured (clique, cell variance) pairs."""
    precision: dict[Clique, float] = {}
    for clique, cell_variance in measured:
        n_clique = domain.size(clique)
        for s in subsets(clique):
            rest = n_clique // domain.size(s)
            precision[s] = precision.get(s, 0.0) + 1.0 / (cell_variance * rest)
    return precision


def residual_of(domain: Domain, clique: Clique, counts: np.ndarray, s: Clique) -> np.ndarray:
    """The S-residual of a (noisy) marginal over `clique`: marginalize to S, centre along S."""
    t = np.asarray(counts, dtype=float).reshape(domain.shape(clique))
    drop = tuple(i for i, a in enumerate(clique) if a not in s)
    t = t.sum(axis=drop) if drop else t
    for axis in range(t.ndim):
        t = t - t.mean(axis=axis, keepdims=True)
    return t


def expand(domain: Domain, residuals: Mapping[Clique, np.ndarray], clique: Clique) -> np.ndarray:
    """The marginal over `clique` rebuilt from its residuals: Σ_S u_S ⊗ 1/n(Q\\S), flattened."""
    shape = domain.shape(clique)
    out = np.zeros(shape)
    for s in subsets(clique):
        u = residuals[s]
        idx = tuple(slice(None) if a in s else None for a in clique)
        out = out + u[idx] / (domain.size(clique) // domain.size(s))
    return out.ravel()


# ---------------------------------------------------------------------------
# Row-wise second moments of a block in the residual basis


def _ones_product(f: Matrix, n: int) -> np.ndarray:
    return np.asarray(to_numpy(f.matvec(np.ones(n))), dtype=float)


def _row_dot(f: Matrix, g: Matrix) -> np.ndarray:
    """Row-wise inner products of two factors with the same rows."""
    diagonal = (Identity, Diagonal)
    if isinstance(f, diagonal) and isinstance(g, diagonal):
        fv = np.ones(f.shape[0]) if isinstance(f, Identity) else to_numpy(f.values)
        gv = np.ones(g.shape[0]) if isinstance(g, Identity) else to_numpy(g.values)
        return fv * gv
    if isinstance(f, Ones) and isinstance(g, Ones):
        return np.full(f.shape[0], float(f.shape[1]))
    return np.asarray(to_numpy((f.dense() * g.dense()).sum(axis=1)), dtype=float)


def _factor_moments(f: Matrix, g: Matrix, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-row products of f and g restricted to V_{a} (centred) and V_∅ (constant) of one axis."""
    f1, g1 = _ones_product(f, n), _ones_product(g, n)
    constant = f1 * g1 / (n * n)
    centred = _row_dot(f, g) - f1 * g1 / n
    return centred, constant


def row_moments(
    first: Block, second: Block, domain: Domain, variance: Callable[[Clique], float]
) -> np.ndarray:
    """Per-row Cov(first·x̂, second·x̂) = Σ_S v_S ⟨B1_S row, B2_S row⟩ for two blocks with equal rows.

    `variance(S)` returns v_S. Only subsets of the two cliques' intersection can
    contribute (a Total factor has no centred component).
    """
    if first.group_by != second.group_by:
        raise ValueError("row moments need blocks with the same GROUP BY")
    union = domain.canonical(set(first.attributes(domain)) | set(second.attributes(domain)))
    shared = domain.canonical(set(first.attributes(domain)) & set(second.attributes(domain)))
    rows = first.num_rows(domain)
    out = np.zeros(rows)
    pairs = []
    for t in first.terms:
        for u in second.terms:
            ft, fu = first.term_factors(t, domain, union), second.term_factors(u, domain, union)
            moments = [_factor_moments(a, b, domain.size_of(name)) for a, b, name in zip(ft, fu, union)]
            pairs.append((t.coef * u.coef, moments))
    for s in subsets(shared):
        v = variance(s)
        if v == 0.0:
            continue
        for coef, moments in pairs:
            vec = np.ones(1)
            for name, (centred, constant) in zip(union, moments):
                vec = kron(vec, centred if name in s else constant)
            out += v * coef * vec
    return out


def residual_weights(block: Block, domain: Domain) -> dict[Clique, float]:
    """a_S = Σ_rows ‖B_S row‖²: the block's total squared error is Σ_S a_S v_S."""
    clique = block.attributes(domain)
    per_term = [
        (t.coef, block.term_factors(t, domain, clique)) for t in block.terms
    ]
    out: dict[Clique, float] = {}
    sums = []
    for c1, f1 in per_term:
        for c2, f2 in per_term:
            moments = [
                tuple(m.sum() for m in _factor_moments(a, b, domain.size_of(name)))
                for a, b, name in zip(f1, f2, clique)
            ]
            sums.append((c1 * c2, moments))
    for s in subsets(clique):
        total = 0.0
        for coef, moments in sums:
            total += coef * prod(
                centred if name in s else constant
                for name, (centred, constant) in zip(clique, moments)
            )
        if abs(total) > 1e-12:
            out[s] = total
    return out


__all__ = [
    "Clique",
    "subsets",
    "residual_precisions",
    "residual_of",
    "expand",
    "row_moments",
    "residual_weights",
]
