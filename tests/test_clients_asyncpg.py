"""asyncpg (and SQLAlchemy's +asyncpg) against `dpsql serve` over TLS: prepared statements, typed parameters,
errors in a pipeline, cancel, error bars, the budget and large results (see tests/served.py for the deployment)."""

from __future__ import annotations

import asyncio
import datetime
import decimal

import pytest
from served import LARGE, LARGE_ROWS, SLOW

asyncpg = pytest.importorskip("asyncpg", reason="asyncpg is not installed: pip install 'dpsql[serve-clients]'")

BY_SEX = "SELECT sex, COUNT(*) AS n FROM people WHERE age > $1 GROUP BY sex ORDER BY sex"


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))  # a hang (a lost Flush) fails, never blocks


def test_asyncpg_prepared_statements_errors_and_error_bars(census_server):
    async def session():
        conn = await asyncpg.connect(host="127.0.0.1", port=census_server.port, user="alice", password="alice-pw",
                                     database="census", ssl=census_server.ssl_context() or False)  # TLS: required
        try:
            count = await conn.fetchrow("SELECT COUNT(*) FROM people WHERE sex = $1", "F")
            assert list(count.keys()) == ["count"] and count["count"] > 5000  # named as PostgreSQL names it
            rows = await conn.fetch(BY_SEX, 25)  # an int parameter: typed int4 by the column it is compared with
            assert [r["sex"] for r in rows] == ["F", "M"] and sum(r["n"] for r in rows) > 10000
            assert await conn.fetchval("SELECT COUNT(*) FROM people WHERE age > $1::int AND sex = $2", 25, "F") > 0
            with pytest.raises(asyncpg.PostgresError, match="not declared"):
                await conn.fetch("SELECT nosuch FROM people WHERE age > $1", 1)  # fails at prepare: answered at once
            assert await conn.fetchval("SELECT 1") == 1
            await conn.execute("CREATE TABLE notes (a INTEGER CHECK (a > 0), b VARCHAR)")
            with pytest.raises(asyncpg.PostgresError, match="(?i)constraint"):  # an error mid-pipeline
                await conn.executemany("INSERT INTO notes VALUES ($1, $2)", [(1, "x"), (-1, "y"), (3, "z")])
            assert await conn.fetchval("SELECT COUNT(*) FROM notes WHERE a > $1", 0) >= 1
            await conn.execute("SET dpsql.stderr = on")  # the cached BY_SEX now has more columns: prepared again
            rows = await conn.fetch(BY_SEX, 25)
            assert list(rows[0].keys()) == ["sex", "n", "n_stderr"] and rows[0]["n_stderr"] > 0
            budget = {r["budget"]: r for r in await conn.fetch("SHOW dpsql.budget")}
            assert budget["total"]["epsilon"] == pytest.approx(2.0) and budget["spent"]["epsilon"] > 0
            with pytest.raises(asyncio.TimeoutError):  # asyncpg sends a cancel request when its timeout passes
                await conn.fetchval(SLOW, timeout=1)
            await conn.execute("SELECT 1; SELECT 2")  # no arguments: the simple protocol
            # asyncpg reads and sends these in binary
            assert await conn.fetchval("SELECT $1::DATE + 1", datetime.date(2020, 1, 2)) == datetime.date(2020, 1, 3)
            assert await conn.fetchval("SELECT $1::DECIMAL(6, 2) * 2", decimal.Decimal("1.25")) == decimal.Decimal("2.50")
            rows = await conn.fetch(LARGE)
            assert len(rows) == LARGE_ROWS and tuple(rows[0]) == (1, "row 1")
            assert tuple(rows[-1]) == (LARGE_ROWS, f"row {LARGE_ROWS}")
            async with conn.transaction():  # a cursor: the rows come in portions (Execute with a row limit)
                streamed = [r["i"] async for r in conn.cursor(LARGE, prefetch=4096)]
            assert streamed == list(range(1, LARGE_ROWS + 1))
        finally:
            await conn.close()
        assert conn.is_closed()

    run(session())


def test_sqlalchemy_asyncio_with_asyncpg(census_server):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.ext.asyncio import create_async_engine

    async def session():
        engine = create_async_engine(census_server.url(driver="asyncpg"))
        try:
            async with engine.connect() as conn:
                result = await conn.execute(sqlalchemy.text(
                    "SELECT sex, COUNT(*) AS n FROM people WHERE age < :age GROUP BY sex ORDER BY sex"), {"age": 50})
                assert [row.sex for row in result] == ["F", "M"]
        finally:
            await engine.dispose()

    run(session())
