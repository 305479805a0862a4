"""Joins of protected tables linked by their privacy unit (`dpsql.tables.joined`, `dpsql.sql.protected_joins`).

Customers (the unit), their orders (a foreign key to the customer) and the orders' items (a foreign key
to the order): INNER and LEFT joins, USING and ON, a chain of three tables, a self-join on the unit and a join
with a public lookup table are answered near the truth, free when asked again, in one scan as a workload; each unit keeps at most
K joined rows, deterministically; removing one unit's rows from every table moves any joined count by
at most K, however the keys multiply rows; joins on undeclared keys are refused and spend nothing.
"""

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.backends import DuckDBBackend
from dpsql.errors import NotSupportedError, ProgrammingError
from dpsql.sql.compiler import compile_query
from dpsql.tables.catalog import Catalog

CATALOG = """
[tables.customers]
privacy_unit = "customer_id"
max_rows_per_unit = 1
[tables.customers.columns]
region = { type = "categorical", values = ["north", "south"] }

[tables.orders]
privacy_unit = { foreign_key = "customer_id", references = "customers.customer_id" }
max_rows_per_unit = 4
[tables.orders.columns]
amount = { type = "integer", min = 0, max = 49 }

[tables.items]
privacy_unit = { foreign_key = "order_id", references = "orders.order_id" }
max_rows_per_unit = 6
[tables.items.columns]
qty = { type = "integer", min = 1, max = 5 }

[tables.visits]
[tables.visits.columns]
region = { type = "categorical", values = ["north", "south"] }

[tables.devices]
privacy_unit = "device_id"
max_rows_per_unit = 2
[tables.devices.columns]
region = { type = "categorical", values = ["north", "south"] }
"""

CUSTOMERS = 1200


def _shop(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE TABLE customers AS SELECT i AS customer_id, CASE WHEN i % 3 = 0 THEN 'north' ELSE 'south' "
                f"END AS region FROM range({CUSTOMERS}) t(i)")
    # customer c has c % 4 orders (some none: the LEFT join keeps them)
    con.execute(f"CREATE TABLE orders AS SELECT c * 10 + j AS order_id, c AS customer_id, (c + 7 * j) % 50 AS amount "
                f"FROM range({CUSTOMERS}) a(c), range(4) b(j) WHERE j < c % 4")
    con.execute("CREATE TABLE items AS SELECT o.order_id, 1 + (o.order_id + j) % 5 AS qty FROM orders o, range(3) b(j) "
                "WHERE j <= o.order_id % 3")
    con.execute("CREATE TABLE visits AS SELECT 'north' AS region FROM range(10)")
    con.execute("CREATE TABLE zones AS SELECT * FROM (VALUES ('north', 'cold'), ('south', 'warm')) t(region, zone)")
    con.execute("CREATE TABLE devices AS SELECT i AS device_id, 'north' AS region FROM range(10) t(i)")


@pytest.fixture()
def shop(tmp_path):
    path = str(tmp_path / "shop.duckdb")
    con = duckdb.connect(path)
    _shop(con)
    con.close()
    return path, str(tmp_path / "state")


