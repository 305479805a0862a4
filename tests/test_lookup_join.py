"""Joins of a protected table with public lookup tables, compiled as public maps of a declared column.

Answers are compared with DuckDB running the same SQL on the raw data (every value lies in
its declared domain, so the catalog's semantics and SQL's agree), within five standard
errors; refused joins must spend nothing.
"""

from __future__ import annotations

from collections import defaultdict

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.sql.lookups import PublicTables
from mechanisms.measurement import GAUSSIAN
from mechanisms.noise import RandomSource
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Workload
from planner.planner import plan_workload

ZIPS = [f"z{i}" for i in range(7)]
CATALOG = f"""
[tables.visits.columns]
zip = {{ type = "categorical", values = {ZIPS} }}
age = {{ type = "integer", min = 0, max = 9 }}
amount = {{ type = "numeric", min = 0, max = 100, bins = 10 }}

[tables.accounts.columns]
zip = {{ type = "categorical", values = {ZIPS} }}
"""


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("lookup") / "data.duckdb")
    con = duckdb.connect(path)
    con.execute("CREATE TABLE visits AS SELECT 'z' || (i * 7 % 13 % 7) AS zip, i % 10 AS age, "
                "(i * 37) % 100 AS amount, 'city' || (i % 3) AS city FROM range(6000) t(i)")
    con.execute("CREATE TABLE accounts AS SELECT zip FROM visits")
    con.execute("CREATE VIEW secret_view AS SELECT * FROM visits")
    # z6 has no row (a LEFT join gives it a NULL region); z9 is no declared value (region X is empty).
    con.execute("CREATE TABLE zips AS SELECT * FROM (VALUES ('z0', 'N', 10), ('z1', 'N', 20), ('z2', 'S', 30), "
                "('z3', 'S', 40), ('z4', 'E', 50), ('z5', 'W', 60), ('z9', 'X', 70)) t(zip, region, pop)")
    con.execute("CREATE TABLE zips_dup AS SELECT * FROM zips UNION ALL SELECT 'z1', 'S', 5")
    con.execute("CREATE TABLE bands AS SELECT i AS age, CASE WHEN i < 4 THEN 'young' ELSE 'old' END AS band "
                "FROM range(12) t(i)")
    con.close()
    return path


@pytest.fixture
def conn(database, tmp_path):
    c = dpsql.connect(database, catalog=CATALOG, epsilon=100.0, query_epsilon=4.0, state=str(tmp_path / "s"), seed=8)
    yield c
    c.close()


