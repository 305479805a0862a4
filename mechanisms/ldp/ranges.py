"""Range queries under LDP, the aggregator's side (thesis Ch. 5): hierarchical histograms and HaarHRR.

Users hold z ∈ [D]; answers are fractions. The domain is padded to B^h (HH) or 2^h (Haar)
leaves, the padding holding no mass. The clients are `client.HierarchicalHistogram` and
`client.HaarHRR`; every user reports one uniformly drawn level with the full ε (§5.4.1: sampling
levels costs a factor h in variance, splitting ε would cost h²).

- HH_B (§5.4.1–5.4.2): per level l = 1..h the frequency oracle's node fractions (OUE: divided by
  that level's own n_l; HRR: per coefficient), then Hay et al.'s two-pass least squares with the
  root fixed at 1 (`consistent_leaves`, Stage 1 weighted averaging and Stage 2 mean consistency):
  the thesis' HH^c_B (TreeOUECI / TreeHRRCI).
- HaarHRR (§5.4.3): per level the HRR estimate of (C_L − C_R)/N for every node, then the leaves
  f̂(x) = 1/D + Σ_l s_l(x)·ŵ_l[x >> l]/2^l (s_l = +1 in a node's left half, −1 in its right); the
  coefficients are orthogonal, so no consistency step is needed.

A range (or any query vector over the leaves, `range_query`) is answered from the leaves; its
exact variance given the true leaf fractions and the numbers of reports per level (and per
coefficient) is `hh_oue_variance`, `hh_hrr_variance` or `haar_variance`, each the exact
`frequency.stratified_variance` of the estimator's weights on the strata (the thesis' bounds
(5.1)–(5.3) bound them from above). `hh_oue_estimate`, `hh_hrr_estimate` and `haar_estimate`
answer queries from the tallies with these variances evaluated at the estimated leaves.
"""

from __future__ import annotations

import numpy as np

from mechanisms.ldp.frequency import (
    Estimate,
    coefficient_means,
    fwht,
    hadamard_cells,
    stratified_variance,
    support_estimate,
)


def tree_height(domain: int, branching: int) -> int:
    """h, the least with B^h ≥ D (the client's `HierarchicalHistogram.height`)."""
    h, size = 1, branching
    while size < domain:
        h, size = h + 1, size * branching
    return h


def _children_sums(values: np.ndarray, branching: int) -> np.ndarray:
    return values.reshape(-1, branching).sum(axis=1)


def _stage_weights(height: int, level: int, branching: int) -> tuple[float, float]:
    """Hay's Stage 1 weights for a node at height i = h − l + 1 (leaves i = 1):
    (B^i − B^(i−1))/(B^i − 1) on its own estimate, (B^(i−1) − 1)/(B^i − 1) on its children's sum."""
    i = height - level + 1
    top = float(branching) ** i
    return (top - top / branching) / (top - 1), (top / branching - 1) / (top - 1)


def consistent_leaves(levels: list[np.ndarray], branching: int) -> np.ndarray:
    """Least-squares consistent leaf fractions from per-level node fractions, the root fixed at 1 (§5.4.2).

    `levels[l − 1]` holds level l's B^l node estimates (equal variances assumed, as in the thesis:
    Gauss–Markov makes this the BLUE under uniform level sampling up to the n_l's spread).
    """
    height = len(levels)
    z = [None] * (height + 1)
    z[height] = np.asarray(levels[-1], dtype=float)
    for level in range(height - 1, 0, -1):  # Stage 1: bottom-up weighted averaging
        own, children = _stage_weights(height, level, branching)
        z[level] = own * np.asarray(levels[level - 1], dtype=float) + children * _children_sums(z[level + 1], branching)
    u = np.ones(1)
    for level in range(1, height + 1):  # Stage 2: top-down mean consistency
        u = z[level] + np.repeat(u - _children_sums(z[level], branching), branching) / branching
    return u


