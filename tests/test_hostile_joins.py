"""Hostile join shapes (`dpsql.tables.joined`): shops whose keys multiply a unit's rows in a join.

Generated shops (hypothesis) give units many orders and many items per order, duplicate rows, NULL
and dangling keys, customers without orders and orders without items. For chains, self-joins (two and
three times) and LEFT joins, the bounded scan keeps, for every unit, exactly min(K, its rows in the
plain SQL join of the tables' unit rows; an order's id names one customer, so rows joined on the keys
are of one unit): never more than K, and a LEFT join's unmatched rows are kept like any other; the same
rows on every scan. Through the DB-API a join on such a shop is answered near its bounded truth or
refused with a dpsql error, and only a released answer is charged.
"""

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpsql
from dpsql.backends import DuckDBBackend
from dpsql.sql.compiler import compile_query
from dpsql.tables.catalog import Catalog
from tests.test_protected_joins import CATALOG

KEY = "hostile-ledger-key"
TRIPLE = CATALOG + '\n[[joins]]\ntables = ["orders", "orders", "orders"]\nmax_rows_per_unit = 5\n'
# (dpsql query, the plain SQL join it bounds over each table's unit rows (its unit as `unit`), catalog, K)
JOINS = [
    ("SELECT COUNT(*) FROM items i JOIN orders o USING (order_id) JOIN customers c USING (customer_id)",
     "SELECT c.unit FROM i_u i JOIN o_u o USING (order_id) JOIN c_u c USING (customer_id)", CATALOG, 24),
    ("SELECT COUNT(*) FROM customers c LEFT JOIN orders o ON c.customer_id = o.customer_id",
     "SELECT c.unit FROM c_u c LEFT JOIN o_u o ON c.customer_id = o.customer_id", CATALOG, 4),
    ("SELECT COUNT(*) FROM orders o LEFT JOIN items i USING (order_id)",
     "SELECT o.unit FROM o_u o LEFT JOIN i_u i USING (order_id)", CATALOG, 24),
    ("SELECT COUNT(*) FROM orders a JOIN orders b USING (customer_id)",
     "SELECT a.unit FROM o_u a JOIN o_u b USING (customer_id)", CATALOG, 16),
    ("SELECT COUNT(*) FROM customers x JOIN customers y USING (customer_id)",
     "SELECT x.unit FROM c_u x JOIN c_u y USING (customer_id)", CATALOG, 1),
    ("SELECT COUNT(*) FROM orders a JOIN orders b USING (customer_id) JOIN orders c USING (customer_id)",
     "SELECT a.unit FROM o_u a JOIN o_u b USING (customer_id) JOIN o_u c USING (customer_id)", TRIPLE, 5),
]
TABLES = [compile_query(sql, Catalog.from_toml(catalog)).table for sql, _, catalog, _ in JOINS]
IDS = ["chain", "left-orders", "left-items", "self", "self-customers", "self-three-declared"]
UNITS = 5
ORDERS_PER_UNIT = 4  # order o belongs to customer o % UNITS: a referenced key names one unit, as a key does

key = st.one_of(st.none(), st.integers(0, UNITS * ORDERS_PER_UNIT + 2))  # NULL, or possibly dangling
shops = st.fixed_dictionaries({
    "customers": st.lists(st.tuples(st.one_of(st.none(), st.integers(0, UNITS - 1)), st.sampled_from(["north", "south"])),
                          max_size=12),
    # (order id, copies): a unit with many orders, each repeated
    "orders": st.lists(st.tuples(st.integers(0, UNITS * ORDERS_PER_UNIT - 1), st.integers(1, 4),
                                 st.integers(0, 49)), max_size=14),
    # (order id, copies, qty): many items per order, repeated, some for orders that do not exist
    "items": st.lists(st.tuples(key, st.integers(1, 6), st.integers(1, 5)), max_size=20),
})


