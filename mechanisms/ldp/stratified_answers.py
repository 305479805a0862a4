"""Answering linear queries from sampled-strata LDP reports, with exact variances and covariances.

Hadamard response, hierarchical histograms, HaarHRR, INPHT and the sampled-marginal protocols
share one shape: each user draws a stratum s (a level, a marginal, a coefficient) independently
of the value z, and reports about the stratum's statistic t_s(z) ∈ R^{m_s} — a ±1 Hadamard/Haar
coefficient by randomized response (`SIGN`), or the one-hot cell of z in the stratum's table by
unary (`UNARY`) or direct (`DIRECT`) encoding. The aggregator unbiases the n_s reports of each
stratum into the stratum's mean θ̂_s (one coordinate per cell or coefficient), and every answer is
an affine map of all coordinates: a query w over a clique's marginal is c_w + Σ_s a_sᵀθ̂_s with
a = wᵀM (`Strata` and the design's `marginal(clique) -> (constant, M)`).

Given the numbers of reports per stratum, the exact covariance of two such answers is the
bilinear form of `frequency.stratified_variance`: per stratum, the reports' noise
E_z[a_sᵀ Cov(report | z) b_s] and the spread Cov_z(a_sᵀt_s(z), b_sᵀt_s(z)), and the query pair's
population covariance Cov_z(w_z, u_z) (Σ_s a_sᵀt_s(z) = w_z − c_w for an unbiased design). A
report's noise is (c² − 1)a·b for a ±1 coefficient (c = 1/(2p − 1)), Σ_j a_j b_j[q(1 − q) +
(p(1 − p) − q(1 − q))F_j]/(p − q)² for unary encoding, and for direct encoding
[Σ_j a_j b_j(q + (p − q)F_j) − Σ_j F_j(qA + (p − q)a_j)(qB + (p − q)b_j)]/(p − q)² (A = Σa, B = Σb),
F_s = E_z[t_s(z)]. These are evaluated at the estimates (θ̂ clipped into range; the clique's
estimated marginal, clipped and normalised), so a sum of cells gets its covariances, not a sum of
variances. ±1 coefficients (`sign_strata`, `sign_covariance`) do better: each F_s² and the rows'
population covariance have unbiased estimates, so the stated variance is unbiased, and a coefficient
without reports is covered by its level's observed ones rather than read as 0 (or made infinite).
Answers are counts: n times the fractions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.ldp.frequency import coefficient_means, stratified_variance
from mechanisms.workload import Block

__all__ = ["SIGN", "UNARY", "DIRECT", "Strata", "FlatMap", "StratifiedAnswers", "sign_strata"]

SIGN, UNARY, DIRECT = "sign", "unary", "direct"
Clique = tuple[str, ...]


@dataclass(frozen=True)
class Strata:
    """A sampled-strata protocol's measurements: per coordinate k the unbiased θ̂_k of E_z[t_k(z)] and its
    stratum (non-decreasing, strata contiguous), per stratum the reports that drew it, and the oracle
    (`SIGN` with p the truth probability, or `UNARY`/`DIRECT` with (p, q))."""

    theta: np.ndarray
    stratum: np.ndarray
    drawn: np.ndarray
    oracle: str
    p: float
    q: float = 0.0
    group: np.ndarray | None = None  # `SIGN`: per coordinate, its set of coefficients drawn with equal probability

    def segments(self, x: np.ndarray) -> np.ndarray:
        """Per stratum, the sum of x's coordinates (x: rows × K) -> strata × rows."""
        starts = np.flatnonzero(np.r_[True, np.diff(self.stratum) != 0])
        out = np.zeros((len(self.drawn), x.shape[0]))
        out[self.stratum[starts]] = np.add.reduceat(x, starts, axis=1).T
        return out

    def coverage(self) -> np.ndarray:
        """`SIGN`: per coordinate with reports, S_g/o_g when o_g of its group's S_g coefficients have reports
        (1 when all have; 0 when fewer than two of an incomplete group have); 0 without reports."""
        seen = self.drawn > 0
        group = np.zeros(len(seen), dtype=np.int64) if self.group is None else np.asarray(self.group)
        size, observed = np.bincount(group), np.bincount(group, weights=seen)
        scale = np.where(observed == size, 1.0, np.where(observed >= 2, size / np.maximum(observed, 1), 0.0))
        return np.where(seen, scale[group], 0.0)

    def means(self) -> np.ndarray:
        """F̂: θ̂ clipped into its range (per stratum a distribution for one-hot statistics)."""
        if self.oracle == SIGN:
            return np.clip(self.theta, -1.0, 1.0)
        f = np.clip(self.theta, 0.0, None)
        totals = self.segments(f[None, :])[:, 0][self.stratum]
        return np.where(totals > 0, f / np.where(totals > 0, totals, 1), 0.0)

    def noise(self, a: np.ndarray, b: np.ndarray, f: np.ndarray) -> np.ndarray:
        """E_z[a_sᵀ Cov(report | z) b_s] per stratum (strata × rows)."""
        p, q, seg = self.p, self.q, self.segments
        if self.oracle == SIGN:
            return (1 / (2 * p - 1) ** 2 - 1) * seg(a * b)
        if self.oracle == UNARY:
            return seg(a * b * (q * (1 - q) + (p * (1 - p) - q * (1 - q)) * f)) / (p - q) ** 2
        d = p - q
        mixed = q * q * seg(a) * seg(b) + q * d * (seg(a) * seg(b * f) + seg(b) * seg(a * f)) + d * d * seg(a * b * f)
        return (seg(a * b * (q + d * f)) - mixed) / d ** 2

    def spread(self, a: np.ndarray, b: np.ndarray, f: np.ndarray) -> np.ndarray:
        """Cov_z(a_sᵀt_s(z), b_sᵀt_s(z)) per stratum: E[t_k²] is 1 for a ±1 coefficient, F_k for a one-hot cell."""
        second = 1.0 if self.oracle == SIGN else f
        return self.segments(a * b * second) - self.segments(a * f) * self.segments(b * f)


