"""DB-API end to end: results with error bars, the ledger, free re-answers, refusals."""

import subprocess
from pathlib import Path
import sys

import duckdb
import pytest

import dpsql
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

ROWS = 30_000


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "people.duckdb"
    con = duckdb.connect(str(path))
    create_people_table(con, rows=ROWS)
    con.close()
    return str(path)


@pytest.fixture
def conn(database, tmp_path):
    c = dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, state=str(tmp_path / "state"), seed=7)
    yield c
    c.close()


def test_module_globals():
    assert dpsql.apilevel == "2.0"
    assert dpsql.paramstyle == "qmark"
    assert dpsql.threadsafety in (0, 1, 2, 3)
    for name in ("Warning", "Error", "InterfaceError", "DatabaseError", "DataError", "OperationalError",
                 "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError"):
        assert issubclass(getattr(dpsql, name), Exception)
    assert issubclass(dpsql.ProgrammingError, dpsql.DatabaseError)
    assert issubclass(dpsql.DatabaseError, dpsql.Error)


def test_dp_query_returns_every_group_with_stderr_and_ci(conn):
    cur = conn.cursor()
    cur.execute("SELECT education, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY education")
    assert [d[0] for d in cur.description] == ["education", "n", "avg_income"]
    rows = cur.fetchall()
    assert [r[0] for r in rows] == ["None", "Primary", "Some HS", "HS", "Some college", "Bachelors", "Masters", "Doctorate"]
    assert cur.rowcount == 8
    stderr = cur.result.stderr
    assert len(stderr) == 8 and all(e[0] is None and e[1] > 0 and e[2] > 0 for e in stderr)
    for (lo, hi), row in zip((ci[1] for ci in cur.result.ci(0.95)), rows):
        assert lo < row[1] < hi
    assert cur.result.ci(0.99)[0][1][1] - cur.result.ci(0.99)[0][1][0] > cur.result.ci(0.9)[0][1][1] - cur.result.ci(0.9)[0][1][0]


def test_description_names_columns_as_postgresql_does(conn):
    cur = conn.cursor()
    cur.execute("SELECT region, COUNT(*), AVG(income) FROM people GROUP BY region")
    assert [d[0] for d in cur.description] == ["region", "count", "avg"]  # as psycopg over `dpsql serve` tells them
    assert cur.result.columns == ["region", "COUNT(*)", "AVG(income)"]  # the result (and the shell) keep the text
    cur.execute("SELECT COUNT(*) FROM (VALUES (1), (2)) AS t(x); SELECT 1 + 1")  # public SQL, one result each
    assert [d[0] for d in cur.description] == ["count"] and cur.fetchall() == [(2,)]
    assert cur.nextset() and [d[0] for d in cur.description] == ["?column?"]


def test_fetch_methods(conn):
    cur = conn.cursor()
    cur.execute("SELECT region, COUNT(*) FROM people GROUP BY region")
    first = cur.fetchone()
    two = cur.fetchmany(2)
    rest = cur.fetchall()
    assert first is not None and len(two) == 2 and len(rest) == 1
    assert cur.fetchone() is None
    cur.arraysize = 3
    cur.execute("SELECT region, COUNT(*) FROM people GROUP BY region")
    assert len(cur.fetchmany()) == 3
    assert cur.nextset() is None
    cur.close()
    with pytest.raises(dpsql.InterfaceError):
        cur.execute("SELECT COUNT(*) FROM people")


def test_answers_are_close_to_the_truth(conn, database):
    cur = conn.cursor()
    cur.execute("SELECT sex, COUNT(*) FROM people WHERE age BETWEEN 18 AND 64 GROUP BY sex")
    noisy = dict(cur.fetchall())
    se = cur.result.stderr[0][1]
    with duckdb.connect(database, read_only=True) as raw:  # the raw data (the test owns it)
        truth = dict(raw.execute("SELECT sex, COUNT(*) FROM people WHERE age BETWEEN 18 AND 64 GROUP BY sex").fetchall())
    for k in truth:
        assert abs(noisy[k] - truth[k]) < 6 * se


def test_reasking_and_span_are_free(conn):
    cur = conn.cursor()
    cur.execute("SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race")
    spent = conn.budget.spent.rho
    assert spent > 0
    first = cur.fetchall()
    cur.execute("SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race")
    assert cur.fetchall() == first
    cur.execute("SELECT race, COUNT(*) FROM people GROUP BY race")  # in the span of (sex, race)
    cur.execute("SELECT COUNT(*) FROM people WHERE sex = 'F' AND race IN ('Asian', 'Other')")
    assert conn.budget.spent.rho == spent
    assert cur.result.charged == 0


