"""What a scan can leave out: the per-row catalog checks the engine's column types make true (and only
those), and the rows outside the bins the measurements read."""

import duckdb
import numpy as np
import pytest

from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.tables.columns import StoredType

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


@pytest.mark.parametrize("stored_type, values", [
    ("INTEGER", [-5, 0, 3, 9, 10, 2**30, None]),
    ("BIGINT", [-5, 0, 3, 9, 10, 2**40, None]),
    ("DOUBLE", [-5, 0, 2.5, 9.999, 10, -0.5, float("nan"), float("inf"), float("-inf"), None]),
    ("DECIMAL(8, 2)", [-5, 0, 2.5, 9.99, 10, None]),
    ("BOOLEAN", [True, False, None]),
])
def test_integer_bins_are_those_of_least_and_greatest(stored_type, values):
    """An integer column stored as an integer type is binned by CASE without FLOOR, any other type as
    before; every value, and each bin range a restricted scan selects, gets the rows LEAST/GREATEST gave."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE v (x {stored_type})")
    con.executemany("INSERT INTO v VALUES (?)", [(v,) for v in values])
    column = Catalog.from_toml('[tables.v.columns]\nx = { type = "integer", min = 0, max = 9, nullable = true }'
                               ).get("v").columns["x"]
    integral = stored_type in ("INTEGER", "BIGINT")
    old = "CASE WHEN x IS NULL THEN 10 ELSE CAST(FLOOR(LEAST(GREATEST(x, 0), 9)) - 0 AS INTEGER) END"
    rows = con.execute(f"SELECT {column.bin_sql(integral=integral)}, {old} FROM v").fetchall()
    assert len(rows) == len(values) and all(a == b for a, b in rows)
    for low, high, null in [(0, 3, False), (4, 9, True), (2, 2, False), (0, 9, False)]:
        bins = (np.arange(11) >= low) & (np.arange(11) <= high)
        bins[10] = null
        where = column.within_sql(bins, integral)
        chosen = con.execute(f"SELECT COUNT(*) FROM v WHERE {where}").fetchone()[0]
        assert chosen == sum(bins[b] for (b, _) in rows), (low, high, null, where)


def test_a_scan_within_the_measured_bins_counts_them_as_the_full_scan_does():
    """Each clique's cells inside its box (the bins its measurements read) are counted as the full scan counts
    them, and any other cell either so or as 0; contiguous integer ranges, gaps, NULL bins, categoricals and
    numeric bins, one clique or several in one scan (each restricting only what all of them restrict)."""
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

    con = duckdb.connect()
    create_people_table(con, rows=20_000)
    con.execute("INSERT INTO people VALUES (0, -3, 'F', 'White', 'HS', 'Married', 'West', 120, 1e9)")
    con.execute("INSERT INTO people VALUES (0, 150, 'M', 'Black', 'HS', 'Married', 'West', NULL, -5)")
    table = Catalog.from_toml(PEOPLE_CATALOG_TOML).get("people")
    backend = DuckDBBackend(con)
    rng = np.random.default_rng(7)
    several = [("age", "education"), ("sex", "hours_per_week"), ("income",), ("age", "hours_per_week", "region")]
    full = backend.marginals(table, several)
    for trial in range(16):
        cliques = several if trial >= 8 else [several[trial % 4]]
        within = {}
        for q in cliques:
            sizes = [table.domain.size_of(a) for a in q]
            if trial % 3 == 0:  # contiguous ranges
                box = []
                for n in sizes:
                    lo, hi = sorted(rng.integers(0, n, 2))
                    box.append(np.arange(n) >= lo) if trial % 2 else box.append((np.arange(n) >= lo) & (np.arange(n) <= hi))
            else:
                box = [rng.random(n) < 0.5 for n in sizes]
            within[q] = box
        got = backend.marginals(table, cliques, within=within)
        for q in cliques:
            inside = np.ix_(*within[q])
            shape = [table.domain.size_of(a) for a in q]
            counted, exact = got[q].reshape(shape), full[q].reshape(shape)
            assert np.array_equal(counted[inside], exact[inside]), (trial, q)
            assert np.all((counted == exact) | (counted == 0)), (trial, q)
            if len(cliques) == 1:
                assert counted.sum() == exact[inside].sum() < exact.sum(), (trial, q)  # the scan did restrict


@pytest.mark.parametrize("sql", [
    "SELECT education, COUNT(*) FROM people WHERE age BETWEEN 30 AND 39 GROUP BY education",
    "SELECT sex, AVG(hours_per_week) FROM people WHERE age >= 90 AND region IN ('West', 'South') GROUP BY sex",
    "BEGIN WORKLOAD; SELECT race, COUNT(*) FROM people WHERE age < 18 GROUP BY race; "
    "SELECT SUM(income) FROM people WHERE age BETWEEN 40 AND 49 AND education = 'HS'; END WORKLOAD",
])
def test_answers_are_those_of_the_full_scan(sql):
    """The executor reads only the bins its measurements read: with the same noise, every answer is the one
    a full scan gives."""
    import dpsql
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

    con = duckdb.connect()
    create_people_table(con, rows=20_000)

    def answers(restricted: bool):
        conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=5.0, delta=1e-9, query_epsilon=1.0,
                             seed=11)
        backend = conn.session.backend
        scanned = []
        full = backend.marginals

        def marginals(table, cliques, key=None, within=None):
            scanned.append(within)
            return full(table, cliques, key, within if restricted else None)

        backend.marginals = marginals
        cur = conn.cursor()
        cur.execute(sql)
        out = [cur.fetchall()]
        while cur.nextset():
            out.append(cur.fetchall())
        return out, scanned

    restricted, boxes = answers(True)
    assert answers(False)[0] == restricted
    assert any(not b.all() for within in boxes for box in within.values() for b in box)  # it did restrict


def test_the_catalog_command_says_what_scans_check(tmp_path, capsys):
    """`dpsql catalog` (the owner's tool) reports per column what every scan checks row by row, and a table
    that does not bind as declared, reading the schema only."""
    from dpsql.interfaces.cli import main
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

    database, catalog = tmp_path / "d.duckdb", tmp_path / "catalog.toml"
    con = duckdb.connect(str(database))
    create_people_table(con, rows=100, typed=False)
    con.close()
    catalog.write_text(PEOPLE_CATALOG_TOML)
    assert main(["catalog", str(database), "--catalog", str(catalog)]) == 0
    lines = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in capsys.readouterr().out.splitlines()
             if line.startswith(" people")}
    assert lines["sex"] == "declared values" and lines["age"] == "NULLs" and lines["hours_per_week"] == "nothing"
    catalog.write_text(PEOPLE_CATALOG_TOML.replace('region ', 'regions '))
    assert main(["catalog", str(database), "--catalog", str(catalog)]) == 1
    assert "DOES NOT BIND" in capsys.readouterr().out


def test_a_restricted_scan_bounds_the_same_rows():
    """With a privacy unit, the scan keeps each unit's rows by the secret ranking over all its rows and
    only then restricts to the needed bins: the cells it counts are those of the full bounded scan."""
    from tests.test_user_level import K, VISITS, make_visits

    con = duckdb.connect()
    make_visits(con)
    table = Catalog.from_toml(VISITS).get("visits")
    backend = DuckDBBackend(con)
    full = backend.marginals(table, [("a", "s")], "secret")[("a", "s")].reshape(10, 2)
    box = [np.arange(10) >= 6, np.array([True, False])]
    got = backend.marginals(table, [("a", "s")], "secret", within={("a", "s"): box})[("a", "s")].reshape(10, 2)
    assert np.array_equal(got[np.ix_(*box)], full[np.ix_(*box)]) and got.sum() == full[np.ix_(*box)].sum()
    assert full.sum() <= 60 * K


def test_the_support_of_a_query_is_the_box_of_bins_its_factors_read():
    from mechanisms.matrices import Dense, Diagonal, Identity, Kronecker, Prefix, Sum, Weighted
    from mechanisms.measurement import support

    rows = Dense(np.array([[0, 1, 1, 0], [0, 0, 1, 0]]))
    got = support(Kronecker([rows, Diagonal(np.array([1.0, 0.0, 2.0]))]), (4, 3))
    assert [b.tolist() for b in got] == [[False, True, True, False], [True, False, True]]
    summed = Sum([Weighted(Kronecker([rows, Identity(3)]), 2.0),
                  Weighted(Kronecker([Dense(np.eye(4)[:2]), Prefix(3)]), 0.0)])  # a zero term reads nothing
    assert [b.tolist() for b in support(summed, (4, 3))] == [[False, True, True, False], [True, True, True]]
    assert all(b.all() for b in support(None, (4, 3)))
    with pytest.raises(ValueError):
        support(Kronecker([rows, Identity(3)]), (5, 3))
