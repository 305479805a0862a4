"""psycopg2 (what Superset, Airflow and most Python BI stacks use) against `dpsql serve` (tests/served.py): it
writes parameters into the text and sends everything by the simple protocol."""

from __future__ import annotations

import threading
from datetime import date

import pytest
from served import LARGE, LARGE_ROWS, SLOW

psycopg2 = pytest.importorskip("psycopg2", reason="psycopg2 is not installed: pip install 'dpsql[serve-clients]'")
import psycopg2.errors  # noqa: E402  (after the skip)


def test_psycopg2_over_tls_parameters_errors_cancel_and_large_results(census_server):
    conn = psycopg2.connect(census_server.dsn())
    try:
        assert bool(conn.info.ssl_in_use) == census_server.tls
        cur = conn.cursor()
        cur.execute("SELECT sex, COUNT(*) FROM people WHERE age > %s GROUP BY sex ORDER BY sex", (25,))
        assert [d.name for d in cur.description] == ["sex", "count"] and [r[0] for r in cur.fetchall()] == ["F", "M"]
        cur.execute("SELECT COUNT(*) AS n FROM people WHERE sex = %(sex)s AND age > %(age)s::int", {"sex": "F", "age": "25"})
        assert cur.fetchone()[0] > 0
        cur.execute("SELECT %s * 2, %s + 1, %s", (1.5, date(2024, 1, 31), True))
        assert cur.fetchone() == (3.0, date(2024, 2, 1), True)
        with pytest.raises(psycopg2.errors.SyntaxError, match="not declared"):
            cur.execute("SELECT COUNT(nosuch) FROM people")  # in a transaction: it fails ...
        with pytest.raises(psycopg2.errors.InFailedSqlTransaction):
            cur.execute("SELECT 1")  # ... until it is rolled back, as in PostgreSQL
        conn.rollback()
        cur.execute("SELECT 1; SELECT 2 AS two")  # several statements: the last one's rows
        assert cur.fetchall() == [(2,)] and cur.description[0].name == "two"
        conn.commit()
        conn.autocommit = True
        cur.execute("SET dpsql.stderr = on")
        cur.execute("SELECT COUNT(*) FROM people")
        assert [d.name for d in cur.description] == ["count", "count_stderr"] and cur.fetchone()[1] > 0
        cur.execute("SHOW dpsql.budget")
        budget = {row[0]: row[1:] for row in cur.fetchall()}
        assert budget["total"][0] == pytest.approx(2.0) and budget["spent"][0] > 0
        cur.execute(LARGE)
        rows = cur.fetchall()
        assert len(rows) == LARGE_ROWS and rows[0] == (1, "row 1") and rows[-1] == (LARGE_ROWS, f"row {LARGE_ROWS}")
        timer = threading.Timer(0.5, conn.cancel)
        timer.start()
        with pytest.raises(psycopg2.errors.QueryCanceled):
            cur.execute(SLOW)
        timer.join()
        cur.execute("SELECT 3")
        assert cur.fetchone() == (3,)
    finally:
        conn.close()
    assert conn.closed
