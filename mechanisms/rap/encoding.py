"""One-hot relaxation of a categorical domain and the Sparsemax projection.

A record x (one bin index per attribute) is encoded as h(x) in {0,1}^{d'},
d' = sum of the attribute sizes, each attribute owning a contiguous block of
columns. The relaxed dataset D' is an (n' x d') array whose every block row
lies on the probability simplex: row l of D' is then a product distribution
over the domain, and D' is the uniform mixture of its n' rows.

`sparsemax` is the Euclidean projection onto the simplex (Martins & Astudillo
2016; the same algorithm as Wang & Carreira-Perpinan 2013), applied per block.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from mechanisms.arrays import xp
from mechanisms.domain import Domain


@dataclass(frozen=True)
class OneHot:
    """Column layout of the one-hot encoding of `domain`: block a is columns offsets[a]:offsets[a+1]."""

    domain: Domain

    @property
    def offsets(self) -> tuple[int, ...]:
        return (0, *accumulate(self.domain.sizes))

    @property
    def width(self) -> int:
        """d' = sum of the attribute sizes."""
        return self.offsets[-1]

    def block(self, attribute: str) -> slice:
        i = self.domain.attributes.index(attribute)
        return slice(self.offsets[i], self.offsets[i + 1])

    def encode(self, records: np.ndarray) -> np.ndarray:
        """The (n x d') one-hot matrix of integer records (n x len(domain))."""
        records = np.asarray(records, dtype=np.int64)
        out = np.zeros((records.shape[0], self.width))
        rows = np.arange(records.shape[0])
        for i, start in enumerate(self.offsets[:-1]):
            out[rows, start + records[:, i]] = 1.0
        return out


def project_block(z):
    """Sparsemax of every row of z (rows x t): the closest point of the simplex, in place-free form."""
    x = xp()
    t = z.shape[1]
    s = -x.sort(-z, axis=1)  # descending
    cumulative = x.cumsum(s, axis=1)
    ks = x.arange(1, t + 1, dtype=z.dtype)
    support = 1 + ks * s > cumulative  # true on a prefix of the sorted entries
    k = support.sum(axis=1, keepdims=True)
    tau = (x.take_along_axis(cumulative, k - 1, axis=1) - 1) / k.astype(z.dtype)
    return x.maximum(z - tau, 0)


def sparsemax(relaxed, encoding: OneHot, attributes: tuple[str, ...] | None = None):
    """Project each attribute block (all, or only `attributes`) of every row onto the simplex."""
    for a in encoding.domain.attributes if attributes is None else attributes:
        cols = encoding.block(a)
        relaxed[:, cols] = project_block(relaxed[:, cols])
    return relaxed


def uniform_relaxed(rows: int, encoding: OneHot, seed: int, dtype=np.float32):
    """Independent Uniform[0,1] entries, then Sparsemax: RAP's initial D' (public randomness)."""
    start = np.random.default_rng(seed).random((rows, encoding.width)).astype(dtype)
    return sparsemax(xp().asarray(start), encoding)
