"""COUNT(DISTINCT <privacy unit>): the number of units, as COUNT(*) of the table of distinct
(unit, group) pairs, whose sensitivity is min(k, groups) rather than k."""

import math

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.errors import NotSupportedError

CATALOG = """
[tables.orders]
privacy_unit = "customer"
max_rows_per_unit = 4
[tables.orders.columns]
region = { type = "categorical", values = ["N", "S"] }
amount = { type = "integer", min = 0, max = 9 }

[tables.visits]
privacy_unit = "customer"
max_rows_per_unit = 2
[tables.visits.columns]
region = { type = "categorical", values = ["N", "S"] }
amount = { type = "integer", min = 0, max = 9 }

[tables.items]
privacy_unit = { foreign_key = "order_id", references = "orders.id" }
max_rows_per_unit = 4
[tables.items.columns]
sku = { type = "integer", min = 0, max = 3 }
"""
CUSTOMERS = 4000


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("units") / "orders.duckdb")
    con = duckdb.connect(path)
    # Customer c has 1 + c % 4 orders (never more than the bound, so bounding drops nothing), in region N
    # when c is even; amounts cycle through 0..9.
    con.execute(f"""CREATE TABLE orders AS SELECT row_number() OVER () AS id, c AS customer,
        CASE WHEN c % 2 = 0 THEN 'N' ELSE 'S' END AS region, (c + j) % 10 AS amount
        FROM range({CUSTOMERS}) t(c), range(4) s(j) WHERE j <= c % 4""")
    con.execute("CREATE TABLE items AS SELECT id AS order_id, id % 4 AS sku FROM orders")
    # Every customer visits 10 times (5 times the bound), once with each amount, in region N when the
    # amount is below 3 or the customer is even, else in S.
    con.execute(f"""CREATE TABLE visits AS SELECT c AS customer, j AS amount,
        CASE WHEN j < 3 OR c % 2 = 0 THEN 'N' ELSE 'S' END AS region FROM range({CUSTOMERS}) t(c), range(10) s(j)""")
    con.close()
    return path


def _connect(database, tmp_path):
    return dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / "ledger.duckdb"), epsilon=2.0, delta=1e-6,
                         query_epsilon=0.5, seed=3)


def _exact(database, sql):
    con = duckdb.connect(database, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("where", ["", "WHERE amount < 3", "WHERE amount >= 3 AND region = 'N'"])
def test_the_number_of_units_is_answered_within_its_error(database, tmp_path, where):
    cur = _connect(database, tmp_path).cursor()
    cur.execute("SET dpsql.stderr = on")
    cur.execute(f"SELECT COUNT(DISTINCT customer) AS n FROM orders {where}")
    (value, stderr), = cur.fetchall()
    exact = _exact(database, f"SELECT COUNT(DISTINCT customer) FROM orders {where}")[0][0]
    assert abs(value - exact) < 6 * stderr
    # Sensitivity 1, whatever k: the noise is that of one count at ρ (not 4 times larger).
    rho = cur.connection.session.query_share
    assert stderr == pytest.approx(math.sqrt(1 / (2 * rho)), rel=0.02)


def test_grouped_counts_have_sensitivity_of_the_groups_a_unit_can_reach(database, tmp_path):
    conn = _connect(database, tmp_path)
    cur = conn.cursor()
    cur.execute("SET dpsql.stderr = on")
    rows = cur.execute("SELECT region, COUNT(DISTINCT customer) AS n FROM orders GROUP BY region").fetchall()
    exact = dict(_exact(database, "SELECT region, COUNT(DISTINCT customer) FROM orders GROUP BY region"))
    rho = conn.session.query_share
    for region, value, stderr in rows:
        assert abs(value - exact[region]) < 6 * stderr
        assert stderr == pytest.approx(math.sqrt(2**2 / (2 * rho)), rel=0.05)  # min(k = 4, 2 regions) pairs
    spent = conn.session.ledger.spent()
    cur.execute("SELECT region, COUNT(DISTINCT customer) FROM orders GROUP BY region")
    assert conn.session.ledger.spent() == spent  # asked again: free


@pytest.mark.parametrize("where", ["WHERE amount = 7", "WHERE amount >= 5 AND region = 'S'"])
def test_units_with_more_rows_than_the_bound_all_count(database, tmp_path, where):
    """A unit counts once whatever its rows: its rows are not bounded before the WHERE (which kept 2 of each
    customer's 10 visits, so `amount = 7` found a fifth of them). Unbiased over seeds, sensitivity 1."""
    exact = _exact(database, f"SELECT COUNT(DISTINCT customer) FROM visits {where}")[0][0]
    errors = []
    for seed in range(8):
        conn = dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / f"l{seed}.duckdb"), epsilon=2.0,
                             delta=1e-6, query_epsilon=0.5, seed=seed)
        cur = conn.cursor()
        cur.execute("SET dpsql.stderr = on")
        (value, stderr), = cur.execute(f"SELECT COUNT(DISTINCT customer) FROM visits {where}").fetchall()
        assert stderr == pytest.approx(math.sqrt(1 / (2 * conn.session.query_share)), rel=0.02)
        errors.append((value - exact) / stderr)
        conn.close()
    assert abs(np.mean(errors)) < 4 / math.sqrt(len(errors)) and np.all(np.abs(errors) < 4.5)


