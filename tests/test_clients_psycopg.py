"""psycopg 3 against `dpsql serve` beyond tests/test_serve.py: pipeline mode with an error in the middle,
and COPY (query) TO STDOUT (tests/served.py)."""

from __future__ import annotations

import pytest

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
