"""Answering linear queries from a frequency oracle's reports, with exact variances.

A table whose rows were randomized on the users' devices (local DP) holds one report per
user about the user's cell of a public domain of size D. For the pure frequency oracles
here — `grr` (and `rr`, its D = 2 case) and the unary encodings `oue`/`sue` — each report r
supports a set S(r) of cells: {r} for direct encoding, the reported ones for unary encoding;
a cell is supported with probability p by a user whose cell it is and q otherwise. The
unbiased histogram (thesis §2.4.2, eq. 2.5) is

    x̂ = (Σ_u 1_{S(r_u)} − n q) / (p − q),

and any linear query w·x̂ is a sum of independent per-user terms, so its variance is
exact: Var(w·x̂) = Σ_u Var(w·1_{S(r_u)}) / (p − q)². For a user of cell v:

- direct encoding: w·1_S = w_r, with E = p w_v + q(W − w_v) and E[·²] = p w_v² + q(W₂ − w_v²);
- unary encoding (bits independent): Var = q(1 − q) W₂ + w_v² (p(1 − p) − q(1 − q));

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

__all__ = ["DIRECT", "UNARY", "FREQUENCY_ORACLES", "FrequencyOracleAnswers"]

DIRECT, UNARY = ("rr", "grr"), ("oue", "sue")
FREQUENCY_ORACLES = DIRECT + UNARY


class FrequencyOracleAnswers:
    """Any block over `domain` from the support counts of n reports of `protocol` at ε (see the module)."""

    kind = "local DP reports"

    def __init__(self, domain: Domain, protocol: str, epsilon: float, support: np.ndarray, n: int):
        if protocol not in FREQUENCY_ORACLES:
            raise ValueError(f"unknown frequency oracle {protocol!r}: one of {FREQUENCY_ORACLES}")
        size = domain.size()
        oracle = PROTOCOLS[protocol](epsilon=epsilon) if protocol == "rr" else \
            PROTOCOLS[protocol](epsilon=epsilon, domain=size)
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
        if self.protocol in UNARY:
            out = n * q * (1 - q) * sum_wu + (p * (1 - p) - q * (1 - q)) * x_wu
        else:
            out = (a - a * a) * x_wu + n * (q * sum_wu - q * q * sum_w * sum_u) - a * q * (sum_u * (w @ x) + sum_w * (u @ x))
        return np.maximum(out, 0.0) / a**2 if first is second else out / a**2