def sign_strata(counts, sums, truth: float, group=None) -> Strata:
    """±1 coefficients, each its own `SIGN` stratum, from the reports per coefficient and the sums of their bits.

    `group` labels the sets of coefficients a user draws with equal probability (a level; default: all).
    A coefficient's estimate is its ratio mean c·(sum/n_k), c = 1/(2p − 1), times S_g/o_g when o_g of its
    group's S_g coefficients have reports: given how many reports each got, the empty ones are a uniformly
    random subset of the group, so the scaled sum over the observed ones is unbiased for the group's sum (an
    empty coefficient is not read as 0). An incomplete group with fewer than two observed coefficients is not
    estimated (its coefficients are 0, and the variance carries a bound on that bias instead)."""
    counts = np.asarray(counts, dtype=float)
    group = np.zeros(len(counts), dtype=np.int64) if group is None else np.asarray(group, dtype=np.int64)
    strata = Strata(coefficient_means(counts, sums, truth), np.arange(len(counts)), counts, SIGN, truth, group=group)
    return replace(strata, theta=strata.theta * strata.coverage())


def sign_covariance(strata: Strata, a: np.ndarray, b: np.ndarray, w: np.ndarray, u: np.ndarray, cells: np.ndarray,
                    n: int) -> np.ndarray:
    """Row-wise covariance, in fractions, of the answers aᵀθ̂ and bᵀθ̂ (rows × coefficients) of `sign_strata`, the
    rows w and u (rows × cells) of the estimated `cells` (fractions, not clipped).

    Unbiased in expectation over the reports: the exact variance given the counts
    (`frequency.stratified_variance` with the weights on the ratio means) with each F_k² replaced by its
    unbiased estimate (n_k m_k² − c² + 1 − g_k)/(n_k − g_k),
    g_k = (n − n_k)/(n − 1), from the k's with n_k ≥ 2 (for n_k = 1, the group's o₁/o₂ share of those),
    plus, per group with empty coefficients, the variance of the scaled sum over which coefficients are
    observed: S·e·s²/o, s² the observed coefficients' sample covariance of a_k F_k and b_k F_k (e empty).
    A group that is not estimated adds the bound (Σ|a_k|)(Σ|b_k|) of its squared bias (|F_k| ≤ 1). The rows'
    population covariance T = (w∘u)ᵀf − (wᵀf)(uᵀf) enters as −T/(n − 1); with E[(wᵀf̂)(uᵀf̂)] = (wᵀf)(uᵀf) + V,
    V = A − T/(n − 1) solves to V = ((n − 1)A − (w∘u)ᵀf̂ + (wᵀf̂)(uᵀf̂))/n, unbiased where a plug-in of clipped
    cells is not (it overstated T by 3x on a range holding 97% of the rows)."""
    c2 = 1.0 / (2 * strata.p - 1) ** 2
    counts, scale = np.asarray(strata.drawn, dtype=float), strata.coverage()
    seen, two = scale > 0, (scale > 0) & (counts >= 2)
    group = np.zeros(len(counts), dtype=np.int64) if strata.group is None else np.asarray(strata.group)
    member = np.eye(group.max() + 1)[group]  # coefficients × groups
    size, observed, paired = member.sum(axis=0), seen @ member, two @ member
    m = np.where(seen, strata.theta / np.where(seen, scale, 1.0), 0.0)
    g = (n - counts) / max(n - 1, 1)
    f2 = np.where(two, (counts * m ** 2 - c2 + 1 - g) / np.where(two, counts - g, 1.0), 0.0)
    share = np.where(paired > 0, (observed - paired) / np.maximum(paired, 1), 0.0)[group]  # o₁/o₂
    finite = n / (n - 1) if n >= 2 else 0.0
    per = np.where(seen, (c2 - 1 + finite) / np.where(seen, counts, 1.0), 0.0)
    per = per - finite * np.where(two, f2 * (1 / np.where(two, counts, 1.0) + share), 0.0)
    out = (a * b * scale ** 2) @ per
    # which coefficients are observed: a simple random sample of o of each group's S
    bounded = np.where(paired > 0, observed / np.maximum(paired, 1), 0.0)[group]
    squares = (a * b) @ (member * np.where(two, f2 * bounded, 0.0)[:, None]) \
        + (a * b) @ (member * (seen & (paired[group] == 0))[:, None])  # no n_k ≥ 2: |F_k| ≤ 1
    sa, sb = (a * m) @ member, (b * m) @ member
    cross = sa * sb - (a * b * m ** 2) @ member
    o, empty = np.maximum(observed, 2), size - observed
    spread = ((1 - 1 / o) * squares - cross / o) / (o - 1)  # the sample covariance of a_k F_k and b_k F_k
    sampled = np.where((observed >= 2) & (empty > 0), size * empty / o * spread, 0.0)
    lost = ~np.isin(group, np.flatnonzero((observed >= 2) | (observed == size)))
    out = out + sampled.sum(axis=-1) + (np.abs(a) @ lost) * (np.abs(b) @ lost)
    if n < 2:  # one report: its population covariance is 0
        return out
    return ((n - 1) * out - (w * u) @ cells + (w @ cells) * (u @ cells)) / n