def test_ledger_is_durable_across_reconnects(database, tmp_path):
    state = str(tmp_path / "ledger")
    with dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, state=state, seed=1) as c:
        c.execute("SELECT marital, COUNT(*) FROM people GROUP BY marital")
        answer = c.cursor().execute("SELECT marital, COUNT(*) FROM people GROUP BY marital").fetchall()
        spent = c.budget.spent.rho
    with dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, state=state) as c:
        assert c.budget.spent.rho == pytest.approx(spent)
        assert c.budget.total.epsilon == pytest.approx(1.0)
        cur = c.cursor().execute("SELECT marital, COUNT(*) FROM people GROUP BY marital")
        assert cur.fetchall() == answer
        assert c.budget.spent.rho == pytest.approx(spent)
        assert len(c.ledger.charges()) == 1
    with pytest.raises(dpsql.ProgrammingError, match="already holds"):
        dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, epsilon=5.0, state=state)


BAD_QUERIES = [
    "SELECT age FROM people",
    "SELECT * FROM people",
    "SELECT COUNT(*) FROM people p JOIN people q ON p.age = q.age",
    "SELECT * FROM (SELECT * FROM people) t",
    "SELECT age FROM people UNION ALL SELECT COUNT(*) FROM people",
    "SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) t WHERE nosuch = 1",
    "SELECT MAX(age + 1) FROM people",
    "SELECT COUNT(DISTINCT age) FROM people",
    "SELECT COUNT(*) FROM people WHERE age = 150",
    "SELECT COUNT(*) FROM people WHERE sex = 'X'",
    "SELECT COUNT(*) FROM people WHERE person_id = 3",
    "SELECT COUNT(*) FROM nosuchtable",
    "SELECT COUNT(*) OVER () FROM people",
    "DELETE FROM people",
    "DROP TABLE people",
    "INSERT INTO people (age) VALUES (3)",
    "SELEC COUNT(*) FROM people",
    "SELECT COUNT(*) FROM people WHERE income = 52000",
]


@pytest.mark.parametrize("sql", BAD_QUERIES)
def test_errors_never_charge(conn, database, sql):
    before = conn.budget.spent.rho
    with pytest.raises(dpsql.Error):
        conn.cursor().execute(sql)
    assert conn.budget.spent.rho == before == 0
    with duckdb.connect(database, read_only=True) as raw:
        assert raw.execute("SELECT COUNT(*) FROM people").fetchone()[0] == ROWS


def test_budget_is_enforced(database, tmp_path):
    with dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, epsilon=0.25, query_epsilon=0.1,
                       state=str(tmp_path / "s"), seed=2) as c:
        cur = c.cursor()
        cur.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex")
        cur.execute("SELECT race, COUNT(*) FROM people GROUP BY race")
        spent = c.budget.spent.rho
        with pytest.raises(dpsql.BudgetExceededError, match="nothing was charged"):
            for col in ("education", "marital", "region", "age"):
                cur.execute(f"SELECT {col}, COUNT(*) FROM people GROUP BY {col}")
                spent = c.budget.spent.rho
        assert c.budget.spent.rho == spent <= c.budget.total.rho
        cur.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex")  # still free
        assert c.budget.spent.rho == spent


def test_query_share_is_settable(conn):
    cur = conn.cursor()
    cur.execute("SET dpsql.query_epsilon = 0.05")
    cur.execute("SELECT region, COUNT(*) FROM people GROUP BY region")
    assert conn.budget.spent.epsilon == pytest.approx(0.05, rel=1e-6)


def test_workload_is_planned_once_with_one_result_per_query(conn):
    cur = conn.cursor()
    cur.execute("""
        BEGIN WORKLOAD WITH (epsilon = 0.3);
        SELECT sex, COUNT(*) FROM people GROUP BY sex;
        SELECT COUNT(*) FROM people WHERE age < 18;
        SELECT education, AVG(income) FROM people GROUP BY education;
        END WORKLOAD;
    """)
    sizes = [len(cur.fetchall())]
    while cur.nextset():
        sizes.append(len(cur.fetchall()))
    assert sizes == [2, 1, 8]
    assert len(conn.ledger.charges()) == 1
    assert conn.budget.spent.epsilon == pytest.approx(0.3, rel=1e-6)


