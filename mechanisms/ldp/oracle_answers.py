"""Answering linear queries from a support oracle's reports over the whole domain, with exact variances.

A table whose rows were randomized on the users' devices (local DP) holds one report per
user about the user's cell of a public domain of size D. For the pure frequency oracles
here — `grr` (and `rr`, its D = 2 case, and `inpps`, GRR over 2^d records), the unary encodings
`oue`/`sue` (and `inprr`, SUE over 2^d records) and local hashing `olh` — each report r
supports a set S(r) of cells: {r} for direct encoding, the reported ones for unary encoding;
a cell is supported with probability p by a user whose cell it is and q otherwise. The
unbiased histogram (thesis §2.4.2, eq. 2.5) is

    x̂ = (Σ_u 1_{S(r_u)} − n q) / (p − q),

and any linear query w·x̂ is a sum of independent per-user terms, so its variance is
exact: Var(w·x̂) = Σ_u Var(w·1_{S(r_u)}) / (p − q)². For a user of cell v:

- direct encoding: w·1_S = w_r, with E = p w_v + q(W − w_v) and E[·²] = p w_v² + q(W₂ − w_v²);
- unary encoding (bits independent): Var = q(1 − q) W₂ + w_v² (p(1 − p) − q(1 − q));
- local hashing: S(r) = {j : H(j) = y}, and the pairs of cells of one report are not independent
  (a Carter–Wegman hash is only pairwise uniform: three cells in arithmetic progression collide far
  more often than 1/g²), so Σ_u E[(w·1_S)(u·1_S)] is estimated, unbiasedly, by wᵀCu with C the
  co-support counts (how many reports support both j and k), less Σ_v x̂_v μ_v(w) μ_v(u),
  μ_v(w) = qW + (p − q) w_v;

(W = Σ_j w_j, W₂ = Σ_j w_j², and likewise for the covariance of two queries w, u with
W·U and Σ w_j u_j). Summed over users these are linear in the true histogram x, which is
estimated by x̂ (clipped at 0): the error bars are the unbiased plug-in of the exact
variance. Every query is answered from the one x̂, so the answers are consistent.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.ldp.client import PROTOCOLS
from mechanisms.workload import Block

__all__ = ["DIRECT", "UNARY", "HASHED", "FREQUENCY_ORACLES", "FrequencyOracleAnswers", "support_oracle"]

DIRECT, UNARY, HASHED = ("rr", "grr", "inpps"), ("oue", "sue", "inprr"), ("olh",)
FREQUENCY_ORACLES = DIRECT + UNARY + HASHED


def support_oracle(protocol: str, epsilon: float, size: int):
    """The client-side oracle whose (p, q) a table of `size` cells was reported with."""
    cls = PROTOCOLS[protocol]
    if protocol == "rr":
        return cls(epsilon=epsilon)
    if protocol in ("inprr", "inpps"):  # records of d binary attributes: an oracle over their 2^d cells
        if size & (size - 1):
            raise ValueError(f"{protocol} reports records of binary attributes: 2^d cells, not {size}")
        return cls(epsilon=epsilon, attributes=size.bit_length() - 1).oracle
    return cls(epsilon=epsilon, domain=size)


class FrequencyOracleAnswers:
    """Any block over `domain` from the support counts of n reports of `protocol` at ε (see the module)."""

    kind = "local DP reports"

    def __init__(self, domain: Domain, protocol: str, epsilon: float, support: np.ndarray, n: int,
                 pairs: np.ndarray | None = None):
        if protocol not in FREQUENCY_ORACLES:
            raise ValueError(f"unknown frequency oracle {protocol!r}: one of {FREQUENCY_ORACLES}")
        size = domain.size()
        oracle = support_oracle(protocol, epsilon, size)
        if protocol in HASHED and pairs is None:
            raise ValueError("olh's exact variance needs the co-support counts (pairs)")
        self.pairs = None if pairs is None else np.asarray(pairs, dtype=float).reshape(size, size)
        if oracle.values != size:
            raise ValueError(f"{protocol} reports {oracle.values} values; the domain has {size} cells")
        p, q = (float(Fraction(v)) for v in oracle.support_probabilities)
        self.domain, self.protocol, self.p, self.q, self.n = domain, protocol, p, q, int(n)
        support = np.asarray(support, dtype=float).reshape(-1)
        self.histogram = (support - self.n * q) / (p - q)  # x̂ over the whole domain, attribute order
        self._plug_in = np.clip(self.histogram, 0.0, None)

    def source_name(self, block: Block) -> str:
        return self.kind

    def covers(self, block: Block) -> bool:
        return True

    def _marginal(self, values: np.ndarray, clique: tuple[str, ...]) -> np.ndarray:
        axes = tuple(i for i, a in enumerate(self.domain.attributes) if a not in clique)
        return values.reshape(self.domain.sizes).sum(axis=axes).reshape(-1)

    def cells(self, clique: tuple[str, ...]) -> np.ndarray:
        """The estimated fractions of the clique's cells, clipped at 0 and normalised (the plug-in)."""
        cells = self._marginal(self._plug_in, clique)
        return cells / cells.sum() if cells.sum() > 0 else np.full(len(cells), 1.0 / len(cells))

    def _co_support(self, clique: tuple[str, ...]) -> np.ndarray:
        """The co-support counts summed onto the clique's cells on both sides."""
        k = len(self.domain.sizes)
        axes = [i for i, a in enumerate(self.domain.attributes) if a not in clique]
        summed = self.pairs.reshape(self.domain.sizes * 2).sum(axis=tuple(axes + [k + i for i in axes]))
        m = self.domain.size(clique)
        return summed.reshape(m, m)

    def _rows(self, block: Block) -> tuple[np.ndarray, tuple[str, ...]]:
        clique = block.attributes(self.domain)
        return np.asarray(to_numpy(block.matrix(self.domain, clique).dense()), dtype=float), clique

    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        rows, clique = self._rows(block)
        return rows @ self._marginal(self.histogram, clique), self.covariance(block, block)

    def estimate(self, block: Block) -> np.ndarray:
        rows, clique = self._rows(block)
        return rows @ self._marginal(self.histogram, clique)

    def variance(self, block: Block) -> np.ndarray:
        return self.covariance(block, block)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Row-wise covariance of two blocks' answers (the plug-in of the exact formula)."""
        w, clique = self._rows(first)
        u, other = self._rows(second)
        if other != clique:  # bring both onto the union of their cliques
            union = self.domain.canonical(set(clique) | set(other))
            w, u = (np.asarray(to_numpy(b.matrix(self.domain, union).dense()), dtype=float) for b in (first, second))
            clique = union
        x = self._marginal(self._plug_in, clique)
        cells = self.domain.size() / self.domain.size(clique)  # full-domain cells behind each clique cell
        p, q, a, n = self.p, self.q, self.p - self.q, self.n
        sum_w, sum_u, sum_wu = cells * w.sum(axis=1), cells * u.sum(axis=1), cells * (w * u).sum(axis=1)
        x_wu = (w * u) @ x
        if self.protocol in HASHED:
            out = ((w @ self._co_support(clique)) * u).sum(axis=1) - (
                q * q * sum_w * sum_u * n + a * q * (sum_w * (u @ x) + sum_u * (w @ x)) + a * a * x_wu)
        elif self.protocol in UNARY:
            out = n * q * (1 - q) * sum_wu + (p * (1 - p) - q * (1 - q)) * x_wu
        else:
            out = (a - a * a) * x_wu + n * (q * sum_wu - q * q * sum_w * sum_u) - a * q * (sum_u * (w @ x) + sum_w * (u @ x))
        return np.maximum(out, 0.0) / a**2 if first is second else out / a**2
