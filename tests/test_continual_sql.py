"""Continual queries in SQL: CREATE CONTINUAL QUERY charges once, EMIT releases a window at a time,
and append-only tables keep each unit's first rows by time (online-stable bounding)."""

from datetime import datetime

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.releases.continual import Schedule
from dpsql.errors import NotSupportedError, ProgrammingError

CATALOG = """
[tables.signups]
privacy_unit = "user_id"
max_rows_per_unit = 3
time = "signup_time"
append_only = true
[tables.signups.columns]
region = { type = "categorical", values = ["N", "S"] }
"""
CREATE = ("CREATE CONTINUAL QUERY weekly AS SELECT region, COUNT(*) AS n FROM signups GROUP BY region "
          "EMIT EVERY INTERVAL '7 days' ON signup_time FROM '2025-01-06' FOR {T} RELEASES WITH (epsilon = 1)")


def _stream(con, users=3000, days=140, seed=0, table="signups"):
    """Each user signs up 1 to 3 times (never beyond the bound, so exact counts are the truth)."""
    rng = np.random.default_rng(seed)
    rows = [(u, int(d), "N" if u % 3 else "S") for u in range(users)
            for d in rng.integers(0, days, 1 + u % 3)]
    _insert(con, table, rows)
    return rows


def _insert(con, table, rows):
    con.execute(f"CREATE TABLE {table} AS SELECT unnest(?) AS user_id, TIMESTAMP '2025-01-06' + unnest(?) * "
                "INTERVAL 1 DAY AS signup_time, unnest(?) AS region", [list(c) for c in zip(*rows)])


