"""Fitting a graphical model to noisy linear measurements: loss, total, mirror descent.

Measurements y_j = Q_j μ_{r_j} + noise (variance σ_j² per entry) on clique
marginals μ_r define the Gaussian negative log-likelihood

    L(μ) = Σ_j ‖Q_j μ_{r_j} − y_j‖² / (2 σ_j²),

a convex function of the model's clique marginals (in counts: μ = N·p_θ).
Entropic mirror descent over the marginal polytope is the update
θ ← θ − α ∇_μ L(μ_θ) on the log-potentials (McKenna's thesis, Algorithm 2),
with an Armijo line search on α: a step is accepted when the loss falls by at
least half the decrease its linearization predicts, the next step starts 2×
larger, a rejected one is halved. A model warm-started from the previous fit
(AIM refits after every new measurement) starts near the optimum; a fit stops
once the step size has met the curvature and an iteration improves the loss by
less than `tol` relative. Stopping early keeps the fit near the maximum-entropy
model it grew from, which regularizes noisy marginals with many near-empty
cells: AIM's error on adult_hd is lower at tol = 3e-4 than with the loss
minimized to convergence (benchmarks/results/aim_adult.md).

The total N is estimated from the measurements when not given: every
measurement whose row space contains the all-ones vector gives the unbiased
estimate vᵀy of N (Qᵀv = 1) with variance σ²‖v‖²; they are combined with
inverse-variance weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.sparse.linalg import LinearOperator, lsqr

from mechanisms.arrays import to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.matrices import Matrix
from mechanisms.measurement import Measurement
from mechanisms.pgm.inference import calibrate, sum_to
from mechanisms.pgm.junction_tree import Clique, JunctionTree
from mechanisms.interruption import checkpoint

_LINE_SEARCH_HALVINGS = 30


@dataclass(frozen=True)
class LinearMeasurement:
    """Noisy answers y = Q·μ_clique + noise; `query` None means the marginal itself (Q = I)."""

    clique: Clique
    values: np.ndarray
    variance: float
    query: Matrix | None = None

    @classmethod
    def of(cls, m: Measurement) -> "LinearMeasurement":
        if m.key is not None:
            raise ValueError(
                f"measurement on {m.clique} answers one block directly and carries no query "
                "matrix; fit the graphical model on marginal and strategy measurements"
            )
        return cls(m.clique, np.asarray(m.values, dtype=float), float(m.variance), m.strategy)


def _ones_preimage(query: Matrix, cells: int) -> np.ndarray | None:
    """v with Qᵀv = 1 (so vᵀy estimates the total), or None when 1 is not in Q's row space."""
    op = LinearOperator(
        query.shape,
        matvec=lambda x: to_numpy(query.matvec(np.ravel(x))),
        rmatvec=lambda y: to_numpy(query.rmatvec(np.ravel(y))),
        dtype=float,
    )
    v = lsqr(op.T, np.ones(cells), atol=1e-12, btol=1e-12, iter_lim=10 * cells)[0]
    if np.abs(op.rmatvec(v) - 1.0).max() > 1e-6:
        return None
    return v


def estimate_total(domain: Domain, measurements: Sequence[LinearMeasurement]) -> float | None:
    """Inverse-variance weighted estimate of the number of rows (at least 1), or None."""
    estimates, precisions = [], []
    for m in measurements:
        cells = domain.size(m.clique)
        if m.query is None:
            estimates.append(float(np.sum(m.values)))
            precisions.append(1.0 / (m.variance * cells))
            continue
        v = _ones_preimage(m.query, cells)
        if v is not None:
            estimates.append(float(v @ m.values))
            precisions.append(1.0 / (m.variance * float(v @ v)))
    if not estimates:
        return None
    return max(1.0, float(np.dot(estimates, precisions) / np.sum(precisions)))


def _spectral_norm2(query: Matrix, cells: int) -> float:
    """‖Q‖₂² (largest eigenvalue of QᵀQ), by power iteration on the implicit operator."""
    x = np.random.default_rng(0).standard_normal(cells)
    value = 0.0
    for _ in range(50):
        y = to_numpy(query.rmatvec(query.matvec(x)))
        norm = float(np.linalg.norm(y))
        if norm == 0.0:
            return 0.0
        if abs(norm - value) <= 1e-6 * norm:
            break
        value, x = norm, y / norm
    return norm


@dataclass
class _Group:
    """The measurements of one clique, attached to the tree clique that contains it."""

    clique: Clique
    holder: int
    precision: float = 0.0  # Σ 1/σ² over identity measurements
    weighted: object = None  # Σ y/σ² over identity measurements
    constant: float = 0.0  # Σ ‖y‖²/(2σ²) over identity measurements
    general: list[LinearMeasurement] = field(default_factory=list)