class FlatMap:
    """`marginal(clique)` of a design that reconstructs the whole (padded) domain affinely from θ̂:
    found by probing `reconstruct` (θ of length K -> L ≥ D leaf fractions) at 0 and at each unit vector."""

    def __init__(self, domain: Domain, reconstruct: Callable[[np.ndarray], np.ndarray], coordinates: int):
        size = domain.size()
        constant = np.asarray(reconstruct(np.zeros(coordinates)), dtype=float)
        matrix = np.empty((size, coordinates))
        for k in range(coordinates):
            unit = np.zeros(coordinates)
            unit[k] = 1.0
            matrix[:, k] = np.asarray(reconstruct(unit), dtype=float)[:size] - constant[:size]
        self.domain, self.constant, self.matrix = domain, constant[:size], matrix

    def __call__(self, clique: Clique) -> tuple[np.ndarray, np.ndarray]:
        axes = tuple(i for i, a in enumerate(self.domain.attributes) if a not in clique)
        sizes = self.domain.sizes
        m = self.domain.size(clique)
        return (self.constant.reshape(sizes).sum(axis=axes).reshape(m),
                self.matrix.reshape(*sizes, -1).sum(axis=axes).reshape(m, -1))


def _distribution(values: np.ndarray) -> np.ndarray:
    clipped = np.clip(values, 0.0, None)
    return clipped / clipped.sum() if clipped.sum() > 0 else np.full(len(clipped), 1.0 / len(clipped))


