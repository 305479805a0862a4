"""OPT_M: weighted-marginal strategies, optimized in the marginal algebra (thesis §3.6–3.7).

A marginal strategy M(θ) measures every marginal a ⊆ [d] (a bitmask; attribute
i is bit d−1−i, so attribute 0 is the most significant) scaled by θ_a. All
marginal grams G(v) = Σ_b v_b ⊗_i (I if i ∈ b else 11ᵀ) share the eigenspaces
V(a) (thesis Thm 7), of dimension m(a) = Π_{i∈a}(n_i − 1) — the corrected
multiplicity, not the printed c(¬a) — with eigenvalue

    κ_v(a) = Σ_{b ⊇ a} v_b c(b),     c(b) = Π_{i∉b} n_i.

So for a workload whose marginal-gram weights are w (`KronGram.marginal_weights`,
exact against marginal strategies) the expected error at unit noise is

    TSE(θ) = ‖θ‖_p² · Σ_{a: κ_w(a) > 0} m(a) κ_w(a) / κ_{θ²}(a)

(the thesis' Thm 9 drops a factor n and misuses X⁺; this eigen form is exact),
and the SVD bound of a marginal workload is (Σ_a m(a) sqrt(κ_w(a)))² / n
(Thm 10 with the corrected multiplicity). κ is a superset-sum (zeta)
transform and the gradient a subset-sum transform, O(d 2^d) each: d = 15
costs milliseconds.

A marginal measured with weight θ_a under total budget B is the same as the
marginal alone with budget share θ_a/‖θ‖₁ (Laplace, ε) or θ_a²/‖θ‖₂²
(Gaussian, ρ), which is how the planner releases it (`budget_shares`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mechanisms.hdmm.restarts import multistart
from mechanisms.interruption import checkpoint

__all__ = ["MarginalAlgebra", "MarginalStrategy", "opt_marginals"]

# κ_w(a) below this fraction of max κ_w counts as zero (the workload has no weight on V(a)).
_SUPPORT_TOL = 1e-12
_PRUNE = 1e-6  # weights below this fraction of the largest are dropped if that costs nothing
_UNSUPPORTED = 1e300  # objective value of a θ that does not support the workload


class MarginalAlgebra:
    """Per-subset constants of a domain of d attributes with sizes n_i (2^d entries each)."""

    def __init__(self, sizes: Sequence[int]):
        self.sizes = tuple(int(n) for n in sizes)
        self.d = len(self.sizes)
        self.c = self._kron([[n, 1] for n in self.sizes])  # cells of the complement
        self.m = self._kron([[1, n - 1] for n in self.sizes])  # eigenspace dimension
        self.cells = self._kron([[1, n] for n in self.sizes])  # cells of the marginal

    @staticmethod
    def _kron(pairs) -> np.ndarray:
        out = np.ones(1)
        for p in pairs:
            out = np.kron(out, np.asarray(p, dtype=float))
        return out

    def _axes(self, f: np.ndarray) -> np.ndarray:
        return np.array(f, dtype=float).reshape((2,) * self.d) if self.d else np.array(f, dtype=float)

    def superset_sum(self, f: np.ndarray) -> np.ndarray:
        """g(a) = Σ_{b ⊇ a} f(b)."""
        t = self._axes(f)
        for axis in range(self.d):
            idx0 = (slice(None),) * axis + (0,)
            idx1 = (slice(None),) * axis + (1,)
            t[idx0] += t[idx1]
        return t.reshape(-1)

    def subset_sum(self, f: np.ndarray) -> np.ndarray:
        """g(b) = Σ_{a ⊆ b} f(a)."""
        t = self._axes(f)
        for axis in range(self.d):
            idx0 = (slice(None),) * axis + (0,)
            idx1 = (slice(None),) * axis + (1,)
            t[idx1] += t[idx0]
        return t.reshape(-1)

    def superset_mobius(self, g: np.ndarray) -> np.ndarray:
        """The inverse of `superset_sum`."""
        t = self._axes(g)
        for axis in range(self.d):
            idx0 = (slice(None),) * axis + (0,)
            idx1 = (slice(None),) * axis + (1,)
            t[idx0] -= t[idx1]
        return t.reshape(-1)

    def eigenvalues(self, v: np.ndarray) -> np.ndarray:
        """κ_v(a) = Σ_{b ⊇ a} v_b c(b): the eigenvalue of G(v) on V(a)."""
        return self.superset_sum(np.asarray(v, dtype=float) * self.c)

    def error(self, theta: np.ndarray, w: np.ndarray, p: int) -> float:
        """‖θ‖_p² Σ_a m(a) κ_w(a)/κ_{θ²}(a) at unit noise (∞ if θ does not support w)."""
        kw, ku = self.eigenvalues(w), self.eigenvalues(np.asarray(theta, dtype=float) ** 2)
        need = kw > _SUPPORT_TOL * max(float(kw.max(initial=0.0)), 1e-300)
        if np.any(ku[need] <= 0):
            return float("inf")
        norm = float(np.sum(np.abs(theta) ** p)) ** (2.0 / p)
        return norm * float(np.sum(self.m[need] * kw[need] / ku[need]))

    def svd_bound(self, w: np.ndarray) -> float:
        """(Σ_a m(a) sqrt(κ_w(a)))² / n for a marginal workload with weights w."""
        kw = np.clip(self.eigenvalues(w), 0.0, None)
        return float(np.sum(self.m * np.sqrt(kw)) ** 2 / np.prod(self.sizes, dtype=float))

    def closed_form(self, w: np.ndarray) -> np.ndarray:
        """Thm 11: θ² = Y⁻¹ sqrt(Y w), optimal for Gaussian noise when non-negative."""
        u = self.superset_mobius(np.sqrt(np.clip(self.eigenvalues(w), 0.0, None))) / self.c
        return np.sqrt(np.clip(u, 0.0, None))

    def subset(self, mask: int) -> tuple[int, ...]:
        """The attribute positions of a bitmask."""
        return tuple(i for i in range(self.d) if mask >> (self.d - 1 - i) & 1)


@dataclass(frozen=True, eq=False)
class MarginalStrategy:
    """Marginal weights θ (2^d, zero for unmeasured marginals) and the error at unit noise."""

    theta: np.ndarray
    error: float
    algebra: MarginalAlgebra
    iterations: int
    seconds: float

    def measured(self, threshold: float = 0.0) -> list[tuple[tuple[int, ...], float]]:
        """(attribute positions, θ) of the marginals with weight above `threshold`·max θ."""
        top = float(self.theta.max(initial=0.0))
        return [
            (self.algebra.subset(a), float(t))
            for a, t in enumerate(self.theta)
            if t > threshold * top and t > 0
        ]

    def budget_shares(self, p: int) -> list[tuple[tuple[int, ...], float]]:
        """Each measured marginal's share of the budget: θ_a/Σθ (p=1) or θ_a²/Σθ² (p=2)."""
        items = self.measured()
        weights = np.asarray([t**p for _, t in items])
        return [(s, float(x)) for (s, _), x in zip(items, weights / weights.sum())]


