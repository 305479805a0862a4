"""PEP 249 compliance: the third-party `dbapi20` suite (PyPI: dbapi-compliance) against dpsql.

Its tables are public: they live in each connection's workspace (an in-memory DuckDB
database), beside one protected table that the catalog declares. Beyond the suite: the
row counts DuckDB reports for DML, and type codes for each kind of column.
"""

import unittest

import dbapi20
import duckdb
import pytest

import dpsql

CATALOG = {"tables": {"people": {"columns": {"age": {"type": "integer", "min": 0, "max": 99}}}}}


class TestDpsqlCompliance(dbapi20.DatabaseAPI20Test):
    driver = dpsql
    connect_args = (":memory:",)
    connect_kw_args = {"catalog": CATALOG, "epsilon": 1.0}
    lower_func = None  # no stored procedures: Cursor.callproc is absent, as PEP 249 allows

    @unittest.skip("close() is idempotent, as in most drivers; PEP 249 leaves a second close undefined")
    def test_non_idempotent_close(self):
        pass

    def test_nextset(self):
        """A script gives one result set per statement (the suite's own test needs stored procedures)."""
        con = self._connect()
        try:
            cur = con.cursor()
            self.executeDDL1(cur)
            for sql in self._populate():
                cur.execute(sql)
            cur.execute(f"select count(*) from {self.table_prefix}booze; select name from {self.table_prefix}booze")
            self.assertEqual(cur.fetchone()[0], len(self.samples))
            self.assertTrue(cur.nextset())
            self.assertEqual(len(cur.fetchall()), len(self.samples))
            self.assertIsNone(cur.nextset())
        finally:
            con.close()

    def test_setoutputsize(self):
        """setoutputsize is accepted and does nothing: rows are returned whole."""
        con = self._connect()
        try:
            cur = con.cursor()
            cur.setoutputsize(1, 0)
            self._paraminsert(cur)
        finally:
            con.close()


@pytest.fixture
def cur():
    data = duckdb.connect()
    data.execute("CREATE TABLE people AS SELECT range % 100 AS age FROM range(1000)")
    with dpsql.connect(con=data, catalog=CATALOG, epsilon=1.0, seed=1) as conn:
        yield conn.cursor()
    data.close()


def test_dml_reports_the_rows_it_changed(cur):
    cur.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")
    assert cur.description is None and cur.rowcount == -1
    cur.executemany("INSERT INTO t VALUES (?, ?)", [(1, "x"), (2, "y"), (3, None)])
    assert cur.rowcount == 3
    cur.execute("UPDATE t SET b = 'z' WHERE a >= 2")
    assert cur.rowcount == 2 and cur.description is None
    with pytest.raises(dpsql.ProgrammingError):
        cur.fetchall()
    cur.execute("INSERT INTO t VALUES (4, 'w') RETURNING a")  # RETURNING: a result set
    assert cur.fetchall() == [(4,)] and cur.rowcount == 1
    cur.execute('SELECT count(*) AS "Count" FROM t')  # shaped like DuckDB's status, but a query
    assert cur.fetchall() == [(4,)]
    cur.execute("DELETE FROM t WHERE a = 1; SELECT a FROM t ORDER BY a; DROP TABLE t")
    assert cur.rowcount == 1 and cur.description is None
    assert cur.nextset() and cur.fetchall() == [(2,), (3,), (4,)] and cur.rowcount == 3
    assert cur.nextset() and cur.description is None and cur.rowcount == -1


def test_type_codes_compare_equal_to_the_type_objects(cur):
    cur.execute("SELECT 'a', 1, 2.5::DECIMAL(10, 2), 1.5::DOUBLE, DATE '2024-01-02', TIMESTAMP '2024-01-02 03:04:05', "
                "'\\x01'::BLOB")
    codes = [d[1] for d in cur.description]
    assert codes[0] == dpsql.STRING and codes[0] != dpsql.NUMBER
    assert all(code == dpsql.NUMBER for code in codes[1:4])
    assert all(code == dpsql.DATETIME for code in codes[4:6])
    assert codes[6] == dpsql.BINARY
    assert all(code != dpsql.ROWID for code in codes)
    cur.execute("SELECT ?, ?, ?", [dpsql.Date(2024, 1, 2), dpsql.Timestamp(2024, 1, 2, 3, 4, 5), dpsql.Binary(b"\x01")])
    assert cur.fetchone() == (dpsql.Date(2024, 1, 2), dpsql.Timestamp(2024, 1, 2, 3, 4, 5), b"\x01")


def test_dp_answers_have_type_codes_and_row_counts(cur):
    cur.execute("SELECT COUNT(*) AS n FROM people")
    assert cur.description[0][0] == "n" and cur.description[0][1] == dpsql.NUMBER and cur.rowcount == 1
