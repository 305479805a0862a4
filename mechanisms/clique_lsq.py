"""Least squares for arbitrary strategy measurements on one clique's marginal.

Strategies such as range trees, wavelets or HDMM-optimized matrices measure
A·x_C (x_C the marginal over clique C) with i.i.d. noise. The generalized
least-squares estimate is x̂ = G⁺ Σ Aᵢᵀyᵢ/σᵢ² with G = Σ AᵢᵀAᵢ/σᵢ², and a
query matrix W on C gets estimate W x̂ and covariance W G⁺ Wᵀ; W is
determined by the measurements when its rows lie in the row space of G.

This implementation works on the dense gram of the clique (cells ≤
`DENSE_LIMIT`); structured strategies over larger cliques need an implicit
solver.
"""

from __future__ import annotations

import numpy as np

from mechanisms.domain import Domain
from mechanisms.measurement import Measurement
from mechanisms.workload import Block

DENSE_LIMIT = 4096
_SPAN_TOLERANCE = 1e-8


class CliqueLeastSquares:
    """GLS over strategy measurements that share one clique."""

    def __init__(self, domain: Domain, clique: tuple[str, ...], measurements: list[Measurement]):
        cells = domain.size(clique)
        if cells > DENSE_LIMIT:
            raise ValueError(f"clique {clique} has {cells} cells; the dense solver stops at {DENSE_LIMIT}")
        self.domain, self.clique = domain, clique
        gram = np.zeros((cells, cells))
        rhs = np.zeros(cells)
        for m in measurements:
            a = np.asarray(m.strategy.dense(), dtype=float)
            gram += a.T @ a / m.variance
            if m.values.size:
                rhs += a.T @ m.values / m.variance
        self.gram_pinv = np.linalg.pinv(gram, hermitian=True)
        self._projector = self.gram_pinv @ gram
        self.x = self.gram_pinv @ rhs

    def _lifted(self, block: Block) -> np.ndarray | None:
        """The block's matrix over this clique, or None if it uses attributes outside it."""
        if not set(block.attributes(self.domain)) <= set(self.clique):
            return None
        return np.asarray(block.matrix(self.domain, self.clique).dense(), dtype=float)

    def covers(self, block: Block) -> bool:
        w = self._lifted(block)
        if w is None:
            return False
        scale = max(float(np.abs(w).max(initial=0.0)), 1.0)
        return bool(np.abs(w @ self._projector - w).max(initial=0.0) <= _SPAN_TOLERANCE * scale)

    def estimate(self, block: Block) -> np.ndarray:
        return self._lifted(block) @ self.x

    def variance(self, block: Block) -> np.ndarray:
        w = self._lifted(block)
        return np.einsum("ij,jk,ik->i", w, self.gram_pinv, w)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        w1, w2 = self._lifted(first), self._lifted(second)
        return np.einsum("ij,jk,ik->i", w1, self.gram_pinv, w2)
