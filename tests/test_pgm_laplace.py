"""The graphical model's L1 loss for Laplace measurements (McKenna's thesis §4.2: the pure-DP estimator)."""

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from mechanisms.domain import Domain
from mechanisms.matrices import Prefix
from mechanisms.measurement import GAUSSIAN, LAPLACE, Measurement, measure
from mechanisms.noise import RandomSource
from mechanisms.pgm import GraphicalModelEstimator
from mechanisms.pgm.estimation import LinearMeasurement
from mechanisms.pgm.laplace_loss import SMOOTHING, absolute_term, laplace_scale
from mechanisms.pgm.model import GraphicalModel

DOMAIN = Domain(("a", "b"), (8, 6))
TOTAL = 6000


def _truth(concentration: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.multinomial(TOTAL, rng.dirichlet(np.full(DOMAIN.size(), concentration))).reshape(DOMAIN.shape())


def _measurements(truth: np.ndarray, repeats: int, epsilon: float) -> list[LinearMeasurement]:
    """The 2-way marginal and a prefix strategy on a's 1-way marginal, each measured `repeats` times."""
    rng, out = RandomSource(1), []
    prefix = Prefix(DOMAIN.size_of("a"))
    for _ in range(repeats):
        values, cal = measure(truth.ravel(), None, LAPLACE, epsilon, rng)
        out.append(LinearMeasurement(("a", "b"), values, cal.variance, None, LAPLACE))
        values, cal = measure(truth.sum(axis=1), prefix, LAPLACE, epsilon, rng)
        out.append(LinearMeasurement(("a",), values, cal.variance, prefix, LAPLACE))
    return out


def _l1_loss(model: GraphicalModel, measurements) -> float:
    total = 0.0
    for q in measurements:
        mu = model.project(q.clique).ravel()
        fitted = mu if q.query is None else np.asarray(q.query.matvec(mu))
        total += np.abs(fitted - q.values).sum() / laplace_scale(q.variance)
    return total


def _l1_minimum(measurements) -> float:
    """min over x ≥ 0 with Σx = TOTAL of Σ_j ‖Q_j x − y_j‖₁ / b_j, by linear programming."""
    rows, ys, weights = [], [], []
    for q in measurements:
        if q.clique == ("a", "b"):
            matrix = np.eye(DOMAIN.size())
        else:
            matrix = np.asarray(q.query.dense()) @ np.kron(np.eye(DOMAIN.size_of("a")), np.ones((1, DOMAIN.size_of("b"))))
        rows.append(matrix)
        ys.append(q.values)
        weights.append(np.full(len(q.values), 1.0 / laplace_scale(q.variance)))
    q_all, y, w = np.vstack(rows), np.concatenate(ys), np.concatenate(weights)
    n, r = DOMAIN.size(), len(y)
    bound = sp.vstack([sp.hstack([sp.csr_matrix(q_all), -sp.eye(r)]), sp.hstack([sp.csr_matrix(-q_all), -sp.eye(r)])])
    total = sp.hstack([sp.csr_matrix(np.ones((1, n))), sp.csr_matrix((1, r))])
    result = linprog(np.concatenate([np.zeros(n), w]), A_ub=bound, b_ub=np.concatenate([y, -y]), A_eq=total,
                     b_eq=[TOTAL], bounds=[(0, None)] * (n + r), method="highs")
    assert result.status == 0
    return float(result.fun)


def test_smoothed_term_is_within_half_the_radius_of_the_l1_loss_and_its_gradient_is_exact():
    rng = np.random.default_rng(3)
    values, mu, variance = rng.normal(size=50) * 10, rng.normal(size=50) * 10, 8.0
    b = laplace_scale(variance)
    value, grad = absolute_term(None, values, variance, mu)
    exact = np.abs(mu - values).sum() / b
    assert exact <= value <= exact + 50 * SMOOTHING / 2 + 1e-12
    step = 1e-7 * b
    for i in (0, 17, 49):
        bumped = mu.copy()
        bumped[i] += step
        assert (absolute_term(None, values, variance, bumped)[0] - value) / step == pytest.approx(grad[i], rel=1e-4)


def test_fit_reaches_the_l1_minimum_and_the_l2_fit_does_not():
    truth = _truth(5.0)
    ms = _measurements(truth, repeats=3, epsilon=0.05)
    minimum = _l1_minimum(ms)
    l1 = GraphicalModel.fit(DOMAIN, ms, total=TOTAL, method="accelerated", max_iters=500, tol=1e-9)
    l2 = GraphicalModel.fit(DOMAIN, [dataclasses.replace(q, noise=GAUSSIAN) for q in ms], total=TOTAL,
                            method="accelerated", max_iters=500, tol=1e-9)
    cells = sum(len(q.values) for q in ms)
    assert _l1_loss(l1, ms) <= minimum + 2e-3 * cells  # within 0.002 per entry, whose expected loss is ~1
    assert _l1_loss(l2, ms) > minimum + 0.02 * cells


def test_repeated_laplace_measurements_are_combined_better_by_the_l1_loss():
    """The median of k Laplace draws beats their mean (asymptotic variance b²/k against 2b²/k)."""
    truth = _truth(20.0)
    ms = _measurements(truth, repeats=9, epsilon=0.05)
    errors = {}
    for noise in (LAPLACE, GAUSSIAN):
        model = GraphicalModel.fit(DOMAIN, [dataclasses.replace(q, noise=noise) for q in ms], total=TOTAL,
                                   method="accelerated", max_iters=500, tol=1e-9)
        errors[noise] = float(np.sqrt(np.mean((model.project(("a", "b")) - truth) ** 2)))
    assert errors[LAPLACE] < 0.95 * errors[GAUSSIAN]  # 7.28 against 8.07 here


def test_the_estimator_fits_laplace_measurements_with_the_l1_loss():
    truth = _truth(5.0)
    rng = RandomSource(2)
    stored = []
    for _ in range(3):
        values, cal = measure(truth.ravel(), None, LAPLACE, 0.05, rng)
        stored.append(Measurement(("a", "b"), LAPLACE, 0.05, cal.variance, values))
    estimator = GraphicalModelEstimator(DOMAIN, stored, max_iters=300)
    assert all(m.noise == LAPLACE for m in estimator.model.measurements)
    l2 = GraphicalModelEstimator(DOMAIN, [dataclasses.replace(m, noise=GAUSSIAN) for m in stored], max_iters=300)
    linear = estimator.model.measurements
    assert _l1_loss(estimator.model, linear) < _l1_loss(l2.model, linear)
