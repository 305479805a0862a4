"""SQLAlchemy 2 over `dpsql serve` (tests/served.py) with psycopg 3 and psycopg2: queries with parameters
and reflection (`inspect`) from the catalog."""

from __future__ import annotations

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")


@pytest.mark.parametrize("driver", ["psycopg", "psycopg2"])
def test_sqlalchemy_queries_and_reflection(census_server, driver):
    pytest.importorskip(driver, reason=f"{driver} is not installed: pip install 'dpsql[serve-clients]'")
    engine = sqlalchemy.create_engine(census_server.url(driver=driver))
    try:
        with engine.connect() as conn:
            rows = conn.execute(sqlalchemy.text("SELECT sex, COUNT(*) AS n FROM people WHERE age > :age "
                                                "GROUP BY sex ORDER BY sex"), {"age": 25}).fetchall()
            assert [r.sex for r in rows] == ["F", "M"]
            inspector = sqlalchemy.inspect(conn)
            assert "people" in inspector.get_table_names()
            columns = inspector.get_columns("people")
            assert [c["name"] for c in columns] == ["age", "sex"]  # declared columns only
            assert isinstance(columns[0]["type"], sqlalchemy.Integer)
            assert inspector.get_table_comment("people")["text"].startswith("protected")
            assert inspector.get_pk_constraint("people")["constrained_columns"] == []
    finally:
        engine.dispose()

