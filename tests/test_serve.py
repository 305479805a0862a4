"""`dpsql serve`: real PostgreSQL clients against a real server on a local port.

The server runs as `dpsql serve PROFILE` in a subprocess; psql (when installed), psycopg 3,
SQLAlchemy's postgresql dialect, pandas and jupysql talk to it as they would to PostgreSQL.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from served import Served, census

psycopg = pytest.importorskip("psycopg")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = census(tmp_path_factory.mktemp("serve"))
    server.start()
    yield server
    server.stop()


def test_psycopg_gets_dp_answers_with_parameters_and_public_sql(served):
    with psycopg.connect(served.dsn()) as conn:
        cur = conn.cursor()
        cur.execute("SELECT sex, COUNT(*) AS n FROM people WHERE age >= %s GROUP BY sex ORDER BY sex", (50,))
        assert [d.name for d in cur.description] == ["sex", "n"]
        rows = cur.fetchall()
        assert [r[0] for r in rows] == ["F", "M"] and all(abs(r[1] - t) < 400 for r, t in zip(rows, (6667, 3333)))
        cur.execute("CREATE TABLE notes (a INTEGER, b VARCHAR)")
        assert cur.statusmessage == "CREATE TABLE" and cur.description is None
        cur.execute("INSERT INTO notes VALUES (%s, %s), (2, 'x')", (1, "y"))
        assert cur.statusmessage == "INSERT 0 2" and cur.rowcount == 2
        cur.execute("SELECT a, b FROM notes ORDER BY a")
        assert cur.fetchall() == [(1, "y"), (2, "x")]


def test_error_bars_and_budget_are_sql(served):
    with psycopg.connect(served.dsn(), autocommit=True) as conn:
        cur = conn.cursor()
        cur.execute("SET dpsql.stderr = on")
        cur.execute("SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM people GROUP BY sex ORDER BY sex")
        assert [d.name for d in cur.description] == ["sex", "n", "n_stderr", "mean_age", "mean_age_stderr"]
        for _, n, n_se, mean, mean_se in cur.fetchall():
            assert n_se > 0 and mean_se > 0 and 0 <= mean <= 99
        cur.execute("SHOW dpsql.budget")
        budget = {row[0]: row[1:] for row in cur.fetchall()}
        assert budget["total"][0] == pytest.approx(2.0)  # alice's own budget, in ε
        assert budget["last_charge"][2] > 0 and budget["remaining"][2] < budget["total"][2]


def test_charges_are_attributed_to_the_analyst_and_capped_by_their_budget(served):
    with psycopg.connect(served.dsn("bob", "bob-pw"), autocommit=True) as conn:
        cur = conn.cursor()
        cur.execute("SET dpsql.query_epsilon = 0.2")
        # Shares of ε = 0.2 against bob's 0.25, each answered by whichever noise errs less (with exact
        # accounting a small share may be spent as Laplace noise that takes less of his allowance): the
        # statements are answered until his allowance is spent, and the one over it is refused.
        answered = []
        for upper in range(10, 100):
            try:
                cur.execute(f"SELECT COUNT(*) FROM people WHERE age < {upper}")
            except psycopg.Error as refused:
                assert refused.sqlstate == "53400"
                break
            answered.append(upper)
        else:
            pytest.fail("bob's allowance never ran out")
    assert answered, "bob's first statement fits his allowance"
    charges = served.ledger().charges()
    assert [c.who for c in charges if "age < 10" in c.statement] == ["bob"]
    assert not [c for c in charges if f"age < {upper}" in c.statement]


def test_sqlalchemy_pandas_and_reflection(served):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pandas = pytest.importorskip("pandas")
    engine = sqlalchemy.create_engine(served.url())
    frame = pandas.read_sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex", engine)
    assert list(frame.columns) == ["sex", "n"] and list(frame["sex"]) == ["F", "M"]
    with engine.connect() as conn:
        assert "people" in sqlalchemy.inspect(conn).get_table_names()
        columns = conn.execute(sqlalchemy.text(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'people' "
            "ORDER BY ordinal_position")).fetchall()
        assert [c for (c,) in columns] == ["age", "sex"]  # declared columns only: never ssn
    engine.dispose()


def test_jupysql_magic(served):
    ipython = pytest.importorskip("IPython.testing.globalipapp")
    pytest.importorskip("sql.magic")
    shell = ipython.start_ipython() or ipython.get_ipython()
    shell.run_line_magic("load_ext", "sql")
    shell.run_line_magic("config", "SqlMagic.autopandas = True")
    shell.run_line_magic("config", "SqlMagic.displaylimit = 0")
    shell.run_line_magic("sql", served.url())
    frame = shell.run_cell_magic("sql", "", "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex")
    assert list(frame["sex"]) == ["F", "M"] and frame["n"].sum() > 15000
    from sql.connection import ConnectionManager

    ConnectionManager.close_all()


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")
def test_psql_runs_queries_and_lists_tables(served):
    env = {**os.environ, "PGPASSWORD": "alice-pw"}
    args = ["psql", "-X", "-h", "127.0.0.1", "-p", str(served.port), "-U", "alice", "-d", "census", "-A", "-t"]
    done = subprocess.run(args + ["-c", "SELECT COUNT(*) AS n FROM people", "-c", "\\dt"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    count, listing = done.stdout.strip().splitlines()[:2]
    assert abs(float(count) - 20000) < 500 and "people" in listing
    described = subprocess.run(args + ["-c", "\\d people"], env=env, capture_output=True, text=True, timeout=60)
    assert described.returncode == 0 or described.stderr.startswith("ERROR:")  # works or fails cleanly


def test_wrong_passwords_are_refused_then_throttled(served):
    for _ in range(3):
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(served.dsn("carol", "guess"))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(served.dsn("nobody", "guess"))  # unknown names fail the same way
    with pytest.raises(psycopg.OperationalError, match="too many failed logins"):
        psycopg.connect(served.dsn("carol", "guess"))
    with pytest.raises(psycopg.OperationalError, match="too many failed logins"):
        psycopg.connect(served.dsn("carol", "anything"))  # no password check while throttled


def test_a_malformed_message_closes_only_that_connection(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as raw:
        raw.sendall(struct.pack("!ii", 8, 1234))  # protocol 0.1234
        assert raw.recv(1000).startswith(b"E")
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as raw:
        raw.sendall(struct.pack("!i", -5) + b"garbage")
        assert raw.recv(1000)[:1] in (b"E", b"")
    with psycopg.connect(served.dsn()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_client_gone_before_the_charge_is_not_charged(served, tmp_path):
    from dpsql.interfaces.server.client import ClientConnection

    server_end, client_end = socket.socketpair()
    client = ClientConnection.__new__(ClientConnection)
    client.sock, client._cancel = server_end, False
    client._before_charge()  # connected: goes ahead
    client_end.close()
    with pytest.raises(Exception, match="nothing was charged"):
        client._before_charge()
    server_end.close()


def test_sigkill_loses_no_charge_and_answers_stay_free(served):
    query = "SELECT COUNT(*) FROM people WHERE age BETWEEN 20 AND 29"
    with psycopg.connect(served.dsn(), autocommit=True) as conn:
        first = conn.execute(query).fetchone()
    spent = served.ledger().spent()
    served.stop(signal.SIGKILL)
    served.start()
    assert served.ledger().verify() == [] and served.ledger().spent() == pytest.approx(spent)
    with psycopg.connect(served.dsn(), autocommit=True) as conn:
        assert conn.execute(query).fetchone() == first  # answered from the ledger's measurements
    assert served.ledger().spent() == pytest.approx(spent)


def test_cancel_stops_a_running_statement(served):
    import threading

    with psycopg.connect(served.dsn(), autocommit=True) as conn:
        threading.Timer(1.0, conn.cancel).start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT COUNT(*) FROM range(1000000000000) a")
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection goes on


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a test certificate")
def test_tls_is_required_when_the_profile_gives_a_certificate(served, tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-keyout", str(tmp_path / "server.key"), "-out", str(tmp_path / "server.crt")],
                   check=True, capture_output=True)
    text = served.profile.read_text().replace('listen = "127.0.0.1:0"', 'listen = "127.0.0.1:0"\n'
                                              f'tls_cert = "{tmp_path / "server.crt"}"\n'
                                              f'tls_key = "{tmp_path / "server.key"}"')
    for name in ("census.duckdb", "catalog.toml"):
        (tmp_path / name).symlink_to(served.root / name)
    secure = Served(tmp_path)
    secure.profile.write_text(text.replace('database = "census.duckdb"',
                                           f'database = "census.duckdb"\nledger = "{tmp_path / "tls.state"}"'))
    secure.start()
    try:
        with psycopg.connect(secure.dsn() + " sslmode=require", autocommit=True) as conn:
            assert conn.info.pgconn.ssl_in_use
            assert conn.execute("SELECT COUNT(*) FROM people").fetchone()[0] > 15000
        with pytest.raises(psycopg.OperationalError, match="requires TLS"):
            psycopg.connect(secure.dsn() + " sslmode=disable")
    finally:
        secure.stop()


def test_client_settings_are_remembered_and_engine_settings_refused(served):
    with psycopg.connect(served.dsn(), autocommit=True) as conn:
        conn.execute("SET extra_float_digits = 3")
        assert conn.execute("SHOW extra_float_digits").fetchone() == ("3",)
        assert conn.execute("SHOW transaction isolation level").fetchone() == ("read committed",)
        for statement in ("SET memory_limit = '1MB'", "SET enable_logging = true", "SET threads = 1"):
            with pytest.raises(psycopg.errors.SyntaxError, match="unrecognized configuration parameter"):
                conn.execute(statement)
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute("COPY people TO '/tmp/people.csv'")


def test_prepared_statements_are_described_before_they_run(served):
    """Clients that prepare first (JDBC after a few executions, asyncpg) learn the columns from the
    statement's Describe, before any charge."""
    with psycopg.connect(served.dsn(), autocommit=True) as conn:
        before = conn.execute("SHOW dpsql.budget").fetchall()[1][3]
        conn.pgconn.prepare(b"by_sex", b"SELECT sex, COUNT(*) AS n FROM people WHERE age > 70 GROUP BY sex")
        described = conn.pgconn.describe_prepared(b"by_sex")
        assert [described.fname(i) for i in range(described.nfields)] == [b"sex", b"n"]
        assert described.ftype(1) == 701  # float8
        assert conn.execute("SHOW dpsql.budget").fetchall()[1][3] == before  # nothing ran, nothing spent
        conn.pgconn.prepare(b"one", b"SELECT 1 AS one, 'x' AS two")
        described = conn.pgconn.describe_prepared(b"one")
        assert [described.fname(i) for i in range(described.nfields)] == [b"one", b"two"]


