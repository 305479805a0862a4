"""pg8000 (pure Python: untyped parameters, its own protocol habits) against `dpsql serve` over TLS
(tests/served.py): native and DB-API interfaces."""

from __future__ import annotations

import socket
import struct
import threading
from datetime import date

import pytest
from served import LARGE, LARGE_ROWS, SLOW

pg8000 = pytest.importorskip("pg8000", reason="pg8000 is not installed: pip install 'dpsql[serve-clients]'")


def test_pg8000_native_and_dbapi(census_server):
    import pg8000.dbapi
    import pg8000.native

    login = {"host": "127.0.0.1", "port": census_server.port, "password": "alice-pw", "database": "census",
             "ssl_context": census_server.ssl_context()}
    conn = pg8000.native.Connection("alice", **login)
    try:
        rows = conn.run("SELECT sex, COUNT(*) FROM people WHERE age > :age GROUP BY sex ORDER BY sex", age=25)
        assert [r[0] for r in rows] == ["F", "M"] and [c["name"] for c in conn.columns] == ["sex", "count"]
        assert conn.run("SELECT COUNT(*) FROM people WHERE age > CAST(:a AS INTEGER)", a="25")[0][0] > 0
        assert conn.run("SELECT COUNT(*) AS n FROM people WHERE sex = :s", s="F")[0][0] > 0
        assert conn.run("SELECT CAST(:x AS DOUBLE PRECISION) * 2, CAST(:d AS DATE) + 1, CAST(:b AS BOOLEAN)", x=1.5,
                        d=date(2024, 1, 31), b=True) == [[3.0, date(2024, 2, 1), True]]  # sent untyped, cast here
        with pytest.raises(pg8000.native.DatabaseError, match="not declared"):
            conn.run("SELECT nosuch FROM people")
        assert conn.run("SELECT 1") == [[1]]
        conn.run("SET dpsql.stderr = on")
        conn.run("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex")
        assert [c["name"] for c in conn.columns] == ["sex", "n", "n_stderr"]
        budget = {r[0]: r[1:] for r in conn.run("SHOW dpsql.budget")}
        assert budget["total"][0] == pytest.approx(2.0)
        rows = conn.run(LARGE)
        assert len(rows) == LARGE_ROWS and rows[0] == [1, "row 1"] and rows[-1] == [LARGE_ROWS, f"row {LARGE_ROWS}"]
    finally:
        conn.close()
    with pg8000.dbapi.connect("alice", **login) as db:
        cur = db.cursor()
        cur.execute("SELECT COUNT(*) FROM people WHERE age < %s", (30,))
        assert cur.fetchone()[0] > 0 and cur.description[0][0] == "count"
        db.rollback()
        db.autocommit = True
        # pg8000 has no cancel call: a CancelRequest with its connection's key, as PostgreSQL documents it
        def cancel():
            with socket.create_connection(("127.0.0.1", census_server.port)) as sock:
                sock.sendall(struct.pack("!ii", 16, 80877102) + db._backend_key_data)

        timer = threading.Timer(0.5, cancel)
        timer.start()
        with pytest.raises(pg8000.dbapi.DatabaseError, match="cancel"):
            cur.execute(SLOW)
        timer.join()
        cur.execute("SELECT 2")
        assert cur.fetchone() == [2]
