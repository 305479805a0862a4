"""A table's answers from one graphical model fitted to all its measurements (HDMM+PGM).

`GraphicalModelEstimator` fits a `GraphicalModel` to every stored measurement of
a table — identity marginals, strategy measurements y = Q·μ_C + noise (range
trees, wavelets, HDMM and residual strategies) and, when their blocks are given,
blocks measured directly — by maximizing the likelihood (the L2 loss for Gaussian,
the L1 loss for Laplace measurements, `mechanisms.pgm.laplace_loss`) over the
marginal polytope of the junction tree (McKenna's thesis §4.5, "HDMM+PGM";
accelerated entropic mirror descent by default). Its answers are consistent
(one distribution answers every block) and non-negative for counting blocks
(every block whose factors and coefficients are non-negative), where least
squares can answer negative counts.

**Coverage.** The model answers every block whose attributes were all measured
(each appears in some measured clique) or that least squares determines (a total
summed over an unmeasured attribute); elsewhere it would only report its uniform
guess, so `covers` is False. Blocks the measurements *determine* (least
squares covers them) are answered with an error bar; others (e.g. a 3-way
marginal from 2-way measurements) are extrapolations by maximum entropy, whose
bias nothing bounds: their variance is NaN, as for AnsweringModel's generative
models.

**Auto.** `AutoEstimator` answers a block from the model where the model agrees
with least squares (at least 90% of its answers inside least squares' 95%
intervals), else from least squares: the model's accuracy on sparse blocks
without its bias on long range sums at small noise (benchmarks/pgm_linear.py).

**Error bars.** `variance` is the exact variance of the least-squares answer to
the same block from the same measurements. Why: the likelihood is
½‖μ − μ̂_LS‖²_G + const in the metric G = Σ QᵀQ/σ² of the measurements, so the
fitted marginals are the G-projection of the least-squares estimate onto the
(convex) marginal polytope, which holds the true marginals; projection onto a
convex set never moves away from its points, so ‖μ̂ − μ‖_G ≤ ‖μ̂_LS − μ‖_G (at
the optimum), and where no constraint is active the two estimates coincide (to
first order the model's error *is* the least-squares error). The least-squares
variance is therefore the model-based variance where the fit is interior, and
bounds the error as a whole (not query by query) elsewhere; it is exact, closed-form and costs no refit (a
parametric bootstrap would need several refits per answer set, and would still
miss the bias). Measured 95% coverage: 0.96 in tests/test_pgm_linear.py (200
draws); on adult's 3-way range-marginals (benchmarks/pgm_linear.py) 0.994,
0.985, 0.951 and 0.912 at ε = 0.1, 0.3, 1 and 10 — above nominal where the
non-negativity constraint is active (sparse blocks, small ε: the model is more
accurate than least squares there), below it at large ε on long prefix sums
over sparse tails (capital-gain, capital-loss), where the constrained fit's
small positive bias on empty cells adds up.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from mechanisms.domain import Domain
from mechanisms.measurement import Measurement
from mechanisms.pgm.estimation import LinearMeasurement
from mechanisms.pgm.model import ACCELERATED, GraphicalModel
from mechanisms.reconstruction.answering import LEAST_SQUARES
from mechanisms.reconstruction.least_squares import LeastSquaresModel, NotInSpan
from mechanisms.workload import Block

GRAPHICAL_MODEL = "graphical model"
Z95 = 1.959963984540054  # the normal's 97.5% quantile
AGREEMENT = 0.9  # `auto` keeps the model's answers to a block when this share lies in least squares' 95% intervals


class GraphicalModelEstimator:
    """One graphical model over all of a table's measurements, answering any block over measured attributes.

    It offers the `Estimator` protocol (`covers`, `estimate`, `variance`,
    `covariance`) and the surface of `AnsweringModel` (`answer`, `source`,
    `source_name`, `exact`, `generative`, `domain`), so it can stand in for either.
    """

    kind = GRAPHICAL_MODEL

    def __init__(
        self,
        domain: Domain,
        measurements: Sequence[Measurement],
        *,
        blocks: Mapping[str, Block] | Sequence[Block] | None = None,
        exact: LeastSquaresModel | None = None,
        total: float | None = None,
        method: str = ACCELERATED,
        max_iters: int = 500,
        tol: float = 1e-6,
        warm_start: GraphicalModel | None = None,
        callback: Callable[[int, float], None] | None = None,
    ):
        """Fit the model (adult's 15 3-way range-marginals: 6–18 s on an H200, 100–240 s on 2 busy cores).

        `blocks`: the blocks measured directly (a list, or fingerprint -> Block); a
        direct measurement whose block is not given is left out of the fit (listed
        in `skipped`; least squares still uses it for `variance`). `exact`: the
        least-squares model over the same measurements, when the caller has one.
        `method`, `max_iters`, `tol`, `warm_start`: see `GraphicalModel.fit`.
        """
        self.domain = domain
        self.measurements = list(measurements)
        if blocks is not None and not isinstance(blocks, Mapping):
            blocks = {b.fingerprint(domain): b for b in blocks}
        linear: list[LinearMeasurement] = []
        self.skipped: list[Measurement] = []
        for m in self.measurements:
            if m.key is not None and (blocks is None or m.key not in blocks):
                self.skipped.append(m)
            else:
                linear.append(LinearMeasurement.of(m, domain, blocks))
        if not linear:
            raise ValueError("no measurement to fit a graphical model to")
        self.model = GraphicalModel.fit(
            domain, linear, total=total, method=method, max_iters=max_iters, tol=tol,
            warm_start=warm_start, callback=callback,
        )
        self.measured = frozenset(a for m in linear for a in m.clique)
        self.exact = exact if exact is not None else LeastSquaresModel(domain, self.measurements)
        self.generative: list = []

    # --- the Estimator protocol -------------------------------------------------------
    def covers(self, block: Block) -> bool:
        """True when every attribute of the block was measured (in some measured clique), or least squares covers it."""
        return self.measured.issuperset(block.attributes(self.domain)) or self.exact.covers(block)

    def determines(self, block: Block) -> bool:
        """True when the measurements determine the block (it gets a finite error bar)."""
        return self.exact.covers(block)

    def estimate(self, block: Block) -> np.ndarray:
        if not block.terms:
            return np.zeros(block.num_rows(self.domain))
        self._check(block)
        return self.model.estimate(block)

    def variance(self, block: Block) -> np.ndarray:
        """The least-squares variance of the block's answer (NaN where the measurements do not determine it)."""
        if not block.terms:
            return np.zeros(block.num_rows(self.domain))
        self._check(block)
        return self.exact.variance(block) if self.determines(block) else self._unknown(block)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Row-wise covariance of two blocks' answers, from least squares (NaN unless both are determined)."""
        if not (first.terms and second.terms):
            return np.zeros(first.num_rows(self.domain))
        if not (self.determines(first) and self.determines(second)):
            return self._unknown(first)
        return self.exact.covariance(first, second)

    # --- the AnsweringModel surface -------------------------------------------------------
    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        """(estimate, variance) per row."""
        return self.estimate(block), self.variance(block)

    def source(self, block: Block) -> "GraphicalModelEstimator":
        self._check(block)
        return self

    def source_name(self, block: Block) -> str:
        self._check(block)
        return GRAPHICAL_MODEL

    def _check(self, block: Block) -> None:
        if not self.covers(block):
            missing = sorted(set(block.attributes(self.domain)) - self.measured)
            raise NotInSpan(f"block {block.name!r} involves unmeasured attributes {missing}")

    def _unknown(self, block: Block) -> np.ndarray:
        return np.full(block.num_rows(self.domain), np.nan)

    def agrees(self, block: Block, level: float = AGREEMENT) -> bool:
        """True when at least `level` of the model's answers lie in least squares' 95% intervals.

        If the model's answers were the true ones, each least-squares answer would be
        within 1.96 sd of them with probability 0.95, so a model that agrees on fewer
        than 90% of a block's rows is biased there by more than the noise (long
        range sums over sparse tails, at small noise).
        """
        if not (self.covers(block) and self.determines(block)):
            return False
        least, variance = self.exact.answer(block)
        inside = np.abs(self.estimate(block) - least) <= Z95 * np.sqrt(variance)
        return bool(np.mean(inside) >= level)


class AutoEstimator:
    """`SET dpsql.estimator = 'auto'`: the graphical model where it agrees with least squares, else least squares.

    Per block: the graphical model's answer when the measurements determine the
    block and the model agrees with least squares (`GraphicalModelEstimator.agrees`:
    non-negative, consistent, and more accurate on sparse blocks), else the
    least-squares answer (exact and unbiased) where least squares covers the block,
    else the model's (NaN variance). Error bars are least squares' either way.
    Same surface as `AnsweringModel`.
    """

    def __init__(self, model: GraphicalModelEstimator):
        self.model = model
        self.exact = model.exact
        self.domain = model.domain
        self.generative: list = []
        self._choice: dict[str, bool] = {}

    def _uses_model(self, block: Block) -> bool:
        key = block.fingerprint(self.domain)
        if key not in self._choice:
            self._choice[key] = self.model.agrees(block) or (
                not self.exact.covers(block) and self.model.covers(block)
            )
        return self._choice[key]

    def source(self, block: Block):
        if not block.terms or not self._uses_model(block):
            if block.terms and not self.exact.covers(block):
                raise NotInSpan(f"block {block.name!r} is not determined by the measurements")
            return self.exact
        return self.model

    def source_name(self, block: Block) -> str:
        return GRAPHICAL_MODEL if self.source(block) is self.model else LEAST_SQUARES

    def covers(self, block: Block) -> bool:
        return self.exact.covers(block) or self.model.covers(block)

    def estimate(self, block: Block) -> np.ndarray:
        return self.answer(block)[0]

    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        return self.source(block).answer(block)

    def variance(self, block: Block) -> np.ndarray:
        return self.source(block).variance(block)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        """Least squares' covariance when both answers are determined (NaN otherwise)."""
        if not (first.terms and second.terms):
            return np.zeros(first.num_rows(self.domain))
        if not (self.exact.covers(first) and self.exact.covers(second)):
            return np.full(first.num_rows(self.domain), np.nan)
        return self.exact.covariance(first, second)
