"""`dpsql synth --mechanism rap --workload past|FILE`: RAP fitted for the queries that come later.

The relaxed data is kept in the ledger (its SHA-256 in the hash chain) and answers later
queries free in any session; errors spend nothing.
"""

import argparse

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.errors import ProgrammingError
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_entries import MODEL
from dpsql.releases.synth import add_parser, future_cliques, synthesize

CATALOG = """
[tables.t]
[tables.t.columns]
age  = { type = "integer", min = 20, max = 24 }
sex  = { type = "categorical", values = ["F", "M"] }
pay  = { type = "numeric", min = 0, max = 100, bins = 4 }
"""


@pytest.fixture
def files(tmp_path):
    con = duckdb.connect(str(tmp_path / "db.duckdb"))
    rng = np.random.default_rng(0)
    age = rng.integers(20, 25, 4000)
    con.register("s", {"age": age, "sex": np.where(age > 22, "M", "F"), "pay": age * 3.0 + rng.integers(0, 10, 4000)})
    con.execute("CREATE TABLE t AS SELECT CAST(age AS INTEGER) AS age, sex, pay FROM s")
    con.close()
    (tmp_path / "catalog.toml").write_text(CATALOG)
    return tmp_path


def _connect(files, seed=1):
    return dpsql.connect(str(files / "db.duckdb"), catalog=str(files / "catalog.toml"), epsilon=4.0, delta=1e-9,
                         seed=seed)


def _ask(conn, sql):
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


def test_rap_fitted_to_past_queries_answers_later_ones_free_in_another_session(files):
    conn = _connect(files)
    _ask(conn, "SELECT age, sex, COUNT(*) FROM t GROUP BY age, sex")
    _ask(conn, "BEGIN WORKLOAD; SELECT pay, COUNT(*) FROM t WHERE age > 21 GROUP BY pay; "
               "SELECT sex, COUNT(*) FROM t GROUP BY sex; END WORKLOAD")
    table = conn.session.catalog.get("t")
    assert future_cliques(conn, table, "past", 10_000) == [("age", "sex"), ("age", "pay"), ("sex",)]
    report = synthesize(conn, "t", 1.0, files / "out.parquet", mechanism="rap", workload="past")
    last = conn.ledger.charges()[-1]
    assert last.detail == "rap" and last.cost == pytest.approx(report.charged.rho)
    assert len(conn.ledger.records(MODEL, "t")) == 1 and conn.ledger.verify() == []
    rows = duckdb.sql(f"SELECT age, sex, pay FROM '{files / 'out.parquet'}'").fetchall()
    assert abs(len(rows) - 4000) < 400 and {r[0] for r in rows} <= set(range(20, 25))
    conn.close()

    later = _connect(files, seed=2)  # a new session: the relaxed data comes from the ledger
    spent = later.ledger.spent()
    answer = dict(((a, p), n) for a, p, n in _ask(later, "SELECT age, pay, COUNT(*) FROM t GROUP BY age, pay"))
    assert later.ledger.spent() == spent and later.session.last_charge == 0.0
    assert sum(answer.values()) == pytest.approx(4000, rel=0.1)
    # Age 24 earns 72–81. Learned from the past (age > 21, pay) query, the cell is nearer its truth than
    # what the age and pay marginals alone give (pay ≥ 75 spread over ages 22–24 by their sizes): past the midpoint.
    con = duckdb.connect(str(files / "db.duckdb"), read_only=True)
    truth, alone = con.execute(
        "SELECT COUNT(*) FILTER (age = 24 AND pay >= 75), COUNT(*) FILTER (age > 21 AND pay >= 75) * "
        "COUNT(*) FILTER (age = 24) / COUNT(*) FILTER (age > 21) FROM t").fetchone()
    con.close()
    assert truth > alone + 150 and answer[(24, 75.0)] > (truth + alone) / 2
    model = later.session.executor.answering(later.session.catalog.get("t")).generative
    assert [type(m).__name__ for m in model] == ["RelaxedData"]


def test_a_workload_file_declares_the_query_class(files):
    conn = _connect(files)
    (files / "future.sql").write_text("SELECT sex, pay, COUNT(*) FROM t GROUP BY sex, pay;\n"
                                      "SELECT COUNT(*) FROM t WHERE age BETWEEN 21 AND 23;\n")
    table = conn.session.catalog.get("t")
    assert future_cliques(conn, table, files / "future.sql", 10_000) == [("sex", "pay"), ("age",)]
    synthesize(conn, "t", 0.5, files / "out.parquet", mechanism="rap", workload=files / "future.sql", r=1)
    assert conn.ledger.charges()[-1].detail == "rap"


@pytest.mark.parametrize("kwargs, message", [
    ({"mechanism": "rap"}, "needs workload"),
    ({"mechanism": "rap", "workload": "past"}, "no query on 't'"),  # nothing asked yet
    ({"mechanism": "aim", "workload": "past"}, "RAP's"),
    ({"mechanism": "rap", "workload": "past", "r": 0}, "r must be"),
    ({"mechanism": "rap", "workload": "nowhere.sql"}, "cannot read"),
])
def test_errors_spend_nothing(files, kwargs, message):
    conn = _connect(files)
    with pytest.raises(ProgrammingError, match=message):
        synthesize(conn, "t", 1.0, files / "out.parquet", **kwargs)
    assert conn.ledger.spent() == 0 and not (files / "out.parquet").exists()


def test_an_altered_model_breaks_the_chain_and_is_not_used(files):
    conn = _connect(files)
    _ask(conn, "SELECT age, pay, COUNT(*) FROM t GROUP BY age, pay")
    synthesize(conn, "t", 1.0, files / "out.parquet", mechanism="rap", workload="past")
    conn.close()
    con = duckdb.connect(str(files / "db.duckdb.dpsql-state"))
    con.execute("UPDATE dpsql_models SET spec = replace(spec, '\"rows\":', '\"rows\":1')")
    con.close()
    assert any("model stored for charge" in p for p in Ledger.existing(str(files / "db.duckdb.dpsql-state")).verify())
    later = _connect(files)
    assert later.session.executor.answering(later.session.catalog.get("t")).generative == []


@pytest.mark.parametrize("mechanism", ["aim", "rap"])
def test_the_session_keeps_each_released_measurement_once(files, mechanism):
    """After a charge the connection's model holds what the ledger holds: no measurement twice (which would
    make its error bars too narrow)."""
    conn = _connect(files)
    _ask(conn, "SELECT age, pay, COUNT(*) FROM t GROUP BY age, pay")
    kwargs = {"workload": "past"} if mechanism == "rap" else {"degree": 2}
    synthesize(conn, "t", 1.0, files / "out.parquet", mechanism=mechanism, **kwargs)
    table = conn.session.catalog.get("t")
    held = conn.session.executor.model(table).measurements
    assert len(held) == len(conn.ledger.measurements("t", table.signature()))


def test_command_line_parser():
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["synth", "t", "--epsilon", "1", "--out", "x.parquet", "--mechanism", "rap",
                              "--workload", "past", "--r", "2"])
    assert (args.mechanism, args.workload, args.r) == ("rap", "past", 2)
