"""OPT₀: optimized explicit strategies for one workload gram V = WᵀW.

Gaussian noise (thesis §3.3.1). The error ‖Q‖₂² tr[(QᵀQ)⁺V] depends on Q only
through X = QᵀQ, and the problem min tr[X⁻¹V] s.t. diag(X) = 1, X ≻ 0 is
convex. We solve its Lagrange dual over the n multipliers λ > 0 instead of the
n(n−1)/2 entries of X: with D = diag(λ)^½ and M = DVD,

    g(λ) = 2 tr[M^½] − Σλ_i,     X(λ) = D⁻¹ M^½ D⁻¹,     ∂g/∂λ_i = X(λ)_ii − 1,

and every g(λ) is a certified lower bound on the error of *any* strategy
(λ ≡ const gives the SVD bound). λ is updated by the multiplicative fixed
point λ_i ← λ_i · X(λ)_ii², one eigendecomposition per step; the best
diagonal-normalized X(λ) seen is returned, with the duality gap. A tiny ridge
(V + ηI) makes X(λ) full rank when V is singular (e.g. WIDTH 32 ranges).

Laplace noise (thesis §3.3.2): p-Identity strategies Q(Θ) = [I; Θ]·D with
D = diag(1 + 1ᵀΘ)⁻¹, Θ ≥ 0 (p × n), so every column has L1 norm 1. With
s = 1 + Θᵀ1, C = diag(s) V diag(s), A = I + ΘᵀΘ and R = (I + ΘΘᵀ)⁻¹,

    f(Θ) = tr[A⁻¹C] = tr C − tr[R ΘCΘᵀ],
    ∇f = −2 R(ΘC − ΘCΘᵀRΘ) + 1_p (2 diag(A⁻¹C) / s)ᵀ   (Woodbury),

one p×n×n product per evaluation (or p gram products for an implicit V),
minimized by L-BFGS-B under Θ ≥ 0 from seeded random restarts, each run and the restarts
stopped when they stop helping (`mechanisms.hdmm.restarts`). Where several starts are allowed
and an evaluation is cheap (`_LEAD_WORK`), the hierarchical start (Θ = p contiguous block sums:
the two-level hierarchy) goes first and random restarts race it: at n = 64 it ends where the
best of 30 random starts does on ALL RANGE and PREFIX (15% below it on WIDTH 16) in about 30
iterations. On larger domains a random start stays first: from the hierarchical start PREFIX
ends 1.3-1.5% higher at n = 160-200 and 10% higher at n = 1024. A strategy's gram inverse has
the closed form (QᵀQ)⁻¹ = diag(s)(I − ΘᵀRΘ)diag(s) (`p_identity_pinv_gram`), used by OPT⊗
instead of an SVD.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from mechanisms.arrays import to_numpy, xp
from mechanisms.hdmm.error import explicit_error
from mechanisms.hdmm.restarts import multistart
from mechanisms.hdmm.workload import GramOperator
from mechanisms.interruption import checkpoint

__all__ = [
    "Opt0Result", "p_identity_objective", "p_identity_strategy", "p_identity_pinv_gram", "hierarchical_start",
    "p_identity_exchangeable", "opt0_laplace", "opt0_gaussian",
]

_TOTAL_TOL = 1e-12  # V counts as a multiple of 11ᵀ below this relative residual
# p-Identity optima have column sums s = 1 + 1ᵀΘ of order one. A restart that runs away (s → ∞)
# makes tr C − tr[RΘCΘᵀ] cancel catastrophically (relative error ≈ 1e-16·s²), so beyond this
# column sum its error is recomputed exactly. (An upper bound on Θ instead would change
# L-BFGS-B's steps everywhere and converge worse.)
_RUNAWAY = 1e3
# The hierarchical start leads where one evaluation costs at most this many flops (p·n² ≤ 1e5:
# n ≤ 112 at p = n // 16). Against random-led solves, PREFIX ends within ±0.7% up to there
# (ALL RANGE and WIDTH 16 up to 15% lower) and 1.3-1.5% higher at n = 160-200.
_LEAD_WORK = 1e6


@dataclass(frozen=True, eq=False)
class Opt0Result:
    """An explicit strategy (unit sensitivity) and its error ‖Q‖² tr[(QᵀQ)⁺V] at unit noise.

    `lower_bound` is a certified bound on the error of every strategy (the
    Gaussian dual value; None for Laplace, whose only bound is the SVD bound). `warm` restarts the
    optimizer where it stopped: Θ for p-Identity, the dual λ for the convex
    template (None for Total).
    """

    strategy: np.ndarray
    error: float
    lower_bound: float | None
    template: str
    iterations: int
    seconds: float
    warm: np.ndarray | None = None


def _total_strategy(v: np.ndarray, started: float) -> Opt0Result | None:
    """The one-row Total strategy when V is a multiple of 11ᵀ (it is then optimal)."""
    n = v.shape[0]
    mean = float(v.mean())
    if mean <= 0 or float(np.abs(v - mean).max()) > _TOTAL_TOL * mean:
        return None
    error = float(v.sum()) / n**2
    return Opt0Result(np.ones((1, n)), error, error, "Total", 0, time.perf_counter() - started)


# ---------------------------------------------------------------------------
# Laplace: p-Identity


def p_identity_objective(theta, v, p: int):
    """(f, ∇f) of the p-Identity objective for flattened Θ (p·n,) and a gram V.

    V is an array of the current array module or a `GramOperator` (then the
    p×n×n product becomes p applications of V, e.g. O(pn) for ranges).
    """
    checkpoint(10.0 * np.size(theta) * (np.size(theta) // p))  # p products with the n × n gram
    m = xp()
    t = m.asarray(theta).reshape(p, -1)
    s = 1.0 + t.sum(axis=0)
    if isinstance(v, GramOperator):
        tc = m.asarray(v.right(t * s)) * s  # ΘC
        c_diag = m.asarray(v.diagonal) * s * s
    else:
        v = m.asarray(v)
        tc = ((t * s) @ v) * s
        c_diag = m.diagonal(v) * s * s
    tct = tc @ t.T  # ΘCΘᵀ
    r = m.linalg.inv(m.eye(p) + t @ t.T)
    f = c_diag.sum() - m.sum(r * tct)
    rtc = r @ tc
    a_inv_c_diag = c_diag - m.sum(t * rtc, axis=0)
    # R(ΘC − ΘCΘᵀRΘ) = RΘC − (R·ΘCΘᵀ·R)Θ: four p×p×n products in all.
    grad = -2.0 * (rtc - (r @ tct @ r) @ t) + (2.0 * a_inv_c_diag / s)[None, :]
    return float(f), to_numpy(grad).ravel()


def p_identity_strategy(theta: np.ndarray) -> np.ndarray:
    """Q(Θ) = [I; Θ] diag(1 + 1ᵀΘ)⁻¹ as an explicit (n + p) × n matrix."""
    theta = np.asarray(theta, dtype=float)
    n = theta.shape[1]
    return np.vstack([np.eye(n), theta]) / (1.0 + theta.sum(axis=0))


def p_identity_pinv_gram(theta: np.ndarray) -> np.ndarray:
    """(QᵀQ)⁻¹ for Q = Q(Θ): diag(s)(I − Θᵀ(I + ΘΘᵀ)⁻¹Θ)diag(s) with s = 1 + 1ᵀΘ (Woodbury).

    Q has full column rank (it holds a scaled identity), so this is also (QᵀQ)⁺. A run-away Θ
    (column sums beyond `_RUNAWAY`) would cancel catastrophically: it goes through the SVD instead.
    """
    theta = np.asarray(theta, dtype=float)
    p, n = theta.shape
    s = 1.0 + theta.sum(axis=0)
    if s.max() > _RUNAWAY:
        pinv = np.linalg.pinv(p_identity_strategy(theta))
        return pinv @ pinv.T
    inner = np.eye(n) - theta.T @ np.linalg.solve(np.eye(p) + theta @ theta.T, theta)
    return inner * s[:, None] * s[None, :]


def hierarchical_start(p: int, n: int) -> np.ndarray:
    """Θ (p × n) whose row j sums the j-th of p contiguous blocks of cells: the two-level
    hierarchical strategy (cells and block sums, weighted equally) as a p-Identity start."""
    return (np.arange(n) * p // n == np.arange(p)[:, None]).astype(float)


def opt0_laplace(
    v: np.ndarray | GramOperator,
    p: int | None = None,
    restarts: int = 3,
    seed: int = 0,
    max_iter: int = 2000,
    init: np.ndarray | None = None,
    ftol: float = 1e-9,
) -> Opt0Result:
    """Best p-Identity strategy for gram V over up to `restarts` seeded starts (p defaults to n // 16).

    `init` (p × n) is tried first (warm start); then, if `restarts` > 1 and an evaluation
    is cheap (`_LEAD_WORK`), the hierarchical start, raced from iteration 20 with "settled"
    patience (`mechanisms.hdmm.restarts`); the others draw
    Θ ~ U(0, 1) from `numpy.random.default_rng(seed)`, so results are
    deterministic for a seed. Runs and restarts stop when they stop helping
    (`mechanisms.hdmm.restarts`).
    """
    started = time.perf_counter()
    if isinstance(v, GramOperator):
        n, dv = v.n, v
    else:
        v = np.asarray(v, dtype=float)
        v = 0.5 * (v + v.T)
        total = _total_strategy(v, started)
        if total is not None:
            return total
        n, dv = v.shape[0], xp().asarray(v)
    p = max(1, n // 16) if p is None else p
    rng = np.random.default_rng(seed)
    work = 10.0 * p * n * n  # per evaluation, as its checkpoint counts (about one per iteration)
    first = [] if init is None else [np.asarray(init, dtype=float).reshape(p, n).ravel()]
    cold = (rng.uniform(0.0, 1.0, p * n) for _ in itertools.count())
    lead = restarts > 1 and work <= _LEAD_WORK
    if lead:
        cold = itertools.chain([hierarchical_start(p, n).ravel()], cold)
    starts = itertools.chain(first, itertools.islice(cold, max(restarts - len(first), 0)))

    def exact(theta: np.ndarray, f: float) -> float:
        if 1.0 + theta.reshape(p, n).sum(axis=0).max() > _RUNAWAY:  # the Woodbury value may be rounding noise
            dense = v.dense() if isinstance(v, GramOperator) else v
            return explicit_error(dense, p_identity_strategy(theta.reshape(p, n)), 1)
        return f

    found = multistart(
        lambda x: p_identity_objective(x, dv, p), starts, max_iter, ftol=ftol, final=exact, warm=len(first),
        work_per_iteration=work, **({"patience": "settled", "first_check": 20} if lead else {}),
    )
    best_theta = found.x.reshape(p, n)
    return Opt0Result(
        p_identity_strategy(best_theta), found.fun, None, f"p-Identity(p={p})", found.iterations,
        time.perf_counter() - started, best_theta,
    )


def p_identity_exchangeable(v: np.ndarray) -> Opt0Result:
    """The best symmetric p = 1 p-Identity strategy for V in span{I, 11ᵀ} (cells exchangeable).

    With Θ = t·1ᵀ: A = I + t²11ᵀ and C = (1 + t)²V, so
    f(t) = (1 + t)² (tr V − t² sum(V) / (1 + n t²)), a one-dimensional search
    (over u = t/(1 + t) ∈ [0, 1)). This is the thesis' I/T template, e.g.
    [aI; (1 − a)T] in Example 4.
    """
    started = time.perf_counter()
    v = np.asarray(v, dtype=float)
    total = _total_strategy(0.5 * (v + v.T), started)
    if total is not None:
        return total
    n, trace, mass = v.shape[0], float(np.trace(v)), float(v.sum())

    def f(u: float) -> float:
        t = u / (1.0 - u)
        return (1.0 + t) ** 2 * (trace - t * t * mass / (1.0 + n * t * t))

    res = minimize_scalar(f, bounds=(0.0, 1.0 - 1e-9), method="bounded", options={"xatol": 1e-12})
    u = float(res.x) if res.fun < f(0.0) else 0.0
    theta = np.full((1, n), u / (1.0 - u))
    return Opt0Result(
        p_identity_strategy(theta), min(float(res.fun), f(0.0)), None, "p-Identity(p=1)", int(res.nfev),
        time.perf_counter() - started, theta,
    )


# ---------------------------------------------------------------------------
# Gaussian: the convex problem, through its dual


def opt0_gaussian(
    v: np.ndarray, tol: float = 1e-5, max_iter: int = 200, ridge: float = 1e-8, init: np.ndarray | None = None
) -> Opt0Result:
    """The optimal strategy for Gaussian noise, to a relative duality gap `tol`.

    Returns Q with QᵀQ = X, diag(X) = 1 (so ‖Q‖₂ = 1); `lower_bound` is the
    dual value g(λ) on V itself, a bound no strategy can beat. `init` is a
    starting λ (e.g. the `warm` of an earlier, similar solve).
    """
    started = time.perf_counter()
    v = np.asarray(v, dtype=float)
    v = 0.5 * (v + v.T)
    total = _total_strategy(v, started)
    if total is not None:
        return total
    m = xp()
    n = v.shape[0]
    dv = m.asarray(v)
    eta = ridge * float(m.trace(dv)) / n
    regular = dv + eta * m.eye(n)
    lam = m.ones(n) if init is None else m.asarray(init, dtype=float)
    best_error, best, iterations = float("inf"), None, 0
    for iterations in range(1, max_iter + 1):
        checkpoint(2.0 * n**3)  # an n × n eigendecomposition and products
        d = m.sqrt(lam)
        mu, u = m.linalg.eigh(regular * d[:, None] * d[None, :])
        root = m.sqrt(m.clip(mu, eta * float(lam.min()), None))  # DV_ηD ⪰ η·min λ: exact floor
        diag_x = (u * u) @ root / lam  # diag X(λ), X(λ) = D⁻¹ M^½ D⁻¹
        # The unit-diagonal X̃ = S X(λ) S (S = diag_x^-½) has tr[X̃⁻¹V] = Σ_k (UᵀBU)_kk / r_k
        # with B = diag(b) V diag(b), b = d·sqrt(diag_x).
        b = d * m.sqrt(diag_x)
        error = float((m.sum(u * ((dv * b[:, None] * b[None, :]) @ u), axis=0) / root).sum())
        if error < best_error:
            best_error, best = error, (u, root, b, lam)
        if best_error - float(2.0 * root.sum() - lam.sum()) <= tol * best_error:
            break
        lam = lam * diag_x**2
    u, root, b, best_lam = best
    q = m.sqrt(root)[:, None] * u.T / b[None, :]  # QᵀQ = X̃: Q = R^½ Uᵀ D⁻¹ S
    lower = max(_dual_value(dv, lam), _dual_value(dv, best_lam))
    return Opt0Result(
        to_numpy(q), best_error, lower, "convex", iterations, time.perf_counter() - started, to_numpy(best_lam)
    )


def _dual_value(v, lam) -> float:
    """g(λ) = 2 tr[(DVD)^½] − Σλ: a lower bound on tr[X⁻¹V] over diag(X) = 1."""
    m = xp()
    d = m.sqrt(lam)
    mu = m.linalg.eigvalsh(v * d[:, None] * d[None, :])
    return float(2.0 * m.sqrt(m.clip(mu, 0.0, None)).sum() - lam.sum())
