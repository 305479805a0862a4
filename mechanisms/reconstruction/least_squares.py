"""Least-squares reconstruction: one model answers every block, with exact variances.

The model holds three kinds of estimator, each fitted to its own, independent
measurements:

- *marginals* measured with the identity are combined by generalized least
  squares in the residual basis (`mechanisms.marginals`): consistent answers
  for any block whose residuals are covered, with no full-domain vector;
- *strategy* measurements (a range tree, a wavelet, an optimized matrix) on a
  clique are solved by least squares on that clique (`CliqueLeastSquares`);
- *direct* (per-query) measurements answer the block they measured.

When several estimators determine a block, their independent unbiased answers
are combined row by row with inverse-variance weights. Everything here is
post-processing.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.reconstruction.clique import CliqueLeastSquares
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
from mechanisms.residual import is_residual_measurement, residual_scale
from mechanisms.workload import Block


class NotInSpan(LookupError):
    """The measurements made so far do not determine this block."""


class Estimator(Protocol):
    """An unbiased linear estimator of blocks from one independent set of measurements."""

    def covers(self, block: Block) -> bool: ...
    def estimate(self, block: Block) -> np.ndarray: ...
    def variance(self, block: Block) -> np.ndarray: ...
    def covariance(self, first: Block, second: Block) -> np.ndarray: ...


class ResidualLeastSquares:
    """GLS from identity-marginal and residual measurements, in the residual basis.

    A residual measurement (`residual_planner.residual_strategy` on clique S)
    estimates u_S alone: Π_S y / Π n_a with variance σ²/Π n_a².
    """

    def __init__(self, domain: Domain, measurements: list[Measurement]):
        self.domain = domain
        self.measurements = measurements
        marginals = [m for m in measurements if m.is_marginal]
        self.precision = residual_precisions(domain, ((m.clique, m.variance) for m in marginals))
        for m in measurements:
            if not m.is_marginal:
                scale = residual_scale(domain, m.clique)
                self.precision[m.clique] = self.precision.get(m.clique, 0.0) + scale**2 / m.variance
        self._residuals: dict[Clique, np.ndarray] = {}

    def residual_variance(self, s: Clique) -> float:
        """v_S, or 0 when nothing covers S (such residuals carry no weight in covered blocks)."""
        p = self.precision.get(s, 0.0)
        return 1.0 / p if p > 0 else 0.0

    def _residual(self, s: Clique) -> np.ndarray:
        if s not in self._residuals:
            if s not in self.precision:
                return np.zeros(self.domain.shape(s))
            total, weight = 0.0, 0.0
            for m in self.measurements:
                if m.is_marginal and set(s) <= set(m.clique):
                    w = 1.0 / (m.variance * (self.domain.size(m.clique) // self.domain.size(s)))
                    total = total + w * residual_of(self.domain, m.clique, m.values, s)
                    weight += w
                elif not m.is_marginal and m.clique == s:
                    scale = residual_scale(self.domain, s)
                    w = scale**2 / m.variance
                    total = total + w * residual_of(self.domain, s, m.values, s) / scale
                    weight += w
            self._residuals[s] = total / weight
        return self._residuals[s]

    def covers(self, block: Block) -> bool:
        return all(s in self.precision for s in residual_weights(block, self.domain))

    def estimate(self, block: Block) -> np.ndarray:
        clique = block.attributes(self.domain)
        x = expand(self.domain, {s: self._residual(s) for s in subsets(clique)}, clique)
        return np.asarray(to_numpy(block.matrix(self.domain, clique).matvec(x)), dtype=float)

    def variance(self, block: Block) -> np.ndarray:
        return row_moments(block, block, self.domain, self.residual_variance)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        return row_moments(first, second, self.domain, self.residual_variance)


class DirectAnswers:
    """Blocks measured directly: each answers only the block it measured (by fingerprint)."""

    def __init__(self, domain: Domain, key: str, measurements: list[Measurement]):
        self.domain, self.key, self.measurements = domain, key, measurements
        self.precision = sum(1.0 / m.variance for m in measurements)

    def covers(self, block: Block) -> bool:
        return block.fingerprint(self.domain) == self.key

    def estimate(self, block: Block) -> np.ndarray:
        if len(self.measurements) == 1:
            return np.asarray(self.measurements[0].values, dtype=float)
        return sum(m.values / m.variance for m in self.measurements) / self.precision

    def variance(self, block: Block) -> np.ndarray:
        return np.full(block.num_rows(self.domain), 1.0 / self.precision)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        same = first.fingerprint(self.domain) == second.fingerprint(self.domain)
        return self.variance(first) if same else np.zeros(first.num_rows(self.domain))


_REMEMBERED = 4096  # computed results a model keeps (then it starts again)


class LeastSquaresModel:
    """All measurements of one table, answering any block they determine."""

    def __init__(self, domain: Domain, measurements: list[Measurement] | None = None):
        self.domain = domain
        self.measurements: list[Measurement] = []
        self._estimators: list[Estimator] | None = None
        self._known: dict[tuple, Any] = {}  # (what, block fingerprints) -> computed: see `_remembered`
        for m in measurements or []:
            self.add(m)

    def add(self, m: Measurement) -> None:
        """Include one more measurement (estimators are rebuilt lazily, what was computed is forgotten)."""
        self.measurements.append(m)
        self._estimators = None
        self._known.clear()

    def _remembered(self, what: str, blocks: tuple[Block, ...], compute: Callable[[], Any]) -> Any:
        """`compute()`, remembered by `what` and the blocks' fingerprints until a measurement is added: a
        re-asked block's coverage, weights and answer (rebuilding the Kronecker factors of the coverage
        check cost milliseconds per block) are computed once per set of measurements."""
        key = (what, *(b.fingerprint(self.domain) for b in blocks))
        if key not in self._known:
            if len(self._known) >= _REMEMBERED:
                self._known.clear()
            self._known[key] = compute()
        return self._known[key]

    @property
    def estimators(self) -> list[Estimator]:
        if self._estimators is None:
            marginals = [m for m in self.measurements if m.is_marginal or is_residual_measurement(m)]
            estimators: list[Estimator] = [ResidualLeastSquares(self.domain, marginals)] if marginals else []
            by_key: dict[str, list[Measurement]] = {}
            by_clique: dict[Clique, list[Measurement]] = {}
            for m in self.measurements:
                if m.key is not None:
                    by_key.setdefault(m.key, []).append(m)
                elif m.strategy is not None and not is_residual_measurement(m):
                    by_clique.setdefault(m.clique, []).append(m)
            estimators += [DirectAnswers(self.domain, k, ms) for k, ms in by_key.items()]
            estimators += [CliqueLeastSquares(self.domain, c, ms) for c, ms in by_clique.items()]
            self._estimators = estimators
        return self._estimators

    def covers(self, block: Block) -> bool:
        """True when the block can be answered without new measurements."""
        return not block.terms or self._remembered("covers", (block,),
                                                   lambda: any(e.covers(block) for e in self.estimators))

    def _weights(self, block: Block) -> list[tuple[Estimator, np.ndarray, np.ndarray]]:
        """(estimator, its row variances, its inverse-variance weight per row) for covering ones."""
        return self._remembered("weights", (block,), lambda: self._weighed(block))

    def _weighed(self, block: Block) -> list[tuple[Estimator, np.ndarray, np.ndarray]]:
        found = [(e, e.variance(block)) for e in self.estimators if e.covers(block)]
        if not found:
            raise NotInSpan(f"block {block.name!r} is not determined by the measurements")
        exact = np.any([v == 0 for _, v in found], axis=0)  # a zero-variance row needs no mixing
        precision = [np.where(exact, (v == 0).astype(float), 1.0 / np.where(v == 0, 1.0, v)) for _, v in found]
        total = np.sum(precision, axis=0)
        return [(e, v, p / total) for (e, v), p in zip(found, precision)]

    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        """(estimate, variance) for every row of the block."""
        if not block.terms:
            zeros = np.zeros(block.num_rows(self.domain))
            return zeros, zeros
        estimate, variance = self._remembered("answer", (block,), lambda: self._answered(block))
        return estimate.copy(), variance.copy()

    def _answered(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        parts = self._weights(block)
        estimate = sum(w * e.estimate(block) for e, _, w in parts)
        variance = sum(w**2 * v for _, v, w in parts)
        return np.asarray(estimate, dtype=float), np.asarray(variance, dtype=float)

    def variance(self, block: Block) -> np.ndarray:
        """Per-row variance of the answer, from the measurements' variances alone (no values)."""
        if not block.terms:
            return np.zeros(block.num_rows(self.domain))
        return np.asarray(sum(w**2 * v for _, v, w in self._weights(block)), dtype=float)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Row-wise covariance of the answers to two blocks with the same rows."""
        if not (first.terms and second.terms):
            return np.zeros(first.num_rows(self.domain))
        w2 = {id(e): w for e, _, w in self._weights(second)}
        out = np.zeros(first.num_rows(self.domain))
        for e, _, w1 in self._weights(first):
            if id(e) in w2:  # estimators are independent of each other
                out += w1 * w2[id(e)] * e.covariance(first, second)
        return out
