"""HDMM's exact expected error and its SVD lower bound, computed from grams alone.

For a strategy Q answered by least squares (x̂ = Q⁺y) and a workload W that Q
supports, the expected total squared error is (McKenna's thesis, Prop. 9)

    TSE = v · ‖Q‖_p² · tr[(QᵀQ)⁺ WᵀW],

with ‖Q‖_p the largest column Lp norm (p = 1: Laplace, p = 2: Gaussian) and v
the noise variance per unit of sensitivity: 2/ε² for Laplace, σ² for Gaussian
(σ from the analytic Gaussian for (ε, δ), as the thesis' tables use, or 1/(2ρ) for ρ-zCDP). The
functions here return the error at v = 1; multiply by v.

The SVD bound (Li & Miklau; thesis Def. 12 and Thm. 3) is a lower bound on the
TSE of every strategy: (Σ σ_i(W))² / n, a product over Kronecker factors;
marginal workloads use the corrected Thm 10 (`MarginalAlgebra.svd_bound`).
Per-query variances of any implicit strategy come from the least squares that
will answer (`per_query_variance`); marginal strategies from the residual
least squares (`mechanisms.reconstruction`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mechanisms.reconstruction.clique import CliqueLeastSquares
from mechanisms.domain import Domain
from mechanisms.hdmm.marginals import MarginalAlgebra
from mechanisms.hdmm.workload import KronGram
from mechanisms.matrices import Matrix
from mechanisms.measurement import Measurement
from mechanisms.workload import Block

__all__ = [
    "laplace_variance",
    "support_residual",
    "explicit_error",
    "kron_error",
    "svd_bound",
    "union_svd_bound",
    "sensitivity",
    "per_query_variance",
]

# A strategy supports a workload when tr[WᵀW (I − Q⁺Q)] is below this fraction of tr[WᵀW].
SUPPORT_TOL = 1e-9


def laplace_variance(epsilon: float) -> float:
    """Variance of Laplace noise per unit of L1 sensitivity at ε: 2/ε²."""
    return 2.0 / epsilon**2


def sensitivity(q: np.ndarray, p: int) -> float:
    """Largest column Lp norm of an explicit strategy."""
    return float((np.abs(q) ** p).sum(axis=0).max() ** (1.0 / p))


def support_residual(v: np.ndarray, q: np.ndarray) -> float:
    """tr[V (I − Q⁺Q)] / tr[V]: zero exactly when Q supports a workload with gram V."""
    projector = np.linalg.pinv(q) @ q
    trace = float(np.trace(v))
    if trace == 0.0:
        return 0.0
    return float(np.trace(v) - np.sum(v * projector)) / trace


def explicit_error(v: np.ndarray, q: np.ndarray, p: int) -> float:
    """‖Q‖_p² tr[(QᵀQ)⁺ V] for an explicit strategy (∞ if Q does not support V)."""
    if support_residual(v, q) > SUPPORT_TOL:
        return float("inf")
    return sensitivity(q, p) ** 2 * float(np.sum(np.linalg.pinv(q.T @ q, hermitian=True) * v))


def kron_error(gram: KronGram, factors: Sequence[np.ndarray], p: int) -> float:
    """‖⊗Q_i‖_p² Σ_k c_k Π_i tr[(Q_iᵀQ_i)⁺ B_i[k]] for a Kronecker strategy (∞ if unsupported).

    Support is checked term by term: each term's factors must lie in the row
    spaces of the strategy factors.
    """
    traces, scale = [], 1.0
    for axis, q in enumerate(factors):
        q = np.asarray(q, dtype=float)
        pinv = np.linalg.pinv(q)
        projector = pinv @ q
        for b in gram.bases[axis]:
            size = max(float(np.abs(b).max()), 1e-300)
            if float(np.abs(b - projector @ b @ projector).max()) > SUPPORT_TOL * size:
                return float("inf")
        traces.append(gram.traces(axis, pinv @ pinv.T))
        scale *= sensitivity(q, p) ** 2
    return scale * gram.total(traces)


def per_query_variance(
    block: Block, domain: Domain, clique: tuple[str, ...], strategy: Matrix, p: int, noise_variance: float = 1.0
) -> np.ndarray:
    """The variance of each answer of `block` when `strategy` (over `clique`'s marginal) is measured
    with noise of variance `noise_variance` per unit of Lp sensitivity and answered by least squares:
    v·‖A‖_p²·w_rᵀ(AᵀA)⁺w_r per row, through the implicit least squares (no data needed)."""
    variance = noise_variance * strategy.sensitivity(p) ** 2
    model = CliqueLeastSquares(domain, clique, [Measurement(clique, "", 0.0, variance, np.empty(0), None, strategy)])
    if not model.covers(block):
        raise ValueError(f"the strategy does not determine block {block.name!r}")
    return model.variance(block)


def svd_bound(v: np.ndarray) -> float:
    """(Σ_i sqrt(λ_i(V)))² / n: the SVD lower bound of a workload with gram V."""
    eig = np.clip(np.linalg.eigvalsh(0.5 * (v + v.T)), 0.0, None)
    return float(np.sqrt(eig).sum() ** 2 / v.shape[0])


def union_svd_bound(gram: KronGram) -> float | None:
    """The SVD bound of W = (⊗ fixed factors) ⊗ (a marginal workload on the other axes), else None.

    This covers single Kronecker products (every axis fixed) and marginal
    workloads. Axes with one base shared by every term factor out (Thm 3); the
    remaining axes must hold bases in span{I, 11ᵀ}, whose gram is then an exact
    marginal gram with the corrected Thm 10 bound (e.g. all prefix-marginals
    with the numeric attributes always prefixed).
    """
    fixed = [i for i in range(len(gram.sizes)) if len(gram.bases[i]) == 1]
    rest = [i for i in range(len(gram.sizes)) if i not in fixed]
    if any(gram.axis_kind(i) == "general" for i in rest):
        return None
    bound = float(np.prod([svd_bound(gram.bases[i][0]) for i in fixed]))
    if rest:
        reduced = KronGram.from_terms(
            [gram.sizes[i] for i in rest], [(c, [f[i] for i in rest]) for c, f in gram.terms()], gram.queries
        )
        bound *= MarginalAlgebra(reduced.sizes).svd_bound(reduced.marginal_weights())
    else:
        bound *= float(gram.coefs.sum())
    return bound
