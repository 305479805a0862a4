"""Frequency oracles, the aggregator's side: unbiased estimates and their exact variances (thesis §2.4.2, §4.7).

The clients are in `mechanisms.ldp.client`; these estimators unbias with the same exact
probabilities (`support_probabilities`, `truth`). Two shapes cover every oracle:

- support oracles (`rr`, `grr`, `oue`, `sue`, `olh`): a report supports some items, the user's
  own item with probability p and any other with probability q, independently across users.
  With S_j the number of the n reports supporting j, f̂_j = (S_j/n − q)/(p − q) is unbiased and
  Var f̂_j = [q(1−q) + f_j(p−q)(1−p−q)] / (n(p−q)²) exactly (Lemmas 2–4, not yet simplified
  for small f_j). A `grr` report supports one item, so a set of s items is itself a support
  oracle with (p + (s−1)q, sq); unary encodings' supports are independent across items.
- sampled-coefficient oracles (`hrr` here; INPHT, MARGHT and HaarHRR use the same shape): each
  user draws one stratum (a Hadamard coefficient k) uniformly and reports the ±1 value χ_k(z)
  by randomized response with truth probability p_r; the aggregator's estimate of the
  coefficient is θ̂_k = c·(mean of the n_k bits reported for k), c = 1/(2p_r − 1) (Algorithm 2,
  the ratio estimator: it divides by the n_k actually observed). `stratified_variance` is the
  exact variance of any linear combination of such stratum means, conditional on the numbers of
  reports per stratum (which the aggregator sees); a stratum with no report has no estimate
  (θ̂ = 0) and makes the conditional variance infinite.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mechanisms.ldp.client import HASH_PRIME


class Estimate(NamedTuple):
    """Unbiased estimates and their exact variances, evaluated at the estimates (clipped into range)."""

    values: np.ndarray
    variances: np.ndarray


def fwht(values) -> np.ndarray:
    """The unnormalised Walsh–Hadamard transform along the last axis (length a power of two):
    out[k] = Σ_z values[z]·(−1)^popcount(k & z)."""
    a = np.array(values, dtype=float)
    size = a.shape[-1]
    if size & (size - 1):
        raise ValueError("fwht needs a power-of-two length")
    h = 1
    while h < size:
        blocks = a.reshape(a.shape[:-1] + (size // (2 * h), 2, h))
        left, right = blocks[..., 0, :].copy(), blocks[..., 1, :]
        blocks[..., 0, :] += right
        blocks[..., 1, :] = left - right
        h *= 2
    return a


def support_variance(frequencies, n: int, p: float, q: float) -> np.ndarray:
    """Exact Var f̂_j = [q(1−q) + f_j(p−q)(1−p−q)] / (n(p−q)²) of a support oracle (Lemmas 2–4)."""
    f = np.asarray(frequencies, dtype=float)
    return (q * (1 - q) + f * (p - q) * (1 - p - q)) / (n * (p - q) ** 2)


def support_estimate(support, n: int, p: float, q: float) -> Estimate:
    """f̂_j = (S_j/n − q)/(p − q) from the support counts S of n reports, with exact variances."""
    values = (np.asarray(support, dtype=float) / n - q) / (p - q)
    return Estimate(values, support_variance(np.clip(values, 0, 1), n, p, q))


def stratified_variance(noise, spread, counts, total, n: int):
    """Exact Var Σ_s a_sᵀθ̂_s = Σ_s (noise_s + n/(n−1)·spread_s)/n_s − total/(n−1), given the counts n_s.

    θ̂_s averages the n_s reports of the users who drew stratum s, each report unbiased for
    t_s(z) with noise; noise_s is the population mean of a_sᵀCov(report | z)a_s, spread_s the
    population variance of a_sᵀt_s(z), total that of Σ_s a_sᵀt_s(z) (for an unbiased estimate of
    a query, the query's own population variance, e.g. f(1 − f)). Given the counts, the users of
    the strata are disjoint simple random samples of the n: their means of t have variance
    σ²(n − n_s)/(n_s(n − 1)) and cross-covariance −C/(n − 1); the reports' noise is independent.
    Strata with a_s = 0 may be left out; an empty stratum with noise or spread gives ∞. Extra
    trailing axes of `noise` and `spread` (after the strata) are independent queries, or, with
    bilinear noise and spread, covariances of query pairs.
    """
    noise, spread = (np.asarray(x, dtype=float) for x in (noise, spread))
    counts = np.asarray(counts, dtype=float).reshape((-1,) + (1,) * (noise.ndim - 1))
    used = (noise != 0) | (spread != 0)
    per = np.where(used, (noise + n / (n - 1) * spread) / np.where(counts > 0, counts, 1), 0.0)
    out = per.sum(axis=0) - np.asarray(total, dtype=float) / (n - 1)
    return np.where(np.any(used & (counts == 0), axis=0), np.inf, out)


def coefficient_means(counts, sums, truth: float) -> np.ndarray:
    """θ̂ = c·sums/counts, c = 1/(2p_r − 1): per-stratum unbiased ±1 means (0 where no report)."""
    counts = np.asarray(counts, dtype=float)
    return np.where(counts > 0, np.asarray(sums, dtype=float) / np.maximum(counts, 1), 0.0) / (2 * truth - 1)


def hadamard_cells(theta) -> np.ndarray:
    """Cells 2^−m Σ_α χ_α(γ)θ_α of a 2^m-cell table from its coefficients, θ_0 = 1 (Lemma 6, eq. 4.1)."""
    theta = np.array(theta, dtype=float)
    theta[..., 0] = 1.0
    return fwht(theta) / theta.shape[-1]


def hadamard_cell_variance(coefficients, counts, truth: float, n: int, cells) -> np.ndarray:
    """Exact variance of each `hadamard_cells` estimate from sampled-coefficient reports.

    With c = 1/(2p_r − 1): 4^−m Σ_{α≠0} [c² − 1 + n/(n−1)(1 − F_α²)]/n_α − m_γ(1 − m_γ)/(n − 1), where F
    are the true coefficients (index 0 ignored), n_α the reports per coefficient and m_γ the true
    cells (`stratified_variance` with a_α = ±2^−m: a report's noise is c² − 1 whatever its value,
    the ±1 coefficient's population variance is 1 − F_α², and Σ_α a_α χ_α(z) = 1[cell γ] − 2^−m).
    """
    coefficients = np.asarray(coefficients, dtype=float)
    size = coefficients.shape[-1]
    c2 = 1 / (2 * truth - 1) ** 2
    noise = np.full(size - 1, (c2 - 1) / size ** 2)
    spread = (1 - coefficients[1:] ** 2) / size ** 2
    cells = np.asarray(cells, dtype=float)
    return stratified_variance(noise, spread, np.asarray(counts)[1:], cells * (1 - cells), n)


def hadamard_variance(frequencies, counts, truth: float, n: int) -> np.ndarray:
    """Exact variance of every cell from sampled-coefficient reports, given the true cells
    (length 2^m; for HRR the true frequencies padded to D') and the reports per coefficient."""
    frequencies = np.asarray(frequencies, dtype=float)
    return hadamard_cell_variance(fwht(frequencies), counts, truth, n, frequencies)


def hadamard_estimate(counts, sums, truth: float, domain: int, n: int) -> Estimate:
    """HRR's frequencies f̂ = (1/D') H θ̂ (θ̂_0 = 1) over the first `domain` items, with exact variances.

    `counts`/`sums` (length D') are the reports and the sum of their bits per coefficient index.
    """
    theta = coefficient_means(counts, sums, truth)
    values = hadamard_cells(theta)[:domain]
    variances = hadamard_cell_variance(np.clip(theta, -1, 1), counts, truth, n, np.clip(values, 0, 1))
    return Estimate(values, variances)


def tally_values(values, size: int) -> np.ndarray:
    """Support counts of `grr` reports: how many reported each item."""
    return np.bincount(np.asarray(values, dtype=np.int64), minlength=size)


def tally_ones(ones, size: int) -> np.ndarray:
    """Support counts of unary-encoding reports (their "ones" lists, or a 0/1 matrix users × items)."""
    if isinstance(ones, np.ndarray) and ones.ndim == 2:
        return ones.sum(axis=0).astype(np.int64)
    flat = [j for row in ones for j in row]
    return np.bincount(np.asarray(flat, dtype=np.int64), minlength=size)


def tally_hashes(a, b, y, domain: int, hash_range: int, chunk: int = 1 << 22) -> np.ndarray:
    """Support counts of `olh` reports: S_j = #{i : H_i(j) = y_i}, O(n·D) (the thesis' decoding cost)."""
    a, b, y = (np.asarray(v, dtype=np.int64) for v in (a, b, y))
    items = np.arange(domain, dtype=np.int64)
    support = np.zeros(domain, dtype=np.int64)
    rows = max(1, chunk // domain)
    for start in range(0, len(a), rows):
        sl = slice(start, start + rows)
        hashed = (a[sl, None] * items + b[sl, None]) % HASH_PRIME % hash_range
        support += (hashed == y[sl, None]).sum(axis=0)
    return support


def tally_signs(index, bit, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(counts, sums) per stratum index of ±1 reports: how many, and the sum of their bits."""
    index = np.asarray(index, dtype=np.int64)
    return (np.bincount(index, minlength=size),
            np.bincount(index, weights=np.asarray(bit, dtype=float), minlength=size))
