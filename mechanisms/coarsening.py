"""Coarsening: a histogram over fine bins read as one over coarser bins that merge them.

`Coarsening(groups, m)` is the m × n 0/1 matrix with a one at (groups[j], j): coarse
bin g sums the fine bins mapped to it, and every fine bin lies in exactly one coarse
bin (so each column's L1 and L2 norms are 1). A measurement taken over the coarse
bins, y = A·(C x) + noise, is a measurement A·C of the fine histogram x: this is
how a key column's older measurements stay valid after its domain grows (the keys
released later were inside the "every other key" bin then).
"""

from __future__ import annotations

import numpy as np

from mechanisms.arrays import xp
from mechanisms.matrices import Diagonal, Matrix, Product


class Coarsening(Matrix):
    """Coarse bin `groups[j]` sums fine bin j (m coarse bins, each holding at least one fine bin)."""

    def __init__(self, groups, m: int):
        self.groups = np.asarray(groups, dtype=np.int64)
        self.sizes = np.bincount(self.groups, minlength=m)
        if self.sizes.size != m or not self.sizes.all():
            raise ValueError("every coarse bin must hold at least one fine bin, and no fine bin lies beyond them")
        self.shape = (m, self.groups.size)

    def _matmat(self, x):
        out = xp().zeros((self.shape[0], x.shape[1]))
        xp().add.at(out, xp().asarray(self.groups), x)
        return out

    def transpose(self) -> Matrix:
        return _Spread(self)

    def gram(self) -> Matrix:
        return Product(_Spread(self), self)

    def column_norms(self, p: int):
        return xp().ones(self.shape[1])

    def pinv(self) -> Matrix:
        """Cᵀ(CCᵀ)⁻¹, with CCᵀ the diagonal of the coarse bins' sizes."""
        return Product(_Spread(self), Diagonal(1.0 / self.sizes))


class _Spread(Matrix):
    """Cᵀ: each fine bin takes its coarse bin's value."""

    def __init__(self, coarsening: Coarsening):
        self.coarsening = coarsening
        self.shape = (coarsening.shape[1], coarsening.shape[0])

    def _matmat(self, x):
        return x[xp().asarray(self.coarsening.groups)]

    def transpose(self) -> Matrix:
        return self.coarsening

    def column_norms(self, p: int):
        return xp().asarray(self.coarsening.sizes, dtype=float)

    def pinv(self) -> Matrix:
        return Product(Diagonal(1.0 / self.coarsening.sizes), self.coarsening)


def key_growth(then: int, now: int) -> Coarsening:
    """A key column's bins when it had `then` released keys, over its bins now (`now` ≥ `then` keys): the
    first `then` keys keep their bins, the keys released since fall in the old last bin (every other key)."""
    if now < then:
        raise ValueError(f"a key domain only grows: {then} keys then, {now} now")
    return Coarsening(np.minimum(np.arange(now + 1), then), then + 1)
