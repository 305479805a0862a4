"""Red team of units reached through foreign keys (`dpsql.tables.privacy_units`, `dpsql.backends.base`).

A row of a linking table must belong to one unit: the check before every scan must see what the scan's
join sees. Keys the referenced table holds as distinct values ('10', '010' as text) may still both equal
one foreign key (10 as an integer: the join casts), so one item belonged to two customers while a check
grouping the referenced keys alone passed."""

import duckdb
import pytest

import dpsql
from tests.test_protected_joins import CATALOG, CUSTOMERS


def _typed_shop(path: str, shared: bool) -> None:
    con = duckdb.connect(path)
    con.execute(f"CREATE TABLE customers AS SELECT i AS customer_id, CASE WHEN i % 3 = 0 THEN 'north' ELSE 'south' "
                f"END AS region FROM range({CUSTOMERS}) t(i)")
    con.execute(f"CREATE TABLE orders AS SELECT CAST(c * 10 + j AS VARCHAR) AS order_id, c AS customer_id, "
                f"(c + 7 * j) % 50 AS amount FROM range({CUSTOMERS}) a(c), range(4) b(j) WHERE j < c % 4")
    con.execute("CREATE TABLE items AS SELECT CAST(o.order_id AS INTEGER) AS order_id, 1 AS qty FROM orders o")
    if shared:  # customer 2 holds order '010', which the items' integer key 10 (customer 1's order) also equals
        con.execute("INSERT INTO orders VALUES ('010', 2, 5)")
    con.close()


@pytest.mark.parametrize("shared", [False, True])
def test_a_foreign_key_equal_to_keys_of_several_units_is_refused(tmp_path, shared):
    path = str(tmp_path / "shop.duckdb")
    _typed_shop(path, shared)
    check = duckdb.connect(path, read_only=True)
    units = check.execute("SELECT COUNT(DISTINCT o.customer_id) FROM items i JOIN orders o ON i.order_id = o.order_id "
                          "WHERE i.order_id = 10").fetchone()[0]
    check.close()
    assert units == (2 if shared else 1)  # the scan's own join gives item 10 two units
    conn = dpsql.connect(path, catalog=CATALOG, state=str(tmp_path / "state"), epsilon=1.0)
    cur = conn.cursor()
    for sql in ("SELECT COUNT(*) FROM items",
                "SELECT COUNT(*) FROM items i JOIN orders o USING (order_id)"):
        spent = conn.budget.spent.rho
        if shared:
            with pytest.raises(dpsql.OperationalError, match="several privacy units hold"):
                cur.execute(sql)
            assert conn.budget.spent.rho == spent
        else:
            cur.execute(sql)
            assert conn.budget.spent.rho > spent
    conn.close()
