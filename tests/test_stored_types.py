"""Scans leave out the per-row catalog checks that the engine's column types make true, and only those."""

import duckdb
import numpy as np
import pytest

from dpsql.backends import DuckDBBackend
from dpsql.catalog import Catalog
from dpsql.columns import StoredType

CATALOG = """
[tables.t.columns]
sex  = { type = "categorical", values = ["F", "M"] }
kind = { type = "categorical", values = ["a", "b", "c"], nullable = true }
age  = { type = "integer", min = 0, max = 9 }
"""
ROWS = [("F", "a", 3), ("M", None, 4), ("M", "c", 12), ("F", "b", 0), ("M", "a", 9)]


def _backend(schema: str, rows=ROWS):
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({schema})")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    return DuckDBBackend(con), Catalog.from_toml(CATALOG).get("t")


PLAIN = "sex VARCHAR, kind VARCHAR, age INTEGER"
TYPED = "sex ENUM('F', 'M') NOT NULL, kind ENUM('a', 'b', 'c'), age INTEGER NOT NULL"


def test_enum_and_not_null_columns_need_no_check():
    backend, table = _backend(TYPED)
    stored = backend.stored_types(table)
    assert stored["sex"] == StoredType(("F", "M"), True) and stored["age"] == StoredType(None, True, integral=True)
    assert table.fits_sql(stored) == "TRUE"
    assert "CASE" in table.fits_sql() and "IS NOT NULL" in table.fits_sql()


@pytest.mark.parametrize("schema, check", [
    ("sex ENUM('F', 'M', 'X') NOT NULL, kind VARCHAR, age INTEGER NOT NULL", "CASE"),  # an undeclared value
    ("sex ENUM('F', 'M'), kind VARCHAR, age INTEGER NOT NULL", '"sex" IS NOT NULL'),  # NULLs allowed
    ("sex VARCHAR NOT NULL, kind VARCHAR, age INTEGER NOT NULL", "CASE"),  # any string
])
def test_types_that_prove_less_keep_their_checks(schema, check):
    backend, table = _backend(schema)
    fits = table.fits_sql(backend.stored_types(table))
    assert check in fits and "age" not in fits


def test_the_marginals_are_those_of_the_checked_scan():
    rows = ROWS + [("X", "b", 1), (None, "a", 2)]  # rows that do not fit: left out either way
    plain, table = _backend(PLAIN, rows)
    typed, _ = _backend("sex ENUM('F', 'M', 'X'), kind ENUM('a', 'b', 'c'), age INTEGER NOT NULL", rows)
    cliques = [("sex",), ("kind", "age"), ("sex", "kind", "age")]
    expected = plain.marginals(table, cliques)
    assert expected[("sex",)].tolist() == [2, 3]
    for got in (typed.marginals(table, cliques), _backend(TYPED)[0].marginals(table, cliques)):
        for clique in cliques:
            assert np.array_equal(got[clique], expected[clique])


@pytest.mark.parametrize("stored_type", ["INTEGER", "BIGINT", "DOUBLE"])
def test_integer_bins_clamp_and_floor_as_before(stored_type):
    """Binning by CASE (and without FLOOR for integer types) gives every value the bin LEAST/GREATEST gave."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE v (x {stored_type})")
    values = [-5, 0, 3, 9, 10, 2**30, None] + ([2**40] if stored_type != "INTEGER" else []) + ([2.5, 9.999, -0.5, float("nan"), float("inf"), float("-inf")]
                                               if stored_type == "DOUBLE" else [])
    con.executemany("INSERT INTO v VALUES (?)", [(v,) for v in values])
    column = Catalog.from_toml('[tables.v.columns]\nx = { type = "integer", min = 0, max = 9, nullable = true }'
                               ).get("v").columns["x"]
    old = "CASE WHEN x IS NULL THEN 10 ELSE CAST(FLOOR(LEAST(GREATEST(x, 0), 9)) - 0 AS INTEGER) END"
    new = column.bin_sql(integral=stored_type != "DOUBLE")
    rows = con.execute(f"SELECT {new}, {old} FROM v").fetchall()
    assert len(rows) == len(values) and all(a == b for a, b in rows)