def opt_marginals(
    sizes: Sequence[int],
    w: np.ndarray,
    p: int,
    allowed: np.ndarray | None = None,
    restarts: int = 3,
    seed: int = 0,
    max_iter: int = 1000,
) -> MarginalStrategy:
    """Minimize ‖θ‖_p² Σ m κ_w/κ_{θ²} over θ ≥ 0 (zero outside `allowed`), best of up to `restarts` starts
    (runs and restarts stop when they stop helping: `mechanisms.hdmm.restarts`).

    The first start is the Thm 11 closed form (restricted to `allowed`, with
    every allowed workload marginal kept positive); the others draw θ ~ U(0, 1)
    from `numpy.random.default_rng(seed)`.
    """
    started = time.perf_counter()
    alg = MarginalAlgebra(sizes)
    w = np.asarray(w, dtype=float)
    allowed = np.ones(len(w), dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    kw = alg.eigenvalues(w)
    need = kw > _SUPPORT_TOL * max(float(kw.max(initial=0.0)), 1e-300)
    if not np.all(alg.superset_sum(allowed.astype(float))[need] > 0):
        raise ValueError("the allowed marginals cannot support this workload")
    free = np.flatnonzero(allowed)

    def objective(x):
        checkpoint(16.0 * len(w) * max(1, len(sizes)))  # transforms over the 2^d subsets
        theta = np.zeros(len(w))
        theta[free] = x
        ku = alg.eigenvalues(theta**2)
        if np.any(ku[need] <= 0):  # support lost: the error is infinite; the line search backs off
            return _UNSUPPORTED, np.zeros_like(x)
        ratio = np.where(need, kw / np.where(need, ku, 1.0), 0.0)
        t = float(np.sum(alg.m * ratio))
        h = np.where(need, alg.m * ratio / np.where(need, ku, 1.0), 0.0)
        dt = -2.0 * theta * alg.c * alg.subset_sum(h)  # ∂T/∂θ
        if p == 1:
            norm, dnorm = float(x.sum()) ** 2, 2.0 * float(x.sum()) * np.ones_like(x)
        else:
            norm, dnorm = float(x @ x), 2.0 * x
        return norm * t, dnorm * t + norm * dt[free]

    rng = np.random.default_rng(seed)
    first = alg.closed_form(w)[free]
    first = np.where((w[free] > 0) & (first <= 0), 0.1 * max(float(first.max(initial=0.0)), 1.0), first)
    if first.sum() == 0:
        first = np.ones(len(free))
    drawn = itertools.chain([first], (rng.uniform(0.0, 1.0, len(free)) for _ in range(restarts - 1)))
    found = multistart(
        objective, (x0 for x0 in drawn if objective(x0)[0] < _UNSUPPORTED), max_iter, warm=1,
        work_per_iteration=16.0 * len(w) * max(1, len(sizes)),  # as its checkpoint counts
    )
    best_x, iterations = found.x, found.iterations
    theta = np.zeros(len(w))
    theta[free] = best_x
    # Every kept marginal is a measurement: drop negligible weights when that costs nothing.
    pruned = np.where(theta > _PRUNE * theta.max(), theta, 0.0)
    if alg.error(pruned, w, p) <= alg.error(theta, w, p) * (1 + 1e-9):
        theta = pruned
    theta /= float(np.sum(theta**p)) ** (1.0 / p)  # unit sensitivity
    return MarginalStrategy(theta, alg.error(theta, w, p), alg, iterations, time.perf_counter() - started)
