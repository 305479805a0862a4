"""RAP end to end (mechanisms.rap): budget, release, relaxed-data estimator, SQL blocks, sampling."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from mechanisms.domain import Domain
from mechanisms.measurement import GAUSSIAN, calibrate
from mechanisms.noise import RandomSource
from mechanisms.rap import (
    BlockQueries,
    MarginalCounts,
    RAPConfig,
    RecordCounts,
    ThresholdQueries,
    ThresholdWorkload,
    random_thresholds,
    run_rap,
    tk_rule,
)
from mechanisms.rap.encoding import OneHot

DOMAIN = Domain(("a", "b", "c", "d"), (6, 5, 4, 7))
N = 3000
FAST = RAPConfig(rounds=3, per_round=8, synthetic_rows=100)


@pytest.fixture(scope="module")
def records() -> np.ndarray:
    """A two-cluster table: answers are concentrated, as in real data."""
    rng = np.random.default_rng(0)
    centre = rng.integers(0, DOMAIN.sizes, size=(2, len(DOMAIN)))
    which = rng.integers(0, 2, N)
    noise = rng.random((N, len(DOMAIN))) < 0.25
    out = np.where(noise, rng.integers(0, DOMAIN.sizes, size=(N, len(DOMAIN))), centre[which])
    return out.astype(np.int64)


def errors(source, result, records):
    worst = mean = worst0 = mean0 = 0.0
    for ids, exact, synthetic in source.scan(result.model.relaxed, OneHot(DOMAIN)):
        e = np.abs(exact / N - synthetic)
        worst, mean = max(worst, e.max()), mean + e.sum()
        worst0, mean0 = max(worst0, (exact / N).max()), mean0 + (exact / N).sum()
    return worst, mean / source.n_queries, worst0, mean0 / source.n_queries


@pytest.mark.parametrize("r", [1, 2, 3])
def test_rap_beats_all_zero(records, r):
    source = ThresholdQueries(ThresholdWorkload(DOMAIN, random_thresholds(DOMAIN, 3, 3, r, seed=1)))
    result = run_rap(source, RecordCounts(DOMAIN, records), 0.5, RandomSource(2), FAST, rows=N)
    worst, mean, worst0, mean0 = errors(source, result, records)
    assert worst < 0.5 * worst0 and mean < 0.5 * mean0


def test_budget_and_release(records):
    source = ThresholdQueries(ThresholdWorkload(DOMAIN, random_thresholds(DOMAIN, 2, 2, 2, seed=0)))
    rho = 0.2
    config = RAPConfig(rounds=2, per_round=3, synthetic_rows=50, one_way_fraction=0.25)
    result = run_rap(source, RecordCounts(DOMAIN, records), rho, RandomSource(3), config)
    release = result.release
    assert release.rho == rho and (release.rounds, release.per_round) == (2, 3)
    rho_rows = rho * config.count_fraction
    rho_one_way = (rho - rho_rows) * config.one_way_fraction
    rho_rounds = rho - rho_rows - rho_one_way
    assert release.rows_variance == pytest.approx(calibrate(GAUSSIAN, 1.0, rho_rows).variance)
    assert release.rows == pytest.approx(N, abs=10 * release.rows_variance**0.5)
    attributes = source.attributes
    assert set(release.one_way) == set(attributes)
    assert release.one_way_variance == pytest.approx(calibrate(GAUSSIAN, 1.0, rho_one_way / len(attributes)).variance)
    assert release.variance == pytest.approx(calibrate(GAUSSIAN, 1.0, rho_rounds / (2 * 2 * 3)).variance)
    exact = source.exact(release.ids)
    assert np.all(np.abs(release.values - exact) < 8 * release.variance**0.5)


def test_non_adaptive_measures_everything(records):
    source = ThresholdQueries(ThresholdWorkload(DOMAIN, random_thresholds(DOMAIN, 1, 2, 2, seed=2)))
    m = source.n_queries
    config = RAPConfig(rounds=1, per_round=m, synthetic_rows=30, one_way_fraction=0.0)
    result = run_rap(source, RecordCounts(DOMAIN, records), 1.0, RandomSource(4), config, rows=N)
    assert sorted(result.release.ids.tolist()) == list(range(m))
    assert result.release.variance == pytest.approx(calibrate(GAUSSIAN, 1.0, 1.0 / m).variance)


def test_tk_rule():
    # c = noise_target^2 rho n^2, then T = ceil(sqrt(c) / 4), K = c // T
    assert tk_rule(1e-4, 50_000, 10**7) == (3, 33)
    assert tk_rule(1e-2, 50_000, 10**7) == (12, 170)  # capped at max_measured
    assert tk_rule(1e-3, 50_000, 2000) == (8, 125)
    assert tk_rule(1e-2, 50_000, 500) == (1, 500)  # capped by the whole workload: non-adaptive
    assert tk_rule(1e-2, 50_000, 500, RAPConfig(rounds=4)) == (4, 125)  # a given T is kept
    assert tk_rule(1e-2, 50_000, 500, RAPConfig(per_round=50)) == (10, 50)  # and so is a given K
    assert tk_rule(1.0, 10, 10**6, RAPConfig(rounds=4, per_round=2)) == (4, 2)
    with pytest.raises(ValueError):
        tk_rule(1.0, 10, 5, RAPConfig(rounds=3, per_round=2))


CATALOG = Catalog.from_toml(
    """
