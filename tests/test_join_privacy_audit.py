"""Privacy audits of joins of protected tables (`dpsql.tables.joined`): empirical ε on neighbouring shops.

The neighbours differ in ONE unit's rows in EVERY joined table: D' adds a customer (its row three times),
its 40 orders (each twice) and 15 items per order (each twice), so the unbounded join gives it thousands
of rows where the bound K keeps K. By default (seconds) the join is scanned on D and D' as dpsql scans it
(the ledger's key, the bound), planned as dpsql plans it, and its released cell drawn 100,000 times with
the plan's calibrated noise: the empirical ε stays below the budget's, and (power check) the same noise on
the unbounded join's shift is flagged. The `slow` audit runs the join end to end through the DB-API, a
fresh ledger per run, and its power check breaks the bound (the planner told one row per unit).
"""

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.backends import DuckDBBackend
from dpsql.sql.compiler import compile_query
from dpsql.tables.catalog import Catalog
from dpsql.tables.joined import JoinedTable
from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.measurement import exact_answer, release
from mechanisms.noise import RandomSource, discrete_gaussian_vector
from mechanisms.workload import Workload
from planner.planner import plan_workload
from tests.privacy_audit import audit
from tests.test_privacy_audit import DELTA, TRIALS, _memoized_planning
from tests.test_protected_joins import CATALOG, _shop

HOSTILE = 5000  # the unit D' adds (no customer of the shop has this id)
KEY = "audit-ledger-key"  # the ledger's secret bounding key: the same for both neighbours
JOINS = {  # query -> its bound K (the product of the tables' bounds: customers 1, orders 4, items 6)
    "SELECT c.region, COUNT(*) FROM items i JOIN orders o USING (order_id) JOIN customers c USING (customer_id) "
    "GROUP BY c.region": 24,
    "SELECT c.region, COUNT(*) FROM customers c LEFT JOIN orders o ON c.customer_id = o.customer_id "
    "GROUP BY c.region": 4,
    "SELECT a.amount < 25, COUNT(*) FROM orders a JOIN orders b USING (customer_id) GROUP BY a.amount < 25": 16,
}


def add_hostile_unit(con: duckdb.DuckDBPyConnection) -> None:
    """One customer's rows in every table, shaped to multiply in a join: its row three times, 40 orders each
    twice, 15 items per order each twice (one unit, 3 × 80 × 30 = 7,200 rows in the three-table join)."""
    con.execute(f"INSERT INTO customers SELECT {HOSTILE}, 'north' FROM range(3)")
    con.execute(f"INSERT INTO orders SELECT {HOSTILE} * 100 + j, {HOSTILE}, j % 50 FROM range(40) a(j), range(2)")
    con.execute(f"INSERT INTO items SELECT {HOSTILE} * 100 + j, 1 + q % 5 FROM range(40) a(j), range(15) b(q), "
                "range(2)")


def shop(neighbour: int) -> duckdb.DuckDBPyConnection:
    """The shop D (the first 300 customers of `tests.test_protected_joins`' shop, their orders and items),
    or with `neighbour` D' = D plus the hostile unit."""
    con = duckdb.connect(config={"threads": 1})
    _shop(con)
    con.execute("DELETE FROM customers WHERE customer_id >= 300")
    con.execute("DELETE FROM orders WHERE customer_id >= 300")
    con.execute("DELETE FROM items WHERE order_id >= 3000")
    if neighbour:
        add_hostile_unit(con)
    return con


def neighbours() -> list[duckdb.DuckDBPyConnection]:
    return [shop(0), shop(1)]


def test_the_hostile_unit_multiplies_rows_in_the_unbounded_join():
    d, d_prime = neighbours()
    join = "SELECT COUNT(*) FROM items i JOIN orders o USING (order_id) JOIN customers c USING (customer_id)"
    assert d_prime.execute(join).fetchone()[0] - d.execute(join).fetchone()[0] == 3 * 80 * 30


@pytest.mark.parametrize("sql", list(JOINS))
def test_join_release_audit(sql):
    """The planned release of a join's count, its true cells from dpsql's bounded scan of D and D'."""
    catalog = Catalog.from_toml(CATALOG)
    table = compile_query(sql, catalog).table
    assert isinstance(table, JoinedTable) and table.contribution == JOINS[sql]
    rho = 0.125
    plan = plan_workload(Workload(table.domain, compile_query(sql, catalog).blocks), rho, "gaussian", DELTA,
                         contribution=table.contribution)
    (measurement,) = plan.measurements
    assert measurement.share == pytest.approx(rho)
    cons = neighbours()
    answers = []
    for con in cons:
        counts = DuckDBBackend(con).marginals(table, [measurement.clique], KEY)[measurement.clique]
        answers.append(exact_answer(counts, measurement.query(table.domain), "gaussian"))
    before, after = (np.array(a.units) for a in answers)
    moved = after - before
    assert np.sqrt((moved.astype(float) ** 2).sum()) <= table.contribution  # the L2 shift the noise is calibrated to
    assert np.abs(moved).max() == table.contribution  # the hostile unit fills its bound: the audit is tight
    _, cal = release(answers[0], "gaussian", measurement.share, RandomSource(0), measurement.contribution)
    cell = int(np.abs(moved).argmax())

    def released(shift):
        def run(neighbour, seed):
            return before[cell] + neighbour * shift + discrete_gaussian_vector(cal.scale, TRIALS, RandomSource(seed))
        return run

    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(released(int(moved[cell])), DELTA) < claimed
    # power check: the same noise on the shift of the join without the bound is flagged
    assert audit(released(unbounded_shift(table, cons)), DELTA) > claimed


def unbounded_shift(table: JoinedTable, cons: list[duckdb.DuckDBPyConnection]) -> int:
    """How much the hostile unit moves the join's total count where each unit kept all its joined rows."""
    d, d_prime = (con.execute(f"SELECT COUNT(*) FROM ({table.unit_rows_sql()})").fetchone()[0] for con in cons)
    return d_prime - d


def join_through_the_dbapi(sql: str, rho: float, trials: int, told_one_row_per_unit: bool = False):
    """The released 'north' cell of `sql` run through `dpsql.connect`, a fresh ledger (fresh bounding key) per
    run. `told_one_row_per_unit` breaks the join's bound: the planner calibrates to one row per unit while
    the scan keeps K (a power check)."""
    def run(neighbour, seed):
        con = shop(neighbour)
        out = np.empty(trials)
        for i in range(trials):
            with dpsql.connect(con=con, catalog=CATALOG, rho=rho, seed=seed * trials + i) as conn:
                out[i] = dict(conn.workload([sql], rho=rho)[0].rows)["north"]
                assert conn.budget.spent.rho == pytest.approx(rho)  # the whole budget, charged once
        con.close()
        return out

    if not told_one_row_per_unit:
        return run

    def broken(neighbour, seed):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(JoinedTable, "contribution", property(lambda self: 1))
            return run(neighbour, seed)

    return broken


@pytest.mark.slow
def test_join_through_the_dbapi_audit(monkeypatch):
    """SQL compiled to the three-table join, bounded by the ledger's key, planned, measured on DuckDB and
    assembled: end to end on the hostile neighbours."""
    _memoized_planning(monkeypatch)
    sql, rho = next(iter(JOINS)), 0.05
    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(join_through_the_dbapi(sql, rho, 250), DELTA) < claimed
    assert audit(join_through_the_dbapi(sql, rho, 100, told_one_row_per_unit=True), DELTA) > claimed
