"""Subqueries, CTEs and UNION of DP selects (issue 29 items 1-2): flattening into the one DP query a
statement means (`dpsql.sql.flatten`), and post-processing of DP answers after their charge
(`dpsql.answers.post_processing`)."""

import re

import duckdb
import pytest
import sqlglot

import dpsql
import dpsql.answers.post_processing
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.sql.flatten import Composite, flatten

PROTECTED = {"people": "people"}


def flat(sql: str) -> str:
    tree = flatten(sqlglot.parse_one(sql, read="duckdb"), PROTECTED)
    assert not isinstance(tree, Composite), sql
    return tree.sql(dialect="duckdb")


def composite(sql: str) -> Composite:
    shape = flatten(sqlglot.parse_one(sql, read="duckdb"), PROTECTED)
    assert isinstance(shape, Composite), sql
    return shape


# --- the passes, on trees ------------------------------------------------------------------------
@pytest.mark.parametrize("sql, expected", [
    ("SELECT sex, COUNT(*) FROM (SELECT sex FROM people WHERE age > 30) t GROUP BY sex",
     "SELECT sex, COUNT(*) FROM people WHERE age > 30 GROUP BY sex"),
    ("WITH adults AS (SELECT * FROM people WHERE age >= 18) SELECT region, AVG(income) FROM adults "
     "WHERE sex = 'F' GROUP BY region",
     "SELECT region, AVG(income) FROM people WHERE age >= 18 AND sex = 'F' GROUP BY region"),
    # three levels, renamed and qualified columns: output names are kept
    ("SELECT t.g, COUNT(*) AS n FROM (SELECT sex AS g, age FROM (SELECT * FROM people WHERE age > 10) u "
     "WHERE age < 50) AS t GROUP BY t.g",
     'SELECT sex AS "g", COUNT(*) AS n FROM people WHERE age > 10 AND age < 50 GROUP BY sex'),
    # a CTE reading an earlier one, and the table's own alias inside
    ("WITH a AS (SELECT * FROM people p WHERE p.age > 20), b AS (SELECT age, income FROM a WHERE age < 60) "
     "SELECT SUM(income) FROM b",
     "SELECT SUM(income) FROM people AS p WHERE p.age > 20 AND age < 60"),
    # a CTE's column names, and a WITH inside a subquery shadowing an outer one
    ("WITH c(g, a) AS (SELECT sex, age FROM people) SELECT x.g, COUNT(*) FROM c AS x WHERE a > 3 GROUP BY x.g",
     'SELECT sex AS "g", COUNT(*) FROM people WHERE age > 3 GROUP BY sex'),
    ("WITH a AS (SELECT * FROM people WHERE age > 1) SELECT COUNT(*) FROM "
     "(WITH a AS (SELECT * FROM people WHERE age > 2) SELECT * FROM a) t",
     "SELECT COUNT(*) FROM people WHERE age > 2"),
    # a derived column is inlined where it is used (whether it then compiles is the compiler's business)
    ("SELECT b, COUNT(*) FROM (SELECT age / 10 AS b FROM people) GROUP BY b",
     'SELECT (age / 10) AS "b", COUNT(*) FROM people GROUP BY (age / 10)'),
    ("SELECT COUNT(*) FROM (SELECT * EXCLUDE (income) FROM people) x WHERE x.sex = 'F'",
     "SELECT COUNT(*) FROM people WHERE people.sex = 'F'"),
    # ORDER BY an output name stays a reference to the output
    ("SELECT s, COUNT(*) AS n FROM (SELECT sex AS s FROM people) GROUP BY s ORDER BY n DESC, s",
     'SELECT sex AS "s", COUNT(*) AS n FROM people GROUP BY sex ORDER BY n DESC, s'),
    # counting distinct rows of units (and groups) is counting distinct units
    ("SELECT COUNT(*) FROM (SELECT DISTINCT person_id FROM people WHERE age > 3) t",
     "SELECT COUNT(DISTINCT person_id) FROM people WHERE age > 3"),
    ("SELECT sex, COUNT(*) AS n FROM (SELECT DISTINCT person_id, sex FROM people) GROUP BY 1 ORDER BY n",
     "SELECT sex, COUNT(DISTINCT person_id) AS n FROM people GROUP BY 1 ORDER BY n"),
    ("SELECT COUNT(*) FROM (SELECT * FROM people) AS t(a, b)", None),
])
def test_row_level_subqueries_and_ctes_flatten_into_one_query(sql, expected):
    if expected is None:
        with pytest.raises(dpsql.NotSupportedError, match="name its columns"):
            flat(sql)
        return
    assert flat(sql) == sqlglot.parse_one(expected, read="duckdb").sql(dialect="duckdb")


