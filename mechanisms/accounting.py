"""Zero-concentrated DP (zCDP) accounting and conversion to (epsilon, delta)-DP.

The conversion is the one of Canonne, Kamath and Steinke (2020), "The Discrete Gaussian
for Differential Privacy", Section 2.3: rho-zCDP implies (epsilon, delta)-DP for

    delta = min_{alpha > 1} exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) * (1 - 1/alpha)^alpha,

which is never worse than the classical epsilon = rho + 2 sqrt(rho log(1/delta)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

__all__ = [
    "zcdp_to_delta",
    "zcdp_to_epsilon",
    "epsilon_delta_to_zcdp",
    "pure_dp_to_zcdp",
    "Amount",
    "budget_split",
]

_REL_TOL = 1e-12
_LOG_X_TOL = 1e-12  # relative bisection width on log(alpha - 1); f is flat at its minimum
_MAX_LOG_X = 700.0  # keeps alpha - 1 = e^u finite in double precision


def _check_rho(rho: float) -> None:
    if not rho >= 0 or math.isinf(rho):
        raise ValueError(f"rho must be finite and >= 0, got {rho}")


def _check_epsilon(epsilon: float) -> None:
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")


def _check_delta(delta: float) -> None:
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta}")


def _softplus(u: float) -> float:
    """log(1 + e^u) without overflow."""
    return max(u, 0.0) + math.log1p(math.exp(-abs(u)))


def _log_delta(rho: float, epsilon: float) -> float:
    """log of the CKS delta (-inf for rho = 0), minimizing over alpha = 1 + x with x = e^u.

    The log of the objective is
        f(x)  = x((1 + x) rho - epsilon) - x log(1 + 1/x) - log(1 + x)
    and it is strictly convex in x with
        f'(x) = (1 + 2x) rho - epsilon - log(1 + 1/x),
    i.e. (2 alpha - 1) rho - epsilon + log(1 - 1/alpha), increasing from -inf to +inf.
    Its root is found by bisection on u = log x. Every alpha > 1 gives a valid delta, so
    stopping early or clamping u only makes the answer conservative.
    """
    if rho == 0:
        return -math.inf

    def slope(u: float) -> float:
        return (1 + 2 * math.exp(u)) * rho - epsilon - _softplus(-u)

    # slope < 0 for u < min(0, epsilon - 3 rho): there x <= 1 and log(1 + 1/x) > -u.
    # slope > 0 for u >= max(0, log((epsilon + 1) / (2 rho))): there x >= 1 and
    # (1 + 2x) rho >= epsilon + 1 > epsilon + log 2 >= epsilon + log(1 + 1/x).
    lo = min(0.0, epsilon - 3 * rho) - 1.0
    hi = min(_MAX_LOG_X, max(0.0, math.log(epsilon + 1) - math.log(2 * rho)))
    while hi - lo > _LOG_X_TOL * max(1.0, -lo, hi):
        mid = (lo + hi) / 2
        if slope(mid) < 0:
            lo = mid
        else:
            hi = mid
    u = (lo + hi) / 2
    x = math.exp(u)
    f = x * ((1 + x) * rho - epsilon) - x * _softplus(-u) - _softplus(u)
    return min(f, 0.0)


def zcdp_to_delta(rho: float, epsilon: float) -> float:
    """Smallest delta such that rho-zCDP implies (epsilon, delta)-DP (CKS conversion)."""
    _check_rho(rho)
    _check_epsilon(epsilon)
    if math.isinf(epsilon):
        return 0.0
    return math.exp(_log_delta(rho, epsilon))


def _bisect(lo: float, hi: float, below: Callable[[float], bool]) -> tuple[float, float]:
    """Shrink [lo, hi] to relative width _REL_TOL, keeping below(lo) true and below(hi) false."""
    while hi - lo > _REL_TOL * hi:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


@lru_cache(maxsize=4096)
def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """Smallest epsilon with zcdp_to_delta(rho, epsilon) <= delta (to ~1e-12 relative).

    Rounded towards the valid side: the returned epsilon always satisfies the bound.
    delta = 0 gives inf for rho > 0. Cached: every footer converts the remaining budget.
    """
    _check_rho(rho)
    _check_delta(delta)
    if rho == 0:
        return 0.0
    if delta == 0:
        return math.inf
    log_target = math.log(delta)

    def too_small(epsilon: float) -> bool:
        return _log_delta(rho, epsilon) > log_target

    if not too_small(0.0):
        return 0.0
    lo = 0.0
    hi = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # classical bound, always valid
    while too_small(hi):  # guards against rounding in the line above
        lo, hi = hi, 2 * hi
    return _bisect(lo, hi, too_small)[1]


@lru_cache(maxsize=4096)
def epsilon_delta_to_zcdp(epsilon: float, delta: float) -> float:
    """Largest rho with zcdp_to_delta(rho, epsilon) <= delta (to ~1e-12 relative).

    Rounded towards the valid side: the returned rho always satisfies the bound.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)
    if math.isinf(epsilon):
        raise ValueError("epsilon must be finite to convert to a zCDP budget")
    if delta == 0:
        return 0.0
    log_target = math.log(delta)

    def valid(rho: float) -> bool:
        return _log_delta(rho, epsilon) <= log_target

    lo, hi = 0.0, max(epsilon, 1.0)
    while valid(hi):
        lo, hi = hi, 2 * hi
    return _bisect(lo, hi, valid)[0]


def pure_dp_to_zcdp(epsilon: float) -> float:
    """epsilon-DP implies (epsilon^2 / 2)-zCDP (Bun and Steinke 2016, Proposition 1.4)."""
    _check_epsilon(epsilon)
    return epsilon**2 / 2


@dataclass(frozen=True)
class Amount:
    """A privacy amount in both units: ρ (zCDP) and the (ε, δ)-DP guarantee it implies.

    `zcdp(rho, delta)` reports ρ at a fixed δ; `pure(epsilon)` is a pure ε-DP amount
    (δ = 0, ρ = ε²/2).
    """

    rho: float
    epsilon: float
    delta: float

    @classmethod
    def zcdp(cls, rho: float, delta: float) -> "Amount":
        _check_rho(rho)
        _check_delta(delta)
        if rho == 0:
            return cls(0.0, 0.0, 0.0)
        return cls(rho, zcdp_to_epsilon(rho, delta), delta)

    @classmethod
    def pure(cls, epsilon: float) -> "Amount":
        _check_epsilon(epsilon)
        return cls(pure_dp_to_zcdp(epsilon), epsilon, 0.0)

    def __str__(self) -> str:
        if self.delta == 0:
            return f"ε={self.epsilon:.4g}"
        return f"ε={self.epsilon:.4g}, δ={self.delta:g} (ρ={self.rho:.4g})"


def budget_split(errors: Sequence[float], exponent: int) -> tuple[list[float], float]:
    """Shares of one budget minimizing Σ E_j / share_j^exponent (Σ shares = 1), and that minimum.

    Independent parts whose errors scale as budget^(-exponent) (1 for zCDP's ρ, 2 for pure ε)
    split a budget in proportion to E_j^(1/(exponent+1)): the closed-form Lagrange optimum.
    """
    roots = [float(e) ** (1.0 / (exponent + 1)) for e in errors]
    total = math.fsum(roots)
    if total == 0.0:
        return [1.0 / len(roots)] * len(roots), 0.0
    return [r / total for r in roots], total ** (exponent + 1)
