"""SQL answers from range protocols' reports over a table's flat domain: `hrr`, `hh` and `haar`.

Each builds the `stratified_answers.Strata` of its reports (from a `ReportTally`) and the affine
reconstruction of the (padded) domain's leaves that the thesis' estimator is (`ranges` and
`frequency`): Hadamard response's f̂ = H θ̂ / D' (θ̂_0 = 1), the hierarchical histogram's levels
(OUE per level, or HRR per level and coefficient) made consistent by Hay's least squares with the
root at 1 (`consistent_leaves`), and HaarHRR's leaves from its per-level coefficients. Any linear
query over the domain (ranges, prefixes, GROUP BY cells and their sums) is then answered with its
exact variance, the covariances between cells included.
"""

from __future__ import annotations

import numpy as np

from mechanisms.domain import Domain
from mechanisms.ldp.client import HadamardResponse, HaarHRR, HierarchicalHistogram
from mechanisms.ldp.frequency import hadamard_cells
from mechanisms.ldp.ranges import consistent_leaves, haar_from_coefficients
from mechanisms.ldp.stratified_answers import UNARY, FlatMap, Strata, StratifiedAnswers, sign_strata
from mechanisms.ldp.tally import ReportTally

__all__ = ["hrr_answers", "hh_answers", "haar_answers"]


def _split(theta: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    return np.split(np.asarray(theta, dtype=float), np.cumsum(lengths)[:-1])


def _sign_strata(tally: ReportTally, strata: list[int], sizes: list[int], first: int, truth: float) -> Strata:
    """±1 coefficients: stratum s's items first .. size − 1, each coordinate its own stratum, grouped by s."""
    counts, sums, group = [], [], []
    for s, size in zip(strata, sizes):
        c, t = tally.dense(s, size)
        counts.append(c[first:])
        sums.append(t[first:])
        group.append(np.full(size - first, len(group)))
    return sign_strata(np.concatenate(counts), np.concatenate(sums), truth, np.concatenate(group))


def hrr_answers(domain: Domain, protocol: HadamardResponse, tally: ReportTally) -> StratifiedAnswers:
    """Hadamard response: coordinates are the D' − 1 non-zero coefficients."""
    size = protocol.size
    strata = _sign_strata(tally, [0], [size], 1, float(protocol.truth))
    return StratifiedAnswers(domain, strata, tally.reports,
                             FlatMap(domain, lambda t: hadamard_cells(np.r_[0.0, t]), size - 1), protocol="hrr")


def hh_answers(domain: Domain, protocol: HierarchicalHistogram, tally: ReportTally) -> StratifiedAnswers:
    """The hierarchical histogram with the consistency step (TreeOUECI or TreeHRRCI)."""
    height, branching = protocol.height, protocol.branching
    levels = range(1, height + 1)
    nodes = [branching ** level for level in levels]
    if protocol.oracle == "oue":
        p, q = (float(v) for v in protocol.level_oracle(1).support_probabilities)
        drawn = np.array([tally.drew(level) for level in levels], dtype=float)
        theta = np.concatenate([(tally.dense(level, m)[0] - d * q) / ((p - q) * max(d, 1))
                                for level, m, d in zip(levels, nodes, drawn)])
        strata = Strata(theta, np.repeat(np.arange(height), nodes), drawn, UNARY, p, q)
        lengths = nodes

        def reconstruct(t):
            return consistent_leaves(_split(t, lengths), branching)
    else:
        padded = [protocol.level_oracle(level).size for level in levels]
        strata = _sign_strata(tally, list(levels), padded, 1, float(protocol.level_oracle(1).truth))
        lengths = [d - 1 for d in padded]

        def reconstruct(t):
            return consistent_leaves([hadamard_cells(np.r_[0.0, c])[:m] for c, m in zip(_split(t, lengths), nodes)],
                                     branching)
    return StratifiedAnswers(domain, strata, tally.reports, FlatMap(domain, reconstruct, sum(lengths)),
                             protocol="hh")


def haar_answers(domain: Domain, protocol: HaarHRR, tally: ReportTally) -> StratifiedAnswers:
    """HaarHRR: coordinates are each level's 2^(h−l) coefficients."""
    height = protocol.height
    lengths = [1 << (height - level) for level in range(1, height + 1)]
    strata = _sign_strata(tally, list(range(1, height + 1)), lengths, 0, float(protocol.truth))
    return StratifiedAnswers(domain, strata, tally.reports,
                             FlatMap(domain, lambda t: haar_from_coefficients(_split(t, lengths)), sum(lengths)),
                             protocol="haar")