def consistency_weights(query, branching: int, height: int) -> tuple[float, list[np.ndarray]]:
    """The adjoint of `consistent_leaves`: (constant, per-level weights c_l) with
    queryᵀ·consistent_leaves(x) = constant + Σ_l c_lᵀ x_l for every input x."""
    u_bar = np.asarray(query, dtype=float)
    z_bar = [None] * (height + 1)
    for level in range(height, 0, -1):  # Stage 2, reversed
        pooled = _children_sums(u_bar, branching)
        z_bar[level] = u_bar - np.repeat(pooled, branching) / branching
        u_bar = pooled / branching
    constant = float(u_bar[0])
    weights = [None] * height
    for level in range(1, height):  # Stage 1, reversed
        own, children = _stage_weights(height, level, branching)
        weights[level - 1] = own * z_bar[level]
        z_bar[level + 1] = z_bar[level + 1] + children * np.repeat(z_bar[level], branching)
    weights[height - 1] = z_bar[height]
    return constant, weights


def oue_levels(ones: list[np.ndarray], counts, p: float, q: float) -> list[np.ndarray]:
    """TreeOUE's node fractions per level: OUE's estimate over that level's n_l reports."""
    return [support_estimate(s, n_l, p, q).values for s, n_l in zip(ones, counts)]


def hrr_levels(counts: list[np.ndarray], sums: list[np.ndarray], truth: float, branching: int) -> list[np.ndarray]:
    """TreeHRR's node fractions per level: HRR's estimate from that level's per-coefficient tallies."""
    return [hadamard_cells(coefficient_means(c, s, truth))[: branching ** (level + 1)]
            for level, (c, s) in enumerate(zip(counts, sums))]


def _signs(size: int, level: int) -> np.ndarray:
    """s_l(x): +1 where x is in the left half of its level-l node, −1 in the right half."""
    return 1 - 2 * ((np.arange(size) >> (level - 1)) & 1)


def haar_leaves(counts: list[np.ndarray], sums: list[np.ndarray], truth: float) -> np.ndarray:
    """HaarHRR's leaf fractions from per-level tallies (level l's arrays have K = 2^(h−l) entries)."""
    return haar_from_coefficients([coefficient_means(c, s, truth) for c, s in zip(counts, sums)])


def haar_from_coefficients(thetas: list[np.ndarray]) -> np.ndarray:
    """HaarHRR's leaf fractions from the per-level estimates θ̂_l of the ±1 coefficients (an affine map)."""
    height = len(thetas)
    size = 1 << height
    leaves = np.full(size, 1.0 / size)
    for level in range(1, height + 1):
        theta = np.asarray(thetas[level - 1], dtype=float)
        w = fwht(theta) / len(theta)  # estimates (C_L − C_R)/N per level-l node
        leaves += _signs(size, level) * np.repeat(w, 1 << level) / (1 << level)
    return leaves


def range_query(size: int, a: int, b: int) -> np.ndarray:
    """The indicator of [a, b] over `size` leaves."""
    q = np.zeros(size)
    q[a:b + 1] = 1.0
    return q


def _population_variance(truth: np.ndarray, query: np.ndarray) -> float:
    return float(truth @ query ** 2 - (truth @ query) ** 2)


def hh_oue_variance(truth, query, level_counts, p: float, q: float, branching: int, n: int) -> float:
    """Exact variance of queryᵀ(TreeOUECI leaves), given the true leaf fractions and each level's n_l.

    Stratum l has the weights c_l of `consistency_weights`: OUE's noise Σ_j c_j²[q(1−q) + f_j(p−q)(1−p−q)]/(p−q)²
    and spread Σ_j c_j² f_j − (Σ_j c_j f_j)², with f the true level-l fractions.
    """
    truth, query = np.asarray(truth, dtype=float), np.asarray(query, dtype=float)
    height = len(level_counts)
    _, weights = consistency_weights(query, branching, height)
    noise, spread = [], []
    for level, c in enumerate(weights, start=1):
        f = truth.reshape(branching ** level, -1).sum(axis=1)
        noise.append(c ** 2 @ (q * (1 - q) + f * (p - q) * (1 - p - q)) / (p - q) ** 2)
        spread.append(c ** 2 @ f - (c @ f) ** 2)
    return float(stratified_variance(noise, spread, level_counts, _population_variance(truth, query), n))


def _coefficient_strata(weights: list[np.ndarray], tables: list[np.ndarray], scale: list[float], first: int):
    """noise/spread factors a², a²(1 − T²) of the ±1 strata of each level, from index `first` on."""
    a2, spread = [], []
    for c, table, s in zip(weights, tables, scale):
        a = fwht(c)[first:] * s
        coefficient = fwht(table)[first:]
        a2.append(a ** 2)
        spread.append(a ** 2 * (1 - coefficient ** 2))
    return np.concatenate(a2), np.concatenate(spread)