class StratifiedAnswers:
    """Any block over `domain` (up to `max_order` attributes) from n sampled-strata reports (see the module)."""

    kind = "local DP reports"

    def __init__(self, domain: Domain, strata: Strata, n: int,
                 marginal: Callable[[Clique], tuple[np.ndarray, np.ndarray]], max_order: int | None = None,
                 protocol: str = ""):
        self.domain, self.strata, self.n, self.marginal = domain, strata, int(n), marginal
        self.max_order, self.protocol = max_order, protocol
        self._means = strata.means()

    def source_name(self, block: Block) -> str:
        return self.kind

    def covers(self, block: Block) -> bool:
        return True

    def _rows(self, block: Block, clique: Clique | None = None) -> tuple[np.ndarray, Clique]:
        clique = block.attributes(self.domain) if clique is None else clique
        if self.max_order is not None and len(clique) > self.max_order:
            raise ValueError(f"{self.protocol} reports estimate marginals of at most {self.max_order} columns; this "
                             f"query involves {len(clique)} ({', '.join(clique)})")
        return np.asarray(to_numpy(block.matrix(self.domain, clique).dense()), dtype=float), clique

    def estimate(self, block: Block) -> np.ndarray:
        rows, clique = self._rows(block)
        constant, matrix = self.marginal(clique)
        return self.n * (rows @ constant + rows @ (matrix @ self.strata.theta))

    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        return self.estimate(block), self.variance(block)

    def variance(self, block: Block) -> np.ndarray:
        return np.maximum(self.covariance(block, block), 0.0)

    def cells(self, clique: Clique) -> np.ndarray:
        """The estimated fractions of the clique's cells, clipped at 0 and normalised (the plug-in)."""
        constant, matrix = self.marginal(clique)
        return _distribution(constant + matrix @ self.strata.theta)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Row-wise covariance of two blocks' answers (the exact formula at the estimates)."""
        if self.n < 2 and self.strata.oracle != SIGN:
            return np.full(first.num_rows(self.domain), np.inf)
        clique = self.domain.canonical(set(first.attributes(self.domain)) | set(second.attributes(self.domain)))
        w, _ = self._rows(first, clique)
        u, _ = self._rows(second, clique)
        constant, matrix = self.marginal(clique)
        a, b, f = w @ matrix, u @ matrix, self._means
        if self.strata.oracle == SIGN:
            return self.n ** 2 * sign_covariance(self.strata, a, b, w, u, constant + matrix @ self.strata.theta, self.n)
        cells = self.cells(clique)
        total = (w * u) @ cells - (w @ cells) * (u @ cells)
        noise, spread = self.strata.noise(a, b, f), self.strata.spread(a, b, f)
        return self.n ** 2 * stratified_variance(noise, spread, self.strata.drawn, total, self.n)