def build(con: duckdb.DuckDBPyConnection, shop: dict) -> None:
    con.execute("CREATE OR REPLACE TABLE customers (customer_id BIGINT, region VARCHAR)")
    con.execute("CREATE OR REPLACE TABLE orders (order_id BIGINT, customer_id BIGINT, amount BIGINT)")
    con.execute("CREATE OR REPLACE TABLE items (order_id BIGINT, qty BIGINT)")
    rows = {
        "customers": shop["customers"],
        "orders": [(o, o % UNITS, a) for o, n, a in shop["orders"] for _ in range(n)],
        "items": [(o, q) for o, n, q in shop["items"] for _ in range(n)],
    }
    for name, values in rows.items():
        if values:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(values[0]))})", values)
    # each table's rows with their unit, as a foreign key reaches it: once per row its key finds (none: no unit)
    con.execute("CREATE OR REPLACE VIEW c_u AS SELECT *, customer_id AS unit FROM customers")
    con.execute("CREATE OR REPLACE VIEW o_u AS SELECT o.*, p.customer_id AS unit FROM orders o "
                "JOIN customers p ON o.customer_id = p.customer_id")
    con.execute("CREATE OR REPLACE VIEW i_u AS SELECT i.*, p2.customer_id AS unit FROM items i "
                "JOIN orders p1 ON i.order_id = p1.order_id JOIN customers p2 ON p1.customer_id = p2.customer_id")


def per_unit(con: duckdb.DuckDBPyConnection, rows_sql: str, unit: str) -> dict:
    return dict(con.execute(f"SELECT {unit}, COUNT(*) FROM {rows_sql} GROUP BY 1").fetchall())


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(shop=shops)
def test_the_bounded_scan_keeps_min_of_k_and_the_units_joined_rows(shop):
    con = duckdb.connect()
    build(con, shop)
    backend = DuckDBBackend(con)
    for (sql, plain, _, k), table in zip(JOINS, TABLES):
        assert table.contribution == k
        joined = {u: n for u, n in per_unit(con, f"({plain})", "unit").items() if u is not None}
        bounded = f"(SELECT * FROM {table.source_sql(KEY)})"
        kept = per_unit(con, bounded, "__dpsql_unit")
        assert kept == {u: min(k, n) for u, n in joined.items()}, sql
        again = f"SELECT * FROM {table.source_sql(KEY)} ORDER BY ALL"
        assert con.execute(again).fetchall() == con.execute(again).fetchall()
        clique = tuple(table.domain.attributes)
        assert int(backend.marginals(table, [clique], KEY)[clique].sum()) == sum(kept.values())


HOSTILE = {  # one unit with 6 orders of 5 items, each row three times; customers 1-3 without orders
    "customers": [(0, "north")] * 3 + [(1, "south"), (2, "north"), (3, "south"), (None, "north")],
    "orders": [(o * UNITS, 3, 7) for o in range(4)] + [(1, 1, 30)],
    "items": [(o * UNITS, 3, 2) for o in range(4) for _ in range(5)] + [(None, 2, 1), (UNITS * ORDERS_PER_UNIT + 2, 1, 1)],
}


@pytest.mark.parametrize("sql, plain, catalog, k", JOINS, ids=IDS)
def test_a_join_that_multiplies_rows_is_answered_near_its_bounded_truth_or_refused(tmp_path, sql, plain, catalog, k):
    path = str(tmp_path / "shop.duckdb")
    con = duckdb.connect(path)
    build(con, HOSTILE)
    joined = {u: n for u, n in per_unit(con, f"({plain})", "unit").items() if u is not None}
    con.close()
    assert max(joined.values()) > k  # the plain join multiplies unit 0's rows beyond the bound
    truth = sum(min(k, n) for n in joined.values())
    conn = dpsql.connect(path, catalog=catalog, state=str(tmp_path / "state"), epsilon=50.0, seed=2)
    cur = conn.cursor()
    try:
        (value,), = cur.execute(sql).fetchall()
    except dpsql.Error:
        assert conn.budget.spent.rho == 0
        return
    assert cur.result.charged > 0
    assert abs(value - truth) <= 5 * cur.result.stderr[0][-1] + 1e-9
