"""psycopg 3 against `dpsql serve` (tests/served.py): TLS, both protocols, parameters, pipeline mode with an
error in the middle, cancel, error bars, the budget, large results and COPY (query) TO STDOUT."""

from __future__ import annotations

from datetime import date

import pytest
from served import LARGE, LARGE_ROWS, SLOW

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'dpsql[serve-clients]'")


def test_psycopg_pipeline_goes_on_after_an_error(census_server):
    with psycopg.connect(census_server.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxError, match="not declared"):
            with conn.pipeline():
                first = conn.execute("SELECT COUNT(*) FROM people WHERE age > %s", (10,))
                conn.execute("SELECT nosuch FROM people")
                conn.execute("SELECT 3")  # skipped by the server until the pipeline's Sync
        assert first.fetchone()[0] > 0
        with conn.pipeline():
            later = conn.execute("SELECT %s::int + 1", (1,))
        assert later.fetchone() == (2,)


def test_copy_of_a_query_streams_its_dp_answer_charged_once(census_server):
    query = "SELECT sex, COUNT(*) AS n FROM people WHERE age BETWEEN 40 AND 44 GROUP BY sex ORDER BY sex"
    with psycopg.connect(census_server.dsn(), autocommit=True) as conn:
        before = census_server.ledger().spent()
        with conn.cursor().copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER)") as copy:
            text = b"".join(bytes(block) for block in copy).decode()
        header, *rows = text.splitlines()
        assert header == "sex,n" and [r.split(",")[0] for r in rows] == ["F", "M"]
        charged = census_server.ledger().spent()
        assert charged > before  # charged like the query ...
        answer = conn.execute(query).fetchall()
        assert [f"{s},{n!r}" for s, n in answer] == rows and census_server.ledger().spent() == charged  # ... once
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="read-only"):
            conn.execute("COPY people TO STDOUT")  # a protected table's rows: never


def test_psycopg_over_tls_both_protocols_parameters_names_and_large_results(census_server):
    import threading

    with psycopg.connect(census_server.dsn(), autocommit=True) as conn:
        assert conn.info.pgconn.ssl_in_use == census_server.tls  # TLS wherever the test server has a certificate
        by_sex = "SELECT sex, COUNT(*) FROM people WHERE age > %s AND sex = %s GROUP BY sex ORDER BY sex"
        cur = conn.execute(by_sex, (25, "F"))  # the extended protocol: an int4 (typed) and a str (unknown: untyped)
        assert [d.name for d in cur.description] == ["sex", "count"]
        women = dict(cur.fetchall())  # every declared sex is a group; the other's count is only noise
        assert women["F"] > 5000 and abs(women["M"]) < 1000
        simple = psycopg.ClientCursor(conn)  # the simple protocol: parameters written into the text
        simple.execute(by_sex, (25, "M"))
        assert [d.name for d in simple.description] == ["sex", "count"] and dict(simple.fetchall())["M"] > 3000
        assert conn.execute("SELECT COUNT(*) FROM people WHERE age > %s::int", ("25",)).fetchone()[0] > 0
        assert conn.execute("SELECT %s::float8 * 2, %s::date + 1, %s::bool", (1.5, date(2024, 1, 31), True)
                            ).fetchone() == (3.0, date(2024, 2, 1), True)
        with pytest.raises(psycopg.errors.SyntaxError, match="not declared"):
            conn.execute("SELECT COUNT(nosuch) FROM people")
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.execute("SET dpsql.stderr = on")
        cur = conn.execute("SELECT COUNT(*) FROM people")
        assert [d.name for d in cur.description] == ["count", "count_stderr"] and cur.fetchone()[1] > 0
        budget = {row[0]: row[1:] for row in conn.execute("SHOW dpsql.budget").fetchall()}
        assert budget["total"][0] == pytest.approx(2.0) and budget["spent"][0] > 0
        rows = conn.execute(LARGE).fetchall()
        assert len(rows) == LARGE_ROWS and rows[0] == (1, "row 1") and rows[-1] == (LARGE_ROWS, f"row {LARGE_ROWS}")
        with conn.cursor() as cur:  # fetched in batches, as a client streaming it would
            cur.execute(LARGE)
            seen = sum(len(batch) for batch in iter(lambda: cur.fetchmany(4096), []))
        assert seen == LARGE_ROWS
        timer = threading.Timer(0.5, conn.cancel)
        timer.start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute(SLOW)
        timer.join()
        assert conn.execute("SELECT 2").fetchone() == (2,)
    assert conn.closed