def _truth(path: str, sql: str) -> list:
    con = duckdb.connect(path, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("sql, truth", [
    ("SELECT c.region, COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id GROUP BY c.region "
     "ORDER BY 1",
     "SELECT c.region, COUNT(*) FROM orders o JOIN customers c USING (customer_id) GROUP BY 1 ORDER BY 1"),
    ("SELECT region, SUM(amount) FROM orders JOIN customers USING (customer_id) GROUP BY region ORDER BY 1",
     "SELECT region, SUM(amount) FROM orders JOIN customers USING (customer_id) GROUP BY 1 ORDER BY 1"),
    ("SELECT c.region, COUNT(*) FROM customers c LEFT JOIN orders o ON c.customer_id = o.customer_id "
     "GROUP BY c.region ORDER BY 1",
     "SELECT c.region, COUNT(*) FROM customers c LEFT JOIN orders o USING (customer_id) GROUP BY 1 ORDER BY 1"),
    ("SELECT customers.region, SUM(items.qty) FROM items JOIN orders ON items.order_id = orders.order_id "
     "JOIN customers ON orders.customer_id = customers.customer_id GROUP BY customers.region ORDER BY 1",
     "SELECT c.region, SUM(i.qty) FROM items i JOIN orders o USING (order_id) JOIN customers c USING (customer_id) "
     "GROUP BY 1 ORDER BY 1"),
    ("SELECT z.zone, COUNT(*) FROM orders o JOIN customers c USING (customer_id) JOIN zones z ON c.region = z.region "
     "GROUP BY z.zone ORDER BY 1",
     "SELECT z.zone, COUNT(*) FROM orders o JOIN customers c USING (customer_id) JOIN zones z USING (region) "
     "GROUP BY 1 ORDER BY 1"),
    ("SELECT COUNT(*) FROM orders a JOIN orders b USING (customer_id) WHERE a.amount < b.amount",
     "SELECT COUNT(*) FROM orders a JOIN orders b USING (customer_id) WHERE a.amount < b.amount"),
])
def test_joins_along_declared_keys_answer_near_the_truth_and_again_for_free(shop, sql, truth):
    path, state = shop
    conn = dpsql.connect(path, catalog=CATALOG, state=state, epsilon=20.0, seed=3)
    cur = conn.cursor()
    rows = cur.execute(sql).fetchall()
    errors = cur.result.stderr
    assert cur.result.charged > 0
    for (*key, value), (*true_key, true_value), se in zip(rows, _truth(path, truth), errors):
        assert key == true_key and abs(value - true_value) <= 5 * se[-1] + 1e-9, (key, value, true_value, se)
    spent = conn.budget.spent.rho
    assert cur.execute(sql).fetchall() == rows and cur.result.charged == 0 and conn.budget.spent.rho == spent


def test_a_dashboard_over_a_join_is_one_workload_in_one_charge(shop):
    path, state = shop
    conn = dpsql.connect(path, catalog=CATALOG, state=state, epsilon=5.0, seed=1)
    cur = conn.cursor().execute("""
        BEGIN WORKLOAD WITH (epsilon = 1);
        SELECT c.region, COUNT(*) FROM orders o JOIN customers c USING (customer_id) GROUP BY c.region;
        SELECT COUNT(*) FROM orders o JOIN customers c USING (customer_id) WHERE o.amount < 25;
        SELECT c.region, AVG(o.amount) FROM orders o JOIN customers c USING (customer_id) GROUP BY c.region;
        END WORKLOAD;
    """)
    sizes = [len(cur.fetchall())]
    while cur.nextset():
        sizes.append(len(cur.fetchall()))
    assert sizes == [2, 1, 2]
    assert len(conn.ledger.charges()) == 1
    # the same join written with other aliases is the same table: answered from the workload's model
    cur.execute("SELECT COUNT(*) FROM orders x JOIN customers y ON x.customer_id = y.customer_id WHERE x.amount < 25")
    assert cur.result.charged == 0


def _joined(sql: str, catalog: Catalog):
    return compile_query(sql, catalog).table


def test_each_unit_keeps_at_most_k_joined_rows_the_same_ones_every_scan(shop):
    path, _ = shop
    catalog = Catalog.from_toml(CATALOG)
    table = _joined("SELECT COUNT(*) FROM orders a JOIN orders b USING (customer_id)", catalog)
    assert table.contribution == 16  # 4 × 4: each order of a customer paired with each
    con = duckdb.connect(path, read_only=True)
    sql = f"SELECT __dpsql_unit, COUNT(*) FROM {table.source_sql('key')} GROUP BY 1"
    assert max(n for _, n in con.execute(sql).fetchall()) <= 16
    kept = f"SELECT * FROM {table.source_sql('key')} ORDER BY ALL"
    assert con.execute(kept).fetchall() == con.execute(kept).fetchall()
    declared = Catalog.from_toml(CATALOG + '\n[[joins]]\ntables = ["orders", "orders"]\nmax_rows_per_unit = 3\n')
    bounded = _joined("SELECT COUNT(*) FROM orders a JOIN orders b USING (customer_id)", declared)
    assert bounded.contribution == 3
    assert max(n for _, n in con.execute(f"SELECT __dpsql_unit, COUNT(*) FROM {bounded.source_sql('key')} "
                                         "GROUP BY 1").fetchall()) == 3
    assert "at most 3 joined rows (as the catalog declares" in bounded.explain_note()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_removing_one_unit_moves_any_joined_count_by_at_most_k(seed):
    """Hostile keys: customers repeat their id (k = 1 keeps one row per unit), orders repeat (order, customer)
    pairs and items point at repeated or missing orders, so the join multiplies rows. An order belongs to one
    customer (its id says which), as a foreign key's referenced key does. Removing a unit's rows from every
    table moves every marginal of the join by at most K in L1."""
    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    units = 6
    customers = [(int(u), ["north", "south"][int(rng.integers(2))]) for u in rng.integers(0, units, 12)]
    orders = [(int(o), int(o) % units, int(rng.integers(0, 50))) for o in rng.integers(0, 2 * units, 30)]
    items = [(int(rng.integers(0, 2 * units + 2)), int(rng.integers(1, 6))) for _ in range(50)]
    catalog = Catalog.from_toml(CATALOG)
    queries = ["SELECT COUNT(*) FROM items i JOIN orders o USING (order_id) JOIN customers c USING (customer_id)",
               "SELECT COUNT(*) FROM customers c LEFT JOIN orders o USING (customer_id)",
               "SELECT COUNT(*) FROM orders a JOIN orders b USING (customer_id)"]
    tables = [_joined(q, catalog) for q in queries]

    def marginals(drop: int | None) -> list[np.ndarray]:
        keep = (lambda rows, unit_of: [r for r in rows if unit_of(r) != drop])
        con.execute("CREATE OR REPLACE TABLE customers (customer_id BIGINT, region VARCHAR)")
        con.execute("CREATE OR REPLACE TABLE orders (order_id BIGINT, customer_id BIGINT, amount BIGINT)")
        con.execute("CREATE OR REPLACE TABLE items (order_id BIGINT, qty BIGINT)")
        for name, rows in (("customers", keep(customers, lambda r: r[0])), ("orders", keep(orders, lambda r: r[1])),
                           ("items", keep(items, lambda r: r[0] % units))):
            if rows:
                con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
        backend = DuckDBBackend(con)
        return [backend.marginals(t, [tuple(t.domain.attributes)], "secret")[tuple(t.domain.attributes)]
                for t in tables]

    full = marginals(None)
    worst = [0] * len(tables)
    for unit in range(units):
        for i, (before, after) in enumerate(zip(full, marginals(unit))):
            moved = int(np.abs(before - after).sum())
            assert moved <= tables[i].contribution, (queries[i], unit)
            worst[i] = max(worst[i], moved)
    assert max(worst) >= 2  # the audit moves counts, not a trivial case


@pytest.mark.parametrize("sql, error, message", [
    ("SELECT COUNT(*) FROM orders o JOIN customers c ON o.amount = c.customer_id", NotSupportedError,
     "join only on declared keys"),
    ("SELECT COUNT(*) FROM orders o RIGHT JOIN customers c ON o.customer_id = c.customer_id", NotSupportedError,
     "RIGHT JOIN"),
    ("SELECT COUNT(*) FROM orders o CROSS JOIN customers c", NotSupportedError, "CROSS JOIN"),
    ("SELECT COUNT(*) FROM orders o JOIN customers c ON customer_id = c.customer_id", ProgrammingError, "qualify"),
    ("SELECT COUNT(*) FROM orders o JOIN customers c ON o.customer_id < c.customer_id", NotSupportedError,
     "declared keys with ="),
    ("SELECT COUNT(*) FROM visits v JOIN customers c ON v.region = c.region", NotSupportedError, "no privacy unit"),
    ("SELECT COUNT(*) FROM devices d JOIN customers c ON d.device_id = c.customer_id", NotSupportedError,
     "different privacy units"),
    ("SELECT COUNT(*) FROM orders JOIN orders USING (customer_id)", ProgrammingError, "alias"),
])
def test_joins_off_the_declared_keys_are_refused_and_spend_nothing(shop, sql, error, message):
    path, state = shop
    conn = dpsql.connect(path, catalog=CATALOG, state=state, epsilon=1.0)
    with pytest.raises(error, match=message):
        conn.cursor().execute(sql)
    assert conn.budget.spent.rho == 0


def test_explain_shows_the_join_bound_and_its_cost(shop):
    path, state = shop
    conn = dpsql.connect(path, catalog=CATALOG, state=state, epsilon=1.0)
    plan = "\n".join(r[0] for r in conn.cursor().execute(
        "EXPLAIN SELECT c.region, COUNT(*) FROM orders o JOIN customers c USING (customer_id) GROUP BY c.region"
    ).fetchall())
    assert "each unit keeps at most 4 joined rows (the product of the tables' own bounds: 4 × 1)" in plan
    assert conn.budget.spent.rho == 0


def test_a_referenced_key_held_by_several_units_is_refused_before_anything_is_charged(tmp_path):
    """A foreign key must reference a key of one unit (a primary key): an order id held by two customers would
    make an item belong to both, and removing one customer would move the other's counts. Every scan of a table
    whose unit goes through such a key, alone or joined, is refused with one fixed message."""
    path = str(tmp_path / "shop.duckdb")
    con = duckdb.connect(path)
    _shop(con)
    con.execute("INSERT INTO orders VALUES (10, 2, 5)")  # order 10 is customer 1's: now customer 2's too
    con.close()
    conn = dpsql.connect(path, catalog=CATALOG, state=str(tmp_path / "state"), epsilon=1.0)
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM orders o JOIN customers c USING (customer_id)")  # customer ids are unique
    spent = conn.budget.spent.rho
    for sql in ("SELECT COUNT(*) FROM items",
                "SELECT COUNT(*) FROM items i JOIN orders o USING (order_id)"):
        with pytest.raises(dpsql.OperationalError, match="several privacy units hold"):
            cur.execute(sql)
        assert conn.budget.spent.rho == spent
