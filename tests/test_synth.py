"""`dpsql synth`: charge first, labels in the Parquet file, errors spend nothing."""

import argparse

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.errors import BudgetExceededError, NotSupportedError, ProgrammingError
from dpsql.releases.synth import add_parser, synthesize

CATALOG = """
[tables.t]
[tables.t.columns]
age  = { type = "integer", min = 20, max = 24 }
sex  = { type = "categorical", values = ["F", "M"] }
pay  = { type = "numeric", min = 0, max = 100, bins = 4, nullable = true }
"""


@pytest.fixture
def conn():
    con = duckdb.connect()
    rng = np.random.default_rng(0)
    n = 2000
    age = rng.integers(20, 25, n)
    sex = np.where(age > 22, "M", "F")
    pay = np.where(rng.random(n) < 0.1, np.nan, age * 3.0 + rng.integers(0, 10, n))
    con.register("source", {"age": age, "sex": sex, "pay": pay})
    con.execute(
        "CREATE TABLE t AS SELECT CAST(age AS INTEGER) AS age, sex, "
        "CASE WHEN isnan(pay) THEN NULL ELSE pay END AS pay FROM source"
    )
    con.unregister("source")
    connection = dpsql.connect(con=con, catalog=CATALOG, epsilon=4.0, delta=1e-9, seed=1)
    yield connection
    connection.close()


def test_synthesize_writes_then_charges_labelled_rows(conn, tmp_path):
    out = tmp_path / "t.parquet"
    before = conn.ledger.spent()
    seen = []
    report = synthesize(conn, "t", 1.0, out, degree=2, progress=seen.append)
    charges = conn.ledger.charges()
    assert charges[-1].cost == pytest.approx(report.charged.rho) and charges[-1].detail == "aim"
    assert len(conn.ledger.measurements("t", conn.session.catalog.get("t").signature())) == report.measurements
    assert conn.ledger.spent() - before == pytest.approx(report.charged.rho)
    assert seen[-1].fraction == 1.0
    rows = duckdb.sql(f"SELECT age, sex, pay FROM '{out}'").fetchall()
    assert len(rows) == report.rows and abs(report.rows - 2000) < 200
    assert {r[0] for r in rows} <= set(range(20, 25))
    assert {r[1] for r in rows} <= {"F", "M"}
    assert {r[2] for r in rows} <= {0.0, 25.0, 50.0, 75.0, None}
    types = duckdb.sql(f"DESCRIBE SELECT * FROM '{out}'").fetchall()
    assert [t[1] for t in types] == ["BIGINT", "VARCHAR", "DOUBLE"]
    # the measurements are stored: a query on a measured marginal is now free
    cur = conn.cursor()
    cur.execute("SELECT sex, COUNT(*) FROM t GROUP BY sex")
    assert cur.result.charged == 0.0


def test_errors_spend_nothing(conn, tmp_path):
    spent = conn.ledger.spent()
    with pytest.raises(ProgrammingError):
        synthesize(conn, "missing", 1.0, tmp_path / "x.parquet")
    with pytest.raises(ProgrammingError):
        synthesize(conn, "t", 1.0, tmp_path / "no" / "dir" / "x.parquet")
    with pytest.raises(BudgetExceededError):
        synthesize(conn, "t", 100.0, tmp_path / "x.parquet")
    assert conn.ledger.spent() == spent


def test_pure_dp_sessions_are_refused(tmp_path):
    with dpsql.connect(catalog=CATALOG, epsilon=1.0, delta=0.0) as conn:
        with pytest.raises(NotSupportedError):
            synthesize(conn, "t", 0.5, tmp_path / "x.parquet")


def test_command_line_parser():
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["synth", "people", "--epsilon", "1", "--out", "p.parquet"])
    assert (args.table, args.epsilon, args.out, args.database, args.mechanism) == ("people", 1.0, "p.parquet", None, "aim")


def test_a_presence_column_is_synthesized_as_true_or_null(tmp_path):
    """A column declared for presence only has no values to write: its synthetic rows are TRUE or NULL."""
    con = duckdb.connect()
    con.execute("CREATE TABLE v AS SELECT i % 3 AS a, CASE WHEN i % 4 = 0 THEN NULL ELSE 'd' || i END AS dev "
                "FROM range(2000) r(i)")
    catalog = '[tables.v.columns]\na = { type = "integer", min = 0, max = 2 }\ndev = { type = "presence", nullable = true }'
    conn = dpsql.connect(con=con, catalog=catalog, epsilon=5.0, seed=1)
    synthesize(conn, "v", 1.0, tmp_path / "s.parquet", mechanism="mst", rows=400)
    counts = dict(duckdb.sql(f"SELECT dev, COUNT(*) FROM '{tmp_path / 's.parquet'}' GROUP BY dev").fetchall())
    assert set(counts) == {True, None} and 50 <= counts[None] <= 150  # a quarter of the rows hold NULL