def test_clear_refusals_while_flattening():
    with pytest.raises(dpsql.ProgrammingError, match="'t.nosuch' is not a column of the subquery t"):
        flat("SELECT COUNT(*) FROM (SELECT age FROM people) t WHERE t.nosuch = 1")
    with pytest.raises(dpsql.NotSupportedError, match="WITH RECURSIVE"):
        flat("WITH RECURSIVE r AS (SELECT age FROM people UNION ALL SELECT age FROM r) SELECT COUNT(*) FROM r")
    with pytest.raises(dpsql.NotSupportedError, match="read-only"):
        flatten(sqlglot.parse_one("DELETE FROM people", read="duckdb"), PROTECTED)


def test_aggregate_subqueries_and_unions_are_dp_parts():
    shape = composite("SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM (SELECT * FROM people WHERE age > 3) "
                      "GROUP BY sex) t")
    assert [p.sql() for p in shape.parts] == ["SELECT sex, COUNT(*) AS n FROM people WHERE age > 3 GROUP BY sex"]
    assert shape.outer.sql() == "SELECT AVG(n) FROM (SELECT * FROM __dpsql_part_0) AS t"
    union = composite("SELECT COUNT(*) FROM people UNION ALL (SELECT SUM(age) FROM people) UNION ALL "
                      "SELECT AVG(age) FROM (SELECT age FROM people WHERE sex = 'F')")
    assert union.union == "all" and union.outer is None and len(union.parts) == 3
    assert union.parts[2].sql() == "SELECT AVG(age) FROM people WHERE sex = 'F'"
    assert composite("SELECT COUNT(*) FROM people UNION SELECT SUM(age) FROM people").union == "distinct"
    pairs = composite("SELECT COUNT(*) FROM (SELECT DISTINCT person_id, sex FROM people) t")  # not one unit each
    assert pairs.parts[0].args.get("distinct") is not None  # left for the compiler to refuse
    ordered = composite("SELECT COUNT(*) AS n FROM people UNION ALL SELECT SUM(age) FROM people ORDER BY n")
    assert ordered.union is None and ordered.outer is not None  # ORDER BY over the union: SQL over the parts


# --- end to end --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "people.duckdb"
    con = duckdb.connect(str(path))
    create_people_table(con, rows=5_000)
    con.execute("CREATE TABLE regions AS SELECT * FROM (VALUES ('Northeast', 57), ('Midwest', 68), "
                "('South', 125), ('West', 78)) t(region, pop)")
    con.close()
    return str(path)


@pytest.fixture
def conn(database, tmp_path):
    c = dpsql.connect(database, catalog=PEOPLE_CATALOG_TOML, epsilon=5.0, state=str(tmp_path / "state"), seed=3)
    yield c
    c.close()


def run(conn, sql):
    cur = conn.cursor().execute(sql)
    return cur.fetchall(), cur.result


def test_a_flattened_query_is_the_query_it_means(conn):
    direct, first = run(conn, "SELECT sex, COUNT(*) FROM people WHERE age > 30 GROUP BY sex")
    assert first.charged > 0
    for sql in ("SELECT sex, COUNT(*) FROM (SELECT sex FROM people WHERE age > 30) t GROUP BY sex",
                "WITH older AS (SELECT * FROM people WHERE age > 30) SELECT sex, COUNT(*) FROM older GROUP BY sex",
                "SELECT s AS sex, COUNT(*) FROM (SELECT sex AS s, age FROM (SELECT * FROM people) a "
                "WHERE age > 30) b GROUP BY s"):
        rows, result = run(conn, sql)
        assert rows == direct and result.charged == 0  # the same measurement: free, the same answer


