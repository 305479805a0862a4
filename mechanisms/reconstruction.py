"""Least-squares reconstruction: one model answers every block, with exact variances.

Marginal measurements are combined by generalized least squares in the
residual basis (`mechanisms.marginals`): consistent estimates for any block
whose residuals are all covered, without any full-domain vector. Direct
(per-query) measurements answer the block they measured; when a block is
answerable both ways the two independent unbiased estimates are combined row
by row with inverse-variance weights. Everything here is post-processing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.domain import Domain
from mechanisms.marginals import (
    Clique,
    expand,
    residual_of,
    residual_precisions,
    residual_weights,
    row_moments,
    subsets,
)
from mechanisms.measurement import Measurement
from mechanisms.workload import Block


class NotInSpan(LookupError):
    """The measurements made so far do not determine this block."""


@dataclass
class _Part:
    variance: np.ndarray
    estimate: np.ndarray | None  # None when only variances were asked for


class LeastSquaresModel:
    """Generalized least-squares model over a set of measurements on one domain."""

    def __init__(self, domain: Domain, measurements: list[Measurement] | None = None):
        self.domain = domain
        self.measurements: list[Measurement] = []
        self._precision: dict[Clique, float] = {}
        self._residuals: dict[Clique, np.ndarray] = {}
        for m in measurements or []:
            self.add(m)

    def add(self, m: Measurement) -> None:
        """Include one more measurement (the fit is refreshed lazily)."""
        self.measurements.append(m)
        self._residuals.clear()
        self._precision = residual_precisions(
            self.domain, ((x.clique, x.variance) for x in self.measurements if x.is_marginal)
        )

    # --- the marginal (residual) part ------------------------------------
    def residual_variance(self, s: Clique) -> float:
        """v_S, or inf when no measurement covers S."""
        p = self._precision.get(s, 0.0)
        return 1.0 / p if p > 0 else float("inf")

    def _residual(self, s: Clique) -> np.ndarray:
        if s not in self._residuals:
            total, weight = 0.0, 0.0
            for m in self.measurements:
                if m.is_marginal and set(s) <= set(m.clique):
                    rest = self.domain.size(m.clique) // self.domain.size(s)
                    w = 1.0 / (m.variance * rest)
                    total = total + w * residual_of(self.domain, m.clique, m.values, s)
                    weight += w
            self._residuals[s] = total / weight
        return self._residuals[s]

    def _marginal_covers(self, block: Block) -> bool:
        return all(s in self._precision for s in residual_weights(block, self.domain))

    def _marginal_part(self, block: Block, with_estimate: bool) -> _Part | None:
        if not self._marginal_covers(block):
            return None
        variance = row_moments(block, block, self.domain, self._finite_variance)
        if not with_estimate:
            return _Part(variance, None)
        clique = block.attributes(self.domain)
        residuals = {s: self._residual(s) for s in subsets(clique) if s in self._precision}
        for s in subsets(clique):  # uncovered residuals carry zero weight for this block
            residuals.setdefault(s, np.zeros(self.domain.shape(s)))
        x = expand(self.domain, residuals, clique)
        estimate = np.asarray(block.matrix(self.domain, clique).matvec(x), dtype=float)
        return _Part(variance, estimate)

    def _finite_variance(self, s: Clique) -> float:
        v = self.residual_variance(s)
        return 0.0 if v == float("inf") else v

    # --- the direct part ---------------------------------------------------
    def _direct_part(self, block: Block, with_estimate: bool) -> _Part | None:
        key = block.fingerprint(self.domain)
        found = [m for m in self.measurements if m.key == key]
        if not found:
            return None
        precision = sum(1.0 / m.variance for m in found)
        variance = np.full(block.num_rows(self.domain), 1.0 / precision)
        if not with_estimate:
            return _Part(variance, None)
        if len(found) == 1:
            estimate = found[0].values
        else:
            estimate = sum(m.values / m.variance for m in found) / precision
        return _Part(variance, np.asarray(estimate, dtype=float))

    # --- public -------------------------------------------------------------
    def covers(self, block: Block) -> bool:
        """True when the block can be answered without new measurements."""
        return self._marginal_covers(block) or any(
            m.key == block.fingerprint(self.domain) for m in self.measurements
        )

    def _weights(self, block: Block, with_estimate: bool = True) -> tuple[_Part | None, _Part | None, np.ndarray]:
        """Both parts and the weight α of the marginal part in each row (inverse variance)."""
        marginal = self._marginal_part(block, with_estimate)
        direct = self._direct_part(block, with_estimate)
        if marginal is None and direct is None:
            raise NotInSpan(f"block {block.name!r} is not determined by the measurements")
        if direct is None:
            alpha = np.ones_like(marginal.variance)
        elif marginal is None:
            alpha = np.zeros_like(direct.variance)
        else:
            vm, vd = marginal.variance, direct.variance
            alpha = np.where(vm + vd > 0, vd / np.where(vm + vd > 0, vm + vd, 1.0), 1.0)
        return marginal, direct, alpha

    def _combine(self, block: Block, with_estimate: bool) -> tuple[np.ndarray | None, np.ndarray]:
        marginal, direct, alpha = self._weights(block, with_estimate)
        estimate = np.zeros_like(alpha) if with_estimate else None
        variance = np.zeros_like(alpha)
        for part, weight in ((marginal, alpha), (direct, 1 - alpha)):
            if part is not None:
                variance += weight**2 * part.variance
                if with_estimate:
                    estimate += weight * part.estimate
        return estimate, variance

    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        """(estimate, variance) for every row of the block."""
        return self._combine(block, with_estimate=True)

    def variance(self, block: Block) -> np.ndarray:
        """Per-row variance of the answer, from the measurements' variances alone (no values)."""
        return self._combine(block, with_estimate=False)[1]

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Row-wise covariance of the answers to two different blocks with the same rows."""
        _, _, a1 = self._weights(first, with_estimate=False)
        _, _, a2 = self._weights(second, with_estimate=False)
        if not (a1.any() and a2.any()):
            return np.zeros_like(a1)  # independent direct measurements
        model = row_moments(first, second, self.domain, self._finite_variance)
        return a1 * a2 * model
