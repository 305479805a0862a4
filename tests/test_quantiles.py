"""Quantiles (MEDIAN, QUANTILE, PERCENTILE_CONT/DISC, MIN/MAX as extreme quantiles) from noisy prefix counts."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

import dpsql
from benchmarks.datasets import DATA, load
from mechanisms.quantiles import quantile_bins

CATALOG = {"tables": {"people": {"columns": {
    "age": {"type": "integer", "min": 0, "max": 99},
    "sex": {"type": "categorical", "values": ["F", "M"]},
    "income": {"type": "numeric", "min": 0, "max": 200000, "bins": 40},
}}}}


@pytest.fixture(scope="module")
def data():
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT (i * 7919 % 100)::INTEGER AS age, "
                "CASE WHEN i % 3 = 0 THEN 'M' ELSE 'F' END AS sex, (i * 104729 % 200000)::DOUBLE AS income "
                "FROM range(60000) t(i)")
    yield con
    con.close()


def _connect(data, seed=1, epsilon=2.0):
    return dpsql.connect(con=data.cursor(), catalog=CATALOG, epsilon=epsilon, seed=seed)


def test_quantile_bins_of_exact_prefixes():
    counts = np.array([[0, 2, 3, 0, 5], [0, 0, 0, 0, 0.4]])
    found = quantile_bins(np.cumsum(counts, axis=1), np.zeros((2, 5)), 0.5, 1.96)
    assert found.bin.tolist() == [2, -1]  # 5 of 10 reached in bin 2; a group below one row has no answer
    assert found.within[0] == pytest.approx(1.0) and found.low[0] == found.high[0] == 2
    noisy = quantile_bins(np.array([[1.0, 4.0, 3.0, 10.0]]), np.full((1, 4), 4.0), 0.25, 1.96)
    assert noisy.bin[0] == 1 and noisy.low[0] <= 1 <= noisy.high[0]  # made monotone first


@pytest.mark.parametrize("q", [0.5, 0.1, 0.9])
def test_quantile_intervals_cover_95_percent_and_no_more(q):
    """Prefix counts of 200 narrow bins with independent noise per bin (the identity measurement): with the
    exact Var(P̂(j) − q·N̂) the two one-sided tests' interval covers the true bin 93-97.5% of the time, and is
    narrower than adding the variances of P̂(j) and q·N̂ (which ignores their covariance)."""
    rng = np.random.default_rng(5)
    bins, trials, sigma = 200, 4000, 10.0
    counts = rng.poisson(5.0, bins).astype(float)
    truth = np.cumsum(counts)
    true_bin = int(np.argmax(truth >= q * truth[-1]))
    noisy = np.cumsum(counts + rng.normal(0, sigma, (trials, bins)), axis=1)
    j = np.arange(1, bins + 1)
    exact = sigma ** 2 * ((1 - q) ** 2 * j + q ** 2 * (bins - j))  # Var(Σ_{i≤j}(1 − q)e_i − Σ_{i>j} q e_i)
    found = quantile_bins(noisy, np.broadcast_to(exact, noisy.shape), q, 1.96)
    covered = np.mean((found.low <= true_bin) & (true_bin <= found.high))
    assert 0.93 <= covered <= 0.975  # each end misses at most 2.5%, at a fixed bin (no union bound)
    added = quantile_bins(noisy, np.broadcast_to(sigma ** 2 * (j + q * q * bins), noisy.shape), q, 1.96)
    assert np.mean(found.high - found.low) < np.mean(added.high - added.low)


def test_median_percentiles_and_groups(data):
    conn = _connect(data)
    cur = conn.cursor()
    cur.execute("SELECT sex, MEDIAN(age) AS m, QUANTILE(income, 0.9) AS p90, "
                "PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY age) AS q1, "
                "PERCENTILE_DISC(0.25) WITHIN GROUP (ORDER BY age DESC) AS q3 FROM people GROUP BY sex ORDER BY sex")
    exact = data.execute("SELECT sex, median(age), quantile_cont(income, 0.9), quantile_cont(age, 0.25), "
                         "quantile_cont(age, 0.75) FROM people GROUP BY sex ORDER BY sex").fetchall()
    for row, truth, errors in zip(cur.fetchall(), exact, cur.result.stderr):
        assert row[0] == truth[0]
        assert abs(row[1] - truth[1]) <= 2 and abs(row[3] - truth[3]) <= 2 and abs(row[4] - truth[4]) <= 2
        assert abs(row[2] - truth[2]) <= 10000  # 5,000-wide bins
        assert all(e is not None and e >= 0 for e in errors[1:])
    cur.execute("EXPLAIN SELECT MEDIAN(age) FROM people WHERE sex = 'F'")
    assert "Plan:" in cur.fetchall()[0][0]


def test_min_and_max_are_extreme_quantiles_and_say_so(data):
    cur = _connect(data).cursor()
    cur.execute("SELECT MIN(age) AS lo, MAX(age) AS hi FROM people")
    lo, hi = cur.fetchone()
    assert 0 <= lo <= 3 and 96 <= hi <= 99
    assert any("MIN is a DP approximation" in n for n in cur.result.notes)
    assert any("MAX is a DP approximation" in n for n in cur.result.notes)


def test_quantiles_and_counts_of_a_workload_share_one_measurement(data):
    conn = _connect(data)
    results = conn.workload(["SELECT MEDIAN(age) FROM people", "SELECT QUANTILE(age, 0.9) FROM people",
                             "SELECT COUNT(*) FROM people WHERE age BETWEEN 20 AND 29"], epsilon=1.0)
    assert "1 measurement(s)" in results[0].plan
    spent = conn.budget.spent.rho
    conn.execute("SELECT PERCENTILE_CONT(0.1) WITHIN GROUP (ORDER BY age) FROM people")
    assert conn.budget.spent.rho == spent  # read off the same CDF: free


@pytest.mark.parametrize("sql, message", [
    ("SELECT MEDIAN(age + 1) FROM people", "one declared column"),
    ("SELECT MEDIAN(sex) FROM people", "integer or numeric"),
    ("SELECT QUANTILE(age, 1.5) FROM people", "from 0 to 1"),
    ("SELECT age, MEDIAN(age) FROM people GROUP BY age", "also grouped"),
    ("SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age, income) FROM people", "one ORDER BY"),
])
def test_misuse_is_refused_and_spends_nothing(data, sql, message):
    conn = _connect(data)
    with pytest.raises(dpsql.Error, match=message):
        conn.execute(sql)
    assert conn.budget.spent.rho == 0


@pytest.mark.skipif(not (DATA / "adult" / "adult.csv").exists(), reason="shared/data/adult is not checked out")
def test_intervals_cover_the_true_quantiles_on_adult():
    """The 95% intervals (rank intervals from the exact prefix variances) hold where the noise matters:
    over 30 noise draws of three quantiles of age in a small subgroup of adult (race = 1, ε = 0.05 a
    query), at least 90% of them contain the exact quantile (97-99% measured: the bound is conservative)."""
    con = duckdb.connect()
    catalog = load(con, "adult")
    quantiles = (0.25, 0.5, 0.75)
    truth = con.execute("SELECT " + ", ".join(f"quantile_disc(age, {q})" for q in quantiles)
                        + " FROM adult WHERE race = 1").fetchone()
    covered = total = 0
    for seed in range(30):
        conn = dpsql.connect(con=con.cursor(), catalog=catalog, epsilon=1, query_epsilon=0.05, seed=seed)
        cur = conn.execute("SELECT " + ", ".join(f"QUANTILE(age, {q})" for q in quantiles) + " FROM adult WHERE race = 1")
        for (low, high), exact in zip(cur.result.ci(0.95)[0], truth):
            covered += low - 1e-9 <= exact <= high + 1e-9
            total += 1
        conn.close()
    assert covered / total >= 0.9, (covered, total)


def test_quantiles_from_plain_duckdb_sql(data):
    con = data.cursor()
    dpsql.register(con, catalog=CATALOG, epsilon=1.0, seed=5)
    rows = con.execute("SELECT * FROM dp_query('SELECT sex, MEDIAN(age) AS m FROM people GROUP BY sex')").fetchall()
    assert [r[0] for r in rows] == ["F", "M"] and all(abs(r[1] - 49.5) <= 3 for r in rows)
