"""GROUP BY GROUPING SETS, ROLLUP, CUBE and GROUPING(): compiled per grouping set, answered from exact sums,
assembled into one result that equals DuckDB's for the same SQL (over data in which every declared group
occurs, so DuckDB lists them all)."""

from __future__ import annotations

import itertools
import math

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.errors import NotSupportedError
from dpsql.answers.result import aggregate_answers, assemble
from dpsql.sql.compiler import compile_query

CATALOG = """
[tables.t]
[tables.t.columns]
a = { type = "integer", min = 0, max = 2 }
c = { type = "categorical", values = ["x", "y"], nullable = true }
o = { type = "categorical", values = ["lo", "hi"] }
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.from_toml(CATALOG)


@pytest.fixture(scope="module")
def con():
    rng = np.random.default_rng(3)
    cells = list(itertools.product(range(3), ["x", "y", None], ["lo", "hi"]))
    rows = cells + [cells[i] for i in rng.integers(len(cells), size=200)]
    c = duckdb.connect()
    c.execute("CREATE TABLE t (a INTEGER, c VARCHAR, o VARCHAR)")
    c.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    yield c
    c.close()


class Exact:
    """Every block's exact answer, no error."""

    def __init__(self, con, table):
        self.con, self.table = con, table

    def answer(self, block):
        clique = block.attributes(self.table.domain)
        counts = DuckDBBackend(self.con).marginals(self.table, [clique])[clique].astype(float)
        values = block.matrix(self.table.domain).matvec(counts)
        return values, np.zeros_like(values)

    def covariance(self, first, second):
        return np.zeros(first.num_rows(self.table.domain))


def _rounded(rows):
    return sorted((tuple(round(v, 9) if isinstance(v, float) else v for v in r) for r in rows), key=repr)


QUERIES = [  # (dpsql SQL, DuckDB SQL when it differs, dialect)
    ("SELECT a, c, COUNT(*), SUM(a), GROUPING(a, c) FROM t GROUP BY ROLLUP (a, c)", None, "duckdb"),
    ("SELECT c, o, AVG(a), GROUPING(c) AS gc, GROUPING(o) FROM t GROUP BY CUBE (c, o)", None, "duckdb"),
    ("SELECT a, COUNT(*) FROM t WHERE o = 'hi' GROUP BY GROUPING SETS ((a), ())", None, "duckdb"),
    ("SELECT a, o, COUNT(*) AS n FROM t GROUP BY a, ROLLUP (o) HAVING n > 20 OR GROUPING(o) = 1", None, "duckdb"),
    ("SELECT c, VAR_POP(a), COUNT(c) FROM t GROUP BY GROUPING SETS (c, ())", None, "duckdb"),
    ("SELECT a, c, o, COUNT(*), GROUPING_ID(a, o) FROM t GROUP BY GROUPING SETS ((a, c), (o), ROLLUP (a))",
     None, "duckdb"),
    ("SELECT c, COUNT(*) FROM t GROUP BY c WITH ROLLUP", "SELECT c, COUNT(*) FROM t GROUP BY ROLLUP (c)", "mysql"),
    ("SELECT o, a, COUNT(*) FROM t GROUP BY CUBE (o, a) ORDER BY GROUPING(o, a), 3 DESC LIMIT 5", None, "duckdb"),
]


@pytest.mark.parametrize("sql,reference,dialect", QUERIES, ids=[q for q, _, _ in QUERIES])
def test_grouping_sets_from_exact_answers_equal_duckdb(con, catalog, sql, reference, dialect):
    compiled = compile_query(sql, catalog, dialect=dialect)
    result = assemble(compiled, aggregate_answers(compiled, Exact(con, catalog.get("t"))))
    expected = con.execute(reference or sql).fetchall()
    if "ORDER BY" in sql:  # the order is the query's: compare row by row
        assert [r[:-1] for r in result.rows] == [r[:-1] for r in expected]
        assert [r[-1] for r in result.rows] == pytest.approx([r[-1] for r in expected])
    else:
        assert _rounded(result.rows) == _rounded(expected)
    assert len(compiled.sets) >= 2 and len(compiled.aggregates) % len(compiled.sets) == 0


def test_rows_come_set_by_set_and_each_set_is_a_marginal_of_one_plan(catalog):
    compiled = compile_query("SELECT a, c, COUNT(*) FROM t GROUP BY ROLLUP (a, c)", catalog)
    assert compiled.sets == ((0, 1), (0,), ()) and compiled.rows == 3 * 3 + 3 + 1
    assert [b.group_by for b in compiled.blocks] == [("a", "c"), ("a",), ()]
    assert len({b.name for b in compiled.blocks}) == 3
    result = assemble(compiled, compiled.zero_answers())
    assert [r[:2] for r in result.rows[9:]] == [(0, None), (1, None), (2, None), (None, None)]


def test_one_charge_for_every_grouping_set_and_refusals_spend_nothing(tmp_path):
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
    db = duckdb.connect()
    create_people_table(db, rows=5000)
    conn = dpsql.connect(con=db, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, seed=1)
    cur = conn.execute("SELECT sex, region, COUNT(*), GROUPING(sex, region) FROM people GROUP BY CUBE (sex, region)")
    result = cur.result
    assert len(result.rows) == (2 + 1) * (4 + 1) and result.charged > 0
    total = [r for r in result.rows if r[3] == 3][0]
    by_sex = sum(r[2] for r in result.rows if r[3] == 1)
    assert by_sex == pytest.approx(total[2], rel=1e-6)  # least squares: the marginals agree
    spent = conn.budget.spent.epsilon
    for sql in ("SELECT sex, COUNT(*) FROM people GROUP BY ROLLUP (sex) HAVING GROUPING(age) = 0",
                "SELECT sex, COUNT(DISTINCT age) FROM people GROUP BY ROLLUP (sex)"):
        with pytest.raises(dpsql.Error):
            conn.execute(sql)
    assert conn.budget.spent.epsilon == spent
    again = conn.execute("SELECT region, COUNT(*) FROM people GROUP BY ROLLUP (region)").result
    assert again.charged == 0 and not math.isnan(again.rows[-1][1])


def test_an_unreleased_key_column_is_refused_in_grouping_sets():
    catalog = Catalog.from_toml('[tables.v]\nprivacy_unit = "u"\nmax_rows_per_unit = 1\n[tables.v.columns]\n'
                                'url = { type = "key" }\nage = { type = "integer", min = 0, max = 3 }')
    with pytest.raises(NotSupportedError, match="keys of 'url' have not been released"):
        compile_query("SELECT url, COUNT(*) FROM v GROUP BY ROLLUP (url)", catalog)
    with pytest.raises(NotSupportedError, match="COUNT\\(DISTINCT <privacy unit>\\) with GROUPING SETS"):
        compile_query("SELECT age, COUNT(DISTINCT u) FROM v GROUP BY ROLLUP (age)", catalog)