QUERIES = [
    "SELECT r.region, COUNT(*) FROM visits v JOIN zips r ON v.zip = r.zip GROUP BY r.region",
    "SELECT v.age, COUNT(*) FROM visits v JOIN zips r ON r.zip = v.zip WHERE r.region IN ('N', 'S') GROUP BY v.age",
    "SELECT region, SUM(pop) FROM visits JOIN zips USING (zip) GROUP BY region",
    "SELECT r.region, COUNT(*) FROM visits v LEFT JOIN zips r ON v.zip = r.zip GROUP BY r.region",
    "SELECT g.band, COUNT(*) FROM visits v JOIN bands g ON v.age = g.age WHERE g.band <> 'young' GROUP BY g.band",
    ("SELECT r.region, g.band, COUNT(*) FROM visits v JOIN zips r ON v.zip = r.zip "
     "JOIN bands AS g ON v.age = g.age GROUP BY r.region, g.band"),
    "SELECT COUNT(*), SUM(r.pop) FILTER (WHERE r.pop >= 30) FROM visits v JOIN zips r ON v.zip = r.zip",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_lookup_answers_match_the_truth(conn, database, sql):
    result = conn.execute(sql).result
    width = _aggregates(result)
    with duckdb.connect(database, read_only=True) as con:
        raw = con.execute(sql).fetchall()  # the raw data, read directly (the test owns it)
    exact = {row[:-width]: row[-width:] for row in raw}
    assert result.charged > 0
    for row, errors in zip(result.rows, result.stderr):
        key, values = row[:-width], row[-width:]
        expected = exact.pop(key, (0,) * width)  # a group no row reaches is an exact 0
        for value, want, error in zip(values, expected, errors[-width:]):
            assert abs(value - (want or 0)) <= 5 * error + 1e-9, (key, value, want, error)
    assert not exact  # every true group is in the answer


def _aggregates(result) -> int:
    return sum(e is not None for e in result.stderr[0])


def test_groups_of_the_public_domain_without_protected_values_are_exact_zeros(conn):
    result = conn.execute(QUERIES[0]).result
    rows = {r[0]: (r[1], e[1]) for r, e in zip(result.rows, result.stderr)}
    assert set(rows) == {"E", "N", "S", "W", "X"}  # the public table's distinct regions
    assert rows["X"] == (0.0, 0.0)  # only z9, which is no declared zip, has region X
    left = conn.execute(QUERIES[3]).result
    assert None in {r[0] for r in left.rows}  # LEFT JOIN: z6 finds no row


def test_lookups_are_planned_and_reused_like_other_queries(conn):
    plan = conn.execute("EXPLAIN " + QUERIES[5]).result.plan
    assert "measure" in plan and conn.ledger.charges() == []
    conn.execute("SELECT zip, age, COUNT(*) FROM visits GROUP BY zip, age")
    # A public map of the (zip, age) marginal is in its span, but each (region, band) count would sum many noisy
    # cells: its own share measures it far better, so it is measured again (`planner.remeasure`), then reused.
    assert "measured again" in conn.execute("EXPLAIN " + QUERIES[5]).result.plan
    spent = conn.budget.spent.rho
    conn.execute(QUERIES[5])
    assert conn.budget.spent.rho > spent
    spent = conn.budget.spent.rho
    conn.execute(QUERIES[5])  # asked again: free
    assert conn.budget.spent.rho == spent
    assert conn.execute("SELECT region, COUNT(*) FROM zips GROUP BY region ORDER BY 1").fetchall()[0] == ("E", 1)


REFUSED = [
    ("SELECT COUNT(*) FROM visits v JOIN zips_dup r ON v.zip = r.zip", "not unique"),
    ("SELECT COUNT(*) FROM visits v JOIN accounts a ON v.zip = a.zip", "two protected tables"),
    ("SELECT COUNT(*) FROM visits v JOIN secret_view s ON v.zip = s.zip", "view 'secret_view' of the database is not"),
    ("SELECT COUNT(*) FROM visits v JOIN zips r ON v.city = r.zip", "not declared"),
    ("SELECT COUNT(*) FROM visits v JOIN zips r ON v.amount = r.pop", "binned numeric"),
    ("SELECT COUNT(*) FROM visits v JOIN zips r ON v.age = r.zip", "cannot join integer column"),
    ("SELECT COUNT(*) FROM visits v RIGHT JOIN zips r ON v.zip = r.zip", "RIGHT JOIN is not supported"),
    ("SELECT COUNT(*) FROM visits v FULL OUTER JOIN zips r ON v.zip = r.zip", "FULL OUTER JOIN"),
    ("SELECT COUNT(*) FROM visits v CROSS JOIN zips r", "CROSS JOIN"),
    ("SELECT COUNT(*) FROM visits v, zips r WHERE v.zip = r.zip", "ON <protected>"),
    ("SELECT COUNT(*) FROM visits v JOIN zips r ON v.zip = r.zip AND r.pop > 3", "one equality"),
    ("SELECT COUNT(*) FROM visits v JOIN zips r ON zip = r.zip", "qualify both"),
    ("SELECT COUNT(*) FROM visits v JOIN (SELECT * FROM zips) r ON v.zip = r.zip", "subqueries"),
    ("SELECT COUNT(*) FROM visits v JOIN read_csv('zips.csv') r ON v.zip = r.zip", "only public tables"),
    ("SELECT COUNT(*) FROM visits v JOIN nowhere n ON v.zip = n.zip", "no public table"),
    ("SELECT COUNT(*) FROM visits v JOIN duckdb_tables t ON v.zip = t.table_name", "no public table"),
    ("SELECT COUNT(*) FROM zips r JOIN visits v ON v.zip = r.zip", "must read it first"),
    ("SELECT zip, COUNT(*) FROM visits v JOIN zips r ON v.zip = r.zip GROUP BY zip", "ambiguous"),
    ("SELECT r.region, COUNT(*) FROM visits v JOIN zips r ON v.zip = r.zip", "not in GROUP BY"),
    ("SELECT COUNT(*) FROM visits v JOIN zips r ON v.zip = r.zip WHERE r.region = 3", "with a string literal"),
    ("SELECT SUM(r.region) FROM visits v JOIN zips r ON v.zip = r.zip", "needs a numeric column"),
    ("SELECT COUNT(*) FROM visits v JOIN zips r ON v.zip = r.zip JOIN zips r ON v.zip = r.zip", "used twice"),
]


@pytest.mark.parametrize("sql,message", REFUSED)
def test_refused_joins_spend_nothing(conn, sql, message):
    with pytest.raises((dpsql.ProgrammingError, dpsql.NotSupportedError), match=message):
        conn.execute(sql)
    assert conn.ledger.charges() == [] and conn.budget.spent.rho == 0


@pytest.mark.parametrize("family", ["marginals", "per-query"])
def test_expected_rmse_of_lookup_blocks_matches_monte_carlo(database, family):
    """200 releases of a lookup workload: the planned RMSE within 15% (>3 SE) of the empirical one.

    Marginals answer the lookup blocks by residual least squares, per-query measures their
    0/1 maps directly: both read the blocks' mapped rows."""
    con = duckdb.connect(database, read_only=True)
    catalog = Catalog.from_toml(CATALOG)
    tables = PublicTables(con, {"visits", "accounts", "secret_view"})
    blocks = [b for i, q in enumerate([QUERIES[0], QUERIES[2], QUERIES[5]])
              for b in compile_query(q, catalog, label=f"q{i}", tables=tables).blocks]
    con.close()
    domain = catalog.get("visits").domain
    workload = Workload(domain, blocks)
    plan = plan_workload(workload, 0.01, GAUSSIAN, 1e-9, families=[family])
    table = np.random.default_rng(1).integers(0, 30, domain.shape(domain.attributes)).astype(np.int64)

    def marginal(clique):
        return table.sum(axis=tuple(i for i, a in enumerate(domain.attributes) if a not in clique)).ravel()

    rng, reps, squared = RandomSource(2), 200, defaultdict(float)
    for _ in range(reps):
        model = LeastSquaresModel(domain, [pm.release(marginal(pm.clique), domain, GAUSSIAN, rng)
                                           for pm in plan.measurements])
        for b in blocks:
            exact = b.matrix(domain).matvec(marginal(b.attributes(domain)).astype(float))
            squared[b.name] += float(np.mean((model.answer(b)[0] - exact) ** 2)) / reps
    for b in blocks:
        assert np.sqrt(squared[b.name]) == pytest.approx(plan.expected_rmse[b.name], rel=0.15), b.name
