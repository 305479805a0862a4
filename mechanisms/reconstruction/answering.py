"""The model a table's queries are answered from: exact least squares first, generative models next.

Least squares answers every block in the span of the linear measurements, with
exact variances. Adaptive releases (AIM's graphical model, RAP's relaxed
synthetic data) answer any other block over their attributes — consistently,
for free — but such a block is exactly one the measurements do not determine,
where the model's error is dominated by its bias, which nothing bounds: those
answers carry no variance (NaN), so no error bar is claimed for them. The most
recent generative model that covers a block answers it.
"""

from __future__ import annotations

import numpy as np

from mechanisms.reconstruction.least_squares import Estimator, LeastSquaresModel, NotInSpan
from mechanisms.workload import Block

LEAST_SQUARES = "least squares"


class AnsweringModel:
    """`exact` where it determines a block, else the latest covering model of `generative`."""

    def __init__(self, exact: LeastSquaresModel, generative: list[Estimator] = ()):
        self.exact = exact
        self.generative = list(generative)
        self.domain = exact.domain

    def source(self, block: Block) -> Estimator | LeastSquaresModel:
        """What answers the block (raises NotInSpan when nothing does)."""
        if self.exact.covers(block):
            return self.exact
        for model in reversed(self.generative):
            if model.covers(block):
                return model
        raise NotInSpan(f"block {block.name!r} is not determined by the measurements")

    def source_name(self, block: Block) -> str:
        source = self.source(block)
        return LEAST_SQUARES if source is self.exact else getattr(source, "kind", type(source).__name__)

    def covers(self, block: Block) -> bool:
        return self.exact.covers(block) or any(m.covers(block) for m in self.generative)

    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        """(estimate, variance) per row; the variance is NaN where a generative model answers."""
        source = self.source(block)
        if source is self.exact:
            return self.exact.answer(block)
        return source.estimate(block), self._unknown(block)

    def variance(self, block: Block) -> np.ndarray:
        source = self.source(block)
        return self.exact.variance(block) if source is self.exact else self._unknown(block)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Row-wise covariance (NaN unless least squares answers both)."""
        if self.source(first) is not self.exact or self.source(second) is not self.exact:
            return self._unknown(first)
        return self.exact.covariance(first, second)

    def _unknown(self, block: Block) -> np.ndarray:
        return np.full(block.num_rows(self.domain), np.nan)