def test_workload_across_execute_calls_and_explain(conn):
    cur = conn.cursor()
    cur.execute("EXPLAIN BEGIN WORKLOAD WITH (epsilon = 0.3); SELECT sex, COUNT(*) FROM people GROUP BY sex; "
                "SELECT COUNT(*) FROM people WHERE age < 18; END WORKLOAD")
    text = "\n".join(r[0] for r in cur.fetchall())
    assert "expected RMSE" in text and "alternatives" in text
    cur.execute("EXPLAIN SELECT age, COUNT(*) FROM people GROUP BY age")
    assert conn.budget.spent.rho == 0
    cur.execute("BEGIN WORKLOAD")
    cur.execute("SELECT region, COUNT(*) FROM people GROUP BY region")
    cur.execute("END WORKLOAD")
    assert len(cur.fetchall()) == 4


def test_having_order_limit_on_noisy_values(conn):
    cur = conn.cursor()
    cur.execute("SELECT race, COUNT(*) AS n FROM people GROUP BY race HAVING COUNT(*) > 1000 ORDER BY n DESC LIMIT 2")
    rows = cur.fetchall()
    assert len(rows) <= 2 and rows == sorted(rows, key=lambda r: -r[1])
    assert all(r[1] > 1000 for r in rows)


def test_parameters_are_bound(conn):
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM people WHERE age >= ? AND sex = ?", [30, "F"])
    assert cur.fetchone()[0] > 0
    cur.executemany("SELECT COUNT(*) FROM people WHERE age >= ?", [[40], [50]])
    assert cur.fetchone()[0] > 0


def test_public_tables_pass_through(conn):
    cur = conn.cursor()
    cur.execute("CREATE TABLE notes (id INTEGER, txt VARCHAR)")
    cur.execute("INSERT INTO notes VALUES (1, 'a'), (2, 'b')")
    assert cur.execute("SELECT * FROM notes ORDER BY id").fetchall() == [(1, "a"), (2, "b")]
    cur.execute("DROP TABLE notes")
    assert conn.budget.spent.rho == 0


def test_pure_dp_mode_uses_epsilon(database, tmp_path):
    with dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, delta=0,
                       state=str(tmp_path / "pure"), seed=3) as c:
        cur = c.cursor().execute("SELECT sex, COUNT(*) FROM people GROUP BY sex")
        assert len(cur.fetchall()) == 2
        assert c.budget.spent.epsilon == pytest.approx(0.1)
        assert c.budget.spent.delta == 0
        assert c.session.budget_unit.noise == "laplace"


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM people WHERE age > 1 LIMIT age",
    "SELECT SUM(age) FROM people HAVING SUM(age) > 'abc'",
])
def test_errors_in_the_outer_query_never_charge(conn, sql):
    with pytest.raises(dpsql.Error):
        conn.cursor().execute(sql)
    assert conn.budget.spent.rho == 0


def test_accuracy_first_workload(conn):
    queries = ["SELECT sex, COUNT(*) FROM people GROUP BY sex", "SELECT COUNT(*) FROM people WHERE age < 18"]
    (plan,) = conn.workload(queries, max_rmse=40.0, explain=True)
    assert "fits in" in plan.plan and conn.budget.spent.rho == 0
    results = conn.workload(queries, max_rmse=40.0)
    spent = conn.budget.spent.rho
    assert 0 < spent < conn.budget.total.rho
    for r in results:
        assert all(e[-1] <= 40.0 * (1 + 1e-6) for e in r.stderr)
    with pytest.raises(dpsql.BudgetExceededError, match="impossible"):
        conn.cursor().execute("BEGIN WORKLOAD WITH (max_rmse = 0.5); SELECT race, COUNT(*) FROM people GROUP BY race; END WORKLOAD")
    assert conn.budget.spent.rho == spent


def test_accuracy_target_for_single_queries(conn):
    cur = conn.cursor()
    cur.execute("SET dpsql.max_rmse = 25")
    cur.execute("SELECT region, COUNT(*) FROM people GROUP BY region")
    assert max(e[1] for e in cur.result.stderr) <= 25 * (1 + 1e-6)
    assert max(e[1] for e in cur.result.stderr) >= 24  # no more budget than needed


def test_weights_shift_accuracy(conn):
    queries = ["SELECT sex, COUNT(*) FROM people GROUP BY sex", "SELECT race, COUNT(*) FROM people GROUP BY race"]
    def measurements(results):
        return [line for line in results[0].plan.splitlines() if "• measure" in line]

    even = measurements(conn.workload(queries, epsilon=0.2, explain=True))
    hinted = measurements(conn.workload(
        ["SELECT /*+ WEIGHT(100) */ sex, COUNT(*) FROM people GROUP BY sex", queries[1]], epsilon=0.2, explain=True))
    weighted = measurements(conn.workload(queries, epsilon=0.2, weights=[100, 1], explain=True))
    assert hinted == weighted != even


