"""The DuckDB extension: DP answers from plain DuckDB SQL, sharing the DB-API's ledger."""

import math

import duckdb
import pytest

import dpsql
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.interfaces.extension import relation_sql
from mechanisms.accounting import epsilon_delta_to_zcdp
from planner.noise_choice import laplace_share

ROWS = 20_000


@pytest.fixture
def database(tmp_path):
    path = str(tmp_path / "people.duckdb")
    con = duckdb.connect(path)
    create_people_table(con, rows=ROWS)
    con.close()
    return path


@pytest.fixture
def con(database):
    c = duckdb.connect(database)
    yield c
    c.close()


def spent(con) -> float:
    return con.execute("SELECT rho FROM dp_budget() WHERE budget = 'spent'").fetchall()[0][0]


def test_dp_query_returns_answer_and_stderr_columns(con):
    dp = dpsql.register(con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, seed=5)
    cur = con.execute("SELECT * FROM dp_query('SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income "
                      "FROM people GROUP BY sex')")
    assert [d[0] for d in cur.description] == ["sex", "n", "n_stderr", "avg_income", "avg_income_stderr"]
    rows = cur.fetchall()
    truth = dict(con.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex").fetchall())
    for sex, n, se, avg, avg_se in rows:
        assert se > 0 and avg_se > 0 and abs(n - truth[sex]) < 6 * se
    assert math.isclose(spent(con), dp.session.query_share)  # one query's share, as the DB-API would spend


def test_repeats_are_free_and_plain_sql_composes(con):
    dpsql.register(con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, seed=5)
    first = con.execute("SELECT n FROM dp_query('SELECT region, COUNT(*) AS n FROM people GROUP BY region') "
                        "ORDER BY n DESC LIMIT 1").fetchall()[0]
    after_first = spent(con)
    again = con.sql("SELECT n FROM dp_query('SELECT region, COUNT(*) AS n FROM people GROUP BY region') "
                    "ORDER BY n DESC LIMIT 1").fetchall()  # the relation API binds twice: still free
    assert again == [first] and spent(con) == after_first
    by_param = con.execute("SELECT count(*) FROM dp_query(?)",
                           ["SELECT region, COUNT(*) FROM people GROUP BY region"]).fetchall()
    assert by_param == [(4,)] and spent(con) == after_first


def test_errors_surface_and_never_charge(con):
    dpsql.register(con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0)
    two = "SELECT sex, COUNT(*) FROM people GROUP BY sex; SELECT COUNT(*) FROM people"
    for bad in [f"dp_query('{two}')",
                f"dp_explain('{two}')",
                "dp_query('SELECT * FROM people')",
                "dp_query('SELECT COUNT(*) FROM people WHERE sex = ''X''')",
                "dp_query('BEGIN WORKLOAD')",
                f"dp_workload(['SELECT COUNT(*) FROM people; END WORKLOAD; {two}'], explain := true)",
                "dp_workload([])"]:
        with pytest.raises(duckdb.Error) as info:
            con.execute(f"SELECT * FROM {bad}")
        assert "Error" in str(info.value)
    assert spent(con) == 0
    # the session is left clean: no half-open workload swallows the next query
    assert con.execute("SELECT count(*) FROM dp_query('SELECT COUNT(*) FROM people')").fetchall() == [(1,)]


def test_explain_workload_budget_and_ledger(con):
    dpsql.register(con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, seed=2)
    plan = [r[0] for r in con.execute("SELECT plan FROM dp_explain('SELECT age, COUNT(*) FROM people "
                                      "GROUP BY age')").fetchall()]
    assert any("Plan:" in line for line in plan) and spent(con) == 0
    queries = ["SELECT marital, COUNT(*) FROM people GROUP BY marital",
               "SELECT COUNT(*) FROM people WHERE marital IN ('Married', 'Widowed')"]
    plan = con.execute("SELECT plan FROM dp_workload(?, epsilon := 0.3, explain := true)", [queries]).fetchall()
    assert any("Plan:" in line for (line,) in plan) and spent(con) == 0
    summary = con.execute("SELECT * FROM dp_workload(?, epsilon := 0.3)", [queries]).fetchall()
    assert summary == [(1, queries[0], 4), (2, queries[1], 1)]
    after = spent(con)
    assert after > 0
    con.execute("SELECT * FROM dp_query(?)", [queries[1]]).fetchall()
    assert spent(con) == after  # answered from the workload's measurements
    budget = dict((r[0], r[1]) for r in con.execute("SELECT budget, epsilon FROM dp_budget()").fetchall())
    assert math.isclose(budget["total"], 1.0) and budget["remaining"] < 1.0
    ledger = con.execute("SELECT seq, epsilon, statement FROM dp_ledger()").fetchall()
    assert len(ledger) == 1 and ledger[0][2].startswith("BEGIN WORKLOAD")
    # The share of ε = 0.3 is spent as the discrete Gaussian (shown at the ledger's δ) or as the discrete
    # Laplace taking the same share of the budget (shown as its own ε of pure DP), whichever errs less.
    delta = con.execute("SELECT delta FROM dp_budget() WHERE budget = 'total'").fetchone()[0]
    laplace = laplace_share(epsilon_delta_to_zcdp(0.3, delta), epsilon_delta_to_zcdp(1.0, delta), delta)
    assert any(math.isclose(ledger[0][1], e, rel_tol=1e-6) for e in (0.3, laplace))


def test_the_ledger_is_shared_with_the_dbapi(database):
    con = duckdb.connect(database)
    dp = dpsql.register(con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0)
    con.execute("SELECT * FROM dp_query('SELECT sex, COUNT(*) FROM people GROUP BY sex')").fetchall()
    through_extension = dp.budget.spent.rho
    assert through_extension > 0
    dp.close()
    con.close()
    with dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML) as conn:
        assert math.isclose(conn.budget.spent.rho, through_extension)
        conn.execute("SELECT region, COUNT(*) FROM people GROUP BY region")
        both = conn.budget.spent.rho
    con = duckdb.connect(database)
    dpsql.register(con, catalog=PEOPLE_CATALOG_TOML)
    assert math.isclose(spent(con), both)
    con.close()


def test_trust_boundary(con, database):
    """The raw connection still reads raw rows; a dpsql connection does not."""
    dpsql.register(con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0)
    assert con.execute("SELECT count(*) FROM people").fetchall() == [(ROWS,)]
    with dpsql.connect(con=con.cursor(), catalog=PEOPLE_CATALOG_TOML, epsilon=1.0) as conn:
        with pytest.raises(dpsql.ProgrammingError):
            conn.execute("SELECT * FROM people")


def test_register_twice_replaces_the_functions(con):
    dpsql.register(con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0)
    dpsql.register(con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0)
    assert con.execute("SELECT count(*) FROM dp_budget()").fetchall() == [(3,)]


def test_relation_sql_round_trips_values():
    sql = relation_sql(["a", "b", "c"], ["VARCHAR", "DOUBLE", "BIGINT"],
                       [["it's", float("nan"), None], [None, 1e-300, 2**40]])
    rows = duckdb.sql(sql).fetchall()
    assert rows[0][0] == "it's" and math.isnan(rows[0][1]) and rows[0][2] is None
    assert rows[1] == (None, 1e-300, 2**40)
    empty = duckdb.sql(relation_sql(["x"], ["DOUBLE"], []))
    assert empty.fetchall() == [] and empty.columns == ["x"]
