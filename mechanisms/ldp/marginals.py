"""Marginals of binary attributes under LDP, the aggregator's side (thesis Ch. 4, §4.3).

Records are d-bit integers (bit i is attribute i); a k-way marginal β is a d-bit mask with k
bits set, and its 2^k cells γ are numbered by `client.compact` (bit r of the cell is the
record's r-th attribute of β). The clients are `mechanisms.ldp.client`'s `inpht`, `inprr`,
`inpps`, `margrr`, `margps`, `marght` and `inpem`. Each estimator returns an `Estimate` of one
marginal's cells (unbiased, with exact variances evaluated at the estimate) and has an exact
variance function of the true marginal:

- INPHT (Algorithms 1–2, Thm 5): F̂_α for the sampled coefficients, then
  C^β[γ] = 2^−k Σ_{α≼β} χ_α(γ) F̂_α (Lemma 6), one shared set of coefficients for all marginals;
- INPRR / INPPS (Thms 3–4): the full 2^d table by SUE / GRR, then summed into the marginal;
- MARGRR / MARGPS / MARGHT (§4.3.3): users split uniformly over the C(d,k) marginals; each
  marginal is estimated from its own users only (SUE, GRR, or its 2^k − 1 Hadamard coefficients);
- INPEM (§4.3.4, Algorithm 3): ε/d-RR bits decoded by expectation–maximisation (no guarantee,
  no variance; `em_marginals` reports its iterations, where Table 4.2 counts one-step failures).

Variances are conditional on the numbers of reports per sampled stratum (see
`mechanisms.ldp.frequency.stratified_variance`).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from mechanisms.ldp.frequency import (
    Estimate,
    coefficient_means,
    hadamard_cell_variance,
    hadamard_cells,
    hadamard_variance,
    support_estimate,
    support_variance,
)


def marginal_masks(attributes: int, order: int) -> np.ndarray:
    """Every k-way marginal β as a d-bit mask, sorted."""
    return np.sort(np.array([sum(1 << i for i in c) for c in combinations(range(attributes), order)], dtype=np.int64))


def inpht_coefficients(attributes: int, order: int) -> np.ndarray:
    """INPHT's sampled coefficients T: every α with 1 ≤ |α| ≤ k, sorted (Lemma 6); tallies index this array."""
    return np.sort(np.concatenate([marginal_masks(attributes, j) for j in range(1, order + 1)]))


def compact_cells(records, beta: int) -> np.ndarray:
    """Each record's cell in marginal β (vectorised `client.compact`)."""
    records = np.asarray(records, dtype=np.int64)
    cells = np.zeros_like(records)
    positions = [i for i in range(int(beta).bit_length()) if beta >> i & 1]
    for r, i in enumerate(positions):
        cells |= ((records >> i) & 1) << r
    return cells


def subcube(beta: int) -> np.ndarray:
    """The 2^k masks α ≼ β, indexed by their compact number (so α = subcube(β)[compact(α, β)])."""
    positions = [i for i in range(int(beta).bit_length()) if beta >> i & 1]
    g = np.arange(1 << len(positions), dtype=np.int64)
    out = np.zeros_like(g)
    for r, i in enumerate(positions):
        out |= ((g >> r) & 1) << i
    return out


def true_marginal(records, beta: int) -> np.ndarray:
    """The exact marginal β of the records, as fractions."""
    k = bin(int(beta)).count("1")
    return np.bincount(compact_cells(records, beta), minlength=1 << k) / len(records)


def marginalize(table, beta: int) -> np.ndarray:
    """Sum a full 2^d table (fractions, or per-item variances of independent items) into marginal β."""
    table = np.asarray(table, dtype=float)
    k = bin(int(beta)).count("1")
    return np.bincount(compact_cells(np.arange(len(table)), beta), weights=table, minlength=1 << k)


def total_variation(estimate, truth) -> float:
    """½‖Ĉ − C‖₁ (Def. 15), the thesis' error measure for a marginal."""
    return 0.5 * float(np.abs(np.asarray(estimate) - np.asarray(truth)).sum())


def inpht_marginal(counts, sums, coefficients, truth: float, beta: int, n: int) -> Estimate:
    """INPHT's marginal β from the per-coefficient tallies (counts, sums indexed like `coefficients`)."""
    sub = subcube(beta)
    position = np.searchsorted(coefficients, sub[1:])
    sub_counts = np.concatenate([[0], np.asarray(counts)[position]])
    theta = np.concatenate([[1.0], coefficient_means(sub_counts[1:], np.asarray(sums)[position], truth)])
    values = hadamard_cells(theta)
    return Estimate(values, hadamard_cell_variance(np.clip(theta, -1, 1), sub_counts, truth, n,
                                                   np.clip(values, 0, 1)))


def inpht_variance(true_cells, counts, coefficients, truth: float, beta: int, n: int) -> np.ndarray:
    """Exact variance of `inpht_marginal`'s cells, given the true marginal β."""
    position = np.searchsorted(coefficients, subcube(beta)[1:])
    return hadamard_variance(true_cells, np.concatenate([[0], np.asarray(counts)[position]]), truth, n)