def test_a_derived_column_groups_as_its_expression(conn):
    rows, _ = run(conn, "SELECT b, COUNT(*) FROM (SELECT age // 10 AS b FROM people) GROUP BY b ORDER BY b")
    assert [r[0] for r in rows] == list(range(10))


def test_outer_query_over_dp_answers_is_post_processing(conn):
    counts, _ = run(conn, "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex")
    rows, result = run(conn, "SELECT AVG(n) AS mean FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) t")
    assert rows[0][0] == pytest.approx(sum(n for _, n in counts) / 2) and result.charged == 0
    assert result.stderr == [(None,)] and result.dp == [True]  # a derived value: no error bar claimed
    rows, result = run(conn, "WITH c AS (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) "
                             "SELECT sex, n FROM c WHERE n > 0 ORDER BY n DESC")
    assert rows == sorted(counts, key=lambda r: -r[1])
    assert all(e[0] is None and e[1] > 0 for e in result.stderr) and result.dp == [False, True]  # passed through


def test_post_processing_joins_public_tables(conn):
    rows, result = run(conn, "WITH c AS (SELECT region, COUNT(*) AS n FROM people GROUP BY region) "
                             "SELECT c.region, n / r.pop AS per FROM c JOIN regions r ON c.region = r.region "
                             "ORDER BY 1")
    assert [r[0] for r in rows] == ["Midwest", "Northeast", "South", "West"] and result.charged > 0
    assert result.columns == ["region", "per"]


def test_post_processing_runs_only_after_the_charge(conn, monkeypatch):
    seen = []
    original = dpsql.answers.post_processing.apply_outer

    def watched(outer, parts):
        seen.append(conn.budget.spent.rho)
        return original(outer, parts)

    monkeypatch.setattr(dpsql.answers.post_processing, "apply_outer", watched)
    run(conn, "SELECT MAX(n) FROM (SELECT region, COUNT(*) AS n FROM people GROUP BY region) t")
    assert len(seen) == 1 and seen[0] > 0


def test_errors_of_the_outer_query(conn):
    with pytest.raises(dpsql.ProgrammingError) as static:
        run(conn, "SELECT AVG(nosuch) FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) t")
    assert "nosuch" in str(static.value) and "Binder Error" not in str(static.value)
    assert conn.budget.spent.rho == 0  # refused on zeros, before any charge
    sql = "SELECT CAST(n * 1000 AS TINYINT) FROM (SELECT COUNT(*) AS n FROM people) t"
    with pytest.raises(dpsql.OperationalError) as noisy:
        run(conn, sql)
    spent = conn.budget.spent.rho
    assert spent > 0 and "did not fit the type" in str(noisy.value) and not re.search(r"\d", str(noisy.value))
    with pytest.raises(dpsql.OperationalError, match="did not fit the type"):
        run(conn, sql)  # asking again is free and fails the same way
    assert conn.budget.spent.rho == spent


def test_union_all_is_one_workload_answered_in_order(conn):
    sql = ("SELECT 'F' AS sex, AVG(age) AS mean FROM people WHERE sex = 'F' "
           "UNION ALL SELECT 'M', AVG(age) FROM people WHERE sex = 'M'")
    charges = len(conn.ledger.charges())
    rows, result = run(conn, sql)
    assert len(conn.ledger.charges()) == charges + 1 and result.charged > 0  # one plan, one charge
    assert result.columns == ["sex", "mean"] and [r[0] for r in rows] == ["F", "M"]
    assert all(e[0] is None and e[1] > 0 for e in result.stderr)
    for i, sex in enumerate("FM"):
        alone, again = run(conn, f"SELECT '{sex}' AS sex, AVG(age) AS mean FROM people WHERE sex = '{sex}'")
        assert alone == [rows[i]] and again.charged == 0


def test_union_distinct_drops_repeated_rows(conn):
    rows, result = run(conn, "SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM people")
    assert len(rows) == 1 and result.stderr[0][0] > 0


