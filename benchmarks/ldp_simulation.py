"""Statistically equivalent simulation of LDP reports, for tests and benchmarks (thesis §5.5).

Each function draws the aggregator's tallies for a population with exactly the distribution the
clients in `mechanisms.ldp.client` would produce (same probabilities), vectorised in numpy:
OUE's support counts as Binomial(θ_j, p) + Binomial(n − θ_j, q) (the thesis' simulation of
§5.5), users' level choices as a multinomial split of the histogram, and sampled-coefficient
reports user by user (a stratum, a ±1 value, a randomized-response flip). Tallies are in the
shapes the estimators of `frequency`, `marginals` and `ranges` take.
"""

from __future__ import annotations

import numpy as np

from mechanisms.ldp.client import HASH_PRIME, LocalHashing
from mechanisms.ldp.marginals import compact_cells


def parity(x) -> np.ndarray:
    """(−1)^popcount(x), elementwise."""
    return 1 - 2 * (np.bitwise_count(np.asarray(x, dtype=np.int64)) & 1).astype(np.int64)


def flip(signs, truth: float, rng: np.random.Generator) -> np.ndarray:
    """Randomized response on ±1 values: each kept with probability `truth`, negated otherwise."""
    signs = np.asarray(signs)
    return np.where(rng.random(signs.shape) < truth, signs, -signs)


