"""The graphical model (Private-PGM): fitted to noisy measurements, answering any linear query.

`GraphicalModel.fit` builds the junction tree of the measured cliques, estimates
the total, and runs mirror descent or its accelerated form (`method`),
warm-started from a previous model when given (its marginals on the new tree's
cliques give the closed-form log-potentials θ_C = log μ_C − log μ_{S(C)}, which
reproduce it exactly when the new tree can represent it).

It implements the `Estimator` protocol of `mechanisms.reconstruction` for any
block over measured attributes: `estimate` contracts each Kronecker term on the
calibrated tree (ranges, predicates and SUM weights included, never a
full-domain vector). `variance` is a model-based *noise-only* error estimate,
not an exact variance: cells of the block's clique marginal are treated as
independent with variance v_r, where v_r is the Theorem-14 variance σ̄_r² of
the inverse-variance average of the identity measurements supporting r
(r ⊆ r_j) when r is supported, and otherwise Σ_i σ̄²_{S_i}(n_{S_i}/n_r)² over
maximal supported subsets S_i covering r (how the model glues sub-marginals
together, to first order). The model's bias on unsupported cliques is not in
it; `mechanisms.pgm.bounds` gives AIM's a-posteriori L1 guarantees instead.
"""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import combinations
from typing import Callable, Mapping, Sequence

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.marginals import row_moments
from mechanisms.matrices import Identity, Ones
from mechanisms.measurement import GAUSSIAN, LAPLACE, Measurement
from mechanisms.pgm.bounds import supported_variance
from mechanisms.pgm.estimation import (
    LinearMeasurement,
    MarginalLoss,
    accelerated_descent,
    estimate_total,
    mirror_descent,
)
from mechanisms.pgm.inference import Beliefs
from mechanisms.pgm.junction_tree import Clique, JunctionTree
from mechanisms.pgm.laplace_loss import CONTINUATION
from mechanisms.pgm.sampling import sample_rows
from mechanisms.workload import Block

_TINY = 1e-300  # floor for log μ in warm starts (probabilities below it underflow anyway)
MIRROR = "mirror"
ACCELERATED = "accelerated"
METHODS = (MIRROR, ACCELERATED)


