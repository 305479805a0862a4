"""The optimal factorization: a certified optimum over all linear strategies, planned and measured exactly."""

import math

import duckdb
import numpy as np
import pytest

from benchmarks.simulate import exact, plan_squared_errors
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from mechanisms.factorization import exact_error, optimal_factorization
from mechanisms.measurement import lattice_step
from mechanisms.workload import Workload
from planner.families.factorization import FACTORIZATION, FactorizationFamily
from planner.planner import plan_workload

CATALOG = Catalog.from_toml(PEOPLE_CATALOG_TOML)
TABLE = CATALOG.get("people")


def prefix(n):
    return np.tril(np.ones((n, n)))


def svd_bound(w):
    return np.linalg.svd(w, compute_uv=False).sum() ** 2 / w.shape[1]


def test_prefix_optimum_matches_hdmm_and_is_certified():
    # HDMM's OPT0 on prefix sums, n = 64, reaches RMSE 1.0293x the SVD bound and is within
    # 5.4e-5 of its own dual bound (benchmarks/results/hdmm_tables.md): the global optimum.
    f = optimal_factorization(prefix(64), np.ones(64))
    assert f.lower_bound <= f.error <= f.lower_bound * 1.004
    assert math.sqrt(f.lower_bound / svd_bound(prefix(64))) == pytest.approx(1.0293, abs=2e-4)
    assert f.rank == 64


def test_low_rank_workloads_keep_their_row_space_exactly():
    rng = np.random.default_rng(0)
    rows = np.zeros((12, 40))
    for r in rows:
        lo, hi = sorted(rng.integers(0, 40, 2))
        r[lo : hi + 1] = 1
    weights = rng.uniform(0.5, 2.0, 12)
    f = optimal_factorization(rows, weights)
    a = f.strategy.dense()
    assert f.rank == np.linalg.matrix_rank(rows) == a.shape[0]
    assert np.allclose(rows @ np.linalg.pinv(a) @ a, rows, atol=1e-9)  # every query in the span
    assert 10**15 % lattice_step(a.ravel()).denominator == 0  # decimals: exact discrete noise
    # The reported error is the exact error of the released (rounded) strategy.
    sensitivity2 = (a**2).sum(axis=0).max()
    weighted = rows * np.sqrt(weights)[:, None]
    assert f.error == pytest.approx(sensitivity2 * np.sum((weighted @ np.linalg.pinv(a)) ** 2), rel=1e-8)
    assert svd_bound(weighted) <= f.lower_bound <= f.error <= f.lower_bound * 1.004


def test_exact_error_of_the_identity():
    z = np.eye(3)
    assert exact_error(np.eye(3), np.eye(3), z) == pytest.approx(3.0)


def test_non_integral_queries_are_declined():
    assert optimal_factorization(np.array([[0.5, 0.25]]), np.ones(1)) is None


BOXES = [
    f"SELECT COUNT(*) FROM people WHERE age BETWEEN {a} AND {b} AND income BETWEEN {c} AND {d}"
    for a, b, c, d in [(20, 40, 10000, 60000), (30, 70, 0, 30000), (18, 25, 20000, 90000), (50, 99, 40000, 120000),
                       (0, 99, 5000, 15000), (35, 45, 0, 200000), (60, 80, 30000, 50000), (22, 33, 70000, 100000)]
]


def box_workload():
    blocks = [b for i, q in enumerate(BOXES) for b in compile_query(q, CATALOG, label=f"q{i}").blocks]
    return Workload(TABLE.domain, blocks)


def test_family_error_is_the_model_error_and_gaussian_only():
    w = box_workload()
    family = FactorizationFamily(TABLE.domain, "gaussian")
    error = family.unit_error(w.blocks)
    assert math.isfinite(error)
    plan = plan_workload(w, 1.0, families=[FACTORIZATION])
    total = sum(b.weight * b.num_rows(TABLE.domain) * plan.expected_rmse[b.name] ** 2 for b in w.blocks)
    assert total == pytest.approx(error, rel=2e-3)  # the discrete Gaussian's variance vs σ²
    assert FactorizationFamily(TABLE.domain, "laplace").unit_error(w.blocks) == math.inf
    assert "optimal factorization (rank 8" in plan.explain()


def test_measured_error_matches_expected_error():
    con = duckdb.connect()
    create_people_table(con, rows=20_000, seed=3)
    w = box_workload()
    plan = plan_workload(w, 0.05, families=[FACTORIZATION])
    truth = exact(TABLE, w, DuckDBBackend(con), {m.clique for m in plan.measurements})
    squared = plan_squared_errors(plan, w, truth, 300, "gaussian")
    measured = sum(squared.values())
    expected = sum(plan.expected_rmse[b.name] ** 2 for b in w.blocks)
    # 300 draws of 8 correlated answers: the relative sd of the mean squared error is below 0.05.
    assert measured == pytest.approx(expected, rel=0.15)


def test_rows_of_very_different_scales_round_without_loss():
    # A SUM over income bins (values ~10^5) beside counts: rounding is relative per column of C.
    n = 40
    values = 2500.0 + 5000.0 * np.arange(n)
    rows = np.vstack([prefix(n)[::4], values * (np.arange(n) < 25), values])
    weights = np.concatenate([np.ones(10), [1 / values.max() ** 2] * 2])
    f = optimal_factorization(rows, weights)
    assert f.error <= f.lower_bound * 1.004


@pytest.mark.parametrize("rows", [prefix(48), np.vstack([prefix(40)[::4], (2500.0 + 5000.0 * np.arange(40))[None, :]])])
def test_a_strategy_knows_its_exact_lattice(rows):
    """The strategy keeps its decimal integers, so exact releases need not read each entry as a decimal:
    the lattice and the integer entries it gives are those of reading every entry (quantile workloads
    spent seconds of planning doing that)."""
    from mechanisms.matrices import Dense
    from mechanisms.measurement import _dense_lattice, forget_lattices

    strategy = optimal_factorization(rows, np.ones(rows.shape[0])).strategy
    forget_lattices()
    fast = _dense_lattice(strategy)
    read = _dense_lattice(Dense(strategy.dense()))
    assert fast[0] == read[0]
    assert np.array_equal(fast[1], read[1]) and isinstance(fast[1].flat[0], int)