def test_grouped_units_keep_up_to_k_groups_after_the_where(database, tmp_path):
    """GROUP BY: a unit keeps k of its groups among its rows meeting the WHERE (here every customer has at
    most 2 = k regions, so all count), and adds at most min(k, groups) pairs."""
    conn = _connect(database, tmp_path)
    cur = conn.cursor()
    cur.execute("SET dpsql.stderr = on")
    sql = "SELECT region, COUNT(DISTINCT customer) AS n FROM visits WHERE amount >= 2 GROUP BY region"
    exact = dict(_exact(database, sql.replace(" AS n", "")))
    for region, value, stderr in cur.execute(sql).fetchall():
        assert stderr == pytest.approx(math.sqrt(2 ** 2 / (2 * conn.session.query_share)), rel=0.05)
        assert abs(value - exact[region]) < 4.5 * stderr


@pytest.mark.parametrize("sql, message", [
    ("SELECT COUNT(DISTINCT amount) FROM orders", "only COUNT\\(DISTINCT customer\\)"),
    ("SELECT COUNT(DISTINCT customer), COUNT(*) FROM orders", "a query of its own"),
    ("SELECT COUNT(DISTINCT customer) FILTER (WHERE amount > 2) FROM orders", "a query of its own"),
    ("SELECT COUNT(DISTINCT order_id) FROM items", "foreign key|only COUNT"),
])
def test_other_distinct_counts_are_refused_and_spend_nothing(database, tmp_path, sql, message):
    conn = _connect(database, tmp_path)
    with pytest.raises(NotSupportedError, match=message):
        conn.cursor().execute(sql)
    assert conn.session.ledger.spent() == 0


def test_a_table_without_a_unit_says_count_star_counts_its_units(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range % 3 AS a FROM range(10)")
    conn = dpsql.connect(con=con, catalog='[tables.t.columns]\na = { type = "integer", min = 0, max = 2 }',
                         epsilon=1.0)
    with pytest.raises(NotSupportedError, match="COUNT\\(\\*\\) counts them"):
        conn.cursor().execute("SELECT COUNT(DISTINCT a) FROM t")


def test_qualified_names_in_a_count_of_units(database, tmp_path):
    """BI tools qualify every column with its table: that failed with "unknown table qualifier"."""
    cur = _connect(database, tmp_path).cursor()
    rows = cur.execute('SELECT "orders"."region", COUNT(DISTINCT "orders"."customer") FROM orders '
                       'GROUP BY "orders"."region" ORDER BY 1').fetchall()
    assert [r[0] for r in rows] == ["N", "S"] and all(abs(r[1] - CUSTOMERS / 2) < 150 for r in rows)