@pytest.mark.parametrize("sql, message", [
    ("SELECT sex, COUNT(*) FROM people GROUP BY sex UNION ALL SELECT COUNT(*) FROM people", "as many columns"),
    ("SELECT sex, COUNT(*) FROM people GROUP BY sex UNION ALL SELECT COUNT(*), COUNT(*) FROM people",
     "cast one of them"),
    ("SELECT sex FROM people GROUP BY sex UNION ALL SELECT COUNT(*) FROM people", "without an aggregate"),
    ("SELECT age FROM people UNION ALL SELECT COUNT(*) FROM people", "raw values"),
])
def test_bad_unions_are_refused_before_the_charge(conn, sql, message):
    with pytest.raises(dpsql.Error, match=message):
        run(conn, sql)
    assert conn.budget.spent.rho == 0


def test_a_union_with_public_rows_is_answered(conn):
    rows, result = run(conn, "SELECT 'all' AS k, COUNT(*) AS n FROM people UNION ALL SELECT region, pop FROM regions")
    assert len(rows) == 5 and rows[0][0] == "all" and result.columns == ["k", "n"]


def test_composites_in_workloads_describe_and_explain(conn):
    sql = "SELECT AVG(n) AS mean FROM (SELECT race, COUNT(*) AS n FROM people GROUP BY race) t"
    shape = conn.session.describe(sql)
    assert shape.columns == ["mean"] and shape.rows == [] and conn.budget.spent.rho == 0
    plan = conn.cursor().execute("EXPLAIN " + sql).fetchall()
    assert any("Total cost" in line[0] for line in plan)
    results = conn.session.execute(f"BEGIN WORKLOAD; {sql}; SELECT COUNT(*) FROM people UNION ALL "
                                   "SELECT SUM(age) FROM people; END WORKLOAD")
    assert [len(r.rows) for r in results] == [1, 2] and sum(r.charged for r in results) > 0


def test_public_subqueries_in_a_dp_query_are_inlined(conn):
    direct, _ = run(conn, "SELECT COUNT(*) FROM people WHERE region IN ('Midwest', 'South', 'West')")
    for sql in ("SELECT COUNT(*) FROM people WHERE region IN (SELECT region FROM regions WHERE pop > 60)",
                "SELECT COUNT(*) FROM people WHERE region NOT IN (SELECT region FROM regions WHERE pop < 60)",
                "SELECT COUNT(*) FROM people WHERE region IN (SELECT region FROM regions WHERE pop > 60) "
                "AND EXISTS (SELECT 1 FROM regions)"):
        rows, result = run(conn, sql)
        assert rows == direct and result.charged == 0  # the same query: free, the same answer
    rows, _ = run(conn, "SELECT COUNT(*) FROM people WHERE age >= (SELECT MIN(pop) FROM regions)")
    assert rows == run(conn, "SELECT COUNT(*) FROM people WHERE age >= 57")[0]
    spent = conn.budget.spent.rho
    for sql, message in [
        ("SELECT COUNT(*) FROM people WHERE age > (SELECT pop FROM regions)", "4 rows where one value"),
        ("SELECT COUNT(*) FROM people WHERE region IN (SELECT region FROM nosuch)", "cannot run: Table with name"),
        ("SELECT COUNT(*) FROM people WHERE age > (SELECT AVG(age) FROM people)", "ask the subquery on its own"),
    ]:
        with pytest.raises(dpsql.Error, match=message):
            run(conn, sql)
    assert conn.budget.spent.rho == spent


def test_stderr_columns_of_composites(conn):
    conn.cursor().execute("SET dpsql.stderr = on")
    sql = "SELECT COUNT(*) AS n FROM people UNION ALL SELECT COUNT(*) FROM people WHERE sex = 'F'"
    assert conn.session.describe(sql).columns == ["n", "n_stderr"]
    rows, result = run(conn, sql)
    assert result.columns == ["n", "n_stderr"] and all(r[1] > 0 for r in rows)
    rows, result = run(conn, "SELECT n, n / 2 AS half FROM (SELECT COUNT(*) AS n FROM people) t")
    assert result.columns == ["n", "n_stderr", "half", "half_stderr"] and rows[0][1] > 0 and rows[0][3] is None
