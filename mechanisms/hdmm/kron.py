"""OPT⊗ and OPT₊: Kronecker-product strategies for (unions of) Kronecker workloads.

OPT⊗ (thesis §3.5, Def. 19–20). For a Kronecker strategy Q = ⊗Q_i with unit
sensitivity per factor and a workload gram Σ_k c_k ⊗_i B_i[k],

    TSE = Σ_k c_k Π_i tr[(Q_iᵀQ_i)⁺ B_i[k]],

so with every factor but Q_i fixed the error is exactly the OPT₀ objective of
one axis for the surrogate gram Σ_k c_k Π_{i'≠i} tr[...] B_i[k]
(`KronGram.surrogate`). Block coordinate descent cycles over the axes,
replacing each factor by OPT₀ of its surrogate (warm-started, kept only when
it lowers the error), until a sweep gains less than `tol`. For a single
Kronecker product one sweep is exact: the optimum factorizes.

Per axis the template follows the thesis (§3.8): Total when the axis is only
ever summed; p-Identity with p = 1 when its bases lie in span{I, 11ᵀ} (the
symmetric optimum, a scalar search), else p = n_i // 16 (Laplace); the convex
optimum (Gaussian).

OPT₊ (Def. 21) gives every sub-workload its own OPT⊗ strategy and splits the
budget in closed form: with E_j the unit-budget error of part j and error
scaling as (share)^-k (k = 2 for ε and Laplace, 1 for ρ and Gaussian), shares
∝ E_j^{1/(k+1)} give the total (Σ_j E_j^{1/(k+1)})^{k+1}. Each part is then
answered from its own measurement (local least squares).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from mechanisms.accounting import budget_split
from mechanisms.hdmm.error import explicit_error, kron_error, sensitivity
from mechanisms.hdmm.opt0 import (
    Opt0Result, opt0_gaussian, opt0_laplace, p_identity_exchangeable, p_identity_pinv_gram,
)
from mechanisms.hdmm.workload import KronGram

__all__ = ["KronStrategy", "PlusStrategy", "opt_kron", "opt_plus", "rounded", "round_factor"]


@dataclass(frozen=True, eq=False)
class KronStrategy:
    """⊗ factors (one explicit matrix per axis, unit sensitivity each) and the error at unit noise."""

    factors: list[np.ndarray]
    templates: list[str]
    error: float
    sweeps: int
    seconds: float

    def summed_axes(self) -> list[int]:
        """Axes whose factor is the single Total row (they can be summed out before measuring)."""
        return [i for i, t in enumerate(self.templates) if t == "Total"]


@dataclass(frozen=True, eq=False)
class PlusStrategy:
    """One Kronecker strategy per sub-workload, its budget share, and the total error."""

    parts: list[KronStrategy]
    shares: list[float]
    error: float
    seconds: float


def _axis_opt0(
    v: np.ndarray, p: int, kind: str, seed: int, restarts: int, warm, max_iter: int, gap_tol: float, memo: dict | None
) -> Opt0Result:
    """OPT₀ of one axis. Cold starts are memoized by the gram's shape (V up to scale): the
    same optimum serves every axis, and every part of an OPT₊ union, with the same queries."""
    key = None
    if memo is not None and warm is None:
        trace = max(float(np.trace(v)), 1e-300)
        shape = hashlib.sha256(np.round(v / trace, 12).tobytes()).hexdigest()
        key = (p, kind, restarts, max_iter, gap_tol, shape)
        if key in memo:
            cached = memo[key]
            return replace(cached, error=_axis_error(v, cached, p))
    if p == 2:
        result = opt0_gaussian(v, tol=gap_tol, max_iter=max_iter, init=warm)
    elif kind == "identity-total":
        result = p_identity_exchangeable(v)
    else:
        result = opt0_laplace(v, restarts=restarts, seed=seed, init=warm, max_iter=max_iter)
    if key is not None:
        memo[key] = result
    return result


def _pinv_gram(q: np.ndarray, template: str, theta: np.ndarray | None = None) -> np.ndarray:
    """(QᵀQ)⁺ of an axis factor: closed forms for Identity, Total (11ᵀ/n²) and p-Identity (Θ given),
    else Q⁺Q⁺ᵀ by the SVD."""
    n = q.shape[1]
    if template == "Identity":
        return np.eye(n)
    if template == "Total":
        return np.full((n, n), 1.0 / n**2)
    if template.startswith("p-Identity") and theta is not None:
        return p_identity_pinv_gram(theta)
    pinv = np.linalg.pinv(q)
    return pinv @ pinv.T


def _axis_error(v: np.ndarray, result: Opt0Result, p: int) -> float:
    """‖Q‖_p² tr[(QᵀQ)⁺V] of an axis optimum for another gram V; p-Identity strategies hold a
    scaled identity, so they support every V and need no support check."""
    if not result.template.startswith("p-Identity"):
        return explicit_error(v, result.strategy, p)
    x = _pinv_gram(result.strategy, result.template, result.warm)
    return sensitivity(result.strategy, p) ** 2 * float(np.sum(x * v))


def opt_kron(
    gram: KronGram,
    p: int,
    restarts: int = 1,
    seed: int = 0,
    sweeps: int = 10,
    tol: float = 1e-4,
    max_iter: int = 1000,
    gap_tol: float = 1e-5,
    memo: dict | None = None,
) -> KronStrategy:
    """Block-coordinate OPT⊗ for a (union-of-)Kronecker workload gram; p = 1 Laplace, 2 Gaussian.

    `max_iter` bounds each axis optimization (L-BFGS-B iterations for Laplace,
    dual fixed-point steps for Gaussian, which stop at relative gap `gap_tol`);
    `memo` (a dict, by default this call's own; shared between calls by OPT₊) reuses cold-start
    axis optima: axes with the same queries (a product of one workload on every axis) are
    optimized once.
    """
    started = time.perf_counter()
    memo = {} if memo is None else memo  # axes with the same queries (up to scale) share their optimum
    d = len(gram.sizes)
    kinds = [gram.axis_kind(i) for i in range(d)]
    factors, templates = [], []
    for n, kind in zip(gram.sizes, kinds):
        factors.append(np.ones((1, n)) if kind == "total" else np.eye(n))
        templates.append("Total" if kind == "total" else "Identity")
    traces = [gram.traces(i, _pinv_gram(q, t)) for i, (q, t) in enumerate(zip(factors, templates))]
    error = gram.total(traces)
    warm: list[np.ndarray | None] = [None] * d
    free = [i for i in range(d) if kinds[i] != "total"]
    done = 0
    for done in range(1, sweeps + 1):
        before = error
        for i in free:
            surrogate = gram.surrogate(i, traces)
            result = _axis_opt0(
                surrogate, p, kinds[i], seed + 7919 * i, restarts if done == 1 else 1, warm[i], max_iter, gap_tol, memo
            )
            if result.error < error * (1 - 1e-12):
                factors[i], templates[i], warm[i] = result.strategy, result.template, result.warm
                traces[i] = gram.traces(i, _pinv_gram(result.strategy, result.template, result.warm))
                error = gram.total(traces)
        single_term = len(gram.coefs) == 1
        if single_term or before - error <= tol * before:
            break
    return KronStrategy(factors, templates, error, done, time.perf_counter() - started)


def opt_plus(parts: Sequence[KronGram], p: int, **kwargs) -> PlusStrategy:
    """OPT₊: OPT⊗ per part (axis optima shared between parts), closed-form split, local least squares."""
    started = time.perf_counter()
    memo: dict = kwargs.pop("memo", {})
    strategies = [opt_kron(part, p, memo=memo, **kwargs) for part in parts]
    shares, error = budget_split([s.error for s in strategies], 2 if p == 1 else 1)
    return PlusStrategy(strategies, shares, error, time.perf_counter() - started)


def round_factor(factor: np.ndarray, decimals: int, p: int) -> np.ndarray:
    """The factor scaled to largest column Lp norm 1, rounded to `decimals` (scaling changes no error)."""
    return np.round(factor / sensitivity(factor, p), decimals)


def rounded(strategy: KronStrategy, gram: KronGram, p: int, decimals: int) -> KronStrategy:
    """The strategy with short-decimal optimized factors and its exact error recomputed.

    Short decimals keep the measurement lattice coarse (exact integer answers
    stay small); the error is that of the rounded matrices, ∞ if rounding
    broke the support.
    """
    factors = [
        f if t in ("Identity", "Total") else round_factor(f, decimals, p)
        for f, t in zip(strategy.factors, strategy.templates)
    ]
    return KronStrategy(factors, strategy.templates, kron_error(gram, factors, p), strategy.sweeps, strategy.seconds)