[tables.t]
[tables.t.columns]
a = { type = "integer", min = 0, max = 5 }
b = { type = "categorical", values = ["p", "q", "r", "s", "u"] }
c = { type = "integer", min = 0, max = 3, nullable = true }
"""
)
SQL = [
    "SELECT COUNT(*) FROM t WHERE (a = 1)::INT + (b = 'q')::INT + (c > 1)::INT >= 2",
    "SELECT b, COUNT(*) FROM t WHERE a >= 3 GROUP BY b",
    "SELECT a, c, COUNT(*) FROM t GROUP BY a, c",
]


@pytest.fixture(scope="module")
def database():
    con = duckdb.connect()
    con.execute("SELECT setseed(0.25)")
    con.execute(
        """CREATE TABLE t AS SELECT
             CASE WHEN random() < 0.5 THEN CAST(floor(random() * 6) AS INTEGER) ELSE 2 END AS a,
             ['p', 'q', 'r', 's', 'u'][CAST(floor(random() * 5) AS INTEGER) + 1] AS b,
             CASE WHEN random() < 0.2 THEN NULL ELSE CAST(floor(random() * 4) AS INTEGER) END AS c
           FROM range(2000)"""
    )
    yield con
    con.close()


def test_sql_blocks_through_the_database(database):
    """Count blocks compiled from SQL, exact counts from DuckDB, answers from the relaxed data."""
    table = CATALOG.get("t")
    domain = table.domain
    blocks = [b for sql in SQL for b in compile_query(sql, CATALOG).blocks]
    source = BlockQueries(domain, blocks)
    counts = MarginalCounts(domain, lambda cliques: DuckDBBackend(database).marginals(table, cliques))
    config = RAPConfig(rounds=3, per_round=6, synthetic_rows=100)
    result = run_rap(source, counts, 2.0, RandomSource(6), config, rows=2000)
    model = result.model
    for sql, block in zip(SQL, blocks):
        assert model.covers(block)
        truth = np.asarray([r[-1] for r in database.execute(sql.replace("COUNT(*)", "COUNT(*) AS n") + (" ORDER BY ALL" if "GROUP" in sql else "")).fetchall()], dtype=float)
        estimate = model.estimate(block)
        assert estimate.shape == (block.num_rows(domain),)
        if truth.size == estimate.size:
            assert np.max(np.abs(estimate - truth)) < 0.2 * 2000
        variance = model.variance(block)
        assert np.all(variance > 0) and variance.shape == estimate.shape
    # a later query on the same columns is covered; one on a column RAP never saw is not
    later = compile_query("SELECT COUNT(*) FROM t WHERE a = 2 AND b = 'p'", CATALOG).blocks[0]
    assert model.covers(later)
    assert np.allclose(model.covariance(later, later), model.variance(later))


def test_marginal_counts_equal_record_counts(records):
    clique = ("a", "c")
    dense = np.bincount(np.ravel_multi_index((records[:, 0], records[:, 2]), (6, 4)), minlength=24)
    via_callback = MarginalCounts(DOMAIN, lambda cliques: {clique: dense})
    a = via_callback.marginals([clique])[clique]
    b = RecordCounts(DOMAIN, records).marginals([clique])[clique]
    assert np.array_equal(a.cells, b.cells) and np.array_equal(a.counts, b.counts)


def test_synthetic_rows(records):
    source = ThresholdQueries(ThresholdWorkload(DOMAIN, random_thresholds(DOMAIN, 2, 2, 2, seed=3)))
    result = run_rap(source, RecordCounts(DOMAIN, records), 0.5, RandomSource(7), FAST, rows=N)
    rows = result.model.sample(per_row=30, seed=0)
    assert rows.shape == (100 * 30, len(DOMAIN))
    assert np.all((rows >= 0) & (rows < np.asarray(DOMAIN.sizes)))
    relaxed = np.asarray(result.model.relaxed, dtype=float)
    encoding = OneHot(DOMAIN)
    for i, a in enumerate(DOMAIN.attributes):  # the sample's 1-way marginals follow D'
        expected = relaxed[:, encoding.block(a)].mean(axis=0)
        observed = np.bincount(rows[:, i], minlength=DOMAIN.sizes[i]) / len(rows)
        assert np.max(np.abs(observed - expected)) < 0.04