def test_worker_processes_share_budget_throttle_and_cancels(served, tmp_path):
    """`workers = 2`: clients spread over two processes; the one ledger, the failed-login counts and
    cancel requests (which may reach either worker) are shared; the workers die with the server."""
    import threading

    for name in ("census.duckdb", "catalog.toml"):
        (tmp_path / name).symlink_to(served.root / name)
    text = served.profile.read_text().replace('listen = "127.0.0.1:0"', 'listen = "127.0.0.1:0"\nworkers = 2')
    text = text.replace('database = "census.duckdb"', f'database = "census.duckdb"\nledger = "{tmp_path / "w.state"}"')
    pool = Served(tmp_path)
    pool.profile.write_text(text)
    pool.start()
    try:
        conns = [psycopg.connect(pool.dsn(), autocommit=True) for _ in range(4)]
        while len({c.info.backend_pid >> 24 for c in conns}) < 2 and len(conns) < 40:  # a worker may start late
            conns.append(psycopg.connect(pool.dsn(), autocommit=True))
        assert len({c.info.backend_pid >> 24 for c in conns}) == 2  # both workers serve
        answers = [c.execute("SELECT COUNT(*) FROM people WHERE age < 30").fetchone()[0] for c in conns]
        assert len(set(answers)) == 1  # measured once, then read from the shared ledger by the other worker
        for conn in conns[:3]:
            threading.Timer(1.0, conn.cancel).start()
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute("SELECT COUNT(*) FROM range(1000000000000) a")
        for c in conns:
            c.close()
        for _ in range(3):
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(pool.dsn("carol", "guess"))
        for _ in range(4):  # whichever worker takes the next attempts, carol is throttled
            with pytest.raises(psycopg.OperationalError, match="too many failed logins"):
                psycopg.connect(pool.dsn("carol", "guess"))
        port = pool.port
        pool.stop(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("a worker outlived the killed server")
    finally:
        pool.stop()


def test_catalog_rewrites_leave_string_literals_alone():
    from dpsql.interfaces.server.pgcompat import VERSION_TEXT, rewrite_catalog_sql

    assert rewrite_catalog_sql("SELECT 'see version() and pg_catalog.f(x)', version()") == \
        f"SELECT 'see version() and pg_catalog.f(x)', '{VERSION_TEXT}'"
    assert rewrite_catalog_sql("SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname "
                               "OPERATOR(pg_catalog.~) '^(it''s)$' COLLATE pg_catalog.default") == \
        "SELECT c.relname FROM dpsql_pg_class c WHERE c.relname ~ '^(it''s)$'"  # the workspace's pg_class


def test_binary_results_of_every_type(served):
    """Binary results (asyncpg and JDBC ask for them): numerics, dates and timestamps in PostgreSQL's
    binary formats, decoded by the client as the text ones would be."""
    import datetime as dt
    import decimal

    with psycopg.connect(served.dsn(), autocommit=True) as conn:
        dp = conn.execute("SELECT CAST(COUNT(*) AS DECIMAL(10, 2)) AS n FROM people WHERE age BETWEEN 3 AND 7",
                          binary=True).fetchone()[0]
        assert isinstance(dp, decimal.Decimal) and dp > 0
        row = conn.execute("SELECT 1234.5::DECIMAL(8, 2), -0.0001::DECIMAL(6, 4), DATE '2020-01-02', "
                           "TIMESTAMP '2020-01-02 03:04:05.5', TIME '12:00:01', gen_random_uuid() IS NOT NULL",
                           binary=True).fetchone()
        assert row == (decimal.Decimal("1234.50"), decimal.Decimal("-0.0001"), dt.date(2020, 1, 2),
                       dt.datetime(2020, 1, 2, 3, 4, 5, 500000), dt.time(12, 0, 1), True)
        assert conn.execute("SELECT %b::DATE + 1", (dt.date(2020, 1, 2),), binary=True).fetchone()[0] == \
            dt.date(2020, 1, 3)  # a binary date parameter


# --- strangers ------------------------------------------------------------------------------------

def _message(raw: socket.socket) -> tuple[bytes, bytes]:
    kind = raw.recv(1)
    if not kind:
        return b"", b""
    head = b""
    while len(head) < 4:
        head += raw.recv(4 - len(head))
    body = b""
    while len(body) < struct.unpack("!i", head)[0] - 4:
        body += raw.recv(65536)
    return kind, body


def _stranger_login(port: int, user: str, source: str) -> bytes:
    """A login as `user` from the address `source` with a wrong SCRAM proof: the server's last answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=20, source_address=(source, 0)) as raw:
        body = struct.pack("!i", 196608) + b"user\0" + user.encode() + b"\0\0"
        raw.sendall(struct.pack("!i", len(body) + 4) + body)
        kind, answer = _message(raw)
        if kind != b"R":
            return answer  # refused before any password exchange
        first = b"n,,n=,r=strangernonce"
        sasl = b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first
        raw.sendall(b"p" + struct.pack("!i", len(sasl) + 4) + sasl)
        _, server_first = _message(raw)
        nonce = dict(p.split("=", 1) for p in server_first[4:].decode().split(","))["r"]
        final = f"c=biws,r={nonce},p={base64.b64encode(bytes(32)).decode()}".encode()
        raw.sendall(b"p" + struct.pack("!i", len(final) + 4) + final)
        return _message(raw)[1]


def test_a_strangers_failed_logins_do_not_lock_out_the_analyst(served):
    """Failed logins are throttled per (address, name) and per address, never per name alone."""
    answers = [_stranger_login(served.port, "alice", "127.0.0.2") for _ in range(5)]
    assert all(b"password authentication failed" in a for a in answers[:3]), answers
    assert b"too many failed logins" in answers[-1]  # the stranger's own address waits
    with psycopg.connect(served.dsn(), connect_timeout=20) as conn:  # alice, from her own address, does not
        assert conn.execute("SELECT 1").fetchone() == (1,)


def _variant(served: Served, root: Path, server_settings: str, **replace: str) -> Served:
    """A second server on the same data, with its own ledger and these [server] settings."""
    for name in ("census.duckdb", "catalog.toml"):
        (root / name).symlink_to(served.root / name)
    text = served.profile.read_text().replace('listen = "127.0.0.1:0"', f'listen = "127.0.0.1:0"\n{server_settings}')
    text = text.replace('database = "census.duckdb"', f'database = "census.duckdb"\nledger = "{root / "v.state"}"')
    for old, new in replace.items():
        text = text.replace(old, new)
    other = Served(root)
    other.profile.write_text(text)
    return other


def test_idle_strangers_cannot_lock_analysts_out(served, tmp_path):
    """Sockets that never send a byte: at most 4 wait per address, at most max_unauthenticated in all (a
    newcomer takes the place of the longest-waiting one of the busiest address), and each is closed at
    the authentication deadline; the analyst logs in throughout."""
    guarded = _variant(served, tmp_path, "authentication_timeout = 3\nmax_connections = 6\nmax_unauthenticated = 4")
    guarded.start()
    idle = []
    try:
        idle += [socket.create_connection(("127.0.0.1", guarded.port), timeout=20, source_address=("127.0.0.2", 0))
                 for _ in range(4)]
        with socket.create_connection(("127.0.0.1", guarded.port), timeout=20,
                                      source_address=("127.0.0.2", 0)) as fifth:
            assert b"not logged in yet" in _message(fifth)[1]
        idle += [socket.create_connection(("127.0.0.1", guarded.port), timeout=20, source_address=("127.0.0.3", 0))
                 for _ in range(4)]
        started = time.monotonic()
        with psycopg.connect(guarded.dsn(), connect_timeout=20) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            for sock in idle:  # each is closed: taken over, or at the deadline
                assert sock.recv(1) == b""
            assert time.monotonic() - started < 15
            assert conn.execute("SELECT 2").fetchone() == (2,)  # a logged-in client has no deadline
    finally:
        for sock in idle:
            sock.close()
        guarded.stop()


@pytest.mark.parametrize("change, refusal", [
    ("output_dir", "holds the data owner's or a deployment's files"),
    ("md5", "md5 verifier"),
])
def test_the_server_refuses_to_start_with_owner_files_in_reach_or_md5(served, tmp_path, change, refusal):
    carol = next(line for line in served.profile.read_text().split("[analysts.carol]")[1].splitlines()
                 if line.startswith("password"))
    replace = ({"[data]": '[data]\noutput_dir = "."'} if change == "output_dir" else
               {carol: f'password = "md5{hashlib.md5(b"pwcarol").hexdigest()}"'})
    other = _variant(served, tmp_path, "", **replace)
    done = subprocess.run([sys.executable, "-m", "dpsql.interfaces.cli", "serve", str(other.profile)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and refusal in done.stderr and "Traceback" not in done.stderr, done.stderr
