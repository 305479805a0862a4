"""Predicted execution time of a plan: data-free, per phase, and shown by EXPLAIN."""

import duckdb
import pytest

import dpsql
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from mechanisms.matrices import Dense
from mechanisms.measurement import exact_work
from mechanisms.workload import Workload
from planner.planner import plan_workload
from planner.timing import ScanSpeed, predict

CATALOG = Catalog.from_toml(PEOPLE_CATALOG_TOML)
TABLE = CATALOG.get("people")
QUERIES = [
    "SELECT sex, COUNT(*) FROM people GROUP BY sex",
    "SELECT race, COUNT(*) FROM people GROUP BY race",
    *[f"SELECT COUNT(*) FROM people WHERE age BETWEEN {a} AND {a + 9}" for a in range(0, 90, 10)],
]
SPEED = ScanSpeed(per_scan=1e-3, per_row=1e-8, per_row_clique=2e-8, per_cell=1e-7)


def plan():
    blocks = [b for i, q in enumerate(QUERIES) for b in compile_query(q, CATALOG, label=f"q{i}").blocks]
    return plan_workload(Workload(TABLE.domain, blocks), 0.1)


def test_exact_work_counts_reads_and_multiply_adds():
    assert exact_work(None) == (0, 0)
    assert exact_work(Dense([[1.0, 2.0, 3.0], [0.0, 1.0, 0.5]])) == (5, 6)  # 5 distinct entries


def test_the_scan_scales_with_released_rows_only():
    p = plan()
    cliques = {m.clique for m in p.measurements}
    cells = sum(TABLE.domain.size(c) for c in cliques)
    small, large = predict(p, TABLE.domain, 1e5, SPEED), predict(p, TABLE.domain, 1e7, SPEED)
    assert large.scan == pytest.approx(SPEED.seconds(1e7, len(cliques), cells))
    assert large.scan > small.scan and large.release == small.release
    assert large.reconstruction == p.fit_seconds > 0
    unknown = predict(p, TABLE.domain, None, SPEED)
    assert unknown.scan is None and unknown.total is None
    assert unknown.scan_per_million_rows == pytest.approx(SPEED.seconds(1e6, len(cliques), cells))
    assert "per million rows (table size not released)" in unknown.describe()
    assert predict(p, TABLE.domain, 1e5, None).scan is None


def test_explain_shows_predicted_time_after_the_size_is_released():
    con = duckdb.connect()
    create_people_table(con, rows=20_000, seed=1)
    conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=5.0, delta=1e-9, seed=0)
    cur = conn.cursor()
    cur.execute("EXPLAIN " + QUERIES[0])
    text = "\n".join(row[0] for row in cur.fetchall())
    assert "time: planned in" in text and "per million rows (table size not released)" in text
    cur.execute("SELECT COUNT(*) FROM people")  # releases the size: later scans are predicted
    cur.execute("EXPLAIN " + QUERIES[1])
    text = "\n".join(row[0] for row in cur.fetchall())
    assert "predicted scan" in text and "per million rows" not in text


def test_a_declared_public_size_predicts_the_scan_before_any_release():
    con = duckdb.connect()
    create_people_table(con, rows=20_000, seed=1)
    catalog = PEOPLE_CATALOG_TOML.replace("[tables.people]\n", "[tables.people]\nrows = 20000\n")
    conn = dpsql.connect(con=con, catalog=catalog, epsilon=5.0, delta=1e-9, seed=0)
    cur = conn.cursor()
    cur.execute("EXPLAIN " + QUERIES[0])
    text = "\n".join(row[0] for row in cur.fetchall())
    assert "predicted scan" in text and "per million rows" not in text
    assert conn.session.budget().spent.epsilon == 0
