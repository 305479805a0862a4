"""Threshold predicates in SQL: a sum of conditions cast to numbers, compared with a literal.

Each compiled block, evaluated on exact marginals from DuckDB, must equal DuckDB's own
answer to the same SQL (NULLs included: a cast of an UNKNOWN condition is NULL, and so is
the comparison). Sizes beyond the limit are refused before anything else happens.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.errors import NotSupportedError, ProgrammingError
from dpsql.sql.expressions import MAX_THRESHOLD_CONDITIONS

CATALOG = Catalog.from_toml(
    """
[tables.t]
[tables.t.columns]
a = { type = "integer", min = 0, max = 4 }
b = { type = "integer", min = 0, max = 3 }
c = { type = "integer", min = 0, max = 9, nullable = true }
s = { type = "categorical", values = ["x", "y", "z"], nullable = true }
"""
)
TABLE = CATALOG.get("t")


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute("SELECT setseed(0.5)")
    c.execute(
        """CREATE TABLE t AS SELECT
             CAST(floor(random() * 5) AS INTEGER) AS a,
             CAST(floor(random() * 4) AS INTEGER) AS b,
             CASE WHEN random() < 0.15 THEN NULL ELSE CAST(floor(random() * 10) AS INTEGER) END AS c,
             CASE WHEN random() < 0.15 THEN NULL ELSE ['x', 'y', 'z'][CAST(floor(random() * 3) AS INTEGER) + 1] END AS s
           FROM range(500)"""
    )
    yield c
    c.close()


def dp_counts(sql: str, con) -> np.ndarray:
    """Every row of the compiled query's single block, evaluated exactly on DuckDB's marginals."""
    block = compile_query(sql, CATALOG).blocks[0]
    clique = block.attributes(TABLE.domain)
    counts = DuckDBBackend(con).marginals(TABLE, [clique])[clique]
    return np.asarray(block.matrix(TABLE.domain, clique).matvec(counts.astype(float)))


CASES = [
    "(a = 1)::INT + (b = 2)::INT + (c > 5)::INT >= 2",
    "(a = 1)::INT + (b = 2)::INT + (c > 5)::INT + (s = 'y')::INT >= 1",
    "(a = 1)::INT + (b = 2)::INT + (c > 5)::INT + (s = 'y')::INT >= 2",
    "(a = 1)::INT + (b = 2)::INT + (c > 5)::INT + (s = 'y')::INT = 4",
    "2 <= CAST(a = 1 AS INTEGER) + 2 * CAST(s = 'x' AS INTEGER) - 1",
    "(a < 2)::INT + (a > 3)::INT + (b IN (1, 2))::INT < 2",
    "NOT ((c IS NULL)::INT + (s IS NULL)::INT = 1)",
    "(a = 1 OR s = 'z')::DOUBLE + 0.5 * (c BETWEEN 2 AND 4)::DOUBLE >= 1.5",
    "-(a = 0)::INT + (b = 0)::INT <> 0",
]


@pytest.mark.parametrize("condition", CASES)
def test_threshold_counts_equal_duckdb(condition, con):
    sql = f"SELECT COUNT(*) FROM t WHERE {condition}"
    assert dp_counts(sql, con)[0] == con.execute(sql).fetchone()[0]


def test_threshold_in_filter_and_group_by(con):
    sql = "SELECT b, COUNT(*) FILTER (WHERE (a = 1)::INT + (c > 5)::INT + (s = 'y')::INT >= 2) FROM t GROUP BY b ORDER BY b"
    want = [row[1] for row in con.execute(sql).fetchall()]
    assert dp_counts(sql, con).tolist() == want


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.sampled_from(["a = 1", "a >= 3", "b = 2", "c > 4", "c IS NULL", "s = 'y'", "s <> 'x'"]), st.integers(-2, 2)),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from(["=", "<>", "<", "<=", ">", ">="]),
    st.integers(-3, 4),
)
def test_random_thresholds_equal_duckdb(con, terms, op, bound):
    total = " + ".join(f"{w} * ({cond})::INT" for cond, w in terms)
    sql = f"SELECT COUNT(*) FROM t WHERE {total} {op} {bound}"
    assert dp_counts(sql, con)[0] == con.execute(sql).fetchone()[0]


def test_conjunction_is_a_single_product_term():
    block = compile_query("SELECT COUNT(*) FROM t WHERE (a = 1)::INT + (b = 2)::INT + (s = 'x')::INT = 3", CATALOG).blocks[0]
    assert len(block.terms) == 1


def test_one_of_k_uses_the_negated_form():
    """1-of-4 over non-nullable columns: known - prod(false), 2 terms instead of 15."""
    sql = "SELECT COUNT(*) FROM t WHERE (a = 1)::INT + (b = 2)::INT + (a = 3)::INT + (b = 0)::INT >= 1"
    assert len(compile_query(sql, CATALOG).blocks[0].terms) <= 2


def test_too_many_conditions_are_refused():
    k = MAX_THRESHOLD_CONDITIONS + 1
    total = " + ".join(f"(a = {i % 5})::INT" for i in range(k))
    with pytest.raises(NotSupportedError, match=f"threshold over {k} conditions exceeds the limit"):
        compile_query(f"SELECT COUNT(*) FROM t WHERE {total} >= 2", CATALOG)


def test_a_threshold_against_a_string_is_refused():
    with pytest.raises(ProgrammingError, match="could not be evaluated on the declared values"):
        compile_query("SELECT COUNT(*) FROM t WHERE (a = 1)::INT + (b = 2)::INT >= 'x'", CATALOG)


@pytest.mark.parametrize("condition", ["(a = 1)::INT + (b = 2)::INT >= b", "(a = 1)::INT + b >= 2"])
def test_thresholds_mixed_with_columns_are_expressions_of_declared_columns(condition):
    """Refused before issue 29; now any deterministic expression of declared columns is evaluated on their
    declared values (`dpsql.sql.evaluation`)."""
    assert compile_query(f"SELECT COUNT(*) FROM t WHERE {condition}", CATALOG).blocks
