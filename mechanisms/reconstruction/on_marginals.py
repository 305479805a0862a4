"""Least squares from strategies in marginal coordinates, A = X·P, on the marginal coordinates alone.

P stacks the marginals on a few cliques of the strategy's clique
(`mechanisms.marginal_stack`). In orthonormal coordinates of P's row space
(rows y·P ↦ y·E S^½, every inner product kept) the strategy is Ã = X·E S^½
(r × k, k ≤ m) and a block F whose attributes lie in one of P's cliques C,
F = F_C·M_C, is T = F_C·(E S^½)_C. Since A⁺ = Pᵀ E S^-½ Ã⁺:

- F·A⁺ = T·Ã⁺ (rows × r): the estimate F x̂ = T Ã⁺ ȳ and, as (AᵀA)⁺ = A⁺A⁺ᵀ,
  the covariance σ̄² · rowdot(F₁A⁺, F₂A⁺);
- F lies in A's row space when T's rows lie in Ã's: the residual T − T Ã⁺ Ã
  has, row by row, the norm of F's residual on the cells (an isometry).

A block on attributes inside no clique of P is written on P extended by its own
clique (the same, on m + |dom B| coordinates). Several measurements, of one
strategy or of several on the same cells, are first whitened into one at unit
variance (`whitened`). Nothing here is of the size of the cells but `solution`,
the estimate of every cell.
"""

from __future__ import annotations

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.marginal_stack import MarginalStack, OnMarginals
from mechanisms.matrices import Matrix, Weighted
from mechanisms.workload import Block

_SPAN_TOLERANCE = 1e-8  # a row's residual norm, relative to its norm (as the clique solvers' checks)


def _on_marginals(strategy: Matrix) -> OnMarginals | None:
    """The strategy as X·P (a weight folded into X), or None when it is not written on marginals."""
    if isinstance(strategy, Weighted) and isinstance(strategy.base, OnMarginals):
        return OnMarginals(strategy.weight * strategy.base.coefficients, strategy.base.stack)
    return strategy if isinstance(strategy, OnMarginals) else None


def whitened(parts: list[tuple[Matrix, object, float]]) -> tuple[OnMarginals, np.ndarray] | None:
    """Measurements (strategy X_i·P_i, answers y_i, variance v_i > 0) on one clique as one at unit variance:
    [X_i/√v_i]·P on the union of their cliques, answers [y_i/√v_i] (GLS is least squares on the whitened
    system); None unless every strategy is written on marginals of the same cells."""
    stacked = [_on_marginals(a) for a, _, _ in parts]
    if any(s is None for s in stacked) or len({s.stack.shape for s in stacked}) != 1 \
            or min(v for _, _, v in parts) <= 0:
        return None
    cliques = list(dict.fromkeys(c for s in stacked for c in s.stack.cliques))
    stack = stacked[0].stack if len(stacked) == 1 else MarginalStack(stacked[0].stack.shape, cliques)
    rows = []
    for s, (_, _, variance) in zip(stacked, parts):
        x = np.zeros((s.shape[0], stack.rows))
        for b, clique in enumerate(s.stack.cliques):
            x[:, stack.block(cliques.index(clique))] += s.coefficients[:, s.stack.block(b)]
        rows.append(x / np.sqrt(variance))
    values = np.concatenate([np.asarray(to_numpy(y), dtype=float) / np.sqrt(v) for _, y, v in parts])
    return OnMarginals(np.vstack(rows), stack), values


class _Coordinates:
    """Orthonormal coordinates of a stack's row space, and the strategy's rows Ã and Ã⁺ in them."""

    def __init__(self, stack: MarginalStack, coefficients: np.ndarray):
        self.stack = stack
        self.strategy = coefficients @ stack.isometry[0]
        self.inverse = np.linalg.pinv(self.strategy)

    def rows(self, b: int, on_clique: np.ndarray) -> np.ndarray:
        """T: rows given on clique b's marginal, in these coordinates."""
        return on_clique @ self.stack.isometry[0][self.stack.block(b)]


class OnMarginalsSolver:
    """Least squares from answers `values` (unit variance) of a strategy X·P on `clique` (`whitened`)."""

    def __init__(self, strategy: OnMarginals, domain: Domain, clique: tuple[str, ...], values: np.ndarray):
        self.domain, self.clique = domain, clique
        self.values = values
        self.coefficients = strategy.coefficients
        self.base = _Coordinates(strategy.stack, strategy.coefficients)
        self._extended: dict[tuple[int, ...], _Coordinates] = {}

    def _written(self, block: Block) -> tuple[_Coordinates, np.ndarray]:
        """(coordinates, T): the block's rows in orthonormal coordinates of a stack holding its clique."""
        stack = self.base.stack
        axes = tuple(sorted(self.clique.index(a) for a in block.attributes(self.domain)))
        home = next((b for b, c in enumerate(stack.cliques) if set(axes) <= set(c)), None)
        coordinates = self.base
        if home is None:
            if axes not in self._extended:
                extended = MarginalStack(stack.shape, [*stack.cliques, axes])
                widened = np.zeros((self.coefficients.shape[0], extended.rows))
                widened[:, :stack.rows] = self.coefficients
                self._extended[axes] = _Coordinates(extended, widened)
            coordinates, home = self._extended[axes], len(stack.cliques)
        names = tuple(self.clique[a] for a in coordinates.stack.cliques[home])
        on_clique = np.asarray(block.matrix(self.domain, names).dense(), dtype=float)
        return coordinates, coordinates.rows(home, on_clique)

    def _applied(self, block: Block) -> np.ndarray:
        """F·A⁺ (rows × strategy rows)."""
        coordinates, t = self._written(block)
        return t @ coordinates.inverse

    def covers(self, block: Block) -> bool:
        coordinates, t = self._written(block)
        residual = t - (t @ coordinates.inverse) @ coordinates.strategy
        norms = np.linalg.norm(t, axis=1)
        return bool(np.all(np.linalg.norm(residual, axis=1) <= _SPAN_TOLERANCE * np.maximum(norms, 1.0)))

    def estimate(self, block: Block) -> np.ndarray:
        return self._applied(block) @ self.values

    def cross(self, first: Block, second: Block) -> np.ndarray:
        return np.sum(self._applied(first) * self._applied(second), axis=1)

    def solution(self, out=None) -> np.ndarray:
        """x̂ = A⁺ȳ on every cell of the clique (`out`, if given, receives it)."""
        stack = self.base.stack
        x = stack.expand((stack.isometry[1] @ (self.base.inverse @ self.values))[None, :])[0]
        if out is None:
            return x
        out[...] = x
        return out


__all__ = ["OnMarginalsSolver", "whitened"]
