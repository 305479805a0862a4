"""SQL answers from marginal protocols' reports: `inpht`, `margrr`, `margps` and `marght`.

The table's columns are d binary attributes and a record is the flat index of its cell (the
first column is the highest bit); a query over a clique of at most k columns (the protocol's
`order`) is answered from the protocol's unbiased estimate of that marginal (`marginals`):

- INPHT: the marginal's cells 2^−|β| Σ_{α≼β} χ_α(γ) F̂_α from the shared coefficients (Lemma 6);
  the whole table with every coefficient above order k set to 0 has exactly these marginals, so
  it is the affine reconstruction (`FlatMap`);
- MARGRR / MARGPS / MARGHT: each sampled k-way marginal β is estimated from its own users (SUE,
  GRR or its 2^k − 1 Hadamard coefficients); a clique μ is answered by the mean, over the k-way
  marginals β ⊇ μ, of β's estimate summed onto μ (unbiased; its exact variance counts each β's
  strata).

`inprr`'s and `inpps`' reports are full-table frequency oracles (`oracle_answers`); `inpem` has no
unbiased estimator or variance (EM decoding), so it is not answered in SQL.
"""

from __future__ import annotations

import numpy as np

from mechanisms.domain import Domain
from mechanisms.ldp.client import InputHadamard, MarginalProtocol
from mechanisms.ldp.frequency import fwht, hadamard_cells
from mechanisms.ldp.marginals import inpht_coefficients, marginal_masks, subcube
from mechanisms.ldp.stratified_answers import DIRECT, UNARY, FlatMap, Strata, StratifiedAnswers, sign_strata
from mechanisms.ldp.tally import ReportTally

__all__ = ["inpht_answers", "sampled_marginal_answers"]


def inpht_answers(domain: Domain, protocol: InputHadamard, tally: ReportTally) -> StratifiedAnswers:
    """INPHT: one ±1 stratum per coefficient α, 1 ≤ |α| ≤ k."""
    alphas = inpht_coefficients(protocol.attributes, protocol.order)
    counts, sums = tally.lookup(0, alphas)
    truth = float(protocol.truth)
    strata = sign_strata(counts, sums, truth)
    size = 1 << protocol.attributes

    def reconstruct(theta):
        full = np.zeros(size)
        full[alphas] = theta
        full[0] = 1.0
        return fwht(full) / size

    return StratifiedAnswers(domain, strata, tally.reports, FlatMap(domain, reconstruct, len(alphas)),
                             protocol.order, "inpht")


class _SampledMarginals:
    """`marginal(clique)` of the MARG* protocols: the mean over the k-way marginals β ⊇ μ of β's cells
    (an affine map of β's coordinates, `cell_maps[i]`) summed onto the clique's cells."""

    def __init__(self, domain: Domain, masks: np.ndarray, cell_maps: list[tuple[np.ndarray, np.ndarray]]):
        self.domain, self.masks, self.cell_maps = domain, masks, cell_maps
        self.offsets = np.cumsum([0] + [m.shape[1] for _, m in cell_maps])

    def __call__(self, clique: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        d = len(self.domain.attributes)
        bits = [d - 1 - self.domain.attributes.index(a) for a in clique]  # record bit of each clique column
        mu = sum(1 << b for b in bits)
        chosen = [i for i, beta in enumerate(self.masks) if int(beta) & mu == mu]
        m = 1 << len(clique)
        constant, matrix = np.zeros(m), np.zeros((m, self.offsets[-1]))
        for i in chosen:
            records = subcube(int(self.masks[i]))  # β's cells γ as records (compact numbering)
            cell = sum(((records >> b) & 1) << (len(bits) - 1 - r) for r, b in enumerate(bits)) if bits else \
                np.zeros(len(records), dtype=np.int64)
            onto = np.zeros((m, len(records)))
            onto[cell, np.arange(len(records))] = 1.0
            c, mat = self.cell_maps[i]
            constant += onto @ c / len(chosen)
            matrix[:, self.offsets[i]:self.offsets[i + 1]] = onto @ mat / len(chosen)
        return constant, matrix


def sampled_marginal_answers(domain: Domain, protocol: MarginalProtocol, tally: ReportTally) -> StratifiedAnswers:
    """MARGRR (SUE per marginal), MARGPS (GRR per marginal) or MARGHT (a coefficient per marginal, by RR)."""
    k = protocol.order
    masks = marginal_masks(protocol.attributes, k)
    cells = 1 << k
    if protocol.name == "marght":
        parts = [tally.lookup(int(beta), subcube(int(beta))[1:]) for beta in masks]
        counts, sums = np.concatenate([c for c, _ in parts]), np.concatenate([s for _, s in parts])
        truth = float(protocol.truth)
        strata = sign_strata(counts, sums, truth)
        hadamard = np.stack([hadamard_cells(np.r_[0.0, e]) for e in np.eye(cells - 1)], axis=1) - 1.0 / cells
        maps = [(np.full(cells, 1.0 / cells), hadamard)] * len(masks)
    else:
        p, q = (float(v) for v in protocol.oracle.support_probabilities)
        drawn = np.array([tally.drew(int(beta)) for beta in masks], dtype=float)
        support = np.concatenate([tally.dense(int(beta), cells)[0] for beta in masks])
        theta = (support - np.repeat(drawn, cells) * q) / ((p - q) * np.maximum(np.repeat(drawn, cells), 1))
        strata = Strata(theta, np.repeat(np.arange(len(masks)), cells), drawn,
                        UNARY if protocol.name == "margrr" else DIRECT, p, q)
        maps = [(np.zeros(cells), np.eye(cells))] * len(masks)
    return StratifiedAnswers(domain, strata, tally.reports, _SampledMarginals(domain, masks, maps), k, protocol.name)
