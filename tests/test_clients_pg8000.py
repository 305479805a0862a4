"""pg8000 (untyped parameters, its own protocol habits) against `dpsql serve` (tests/served.py)."""

from __future__ import annotations

import pytest

pg8000 = pytest.importorskip("pg8000", reason="pg8000 is not installed: pip install 'dpsql[serve-clients]'")


def test_pg8000_native_and_dbapi(census_server):
    import pg8000.dbapi
    import pg8000.native

    conn = pg8000.native.Connection("alice", host="127.0.0.1", port=census_server.port, password="alice-pw",
                                    database="census")
    try:
        rows = conn.run("SELECT sex, COUNT(*) AS n FROM people WHERE age > :age GROUP BY sex ORDER BY sex", age=25)
        assert [r[0] for r in rows] == ["F", "M"]
        assert conn.run("SELECT COUNT(*) FROM people WHERE age > CAST(:a AS INTEGER)", a="25")[0][0] > 0
        assert conn.run("SELECT COUNT(*) AS n FROM people WHERE sex = :s", s="F")[0][0] > 0
        with pytest.raises(pg8000.native.DatabaseError, match="not declared"):
            conn.run("SELECT nosuch FROM people")
        assert conn.run("SELECT 1") == [[1]]
        conn.run("SET dpsql.stderr = on")
        conn.run("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex")
        assert [c["name"] for c in conn.columns] == ["sex", "n", "n_stderr"]
        budget = {r[0]: r[1:] for r in conn.run("SHOW dpsql.budget")}
        assert budget["total"][0] == pytest.approx(2.0)
    finally:
        conn.close()
    with pg8000.dbapi.connect("alice", host="127.0.0.1", port=census_server.port, password="alice-pw",
                              database="census") as db:
        cur = db.cursor()
        cur.execute("SELECT COUNT(*) FROM people WHERE age < %s", (30,))
        assert cur.fetchone()[0] > 0
