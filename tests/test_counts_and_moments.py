"""COUNT of the privacy unit and of presence columns, VAR/STDDEV under every name: compiled blocks
evaluated on exact marginals equal DuckDB's answers, and the noisy answers' error bars hold."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from dpsql.backends import DuckDBBackend
from dpsql.catalog import Catalog
from dpsql.errors import Error, NotSupportedError, ProgrammingError
from dpsql.sql.compiler import compile_query

CATALOG = """
[tables.v]
privacy_unit = "uid"
max_rows_per_unit = 3
[tables.v.columns]
g = { type = "categorical", values = ["p", "q", "r"] }
x = { type = "integer", min = 0, max = 9, nullable = true }
dev = { type = "presence", nullable = true }
url = { type = "key" }
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.from_toml(CATALOG)


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    # Units of one to three rows; a few rows without a unit (outside the protected table); x NULL on
    # some rows, dev NULL on others; group 'r' holds a single row (a sample variance's empty case).
    c.execute("""CREATE TABLE v AS SELECT CASE WHEN i % 50 = 7 THEN NULL ELSE i // 3 END AS uid,
        CASE WHEN i = 0 THEN 'r' WHEN i % 3 = 0 THEN 'p' ELSE 'q' END AS g,
        CASE WHEN i % 11 = 4 THEN NULL ELSE (i * 7) % 10 END AS x,
        CASE WHEN i % 4 = 1 THEN NULL ELSE 'device-' || i END AS dev, 'u' || (i % 5) AS url
        FROM range(600) r(i)""")
    yield c
    c.close()


def exact(con, table, block) -> np.ndarray:
    clique = block.attributes(table.domain)
    counts = DuckDBBackend(con).marginals(table, [clique], "key")[clique].astype(float)  # units keep all rows
    return block.matrix(table.domain).matvec(counts)


def test_count_of_the_unit_counts_rows_and_a_presence_column_its_non_nulls(con, catalog):
    table = catalog.get("v")
    compiled = compile_query("SELECT g, COUNT(uid), COUNT(v.uid), COUNT(dev), COUNT(x), COUNT(*) FROM v "
                             "WHERE dev IS NOT NULL OR x > 4 GROUP BY g", catalog)
    got = np.array([exact(con, table, a.blocks[0]) for a in compiled.aggregates])
    truth = con.execute("SELECT g, COUNT(uid), COUNT(dev), COUNT(x), COUNT(*) FROM v WHERE uid IS NOT NULL "
                        "AND (dev IS NOT NULL OR x > 4) GROUP BY g ORDER BY g").fetchall()
    order = {"p": 0, "q": 1, "r": 2}
    assert len(compiled.aggregates) == 5  # COUNT(uid) and COUNT(v.uid) are two spellings of one aggregate
    for g, units, devices, xs, rows in truth:
        assert got[:, order[g]].tolist() == [units, units, devices, xs, rows]
    assert units == rows


@pytest.mark.parametrize("sql,message", [
    ("SELECT COUNT(url) FROM v", "key column 'url' does not declare which rows hold NULL"),
    ("SELECT dev, COUNT(*) FROM v GROUP BY dev", "'dev' is declared for presence only.*grouped by"),
    ("SELECT SUM(dev) FROM v", "presence only.*summed"),
    ("SELECT COUNT(*) FROM v WHERE dev = 'a'", "presence only.*compared"),
    ("SELECT SUM(uid) FROM v", "'uid' is not declared"),
    ("SELECT COUNT(w.uid) FROM v", "unknown table qualifier 'w'"),
    ("SELECT g FROM v GROUP BY g", "GROUP BY without an aggregate"),
    ("SELECT g FROM v GROUP BY 1", "GROUP BY without an aggregate"),
    ("SELECT url FROM v GROUP BY url", "GROUP BY without an aggregate"),
])
def test_refusals_name_the_construct(catalog, sql, message):
    with pytest.raises(Error, match=message) as info:
        compile_query(sql, catalog)
    assert isinstance(info.value, (ProgrammingError, NotSupportedError))