class MarginalLoss:
    """L(μ) = Σ_j ‖Q_j μ_{r_j} − y_j‖² / (2σ_j²) and its gradient on the tree's clique tables.

    Identity measurements of one clique are merged exactly into
    (Σ 1/σ², Σ y/σ², Σ ‖y‖²/2σ²), so the loss costs one pass per measured clique.
    """

    def __init__(self, tree: JunctionTree, measurements: Sequence[LinearMeasurement]):
        m = xp()
        self.tree = tree
        groups: dict[Clique, _Group] = {}
        for meas in measurements:
            clique = tree.domain.canonical(meas.clique)
            if clique not in groups:
                holder = tree.containing(clique)
                if holder is None:
                    raise ValueError(f"clique {clique} is not inside any clique of the junction tree")
                groups[clique] = _Group(clique, holder, weighted=m.zeros(tree.domain.shape(clique)))
            g = groups[clique]
            if meas.query is None:
                y = m.asarray(meas.values, dtype=float).reshape(tree.domain.shape(clique))
                g.precision += 1.0 / meas.variance
                g.weighted = g.weighted + y / meas.variance
                g.constant += float(np.dot(meas.values, meas.values)) / (2.0 * meas.variance)
            else:
                g.general.append(meas)
        # Larger cliques first; each marginal is summed from the smallest measured superset seen.
        self.groups = sorted(groups.values(), key=lambda g: -tree.domain.size(g.clique))
        self.sources: list[int] = []
        for k, g in enumerate(self.groups):
            supersets = [j for j in range(k) if set(g.clique) <= set(self.groups[j].clique)]
            self.sources.append(min(supersets, key=lambda j: tree.domain.size(self.groups[j].clique), default=-1))

    def lipschitz(self) -> float:
        """An upper bound on the curvature of L along any tree clique (sets the first step)."""
        domain, per_clique = self.tree.domain, [0.0] * len(self.tree.cliques)
        for g in self.groups:
            spread = domain.size(self.tree.cliques[g.holder]) / domain.size(g.clique)
            norm2 = g.precision + sum(
                _spectral_norm2(q.query, domain.size(g.clique)) / q.variance for q in g.general
            )
            per_clique[g.holder] += norm2 * spread
        return max(per_clique) or 1.0

    def __call__(self, marginals: Sequence, total: float) -> tuple[float, list, list]:
        """(loss, μ_r and ∇_{μ_r} L per measured clique) at clique marginals `marginals` × `total`."""
        m = xp()
        loss, counts, grads = 0.0, [], []
        for g, source in zip(self.groups, self.sources):
            if source < 0:
                mu = total * sum_to(marginals[g.holder], self.tree.cliques[g.holder], g.clique)
            else:
                mu = sum_to(counts[source], self.groups[source].clique, g.clique)
            grad = g.precision * mu - g.weighted
            loss += float((0.5 * g.precision * mu - g.weighted).ravel() @ mu.ravel()) + g.constant
            flat = mu.ravel()
            for q in g.general:
                residual = q.query.matvec(flat) - m.asarray(q.values)
                loss += float(residual @ residual) / (2.0 * q.variance)
                grad = grad + (q.query.rmatvec(residual) / q.variance).reshape(mu.shape)
            counts.append(mu)
            grads.append(grad)
        return loss, counts, grads

    def direction(self, grads: Sequence) -> list:
        """∇L as tables on the tree's cliques (None where zero).

        Each measured clique's gradient is first folded into its smallest measured
        superset (small tables), so only the outermost ones are broadcast over a
        tree clique: adding a function of x_r to any clique containing r changes
        p_θ the same way.
        """
        tree = self.tree
        pushed = list(grads)
        out: list = [None] * len(tree.cliques)
        for k in reversed(range(len(self.groups))):  # smallest cliques first
            g, source = self.groups[k], self.sources[k]
            into = self.groups[source].clique if source >= 0 else tree.cliques[g.holder]
            table = pushed[k].reshape(_broadcast(tree.domain, g.clique, into))
            if source >= 0:
                pushed[source] = pushed[source] + table
            else:
                out[g.holder] = table if out[g.holder] is None else out[g.holder] + table
        return out


def _broadcast(domain: Domain, sub: Sequence[str], clique: Sequence[str]) -> tuple[int, ...]:
    return tuple(domain.size_of(a) if a in sub else 1 for a in clique)


@dataclass
class Fit:
    """Result of mirror descent: log-potentials, normalized clique marginals, log Z, loss."""

    potentials: list
    marginals: list
    log_partition: float
    loss: float
    step: float
    iterations: int


@dataclass
class _Point:
    """Log-potentials with their calibrated marginals, loss and gradient."""

    theta: list
    marginals: list
    log_z: float
    value: float
    counts: list
    grads: list
    direction: list


def mirror_descent(
    tree: JunctionTree,
    loss: MarginalLoss,
    total: float,
    potentials: Sequence,
    *,
    step: float | None = None,
    max_iters: int = 1000,
    tol: float = 1e-6,
    callback: Callable[[int, float], None] | None = None,
) -> Fit:
    """Minimize loss(total·μ_θ) over θ by entropic mirror descent with an Armijo line search.

    Stops after `max_iters` iterations, or once the step size has met the
    curvature (some step was rejected) and an iteration improves the loss by
    less than `tol` relative.
    """
    m = xp()

    def evaluate(theta: list) -> _Point:
        marginals, log_z = calibrate(tree, theta)
        value, counts, grads = loss(marginals, total)
        return _Point(theta, marginals, log_z, value, counts, grads, loss.direction(grads))

    current = evaluate([m.asarray(p, dtype=float) for p in potentials])
    alpha = step if step is not None else 1.0 / (total * loss.lipschitz())
    settled = False
    it = 0
    for it in range(1, max_iters + 1):
        checkpoint()
        for _ in range(_LINE_SEARCH_HALVINGS):
            trial = evaluate([t if d is None else t - alpha * d for t, d in zip(current.theta, current.direction)])
            predicted = sum(float(m.vdot(g, a - b)) for g, a, b in zip(current.grads, current.counts, trial.counts))
            if trial.value <= current.value and current.value - trial.value >= 0.5 * predicted:
                break
            alpha *= 0.5
            settled = True
        else:  # no step decreases the loss measurably: at the optimum to machine precision
            break
        improvement = current.value - trial.value
        current = trial
        alpha *= 2.0
        if callback is not None:
            callback(it, current.value)
        if settled and improvement <= tol * abs(current.value):
            break
    return Fit(current.theta, current.marginals, current.log_z, current.value, alpha, it)