class GraphicalModel:
    """p_θ(x) ∝ exp Σ_C θ_C(x_C) on a junction tree, scaled to `total` rows."""

    kind = "graphical model"

    def __init__(
        self,
        tree: JunctionTree,
        potentials: list,
        marginals: list,
        total: float,
        measurements: Sequence[LinearMeasurement],
        step: float | None = None,
        loss: float = 0.0,
        iterations: int = 0,
    ):
        self.domain = tree.domain
        self.tree = tree
        self.potentials = potentials
        self.beliefs = Beliefs(tree, marginals)
        self.total = float(total)
        self.measurements = list(measurements)
        self.step = step
        self.loss = loss
        self.iterations = iterations

    # --- fitting ------------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        domain: Domain,
        measurements: Sequence[LinearMeasurement | Measurement],
        *,
        total: float | None = None,
        cliques: Sequence[Clique] = (),
        warm_start: "GraphicalModel | None" = None,
        max_iters: int = 1000,
        tol: float = 1e-6,
        callback: Callable[[int, float], None] | None = None,
        method: str = MIRROR,
        blocks: Mapping[str, Block] | None = None,
    ) -> "GraphicalModel":
        """Fit to the measurements (their log-likelihood: L2 loss for Gaussian, L1 for Laplace noise).

        `cliques` adds model cliques.

        `method` is MIRROR (entropic mirror descent with an Armijo line search, AIM's
        estimator) or ACCELERATED (`accelerated_descent`, much faster on strategy
        measurements and small noise). Directly measured blocks need their Block in
        `blocks` (fingerprint -> Block), see `LinearMeasurement.of`.
        """
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}: use {' or '.join(METHODS)}")
        linear = [m if isinstance(m, LinearMeasurement) else LinearMeasurement.of(m, domain, blocks) for m in measurements]
        tree = JunctionTree.build(domain, [m.clique for m in linear] + list(cliques))
        if total is None:
            total = estimate_total(domain, linear)
            if total is None:
                raise ValueError("no measurement determines the number of rows: pass total=")
        if warm_start is None:
            start = [xp().zeros(domain.shape(c)) for c in tree.cliques]
            step = None
        else:
            start, step = warm_start._potentials_on(tree), warm_start.step
        descend = mirror_descent if method == MIRROR else accelerated_descent
        iterations = 0
        for loss in _losses(tree, linear):
            fit = descend(tree, loss, total, start, step=step, max_iters=max_iters, tol=tol, callback=callback)
            start, step, iterations = fit.potentials, fit.step, iterations + fit.iterations
        return cls(tree, fit.potentials, fit.marginals, total, linear, fit.step, fit.loss, iterations)

    def _potentials_on(self, tree: JunctionTree) -> list:
        """Log-potentials on another tree reproducing this model's marginals on its cliques."""
        if tree.cliques == self.tree.cliques:
            return list(self.potentials)
        m = xp()
        out = []
        for i, clique in enumerate(tree.cliques):
            log_mu = m.log(m.maximum(self.beliefs.marginal(clique), _TINY))
            sep = tree.separators[i]
            if tree.parent[i] >= 0:
                below = m.log(m.maximum(self.beliefs.marginal(sep), _TINY)) if sep else m.asarray(0.0)
                log_mu = log_mu - below.reshape([self.domain.size_of(a) if a in sep else 1 for a in clique])
            out.append(log_mu)
        return out

    # --- answers ------------------------------------------------------------------
    def project(self, attributes: Sequence[str]) -> np.ndarray:
        """The model's marginal counts over `attributes` (domain order), as a NumPy table."""
        return to_numpy(self.beliefs.marginal(attributes)) * self.total

    def query(self, factors: Mapping[str, object], keep: Sequence[str] = ()) -> np.ndarray:
        """Σ_x N·p(x) Π_a Q_a[z_a, x_a] for 2-D factors Q_a (e.g. range indicators), `keep` kept as axes."""
        m = xp()
        arrays = {a: m.asarray(f, dtype=float).reshape(-1, self.domain.size_of(a)) for a, f in factors.items()}
        return to_numpy(self.beliefs.contract(keep, arrays)) * self.total

    def covers(self, block: Block) -> bool:
        """True when the block's attributes are covered by marginal measurements (finite error estimate)."""
        return math.isfinite(self.cell_variance(block.attributes(self.domain)))

    def estimate(self, block: Block) -> np.ndarray:
        clique = block.attributes(self.domain)
        out = np.zeros(block.num_rows(self.domain))
        for term in block.terms:
            keep, factors = [], {}
            for a, f in zip(clique, block.term_factors(term, self.domain, clique)):
                if isinstance(f, Identity):
                    keep.append(a)
                elif not (isinstance(f, Ones) and f.shape[0] == 1):
                    factors[a] = to_numpy(f.dense())
            out += term.coef * self.query(factors, keep).ravel()
        return out

    def cell_variance(self, clique: Sequence[str]) -> float:
        """Model-based per-cell variance v_r of the marginal on `clique` (see the module doc)."""
        r = self.domain.canonical(clique)
        supported = supported_variance(self.domain, self.measurements, r)
        if supported is not None:
            return supported
        n_r = self.domain.size(r)
        total, covered = 0.0, set()
        for k in range(len(r) - 1, 0, -1):
            for s in combinations(r, k):
                if set(s) <= covered:
                    continue
                v = supported_variance(self.domain, self.measurements, s)
                if v is not None:
                    total += v * (self.domain.size(s) / n_r) ** 2
                    covered |= set(s)
        return total if covered == set(r) else float("inf")

    def _moments(self, first: Block, second: Block) -> np.ndarray:
        union = self.domain.canonical(set(first.attributes(self.domain)) | set(second.attributes(self.domain)))
        v, n = self.cell_variance(union), self.domain.size(union)
        return row_moments(first, second, self.domain, lambda s: v * n / self.domain.size(s))

    def variance(self, block: Block) -> np.ndarray:
        return self._moments(block, block)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        return self._moments(first, second)

    # --- synthetic data ---------------------------------------------------------------
    def sample(self, n_rows: int | None = None, rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Synthetic rows (bin indices, one column per attribute) following the model's marginals.

        `n_rows` defaults to the estimated total. Sampling is post-processing of
        released values, so an ordinary NumPy generator is used.
        """
        n = int(round(self.total)) if n_rows is None else int(n_rows)
        return sample_rows(self.tree, self.beliefs, n, np.random.default_rng(rng))

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return self.tree.cliques


def _losses(tree: JunctionTree, linear: Sequence[LinearMeasurement]) -> list[MarginalLoss]:
    """The losses minimized in turn, each fit warm-starting the next.

    Gaussian measurements only: their L2 loss. With Laplace measurements, the L1
    loss is reached by continuation: first every measurement's L2 loss (smooth, fast),
    then the L1 loss smoothed within κ·b for κ = 1, 0.1, 0.01, 0.001 (`CONTINUATION`):
    a fit with the final κ alone from scratch crawls (its curvature is 1/κ times
    the L2 loss'), each stage from the previous one's optimum does not.
    """
    if not any(m.noise == LAPLACE for m in linear):
        return [MarginalLoss(tree, linear)]
    gaussian = [replace(m, noise=GAUSSIAN) for m in linear]
    return [MarginalLoss(tree, gaussian)] + [MarginalLoss(tree, linear, smoothing=k) for k in CONTINUATION]