def hh_hrr_variance(truth, query, counts: list[np.ndarray], truth_probability: float, branching: int, n: int) -> float:
    """Exact variance of queryᵀ(TreeHRRCI leaves): strata are (level, non-zero coefficient) pairs,
    a_{l,k} = (H c_l)_k / D'_l; `counts[l − 1]` has D'_l entries (reports per coefficient, index 0 unused)."""
    truth, query = np.asarray(truth, dtype=float), np.asarray(query, dtype=float)
    height = len(counts)
    _, weights = consistency_weights(query, branching, height)
    padded_c, padded_f = [], []
    for level, (c, cnt) in enumerate(zip(weights, counts), start=1):
        pad = len(cnt) - len(c)
        padded_c.append(np.pad(c, (0, pad)))
        padded_f.append(np.pad(truth.reshape(branching ** level, -1).sum(axis=1), (0, pad)))
    a2, spread = _coefficient_strata(padded_c, padded_f, [1 / len(c) for c in counts], first=1)
    c2 = 1 / (2 * truth_probability - 1) ** 2
    strata_counts = np.concatenate([np.asarray(c)[1:] for c in counts])
    return float(stratified_variance((c2 - 1) * a2, spread, strata_counts, _population_variance(truth, query), n))


def haar_variance(truth, query, counts: list[np.ndarray], truth_probability: float, n: int) -> float:
    """Exact variance of queryᵀ(HaarHRR leaves): strata are (level, coefficient) pairs with
    a_{l,k} = (H A_l)_k/(K·2^l), A_l[u] = Σ_{x in node u} s_l(x)·query[x] (O_L(u) − O_R(u) for a range)."""
    truth, query = np.asarray(truth, dtype=float), np.asarray(query, dtype=float)
    height = len(counts)
    size = 1 << height
    a_tables, w_tables, scale = [], [], []
    for level in range(1, height + 1):
        s = _signs(size, level)
        a_tables.append((s * query).reshape(-1, 1 << level).sum(axis=1))
        w_tables.append((s * truth).reshape(-1, 1 << level).sum(axis=1))
        scale.append(1.0 / (size >> level) / (1 << level))
    a2, spread = _coefficient_strata(a_tables, w_tables, scale, first=0)
    c2 = 1 / (2 * truth_probability - 1) ** 2
    strata_counts = np.concatenate([np.asarray(c) for c in counts])
    return float(stratified_variance((c2 - 1) * a2, spread, strata_counts, _population_variance(truth, query), n))


def _plug_in(leaves: np.ndarray) -> np.ndarray:
    """Estimated leaves made a distribution, to evaluate the variance formulas at."""
    clipped = np.clip(leaves, 0, None)
    return clipped / clipped.sum()


def hh_oue_estimate(ones, counts, p: float, q: float, branching: int, queries) -> Estimate:
    """TreeOUECI's answers to `queries` (rows over the B^h leaves) and their variances."""
    leaves = consistent_leaves(oue_levels(ones, counts, p, q), branching)
    n, truth = int(np.sum(counts)), _plug_in(leaves)
    queries = np.atleast_2d(queries)
    return Estimate(queries @ leaves,
                    np.array([hh_oue_variance(truth, qv, counts, p, q, branching, n) for qv in queries]))


def hh_hrr_estimate(counts, sums, truth_probability: float, branching: int, queries) -> Estimate:
    """TreeHRRCI's answers to `queries` and their variances."""
    leaves = consistent_leaves(hrr_levels(counts, sums, truth_probability, branching), branching)
    n, truth = int(sum(np.sum(c) for c in counts)), _plug_in(leaves)
    queries = np.atleast_2d(queries)
    return Estimate(queries @ leaves, np.array([hh_hrr_variance(truth, qv, counts, truth_probability, branching, n)
                                                for qv in queries]))


def haar_estimate(counts, sums, truth_probability: float, queries) -> Estimate:
    """HaarHRR's answers to `queries` (rows over the 2^h leaves) and their variances."""
    leaves = haar_leaves(counts, sums, truth_probability)
    n, truth = int(sum(np.sum(c) for c in counts)), _plug_in(leaves)
    queries = np.atleast_2d(queries)
    return Estimate(queries @ leaves,
                    np.array([haar_variance(truth, qv, counts, truth_probability, n) for qv in queries]))
