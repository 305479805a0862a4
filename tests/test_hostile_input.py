"""Hostile input through the DB-API: generated, sqlglot-built and mutated SQL.

For every input: the engine either answers or raises a dpsql error (never any
other exception), an error never charges the ledger, no error message carries a
raw protected value (the table holds planted secrets), and the protected table
is intact afterwards. The default run tries a few hundred inputs; the `slow`
run tries 10,000.
"""

import random

import duckdb
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import dpsql

SECRET_TEXT = "S3CR3T-Zq9"
SECRET_NUMBERS = ("731.0625", "8812.3125")
COLUMNS = ["age", "sex", "income", "secret", "nosuch", "AGE", '"age"', "p.age", "1", "NULL"]
TABLES = ["people", "people p", "public_notes", "nosuch", "(SELECT * FROM people)", "people, public_notes",
          "read_csv('x.csv')", "main.people", '"people"']
CATALOG = {"tables": {"people": {"columns": {
    "age": {"type": "integer", "min": 0, "max": 99},
    "sex": {"type": "categorical", "values": ["F", "M"]},
    "income": {"type": "numeric", "min": 0, "max": 10000, "bins": 10},
}}}}


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT (i % 100)::INT AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, "
                f"CASE WHEN i = 7 THEN {SECRET_NUMBERS[0]} WHEN i = 9 THEN {SECRET_NUMBERS[1]} ELSE i * 3.0 END AS income, "
                f"'{SECRET_TEXT}' || i AS secret FROM range(500) t(i)")
    con.execute("CREATE TABLE public_notes AS SELECT 1 AS id, 'hello' AS txt")
    c = dpsql.connect(con=con, catalog=CATALOG, epsilon=1e6, query_epsilon=1.0, seed=0)
    yield c


def _checksum(conn):
    return conn.session.con.execute("SELECT COUNT(*), SUM(hash(age, sex, income, secret)) FROM people").fetchone()


def _reset(session):
    """Each input starts from the same session state (no open workload, default settings)."""
    session._workload, session._pending = None, []
    session.max_rmse, session.objective = None, "total"
    session.query_share = session._share(1.0, None)


def _check(conn, sql):
    _reset(conn.session)
    before = conn.budget.spent.rho
    checksum = _checksum(conn)
    try:
        conn.cursor().execute(sql)
    except dpsql.Error as e:
        message = str(e)
        assert SECRET_TEXT not in message and not any(n in message for n in SECRET_NUMBERS), message
        assert conn.budget.spent.rho == before, f"an error charged: {sql!r}"
    assert _checksum(conn) == checksum, f"protected table changed by {sql!r}"


literals = st.one_of(
    st.integers(-1000, 1000).map(str), st.sampled_from(["'F'", "'M'", "'X'", "NULL", "TRUE", "1e400", "''''", "-0.5"]),
    st.text(alphabet="ab'\";-()*", max_size=6).map(lambda s: "'" + s.replace("'", "''") + "'"),
)
ops = st.sampled_from(["=", "<>", "<", "<=", ">", ">=", "LIKE", "IN", "BETWEEN", "IS"])


@st.composite
def predicate(draw, depth=0):
    if depth < 2 and draw(st.booleans()):
        joiner = draw(st.sampled_from(["AND", "OR"]))
        return f"({draw(predicate(depth + 1))} {joiner} {draw(predicate(depth + 1))})"
    col, op = draw(st.sampled_from(COLUMNS)), draw(ops)
    if op == "IN":
        return f"{col} IN ({', '.join(draw(st.lists(literals, min_size=1, max_size=3)))})"
    if op == "BETWEEN":
        return f"{col} BETWEEN {draw(literals)} AND {draw(literals)}"
    if op == "IS":
        return f"{col} IS {draw(st.sampled_from(['NULL', 'NOT NULL']))}"
    return f"{draw(st.sampled_from(['NOT ', '']))}{col} {op} {draw(literals)}"


