"""The model a table's queries are answered from: exact least squares first, generative models next.

Least squares answers every block in the span of the linear measurements, with
exact variances. Adaptive releases (AIM's graphical model, RAP's relaxed
synthetic data) answer any other block over their attributes — consistently,
for free — with their own model-based error estimates. The most recent
generative model that covers a block answers it.
"""

from __future__ import annotations

import numpy as np

from mechanisms.reconstruction import Estimator, LeastSquaresModel, NotInSpan
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
        """(estimate, variance) per row."""
        source = self.source(block)
        if source is self.exact:
            return self.exact.answer(block)
        return source.estimate(block), source.variance(block)

    def variance(self, block: Block) -> np.ndarray:
        return self.source(block).variance(block)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Row-wise covariance; blocks answered by different models are treated as uncorrelated
        (an approximation: a generative model is fitted to some of the same measurements)."""
        source = self.source(first)
        if source is not self.source(second):
            return np.zeros(first.num_rows(self.domain))
        return source.covariance(first, second)
