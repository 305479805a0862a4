"""SQLAlchemy 2 over `dpsql serve` (tests/served.py), sync (+psycopg, +psycopg2) and asyncio (+asyncpg,
+psycopg): queries with parameters, large results, and reflection (`inspect`, `Table(..., autoload_with=)`)
from the catalog."""

from __future__ import annotations

import asyncio

import pytest
from served import LARGE, LARGE_ROWS

sqlalchemy = pytest.importorskip("sqlalchemy")


def _check_reflected(people, regions) -> None:
    assert [c.name for c in people.columns] == ["age", "sex"]  # declared columns only: never ssn
    assert isinstance(people.c.age.type, sqlalchemy.Integer) and isinstance(people.c.sex.type, sqlalchemy.String)
    assert people.comment.startswith("protected") and regions.comment.startswith("public")
    assert [c.name for c in regions.columns] == ["id", "name"] and not people.primary_key.columns


def _queries(conn, people) -> None:
    rows = conn.execute(sqlalchemy.text("SELECT sex, COUNT(*) AS n FROM people WHERE age > :age "
                                        "GROUP BY sex ORDER BY sex"), {"age": 25}).fetchall()
    assert [r.sex for r in rows] == ["F", "M"]
    counted = conn.execute(sqlalchemy.select(people.c.sex, sqlalchemy.func.count()).group_by(people.c.sex)
                           .order_by(people.c.sex))  # SQLAlchemy's own SQL, built from the reflected table
    assert list(counted.keys()) == ["sex", "count_1"] and [r[0] for r in counted] == ["F", "M"]
    result = conn.execute(sqlalchemy.text("SELECT COUNT(*) FROM people"))
    assert list(result.keys()) == ["count"]  # named as PostgreSQL names it
    rows = conn.execute(sqlalchemy.text(LARGE)).fetchall()
    assert len(rows) == LARGE_ROWS and tuple(rows[0]) == (1, "row 1") and rows[-1].i == LARGE_ROWS
    conn.exec_driver_sql("SET dpsql.stderr = on")
    # (a statement +asyncpg prepared before the SET would now answer InvalidCachedStatementError once, as after
    # a schema change in PostgreSQL: its columns changed)
    result = conn.execute(sqlalchemy.text("SELECT COUNT(*) FROM people WHERE age >= 18"))
    assert list(result.keys()) == ["count", "count_stderr"]
    budget = {row.budget: row for row in conn.execute(sqlalchemy.text("SHOW dpsql.budget"))}
    assert budget["total"].epsilon == pytest.approx(2.0) and budget["spent"].epsilon > 0
    conn.exec_driver_sql("SET dpsql.stderr = off")


@pytest.mark.parametrize("driver", ["psycopg", "psycopg2"])
def test_sqlalchemy_queries_and_reflection(census_server, driver):
    pytest.importorskip(driver, reason=f"{driver} is not installed: pip install 'dpsql[serve-clients]'")
    engine = sqlalchemy.create_engine(census_server.url(driver=driver))
    try:
        with engine.connect() as conn:
            metadata = sqlalchemy.MetaData()
            people = sqlalchemy.Table("people", metadata, autoload_with=conn)
            _check_reflected(people, sqlalchemy.Table("regions", metadata, autoload_with=conn))
            _queries(conn, people)
            inspector = sqlalchemy.inspect(conn)
            assert "people" in inspector.get_table_names()
            columns = inspector.get_columns("people")
            assert [c["name"] for c in columns] == ["age", "sex"]  # declared columns only
            assert isinstance(columns[0]["type"], sqlalchemy.Integer)
            assert inspector.get_table_comment("people")["text"].startswith("protected")
            assert inspector.get_pk_constraint("people")["constrained_columns"] == []
    finally:
        engine.dispose()


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
def test_sqlalchemy_asyncio_queries_and_reflection(census_server, driver):
    pytest.importorskip(driver, reason=f"{driver} is not installed: pip install 'dpsql[serve-clients]'")
    from sqlalchemy.ext.asyncio import create_async_engine

    def reflect_and_query(conn):
        metadata = sqlalchemy.MetaData()
        people = sqlalchemy.Table("people", metadata, autoload_with=conn)
        _check_reflected(people, sqlalchemy.Table("regions", metadata, autoload_with=conn))
        _queries(conn, people)
        return sqlalchemy.inspect(conn).get_table_names()

    async def session():
        engine = create_async_engine(census_server.url(driver=driver))
        try:
            async with engine.connect() as conn:
                assert set(await conn.run_sync(reflect_and_query)) == {"people", "regions"}
                result = await conn.execute(sqlalchemy.text("SELECT COUNT(*) FROM people WHERE age < :age"),
                                            {"age": 50})
                assert list(result.keys()) == ["count"] and result.scalar() > 5000
        finally:
            await engine.dispose()

    asyncio.run(asyncio.wait_for(session(), 120))