def full_table_marginal(support, n: int, p: float, q: float, beta: int, exclusive: bool) -> Estimate:
    """INPRR (`exclusive=False`: SUE, independent items) or INPPS (`exclusive=True`: GRR) marginal β."""
    full = support_estimate(support, n, p, q).values
    values = marginalize(full, beta)
    return Estimate(values, full_table_variance(np.clip(values, 0, 1), n, p, q, beta, len(full), exclusive))


def full_table_variance(true_cells, n: int, p: float, q: float, beta: int, size: int, exclusive: bool):
    """Exact variance of a marginal cell summed from a full table of `size` = 2^d items.

    A cell sums s = 2^(d−k) items. GRR supports one item per report, so the cell is a support
    oracle with (p + (s−1)q, sq); SUE's items are independent, so the cell's variance is the sum
    [s·q(1−q) + m(p−q)(1−p−q)] / (n(p−q)²).
    """
    cells = np.asarray(true_cells, dtype=float)
    s = size // len(cells)
    if exclusive:
        return support_variance(cells, n, p + (s - 1) * q, s * q)
    return (s * q * (1 - q) + cells * (p - q) * (1 - p - q)) / (n * (p - q) ** 2)


def sampled_support_marginal(support, count: int, n: int, p: float, q: float) -> Estimate:
    """MARGRR (SUE) or MARGPS (GRR) marginal β from the support counts of its `count` users."""
    values = support_estimate(support, count, p, q).values
    return Estimate(values, sampled_support_variance(np.clip(values, 0, 1), count, n, p, q))


def sampled_support_variance(true_cells, count: int, n: int, p: float, q: float) -> np.ndarray:
    """Exact variance of a MARGRR/MARGPS cell: the oracle's variance over the n_β users who drew β,
    plus their sampling variance m(1−m)(n − n_β)/(n_β(n − 1)) (`stratified_variance`, one stratum)."""
    m = np.asarray(true_cells, dtype=float)
    return support_variance(m, count, p, q) + m * (1 - m) * (n - count) / (count * (n - 1))


def marght_marginal(counts, sums, truth: float, n: int) -> Estimate:
    """MARGHT's marginal from its users' tallies per compact coefficient α (length 2^k, index 0 unused)."""
    theta = coefficient_means(counts, sums, truth)
    values = hadamard_cells(theta)
    return Estimate(values, hadamard_cell_variance(np.clip(theta, -1, 1), counts, truth, n, np.clip(values, 0, 1)))


def tally_sampled(marginals, masks, cells, size: int, weights=None) -> np.ndarray:
    """Per-marginal tallies of MARG* reports: out[i, c] = Σ weights over reports of marginal masks[i] at cell c.

    `marginals` are the reports' β masks; `cells` their cell (MARGPS), compact coefficient
    (MARGHT, with `weights` the bits for the sums) or, for MARGRR, a 0/1 matrix of cells (reports × 2^k).
    """
    row = np.searchsorted(masks, np.asarray(marginals, dtype=np.int64))
    out = np.zeros((len(masks), size))
    cells = np.asarray(cells)
    if cells.ndim == 2:
        np.add.at(out, row, cells)
    else:
        np.add.at(out, (row, cells), 1.0 if weights is None else np.asarray(weights, dtype=float))
    return out


def em_marginals(bits, betas, truth: float, tolerance: float = 1e-5,
                 max_iterations: int = 100_000) -> tuple[np.ndarray, np.ndarray]:
    """INPEM's EM decoding (Algorithm 3) of several k-way marginals from ε/d-RR bits.

    Starts from the uniform marginal; each step is Pr'[γ] = Σ_γ' o[γ'] P[γ'|γ]Pr[γ] / Σ_γ'' P[γ'|γ'']Pr[γ'']
    with o the observed noisy cells and P[γ'|γ] = p^(k−h)(1−p)^h (h differing bits); it stops when
    ‖Pr' − Pr‖_∞ ≤ `tolerance`. Returns the marginals and the iterations each took (1 means it
    stopped at once, essentially at the uniform prior: Table 4.2's failures).
    """
    betas = np.asarray(betas, dtype=np.int64)
    k = bin(int(betas[0])).count("1")
    size = 1 << k
    observed = np.stack([np.bincount(compact_cells(bits, b), minlength=size) for b in betas]) / len(bits)
    distance = np.array([bin(i ^ j).count("1") for i in range(size) for j in range(size)]).reshape(size, size)
    channel = truth ** (k - distance) * (1 - truth) ** distance  # channel[γ', γ]
    current = np.full((len(betas), size), 1.0 / size)
    iterations = np.zeros(len(betas), dtype=np.int64)
    active = np.ones(len(betas), dtype=bool)
    while active.any() and iterations.max() < max_iterations:
        pr = current[active]
        evidence = pr @ channel.T  # [m, γ'] = Σ_γ P[γ'|γ]Pr[γ]
        updated = pr * ((observed[active] / evidence) @ channel)
        iterations[active] += 1
        done = np.abs(updated - pr).max(axis=1) <= tolerance
        current[active] = updated
        active[np.flatnonzero(active)[done]] = False
    return current, iterations