def _truth(rows, window, region):
    return sum(1 for _, d, r in rows if d // 7 == window and r == region)


@pytest.fixture
def stream():
    con = duckdb.connect()
    rows = _stream(con)
    conn = dpsql.connect(con=con, catalog=CATALOG, epsilon=3.0, delta=1e-6, seed=5)
    return conn, rows


def test_create_charges_once_and_each_emit_releases_the_next_window_free(stream):
    conn, rows = stream
    cur = conn.cursor()
    cur.execute(CREATE.format(T=20))
    charged = conn.session.ledger.spent()
    assert charged == pytest.approx(conn.session.share(1.0, None))
    cur.execute("SET dpsql.stderr = on")
    totals = {"N": 0, "S": 0}
    for window in range(4):
        cur.execute("EMIT weekly")
        got = cur.fetchall()
        assert [r[0] for r in got] == [window + 1] * 2
        for _, _, _, region, n, n_err, total, total_err in got:
            totals[region] += _truth(rows, window, region)
            assert abs(n - _truth(rows, window, region)) < 6 * n_err
            assert abs(total - totals[region]) < 6 * total_err
    assert conn.session.ledger.spent() == charged
    assert conn.session.ledger.verify() == []
    shown = cur.execute("SHOW CONTINUAL weekly").fetchall()
    assert len(shown) == 8 and all(abs(r[4] - _truth(rows, r[0] - 1, r[3])) < 6 * r[5] for r in shown)


def test_emits_continue_in_a_new_connection_from_the_ledger(tmp_path):
    path = str(tmp_path / "s.duckdb")
    con = duckdb.connect(path)
    _stream(con)
    con.close()
    state = str(tmp_path / "ledger.duckdb")
    with dpsql.connect(path, catalog=CATALOG, epsilon=3.0, delta=1e-6, state=state) as conn:
        conn.cursor().execute(CREATE.format(T=10))
        conn.cursor().execute("EMIT weekly")
    with dpsql.connect(path, catalog=CATALOG, state=state) as conn:
        assert conn.cursor().execute("EMIT weekly").fetchall()[0][0] == 2
        assert len(conn.cursor().execute("SHOW CONTINUAL weekly").fetchall()) == 4


def test_sensdiff_at_a_short_horizon_measures_the_newest_window_only(stream):
    conn, _ = stream
    cur = conn.cursor()
    cur.execute(CREATE.format(T=4))
    assert dict(cur.fetchall())["time strategy"] == "identity"  # SENSDIFF
    seen = []
    backend = conn.session.executor.backend
    original = backend.window_counts
    backend.window_counts = lambda *a, **k: seen.append(a[4:6]) or original(*a, **k)
    for _ in range(3):
        cur.execute("EMIT weekly")
    assert seen == [(0, 1), (1, 2), (2, 3)]


@pytest.mark.parametrize("sql, error, message", [
    (CREATE.format(T=10).replace("'7 days'", "'1 month'"), ProgrammingError, "months vary"),
    (CREATE.format(T=10).replace("ON signup_time", "ON other_time"), NotSupportedError, "needs a stream"),
    (CREATE.format(T=10).replace("COUNT(*) AS n", "COUNT(*) AS n, COUNT(*) AS m"), NotSupportedError, "one COUNT"),
    (CREATE.format(T=10).replace("FROM '2025-01-06'", "FROM '2999-01-01'"), None, None),
    ("EMIT nothing", ProgrammingError, "no continual query"),
])
def test_misuse_is_refused_and_spends_nothing(stream, sql, error, message):
    conn, _ = stream
    cur = conn.cursor()
    if error is None:  # a query over future windows is created, but a window is emitted only once closed
        cur.execute(sql)
        spent = conn.session.ledger.spent()
        with pytest.raises(ProgrammingError, match="closes at"):
            cur.execute("EMIT weekly")
        assert conn.session.ledger.spent() == spent
        return
    with pytest.raises(error, match=message):
        cur.execute(sql)
    assert conn.session.ledger.spent() == 0


def test_a_table_that_is_not_a_stream_is_refused():
    con = duckdb.connect()
    _stream(con)
    catalog = CATALOG.replace("append_only = true\n", "").replace('time = "signup_time"\n', "")
    conn = dpsql.connect(con=con, catalog=catalog, epsilon=1.0, delta=1e-6)
    with pytest.raises(NotSupportedError, match="append_only"):
        conn.cursor().execute(CREATE.format(T=10))


def test_all_releases_made_and_duplicate_names_are_refused(stream):
    conn, _ = stream
    cur = conn.cursor()
    cur.execute(CREATE.format(T=2))
    cur.execute("EMIT weekly")
    cur.execute("EMIT weekly")
    with pytest.raises(ProgrammingError, match="all its 2 releases"):
        cur.execute("EMIT weekly")
    with pytest.raises(ProgrammingError, match="exists already"):
        cur.execute(CREATE.format(T=2))


def _window_counts(con, table, k=3):
    catalog = Catalog.from_toml(CATALOG.replace("signups", table).replace("max_rows_per_unit = 3",
                                                                          f"max_rows_per_unit = {k}"))
    schedule = Schedule("signup_time", datetime(2025, 1, 6), 7 * 86400, 20)
    return DuckDBBackend(con).window_counts(catalog.get(table), ("region",), "TRUE", schedule.window_sql(), 0, 20,
                                            "key")


@pytest.mark.parametrize("seed", range(5))
def test_bounding_by_time_is_online_stable_and_a_unit_moves_the_stream_by_at_most_k(seed):
    """Removing one unit changes the window-difference sequence by at most k in L1; rows that arrive later
    (later times) never change what earlier windows count."""
    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    rows = [(int(u), int(d), "N" if u % 2 else "S") for u, d in zip(rng.integers(0, 40, 400), rng.integers(0, 140, 400))]
    for name, subset in [("whole", rows), ("without", [r for r in rows if r[0] != rows[0][0]]),
                         ("early", [r for r in rows if r[1] < 70])]:
        _insert(con, name, subset)
    full, without, early = (_window_counts(con, name) for name in ("whole", "without", "early"))
    assert 0 < np.abs(full - without).sum() <= 3
    assert np.array_equal(full[:10], early[:10])  # windows 0-9 end by day 70


def test_the_duckdb_functions_and_the_command_line_emit(tmp_path, capsys):
    from dpsql.interfaces.cli import main

    path, catalog = str(tmp_path / "s.duckdb"), tmp_path / "catalog.toml"
    catalog.write_text(CATALOG)
    con = duckdb.connect(path)
    _stream(con)
    dpsql.register(con, catalog=str(catalog), epsilon=2.0, delta=1e-6)
    con.execute("SELECT * FROM dp_query(?)", [CREATE.format(T=10)]).fetchall()
    assert con.execute("SELECT window_number FROM dp_emit('weekly')").fetchall() == [(1,), (1,)]
    con.close()
    assert main(["continual", "emit", "weekly", "--database", path, "--catalog", str(catalog)]) == 0
    assert "no charge" in capsys.readouterr().out
    assert main(["continual", "show", "weekly", "--database", path, "--catalog", str(catalog)]) == 0
    shown = capsys.readouterr().out
    assert shown.count("| 2025-01-06 00:00:00 |") == 2 and shown.count("| 2025-01-13 00:00:00 |") == 4  # 2 windows


def test_a_scan_ranks_only_the_time_prefix_and_the_units_it_counts_yet_keeps_the_same_rows():
    """Bounding over rows up to the scan's last window, of units it counts, equals bounding the whole table."""

    con = duckdb.connect()
    rng = np.random.default_rng(3)
    _insert(con, "signups", [(int(u), int(d), "N" if u % 2 else "S")
                             for u, d in zip(rng.integers(0, 60, 900), rng.integers(0, 140, 900))])
    table = Catalog.from_toml(CATALOG).get("signups")
    window = Schedule("signup_time", datetime(2025, 1, 6), 7 * 86400, 20).window_sql()
    for first, last in [(0, 1), (5, 6), (3, 11), (19, 20)]:
        fast = DuckDBBackend(con).window_counts(table, ("region",), "TRUE", window, first, last, "key")
        whole = con.execute(f"SELECT w, region, COUNT(*) FROM (SELECT {window} AS w, region FROM "
                            f"{table.source_sql('key')}) WHERE w >= {first} AND w < {last} GROUP BY ALL").fetchall()
        expected = np.zeros_like(fast)
        for w, region, n in whole:
            expected[w - first, ["N", "S"].index(region)] = n
        assert np.array_equal(fast, expected)