def test_results_as_dataframes_and_arrow_tables(conn):
    cur = conn.cursor()
    cur.execute("SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY sex")
    rows = cur.fetchall()
    cur.execute("SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY sex")  # free: same answer
    first = cur.fetchone()
    table = cur.fetch_arrow_table()  # the rest, as fetchall() would give it
    assert table.column_names == ["sex", "n", "avg_income"] and table.to_pylist() == [
        dict(zip(table.column_names, row)) for row in rows[1:]]
    cur.execute("SELECT sex, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY sex")
    frame = cur.fetchdf()
    assert list(frame.columns) == ["sex", "n", "avg_income"]
    assert [tuple(r) for r in frame.itertuples(index=False)] == rows and first == rows[0]
    assert str(frame["n"].dtype) == "float64"
    cur.execute("SELECT * FROM range(0) t(i)")  # no rows: the columns keep their types
    assert str(cur.fetch_arrow_table().schema.field("i").type) == "int64"
    cur.execute("CREATE TABLE notes (i INTEGER)")
    with pytest.raises(dpsql.ProgrammingError, match="no result set"):
        cur.fetchdf()


def test_fetchdf_says_how_to_get_pandas(conn, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    cur = conn.cursor().execute("SELECT 1 AS one")
    with pytest.raises(ImportError, match="pip install pandas"):
        cur.fetchdf()


def test_a_missing_database_is_an_error_not_a_new_file(tmp_path):
    missing = tmp_path / "nope.duckdb"
    with pytest.raises(dpsql.OperationalError, match="does not exist"):
        dpsql.connect(str(missing), catalog=PEOPLE_CATALOG_TOML)
    assert not missing.exists()
    with dpsql.connect(":memory:", catalog=PEOPLE_CATALOG_TOML) as conn:  # in memory: allowed
        assert conn.cursor().execute("SELECT 1").fetchall() == [(1,)]


def test_file_databases_open_read_only_so_many_can_connect(database, tmp_path):
    state = str(tmp_path / "state")
    reader = "import dpsql; dpsql.connect({!r}, catalog={!r}, state={!r}).close()".format(
        database, PEOPLE_CATALOG_TOML, state)
    with dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, state=state) as first, \
            dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, state=state) as second, \
            duckdb.connect(database, read_only=True) as raw:
        subprocess.run([sys.executable, "-c", reader], check=True, timeout=120)  # another process, meanwhile
        assert raw.execute("SELECT COUNT(*) FROM people").fetchone()[0] == ROWS
        assert first.budget.total.rho == second.budget.total.rho
    with dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, state=state, read_only=False) as owner:
        assert owner.cursor().execute("SELECT 1").fetchall() == [(1,)]
    with dpsql.connect(Path(database), catalog=PEOPLE_CATALOG_TOML, state=state) as by_path:  # a path object
        assert by_path.cursor().execute("SELECT 1").fetchall() == [(1,)]
    with pytest.raises(dpsql.ProgrammingError, match="must be a path"):
        dpsql.connect(3)


def test_import_dpsql_gives_synth():
    check = "import dpsql; assert dpsql.releases.synth.synthesize.__module__ == 'dpsql.releases.synth'"
    subprocess.run([sys.executable, "-c", check], check=True, timeout=120)  # a fresh interpreter


def test_stderr_columns_and_budget_as_sql(conn):
    cur = conn.cursor()
    cur.execute("SET dpsql.stderr = on")
    cur.execute("SELECT sex, COUNT(*) AS n, AVG(income) AS mean FROM people GROUP BY sex")
    assert [d[0] for d in cur.description] == ["sex", "n", "n_stderr", "mean", "mean_stderr"]
    row, errors = cur.fetchone(), cur.result.stderr[0]
    assert row[2] == errors[1] and row[4] == errors[3] and row[2] > 0  # the bars, as columns
    cur.execute("SHOW dpsql.budget")
    budget = {r[0]: r[1:] for r in cur.fetchall()}
    assert budget["spent"][2] == pytest.approx(conn.budget.spent.rho) and budget["last_charge"][2] > 0
    cur.execute("SHOW dpsql.stderr")
    assert cur.fetchall() == [("on",)]
    with pytest.raises(dpsql.ProgrammingError, match="on or off"):
        cur.execute("SET dpsql.stderr = maybe")


def test_connections_and_cursors_are_context_managers(database, tmp_path):
    with dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, state=str(tmp_path / "s")) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) AS n FROM people")
            assert cur.fetchone()[0] > 0
        with pytest.raises(dpsql.InterfaceError, match="cursor is closed"):
            cur.execute("SELECT 1")
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection stays open after its cursor
    with pytest.raises(dpsql.InterfaceError, match="connection is closed"):
        conn.cursor()