def flip_tallies(plus, minus, truth: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(counts, sums) per stratum after RR, from the numbers of +1 and −1 true values in each."""
    plus, minus = np.asarray(plus, dtype=np.int64), np.asarray(minus, dtype=np.int64)
    sums = 2 * rng.binomial(plus, truth) - plus + 2 * rng.binomial(minus, 1 - truth) - minus
    return plus + minus, sums.astype(float)


def sign_tallies(strata, signs, truth: float, size: int, rng: np.random.Generator):
    """(counts, sums) per stratum of ±1 reports: each user's true `signs` at its drawn stratum, by RR."""
    reported = flip(signs, truth, rng)
    return (np.bincount(strata, minlength=size),
            np.bincount(strata, weights=reported.astype(float), minlength=size))


def expand_histogram(histogram) -> np.ndarray:
    """One value per user: value x repeated histogram[x] times."""
    histogram = np.asarray(histogram, dtype=np.int64)
    return np.repeat(np.arange(len(histogram), dtype=np.int64), histogram)


def unary_support(histogram, p: float, q: float, rng: np.random.Generator) -> np.ndarray:
    """Unary-encoding support counts: Binomial(θ_j, p) + Binomial(n − θ_j, q) per item."""
    histogram = np.asarray(histogram, dtype=np.int64)
    return rng.binomial(histogram, p) + rng.binomial(histogram.sum() - histogram, q)


def direct_reports(values, size: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """GRR reports: the value with probability p, else one of the other size − 1 uniformly."""
    values = np.asarray(values, dtype=np.int64)
    other = rng.integers(0, size - 1, len(values))
    other = other + (other >= values)
    return np.where(rng.random(len(values)) < p, values, other)


def hash_reports(values, protocol: LocalHashing, rng: np.random.Generator):
    """OLH reports (a, b, y): a Carter–Wegman hash per user and GRR of the hashed value over [g]."""
    values = np.asarray(values, dtype=np.int64)
    a = rng.integers(1, HASH_PRIME, len(values))
    b = rng.integers(0, HASH_PRIME, len(values))
    hashed = (a * values + b) % HASH_PRIME % protocol.range
    return a, b, direct_reports(hashed, protocol.range, float(protocol.truth), rng)


def hadamard_tallies(values, size: int, truth: float, rng: np.random.Generator):
    """HRR: each user a non-zero coefficient k ∈ [1, size) uniformly, RR(χ_k(z)); (counts, sums) per k."""
    values = np.asarray(values, dtype=np.int64)
    k = rng.integers(1, size, len(values))
    return sign_tallies(k, parity(k & values), truth, size, rng)


def inpht_tallies(records, coefficients, truth: float, rng: np.random.Generator):
    """INPHT: each user one of the `coefficients` uniformly (Algorithm 1); tallies by position."""
    records = np.asarray(records, dtype=np.int64)
    position = rng.integers(0, len(coefficients), len(records))
    return sign_tallies(position, parity(np.asarray(coefficients)[position] & records), truth, len(coefficients), rng)


def _sampled(records, masks, rng):
    records = np.asarray(records, dtype=np.int64)
    row = rng.integers(0, len(masks), len(records))
    cells = np.zeros_like(records)
    for i, beta in enumerate(masks):
        chosen = row == i
        cells[chosen] = compact_cells(records[chosen], int(beta))
    return row, cells


def margps_tallies(records, masks, order: int, p: float, rng: np.random.Generator):
    """MARGPS: a marginal uniformly, GRR of the cell; (support per marginal × cell, users per marginal)."""
    row, cells = _sampled(records, masks, rng)
    size = 1 << order
    reported = direct_reports(cells, size, p, rng)
    support = np.zeros((len(masks), size))
    np.add.at(support, (row, reported), 1.0)
    return support, np.bincount(row, minlength=len(masks))


def margrr_tallies(records, masks, order: int, p: float, q: float, rng: np.random.Generator):
    """MARGRR: a marginal uniformly, SUE of the cell (per marginal: binomial supports of its users)."""
    row, cells = _sampled(records, masks, rng)
    size = 1 << order
    histogram = np.zeros((len(masks), size), dtype=np.int64)
    np.add.at(histogram, (row, cells), 1)
    counts = histogram.sum(axis=1)
    support = rng.binomial(histogram, p) + rng.binomial(counts[:, None] - histogram, q)
    return support.astype(float), counts


def marght_tallies(records, masks, order: int, truth: float, rng: np.random.Generator):
    """MARGHT: a marginal, then a non-zero compact coefficient uniformly; (counts, sums) per marginal × coefficient."""
    row, cells = _sampled(records, masks, rng)
    size = 1 << order
    alpha = rng.integers(1, size, len(row))
    flat = row * size + alpha
    counts, sums = sign_tallies(flat, parity(alpha & cells), truth, len(masks) * size, rng)
    return counts.reshape(len(masks), size), sums.reshape(len(masks), size)


def em_bits(records, attributes: int, truth: float, rng: np.random.Generator) -> np.ndarray:
    """INPEM: every bit of every record kept with probability `truth` (ε/d-RR)."""
    records = np.asarray(records, dtype=np.int64)
    flips = (rng.random((len(records), attributes)) >= truth) @ (1 << np.arange(attributes, dtype=np.int64))
    return records ^ flips


def level_split(histogram, height: int, rng: np.random.Generator):
    """Yield, for l = 1..h, the histogram of the users who drew level l (each uniformly, independently)."""
    remaining = np.asarray(histogram, dtype=np.int64)
    for level in range(1, height + 1):
        taken = rng.binomial(remaining, 1.0 / (height - level + 1)) if level < height else remaining
        remaining = remaining - taken
        yield taken


def node_histogram(leaves: np.ndarray, nodes: int) -> np.ndarray:
    """Leaf counts summed into `nodes` equal consecutive blocks (a level of the tree)."""
    return leaves.reshape(nodes, -1).sum(axis=1)


def hh_oue_tallies(level_histograms, branching: int, p: float, q: float, rng: np.random.Generator):
    """TreeOUE: per level, OUE's support counts over its B^l nodes and its number of users.

    `level_histograms[l − 1]`: level l's users over the leaves (or already over its B^l nodes)."""
    ones, counts = [], []
    for level, leaves in enumerate(level_histograms, start=1):
        nodes = node_histogram(leaves, branching ** level)
        ones.append(unary_support(nodes, p, q, rng))
        counts.append(int(nodes.sum()))
    return ones, counts


def hh_hrr_tallies(level_histograms, branching: int, truth: float, rng: np.random.Generator):
    """TreeHRR: per level, HRR's (counts, sums) over the padded 2^⌈log₂ B^l⌉ coefficients."""
    counts, sums = [], []
    for level, leaves in enumerate(level_histograms, start=1):
        nodes = node_histogram(leaves, branching ** level)
        c, s = hadamard_tallies(expand_histogram(nodes), 1 << (len(nodes) - 1).bit_length(), truth, rng)
        counts.append(c)
        sums.append(s)
    return counts, sums


def haar_signs(level_histograms, rng: np.random.Generator, chunk: int = 1 << 22):
    """HaarHRR before RR: per level, the numbers of users whose value s_l(z)·χ_k(z >> l) at their drawn
    coefficient k is +1 and −1 (`flip_tallies` then applies any ε). Users are drawn in chunks."""
    plus, minus = [], []
    for level, leaves in enumerate(level_histograms, start=1):
        leaves = np.asarray(leaves, dtype=np.int64)
        size = len(leaves) >> level
        up, down = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
        edges = np.searchsorted(np.cumsum(leaves), np.arange(chunk, leaves.sum(), chunk))  # about `chunk` users apart
        for lo, hi in zip(np.r_[0, edges], np.r_[edges, len(leaves)]):
            x = lo + expand_histogram(leaves[lo:hi])
            k = rng.integers(0, size, len(x))
            sign = (1 - 2 * ((x >> (level - 1)) & 1)) * parity((x >> level) & k)
            up += np.bincount(k[sign > 0], minlength=size)
            down += np.bincount(k[sign < 0], minlength=size)
        plus.append(up)
        minus.append(down)
    return plus, minus
