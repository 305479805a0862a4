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


UNITS_AS_TYPED = """
[tables.people]
privacy_unit = "pid"
max_rows_per_unit = 1
[tables.people.columns]
region = { type = "categorical", values = ["north", "south"] }

[tables.labs]
privacy_unit = "pid"
max_rows_per_unit = 3
[tables.labs.columns]
value = { type = "integer", min = 0, max = 9 }
"""


def test_units_of_different_types_pair_only_when_equal_as_text(tmp_path):
    """`people` holds its units as text ('1' and '01' are two people), `labs` as integers: compared with `=`
    both text units pair with lab person 1 (the join casts), so one lab person's rows would reach two units'
    joined rows; compared as text, lab person 1 pairs with '1' alone."""
    path = str(tmp_path / "units.duckdb")
    con = duckdb.connect(path)
    con.execute("CREATE TABLE people AS SELECT * FROM (VALUES ('1', 'north'), ('01', 'south'), ('2', 'north')) "
                "t(pid, region)")
    con.execute("CREATE TABLE labs AS SELECT * FROM (VALUES (1, 3), (1, 4), (1, 5), (2, 1)) t(pid, value)")
    con.close()
    conn = dpsql.connect(path, catalog=UNITS_AS_TYPED, state=str(tmp_path / "state"), epsilon=1.0)
    table = conn.session.compile("SELECT COUNT(*) FROM people p JOIN labs l USING (pid)").table
    check = duckdb.connect(path, read_only=True)
    units = dict(check.execute(f"SELECT __dpsql_unit, COUNT(*) FROM ({table.unit_rows_sql()}) GROUP BY 1").fetchall())
    check.close()
    assert units == {"1": 3, "2": 1}  # never '01': it is another person than lab person 1
    conn.close()
