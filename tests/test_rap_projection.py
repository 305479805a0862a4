"""Sparsemax, the hand-written surrogate gradients, and the relaxed projection (mechanisms.rap)."""

from __future__ import annotations

import numpy as np

from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from mechanisms.domain import Domain
from mechanisms.rap import Threshold
from mechanisms.rap.encoding import OneHot, project_block, sparsemax, uniform_relaxed
from mechanisms.rap.projection import ProjectionConfig, relaxed_projection
from mechanisms.rap.queries import QuerySet
from mechanisms.rap.relaxed import block_answers

CATALOG = Catalog.from_toml(
    """
[tables.t]
[tables.t.columns]
a = { type = "integer", min = 0, max = 3 }
b = { type = "categorical", values = ["x", "y", "z"], nullable = true }
c = { type = "integer", min = 0, max = 4 }
"""
)
DOMAIN = CATALOG.get("t").domain


def simplex_projection_by_qp(z: np.ndarray) -> np.ndarray:
    """Reference: bisection on tau in sum max(z - tau, 0) = 1."""
    lo, hi = z.min() - 1, z.max()
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.maximum(z - mid, 0).sum() > 1 else (lo, mid)
    return np.maximum(z - (lo + hi) / 2, 0)


def test_c4_sparsemax_is_the_simplex_projection():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 7)) * rng.choice([0.1, 1, 5], size=(50, 1))
    p = project_block(z)
    assert np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(p, np.stack([simplex_projection_by_qp(row) for row in z]), atol=1e-9)
    np.testing.assert_allclose(project_block(p), p, atol=1e-12)  # a projection is idempotent


def test_sparsemax_per_block():
    encoding = OneHot(Domain(("a", "b"), (3, 5)))
    x = np.random.default_rng(1).normal(size=(4, 8))
    sparsemax(x, encoding)
    np.testing.assert_allclose(x[:, :3].sum(axis=1), 1.0)
    np.testing.assert_allclose(x[:, 3:].sum(axis=1), 1.0)


def numeric_gradient(queries, relaxed, targets, weights, eps=1e-6):
    out = np.zeros_like(relaxed)
    for i in range(relaxed.shape[0]):
        for j in range(relaxed.shape[1]):
            up, down = relaxed.copy(), relaxed.copy()
            up[i, j] += eps
            down[i, j] -= eps
            out[i, j] = (queries.loss_and_gradient(up, targets, weights)[0] - queries.loss_and_gradient(down, targets, weights)[0]) / (2 * eps)
    return out


def mixed_queries(encoding: OneHot) -> QuerySet:
    queries = QuerySet(encoding)
    queries.add_threshold(Threshold.r_of_k(("a", "b", "c"), 1), np.asarray([[0, 1, 2], [3, 0, 4]]))
    queries.add_threshold(Threshold.r_of_k(("a", "b", "c"), 2), np.asarray([[1, 2, 0]]))
    sql = "SELECT b, COUNT(*) FROM t WHERE (a = 1)::INT + (c > 2)::INT >= 1 GROUP BY b"
    block = compile_query(sql, CATALOG).blocks[0]
    queries.add_block(block, np.asarray([0, 2, 3]))
    return queries


def test_gradient_matches_finite_differences():
    encoding = OneHot(DOMAIN)
    relaxed = uniform_relaxed(5, encoding, seed=2, dtype=np.float64)
    queries = mixed_queries(encoding)
    rng = np.random.default_rng(3)
    targets, weights = rng.random(queries.size), rng.random(queries.size) + 0.5
    _, grad = queries.loss_and_gradient(relaxed, targets, weights)
    np.testing.assert_allclose(grad, numeric_gradient(queries, relaxed, targets, weights), atol=1e-8)


def test_block_rows_agree_with_the_block_expectation():
    encoding = OneHot(DOMAIN)
    relaxed = uniform_relaxed(9, encoding, seed=4, dtype=np.float64)
    block = compile_query("SELECT b, COUNT(*) FROM t WHERE (a = 1)::INT + (c > 2)::INT >= 1 GROUP BY b", CATALOG).blocks[0]
    queries = QuerySet(encoding)
    positions = queries.add_block(block, np.arange(block.num_rows(DOMAIN)))
    np.testing.assert_allclose(queries.answers(relaxed)[positions], block_answers(relaxed, encoding, block), atol=1e-12)


def test_relaxed_projection_fits_and_stays_on_the_simplex():
    encoding = OneHot(DOMAIN)
    relaxed = uniform_relaxed(50, encoding, seed=5, dtype=np.float64)
    queries = mixed_queries(encoding)
    targets = queries.answers(uniform_relaxed(3, encoding, seed=6, dtype=np.float64))  # attainable
    weights = np.ones(queries.size)
    before = queries.loss_and_gradient(relaxed, targets, weights)[0]
    loss, steps = relaxed_projection(relaxed, queries, targets, weights, ProjectionConfig(max_iterations=400, target_loss=1e-6, tolerance=0.0))
    assert loss < 5e-3 * before and steps <= 400
    for a in DOMAIN.attributes:
        block = relaxed[:, encoding.block(a)]
        assert np.all(block >= 0)
        np.testing.assert_allclose(block.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(queries.answers(relaxed), targets, atol=1e-2)