@st.composite
def select(draw):
    aggs = st.sampled_from(["COUNT(*)", "COUNT(age)", "SUM(income)", "AVG(age)", "MAX(age)", "COUNT(DISTINCT sex)",
                            "SUM(CASE WHEN age > 30 THEN 1 END)", "COUNT(*) FILTER (WHERE sex = 'F')", "*",
                            "secret", "age", "SUM(secret)", "AVG(income) * 2", "COUNT(*) OVER ()"])
    items = draw(st.lists(st.one_of(aggs, st.sampled_from(COLUMNS)), min_size=1, max_size=3))
    sql = f"SELECT {', '.join(items)} FROM {draw(st.sampled_from(TABLES))}"
    if draw(st.booleans()):
        sql += f" WHERE {draw(predicate())}"
    if draw(st.booleans()):
        sql += f" GROUP BY {', '.join(draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=2)))}"
    if draw(st.booleans()):
        sql += draw(st.sampled_from([" HAVING COUNT(*) > 3", " ORDER BY 1", " LIMIT 2", " LIMIT age", " ORDER BY 9"]))
    return sql


HOSTILE = [
    "DROP TABLE people", "DELETE FROM people", "UPDATE people SET age = 1", "INSERT INTO people VALUES (1, 'F', 1, 'x')",
    "ALTER TABLE people ADD COLUMN x INT", "CREATE VIEW v AS SELECT * FROM people", "COPY people TO 'out.csv'",
    "ATTACH ':memory:' AS other", "PRAGMA table_info('people')", "SELECT * FROM query('SELECT * FROM people')",
    "SELECT * FROM query_table('people')", "EXPORT DATABASE 'dir'", "SUMMARIZE people", "DESCRIBE people",
    "SELECT COUNT(*) FROM people; DROP TABLE people", "SELECT 1; SELECT secret FROM people",
    "WITH x AS (SELECT * FROM people) SELECT COUNT(*) FROM x", "SELECT COUNT(*) FROM people UNION SELECT 1",
    "SET dpsql.query_epsilon = -1", "SET dpsql.query_epsilon = 1e999", "BEGIN WORKLOAD WITH (epsilon = 0)",
    "END WORKLOAD", "EXPLAIN SELECT secret FROM people", "SELECT COUNT(*) FROM people WHERE secret = 'a'",
    "SELECT COUNT(*) FROM people /* unterminated", "SELECT 'unterminated FROM people", "\x00", "",
    "SELECT COUNT(*) FROM people WHERE age = (SELECT MAX(age) FROM people)", "SET dpsql.max_rmse = 0.000001",
    "BEGIN WORKLOAD; SELECT COUNT(*) FROM people; END WORKLOAD; END WORKLOAD",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_known_attacks(conn, sql):
    _check(conn, sql)


def _sqlglot_variants(sql: str, rng: random.Random) -> list[str]:
    """The same statement re-rendered by sqlglot in other dialects, and with its AST perturbed."""
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except Exception:
        return []
    out = []
    for dialect in ("postgres", "mysql", "spark", "bigquery", "sqlite"):
        try:
            out.append(tree.sql(dialect=dialect))
        except Exception:
            pass
    nodes = [n for n in tree.walk() if isinstance(n, (exp.Column, exp.Literal))]
    if nodes:
        node = rng.choice(nodes)
        replacement = rng.choice([exp.column("secret"), exp.Literal.number(10**6), exp.Star(), exp.null()])
        node.replace(replacement)
        out.append(tree.sql())
    return out


def _mutations(sql: str, rng: random.Random, n: int) -> list[str]:
    alphabet = "'\";()*,.=<>-/ \n\tSELECTFROMWHERpeol0123456789"
    out = []
    for _ in range(n):
        chars = list(sql)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(chars) + 1)
            op = rng.random()
            if op < 0.4 and chars:
                del chars[min(i, len(chars) - 1)]
            elif op < 0.8:
                chars.insert(i, rng.choice(alphabet))
            elif chars:
                chars[min(i, len(chars) - 1)] = rng.choice(alphabet)
        out.append("".join(chars))
    return out


def _run_generated(conn, count):
    rng = random.Random(1)
    done = 0

    @settings(max_examples=max(count // 12, 1), deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(select())
    def run(sql):
        nonlocal done
        for candidate in [sql, *_sqlglot_variants(sql, rng), *_mutations(sql, rng, 5)]:
            _check(conn, candidate)
            done += 1

    run()
    return done


def test_generated_and_mutated_inputs(conn):
    assert _run_generated(conn, 400) >= 300


@pytest.mark.slow
def test_ten_thousand_inputs(conn):
    assert _run_generated(conn, 12_000) >= 10_000
