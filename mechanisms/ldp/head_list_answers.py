"""Answering linear queries from grr2 reports over a head list (BLENDER's clients), with exact variances.

The reports' counts c over the flat records have mean P x (x the users' histogram over the
head list's records, P the report law, `head_list.channel`), so x̂ = P⁻¹ c is unbiased: it is
Algorithm 2.5's estimate times n. Every user reports independently, so a linear query w·x̂ =
Σ_u (wP⁻¹)_{r_u} has the exact variance Σ_v x_v (Σ_r P_{rv} a_r² − w_v²), a = wP⁻¹ (the report's
second moment less its mean, (aP)_v = w_v), and two queries w, u the covariance
Σ_v x_v (Σ_r P_{rv} a_r b_r − w_v u_v). The error bars are these evaluated at x̂ clipped at 0,
as for the other protocols (`oracle_answers`).
"""

from __future__ import annotations

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.ldp.client import TwoLevelGRR
from mechanisms.ldp.head_list import channel
from mechanisms.ldp.tally import ReportTally
from mechanisms.workload import Block

__all__ = ["HeadListAnswers", "head_list_answers"]


class HeadListAnswers:
    """Any block over `domain` (its flat cells = the head list's records) from the counts of n grr2 reports."""

    kind = "local DP reports (two-level GRR over the head list)"

    def __init__(self, domain: Domain, protocol: TwoLevelGRR, counts: np.ndarray):
        if protocol.values != domain.size():
            raise ValueError(f"grr2 reports {protocol.values} records; the domain has {domain.size()} cells")
        self.domain, self.protocol = domain, protocol
        counts = np.asarray(counts, dtype=float).reshape(-1)
        self.n = int(counts.sum())
        self.law = channel(protocol)
        self.inverse = np.linalg.inv(self.law)
        self.histogram = self.inverse @ counts
        self._plug_in = np.clip(self.histogram, 0.0, None)

    def source_name(self, block: Block) -> str:
        return self.kind

    def covers(self, block: Block) -> bool:
        return True

    def _full(self, block: Block) -> np.ndarray:
        """The block's rows over every cell of the domain."""
        every = self.domain.canonical(set(self.domain.attributes))
        return np.asarray(to_numpy(block.matrix(self.domain, every).dense()), dtype=float)

    def cells(self, clique: tuple[str, ...]) -> np.ndarray:
        """The estimated fractions of the clique's cells, clipped at 0 and normalised (the plug-in)."""
        axes = tuple(i for i, a in enumerate(self.domain.attributes) if a not in clique)
        cells = self._plug_in.reshape(self.domain.sizes).sum(axis=axes).reshape(-1)
        return cells / cells.sum() if cells.sum() > 0 else np.full(len(cells), 1.0 / len(cells))

    def estimate(self, block: Block) -> np.ndarray:
        return self._full(block) @ self.histogram

    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        return self.estimate(block), self.variance(block)

    def variance(self, block: Block) -> np.ndarray:
        return self.covariance(block, block)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Row-wise covariance of two blocks' answers (the plug-in of the exact formula)."""
        w, u = self._full(first), self._full(second)
        a, b = w @ self.inverse, u @ self.inverse
        out = ((a * b) @ self.law - w * u) @ self._plug_in
        return np.maximum(out, 0.0) if first is second else out


def head_list_answers(domain: Domain, protocol: TwoLevelGRR, tally: ReportTally) -> HeadListAnswers:
    """The answering model of a table of grr2 reports (`answering.LOCAL_PROTOCOLS`)."""
    return HeadListAnswers(domain, protocol, tally.dense(0, domain.size())[0])
