"""Tests for the SQL compiler (dpsql.sql.compiler, dpsql.sql.expressions).

Three parts:
- refused constructs raise a dpsql error whose message names the construct;
- accepted constructs compile, and their blocks evaluated on exact marginals give
  exactly DuckDB's answer to the same SQL;
- a hypothesis property test does the same for random WHERE predicates (three-valued
  logic included), GROUP BY subsets and aggregates.

"Exact evaluation" of a block: `block.matrix(domain) @ (exact marginal counts over
block.attributes(domain))`, the counts coming from `DuckDBBackend.marginals`. The
block's rows enumerate the GROUP BY attributes in domain (declaration) order, every
bin including empty groups, NULL bin last; DuckDB's own GROUP BY is filled with zeros
for the groups it leaves out.
"""

from __future__ import annotations

import itertools
import math
import re

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.errors import CatalogError, Error, NotSupportedError, ProgrammingError
from dpsql.answers.result import assemble

CATALOG_TOML = """
[tables.t]
[tables.t.columns]
a = { type = "integer", min = 0, max = 4 }
c = { type = "categorical", values = ["x", "y", "z"], nullable = true }
o = { type = "categorical", values = ["lo", "mid", "hi"], ordered = true }
n = { type = "integer", min = 0, max = 3, nullable = true }
"""
# Domain: a (5) x c (3 + NULL) x o (3) x n (4 + NULL) = 300 cells.
A_VALUES, C_VALUES, O_VALUES, N_VALUES = range(5), ["x", "y", "z"], ["lo", "mid", "hi"], range(4)
N_RANDOM_ROWS = 300


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.from_toml(CATALOG_TOML)


def _rows(seed: int, n: int, complete: bool) -> list[tuple]:
    """In-domain rows; `complete` adds one row per domain cell so no group is ever empty."""
    rng = np.random.default_rng(seed)
    c_choices, n_choices = C_VALUES + [None], list(N_VALUES) + [None]
    rows = [
        (int(rng.integers(5)), c_choices[rng.integers(4)], O_VALUES[rng.integers(3)], n_choices[rng.integers(5)])
        for _ in range(n)
    ]
    if complete:
        rows += list(itertools.product(A_VALUES, c_choices, O_VALUES, n_choices))
    return rows


def _connect(rows: list[tuple]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    # An ENUM makes DuckDB order `o` by declaration, like the catalog's ordered categorical
    # (comparisons need the literal cast to the ENUM: see `reference_sql`).
    con.execute("CREATE TYPE lvl AS ENUM ('lo', 'mid', 'hi')")
    con.execute("CREATE TABLE t (a INTEGER, c VARCHAR, o lvl, n INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    return con


@pytest.fixture(scope="module")
def con():
    c = _connect(_rows(seed=7, n=N_RANDOM_ROWS, complete=False))
    yield c
    c.close()


@pytest.fixture(scope="module")
def dense_con():
    c = _connect(_rows(seed=11, n=N_RANDOM_ROWS, complete=True))
    yield c
    c.close()


def reference_sql(sql: str) -> str:
    """The SQL DuckDB runs: ordered-categorical literals `O('mid')` cast to the ENUM."""
    return re.sub(r"O\('(\w+)'\)", r"CAST('\1' AS lvl)", sql)


def dp_sql(sql: str) -> str:
    """The SQL dpsql compiles: plain string literals."""
    return re.sub(r"O\('(\w+)'\)", r"'\1'", sql)


class Exact:
    """Evaluates compiled blocks on exact marginals (cached per clique)."""

    def __init__(self, con, table):
        self.backend, self.table, self.cache = DuckDBBackend(con), table, {}

    def block(self, block) -> np.ndarray:
        clique = block.attributes(self.table.domain)
        if clique not in self.cache:
            self.cache[clique] = self.backend.marginals(self.table, [clique])[clique].astype(float)
        return block.matrix(self.table.domain).matvec(self.cache[clique])

    def aggregates(self, compiled) -> list[tuple[np.ndarray, np.ndarray]]:
        """(answer, zero standard error) per aggregate, AVG from its centred SUM and COUNT like result.py."""
        out = []
        for agg in compiled.aggregates:
            values = [self.block(b) for b in agg.blocks]
            if agg.kind == "avg":
                values = [agg.average(*values, 1)]
            out.append((values[0], np.zeros_like(values[0])))
        return out


def group_keys(table, group_by: tuple[str, ...]) -> list[tuple]:
    """Block row order: group attributes in domain order, each bin's label, NULL last."""
    attrs = table.domain.canonical(group_by)
    return list(itertools.product(*(table.column(a).labels() for a in attrs)))


def check_against_duckdb(con, catalog, sql: str, group_by: list[str]) -> None:
    """`sql` is SELECT <group_by columns>, <aggregates> FROM t [WHERE] [GROUP BY group_by]."""
    table = catalog.get("t")
    compiled = compile_query(dp_sql(sql), catalog)
    assert compiled.group_by == tuple(group_by)
    domain_order = table.domain.canonical(group_by)
    assert all(b.group_by == domain_order for b in compiled.blocks)
    keys = group_keys(table, tuple(group_by))
    assert all(b.num_rows(table.domain) == len(keys) for b in compiled.blocks)

    rows = con.execute(reference_sql(sql)).fetchall()
    positions = [group_by.index(a) for a in domain_order]  # reorder user GROUP BY -> domain order
    by_group = {tuple(r[p] for p in positions): r[len(group_by):] for r in rows}
    assert set(by_group) <= set(keys), "DuckDB returned a group outside the declared domain"

    answers = Exact(con, table).aggregates(compiled)
    agg_items = compiled.output_aggregate[len(group_by):]
    assert not rows or len(agg_items) == len(rows[0]) - len(group_by)
    for j, k in enumerate(agg_items):
        assert k is not None
        got = answers[k][0]
        kind = compiled.aggregates[k].kind
        for i, key in enumerate(keys):
            expected = by_group.get(key, (None,) * len(agg_items))[j]
            if kind == "avg":
                if expected is None:
                    assert math.isnan(got[i]), (sql, key)
                else:
                    assert got[i] == pytest.approx(float(expected), rel=1e-9, abs=1e-9), (sql, key)
            else:  # COUNT, SUM: an empty group (or a SUM of only NULLs) is 0
                assert got[i] == pytest.approx(float(expected or 0), abs=1e-9), (sql, key, got, expected)


# --- refused constructs -------------------------------------------------------------------

REFUSED = [
    # raw values
    ("SELECT a FROM t", "raw values"),
    ("SELECT a, COUNT(*) FROM t", "not in GROUP BY"),
    ("SELECT c, COUNT(*) FROM t GROUP BY c ORDER BY a", "not in GROUP BY"),
    ("SELECT c, COUNT(*) FROM t GROUP BY c HAVING a > 1", "not in GROUP BY"),
    ("SELECT 1 FROM t", "without aggregates would release raw rows"),
    ("SELECT * FROM t", "SELECT \\*"),
    ("SELECT t.* FROM t", "SELECT \\*"),
    ("SELECT COUNT(*), * FROM t", "SELECT \\*"),
    # joins
    ("SELECT COUNT(*) FROM t JOIN u ON t.a = u.a", "joins"),
    ("SELECT COUNT(*) FROM t, u", "joins"),
    ("SELECT COUNT(*) FROM t AS t1 JOIN t AS t2 ON t1.a = t2.a", "joins"),
    ("SELECT COUNT(*) FROM u JOIN t ON t.a = u.a", "joins"),
    # subqueries
    ("SELECT COUNT(*) FROM (SELECT * FROM t)", "subqueries"),
    ("SELECT COUNT(*) FROM t WHERE a IN (SELECT a FROM t)", "subqueries"),
    ("SELECT COUNT(*) FROM t WHERE a = (SELECT 1)", "subqueries"),
    ("SELECT (SELECT 1), COUNT(*) FROM t", "subqueries"),
    ("SELECT COUNT(*) FROM t WHERE EXISTS (SELECT 1)", "subqueries"),
    ("SELECT COUNT(*) FROM t WHERE a > ALL (SELECT 1)", "subqueries"),
    ("SELECT COUNT(*) FROM t UNION SELECT COUNT(*) FROM t", "UNION"),
    # CTEs
    ("WITH x AS (SELECT * FROM t) SELECT COUNT(*) FROM x", "WITH \\(common table expressions\\)"),
    ("WITH x AS (SELECT 1) SELECT COUNT(*) FROM t", "WITH \\(common table expressions\\)"),
    # window functions
    ("SELECT COUNT(*) OVER () FROM t", "window functions"),
    ("SELECT c, SUM(a) OVER (PARTITION BY c) FROM t GROUP BY c", "window functions"),
    # unsupported aggregates
    ("SELECT STDDEV(DISTINCT a) FROM t", "DISTINCT values have unbounded sensitivity"),
    ("SELECT VAR_POP(c) FROM t", "needs a numeric column"),
    ("SELECT VAR(a, n) FROM t", "takes one argument"),
    ("SELECT VAR_SAMP(SUM(a)) FROM t", "nested aggregates"),
    ("SELECT a FROM t GROUP BY a", "GROUP BY without an aggregate"),
    ("SELECT ARRAY_AGG(a) FROM t", "raw values"),
    ("SELECT STRING_AGG(c, ',') FROM t", "raw values"),
    ("SELECT ANY_VALUE(a) FROM t", "ANY_VALUE"),
    ("SELECT MODE(a), COUNT(*) FROM t", "MODE is answered by report-noisy-max in a query of its own"),
    ("SELECT MEAN(a) FROM t", "aggregate MEAN is not supported"),
    ("SELECT a, FSUM(a) FROM t GROUP BY a", "aggregate FSUM is not supported"),
    ("SELECT c, HISTOGRAM(c) FROM t GROUP BY c", "aggregate HISTOGRAM is not supported"),
    ("SELECT SUM(a), ENTROPY(1) FROM t", "aggregate ENTROPY is not supported"),
    ("SELECT SUM(SUM(a)) FROM t", "nested aggregates"),
    ("SELECT COUNT(DISTINCT a) FROM t", "COUNT\\(DISTINCT"),
    ("SELECT SUM(DISTINCT a) FROM t", "SUM\\(DISTINCT"),
    ("SELECT AVG(DISTINCT a) FROM t", "AVG\\(DISTINCT"),
    # undeclared columns and unknown tables
    ("SELECT COUNT(zz) FROM t", "'zz' is not declared"),
    ("SELECT COUNT(*) FROM t WHERE zz = 1", "'zz' is not declared"),
    ("SELECT zz, COUNT(*) FROM t GROUP BY zz", "'zz' is not declared"),
    ("SELECT SUM(zz) FROM t", "'zz' is not declared"),
    ("SELECT COUNT(*) FROM nope", "'nope' is not a protected table"),
    ("SELECT COUNT(*)", "needs FROM"),
    ("SELECT COUNT(*) FROM t AS s WHERE u.a = 1", "unknown table qualifier 'u'"),
    # out-of-domain and ill-typed literals
    ("SELECT COUNT(*) FROM t WHERE a = 9", "outside the declared domain of 'a'"),
    ("SELECT COUNT(*) FROM t WHERE a BETWEEN 0 AND 5", "outside the declared domain of 'a'"),
    ("SELECT COUNT(*) FROM t WHERE a IN (1, 7)", "outside the declared domain of 'a'"),
    ("SELECT COUNT(*) FROM t WHERE c = 'w'", "'w' is not a declared value of 'c'"),
    ("SELECT COUNT(*) FROM t WHERE c IN ('x', 'w')", "'w' is not a declared value of 'c'"),
    ("SELECT COUNT(*) FILTER (WHERE o = 'top') FROM t", "'top' is not a declared value of 'o'"),
    ("SELECT SUM(CASE WHEN n = 4 THEN 1 END) FROM t", "outside the declared domain of 'n'"),
    ("SELECT COUNT(*) FROM t WHERE a = 'x'", "must be a number"),
    ("SELECT COUNT(*) FROM t WHERE c = 1", "string literal"),
    ("SELECT COUNT(*) FROM t WHERE c < 'y'", "unordered categorical"),
    ("SELECT COUNT(*) FROM t WHERE c BETWEEN 'x' AND 'y'", "unordered categorical"),
    ("SELECT COUNT(*) FROM t WHERE a = 1e400", "finite"),
    ("SELECT SUM(a * 1e400) FROM t", "finite"),
    ("SELECT SUM(c) FROM t", "SUM\\(c\\) needs a numeric column"),
    ("SELECT AVG(o) FROM t", "AVG\\(o\\) needs a numeric column"),
    # expressions that are not deterministic scalar functions of declared columns
    ("SELECT COUNT(*) FROM t WHERE COUNT(*) > 1", "the aggregate 'COUNT\\(\\*\\)' cannot be used inside WHERE"),
    ("SELECT COUNT(*) FROM t WHERE a", "'a' is not a condition \\(its type is INTEGER\\)"),
    ("SELECT COUNT(*) FROM t WHERE a = ?", "parameters are not supported"),
    ("SELECT SUM(a / n) FROM t", "not finite numbers"),
    ("SELECT SUM(a / 0) FROM t", "division by zero"),
    ("SELECT COUNT(*) FROM t WHERE random() < 0.5", "random\\(\\) is not deterministic"),
    ("SELECT SUM(a * random()) FROM t", "random\\(\\) is not deterministic"),
    ("SELECT COUNT(*) FROM t WHERE CAST(gen_random_uuid() AS VARCHAR) > c", "uuid\\(\\) is not deterministic"),
    ("SELECT COUNT(*) FROM t WHERE current_setting('threads') = c", "current_setting\\(\\) reads the session"),
    ("SELECT COUNT(*) FROM t WHERE getvariable('x') = a", "getvariable\\(\\) reads the session"),
    ("SELECT COUNT(*) FROM t WHERE CAST(c AS INTEGER) + 1 = 2", "could not be evaluated on the declared values"),
    ("SELECT COUNT(*) FROM t WHERE no_such_function(a) = 1", "could not be evaluated"),
    ("SELECT COUNT(*) FROM t WHERE a + a + a + a + a + zz = 1", "'zz' is not declared"),
    ("SELECT COUNT(*) FROM t WHERE length(c) = 'x'", "could not be evaluated"),
    # GROUP BY forms
    ("SELECT COUNT(*) FROM t GROUP BY 1", "the aggregate 'COUNT\\(\\*\\)' cannot be used"),
    ("SELECT a + n, a - n, COUNT(*) FROM t GROUP BY 1, 2", "at most one expression of several columns"),
    ("SELECT random() > 0.5, COUNT(*) FROM t GROUP BY 1", "random\\(\\) is not deterministic"),
    ("SELECT [a, n] AS l, COUNT(*) FROM t GROUP BY 1", "its values are of type INTEGER\\[\\]; group by a scalar"),
    ("SELECT {'x': a} AS s, COUNT(*) FROM t GROUP BY s", "its values are of type STRUCT"),
    ("SELECT a, COUNT(*) FROM t GROUP BY 3", "GROUP BY 3 refers to no select item"),
    ("SELECT a, COUNT(*) FROM t GROUP BY a ORDER BY 3", "ORDER BY 3 refers to no select item"),
    ("SELECT COUNT(*) FROM t ORDER BY 0", "ORDER BY 0 refers to no select item"),
    ("SELECT COUNT(*) FROM t GROUP BY CUBE (a, c, o, n), CUBE (a, c, o)", "more than 64 grouping sets"),
    ("SELECT a, COUNT(*), GROUPING(c) FROM t GROUP BY ROLLUP (a)", "GROUPING\\(c\\).*'c' is not a GROUP BY column"),
    ("SELECT a, COUNT(*), GROUPING_ID() FROM t GROUP BY ROLLUP (a)", "at least one GROUP BY column"),
    ("SELECT a, COUNT(*) FROM t GROUP BY ROLLUP (a) HAVING GROUPING(a + 1) = 0", "is not a GROUP BY column"),
    ("SELECT a, COUNT(*) FROM t GROUP BY ALL", "GROUP BY ALL"),
    # DISTINCT, sampling, QUALIFY
    ("SELECT DISTINCT a FROM t", "SELECT DISTINCT"),
    ("SELECT DISTINCT c, COUNT(*) FROM t GROUP BY c", "SELECT DISTINCT"),
    ("SELECT COUNT(*) FROM t USING SAMPLE 10%", "SAMPLE"),
    ("SELECT COUNT(*) FROM t TABLESAMPLE 10%", "TABLESAMPLE"),
    ("SELECT c, COUNT(*) FROM t GROUP BY c QUALIFY COUNT(*) > 1", "QUALIFY"),
    # non-SELECT statements
    ("INSERT INTO t VALUES (1, 'x', 'lo', 1)", "only SELECT .*got INSERT"),
    ("UPDATE t SET a = 1", "only SELECT .*got UPDATE"),
    ("DELETE FROM t", "only SELECT .*got DELETE"),
    ("DROP TABLE t", "only SELECT .*got DROP"),
    ("CREATE TABLE x AS SELECT * FROM t", "only SELECT .*got CREATE"),
    ("VALUES (1)", "only SELECT .*got VALUES"),
    ("SELECT COUNT(*) FROM t; SELECT 1", "expected one statement, found 2"),
    ("SELEC COUNT(*) FROM t", "could not parse"),
]


@pytest.mark.parametrize("sql,message", REFUSED, ids=[s for s, _ in REFUSED])
def test_refused(catalog, sql, message):
    with pytest.raises(Error) as info:
        compile_query(sql, catalog)
    # ProgrammingError (CatalogError is one) or NotSupportedError: never a bare Python error.
    assert isinstance(info.value, (ProgrammingError, NotSupportedError)), type(info.value)
    assert re.search(message, str(info.value)), str(info.value)


def test_every_other_duckdb_aggregate_is_refused(catalog):
    """Only COUNT, SUM, AVG, quantiles, variances and MODE compile, whatever name DuckDB knows an aggregate by."""
    names = duckdb.connect().execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type = 'aggregate'"
    ).fetchall()
    accepted = set()
    for (name,) in names:
        for sql in (f"SELECT {name}(a) FROM t", f"SELECT a, {name}(a) FROM t GROUP BY a"):
            try:
                compile_query(sql, catalog)
                accepted.add(name.lower())
            except Error:
                pass
    quantiles = {"min", "max", "median", "quantile", "quantile_cont", "quantile_disc", "approx_quantile"}
    moments = {"var_pop", "var_samp", "variance", "stddev", "stddev_pop", "stddev_samp"}
    assert accepted <= {"count", "sum", "avg", "mode"} | quantiles | moments, accepted


def test_catalog_conflicts_raise_catalog_error(catalog):
    for sql in ("SELECT COUNT(zz) FROM t", "SELECT COUNT(*) FROM t WHERE a = 9", "SELECT SUM(c) FROM t"):
        with pytest.raises(CatalogError):
            compile_query(sql, catalog)


def test_too_complex_predicate_is_refused_cleanly(catalog):
    # 24 overlapping conjunctions over four columns expand past the term limit.
    atoms = ["a <> {}", "n <> {}", "o <> '{}'", "c <> '{}'"]
    values = [A_VALUES, N_VALUES, O_VALUES, C_VALUES]
    rng = np.random.default_rng(1)
    conj = []
    for _ in range(24):
        picks = rng.choice(4, 3, replace=False)
        conj.append("(" + " AND ".join(atoms[p].format(values[p][rng.integers(len(values[p]))]) for p in picks) + ")")
    with pytest.raises(NotSupportedError, match="too complex"):
        compile_query("SELECT COUNT(*) FROM t WHERE " + " OR ".join(conj), catalog)


# --- accepted constructs: exact evaluation equals DuckDB --------------------------------------

ACCEPTED = [
    ("SELECT COUNT(*) FROM t", []),
    ("SELECT COUNT(a), COUNT(c), COUNT(n), COUNT(1), COUNT(NULL) FROM t", []),
    ("SELECT SUM(a), SUM(n), AVG(a), AVG(n) FROM t", []),
    ("SELECT SUM(1), SUM(-a), SUM(2 * a), SUM(a * 2 + 1), SUM(a / 2), SUM(a - n), SUM(a + n) FROM t", []),
    ("SELECT SUM(a * a), SUM(a * n), AVG(a * (a - 1) / 2), SUM((a + 1) * (n - 2) * a) FROM t", []),
    ("SELECT c, SUM(a * n), AVG(n * n) FROM t GROUP BY c", ["c"]),
    ("SELECT COUNT(*) FILTER (WHERE a > 2), SUM(n) FILTER (WHERE c = 'x') FROM t", []),
    ("SELECT AVG(n) FILTER (WHERE NOT c IS NULL) FROM t", []),
    # CASE: searched and simple, several branches, with and without ELSE
    ("SELECT SUM(CASE WHEN a >= 3 THEN 1 ELSE 0 END) FROM t", []),
    ("SELECT SUM(CASE WHEN a >= 3 THEN n END), COUNT(CASE WHEN a >= 3 THEN n END) FROM t", []),
    ("SELECT SUM(CASE WHEN c = 'x' THEN a WHEN n > 1 THEN 10 WHEN n IS NULL THEN 100 ELSE n END) FROM t", []),
    ("SELECT SUM(CASE c WHEN 'x' THEN 1 WHEN 'y' THEN n END), COUNT(CASE c WHEN 'z' THEN 1 END) FROM t", []),
    ("SELECT SUM(CASE n WHEN 1 THEN a ELSE -1 END) FROM t", []),
    ("SELECT SUM(CASE WHEN n <> 1 THEN 1 END), COUNT(CASE WHEN NOT n = 1 THEN 'q' END) FROM t", []),
    ("SELECT SUM(CASE WHEN a > 1 AND c = 'y' OR n IS NULL THEN a * 2 ELSE NULL END) FROM t", []),
    ("SELECT AVG(CASE WHEN o >= O('mid') THEN n END) FROM t", []),
    ("SELECT SUM(IF(a > 1, 1, 0)) FROM t", []),
    ("SELECT SUM(CAST(a > 1 AS INTEGER)) FROM t", []),
    # WHERE forms
    ("SELECT COUNT(*) FROM t WHERE a = 2", []),
    ("SELECT COUNT(*) FROM t WHERE a <> 2 AND n != 1", []),
    ("SELECT COUNT(*) FROM t WHERE a < 2 OR a > 3", []),
    ("SELECT COUNT(*) FROM t WHERE 2 <= a AND 1 >= n", []),
    ("SELECT COUNT(*) FROM t WHERE a BETWEEN 1 AND 3", []),
    ("SELECT COUNT(*) FROM t WHERE a NOT BETWEEN 1 AND 3", []),
    ("SELECT COUNT(*) FROM t WHERE n BETWEEN 3 AND 1", []),
    ("SELECT COUNT(*) FROM t WHERE n IN (1, 2) OR c IN ('x')", []),
    ("SELECT COUNT(*) FROM t WHERE n NOT IN (1, 2)", []),
    ("SELECT COUNT(*) FROM t WHERE c NOT IN ('x', 'y')", []),
    ("SELECT COUNT(*) FROM t WHERE NOT (n = 1)", []),
    ("SELECT COUNT(*) FROM t WHERE NOT (n = 1 OR c = 'x')", []),
    ("SELECT COUNT(*) FROM t WHERE NOT NOT c = 'x'", []),
    ("SELECT COUNT(*) FROM t WHERE c IS NULL", []),
    ("SELECT COUNT(*) FROM t WHERE c IS NOT NULL AND n IS NULL", []),
    ("SELECT COUNT(*) FROM t WHERE a IS NULL", []),
    ("SELECT COUNT(*) FROM t WHERE NOT (a IS NOT NULL)", []),
    ("SELECT COUNT(*) FROM t WHERE o > O('lo') AND o <= O('hi')", []),
    ("SELECT COUNT(*) FROM t WHERE o BETWEEN O('lo') AND O('mid')", []),
    ("SELECT COUNT(*) FROM t WHERE TRUE", []),
    ("SELECT COUNT(*) FROM t WHERE FALSE OR NOT FALSE", []),
    ("SELECT COUNT(*) FROM t WHERE a = -(-1) OR a = (2) OR a = CAST(3 AS INTEGER)", []),
    ("SELECT COUNT(*) FROM t WHERE CAST(a AS DOUBLE) = 1", []),
    ("SELECT COUNT(*) FROM t WHERE (a = 1 OR n = 2) AND NOT (c = 'x' AND n IS NOT NULL)", []),
    # GROUP BY, in either order (rows are in domain order regardless)
    ("SELECT a, COUNT(*), SUM(n) FROM t GROUP BY a", ["a"]),
    ("SELECT c, COUNT(*), AVG(n) FROM t GROUP BY c", ["c"]),
    ("SELECT n, c, COUNT(*) FROM t WHERE a > 1 GROUP BY n, c", ["n", "c"]),
    ("SELECT o, a, COUNT(n) FROM t WHERE n IS NULL GROUP BY o, a", ["o", "a"]),
    ("SELECT c, n, o, a, COUNT(*) FROM t GROUP BY c, n, o, a", ["c", "n", "o", "a"]),
    ("SELECT t.c, COUNT(*) FROM t GROUP BY t.c", ["c"]),
    ("SELECT s.c, SUM(s.a) FROM t AS s WHERE s.n = 1 GROUP BY s.c", ["c"]),
    ("SELECT s.c, SUM(a) FROM t s WHERE n = 1 GROUP BY c", ["c"]),
    ("SELECT C, COUNT(*) FROM T WHERE A = 1 GROUP BY C", ["c"]),
    # any deterministic expression of declared columns, evaluated by DuckDB on the declared values
    ("SELECT COUNT(*) FROM t WHERE a = n", []),
    ("SELECT COUNT(*) FROM t WHERE a < n OR n IS NULL", []),
    ("SELECT COUNT(*) FROM t WHERE a BETWEEN n AND 3", []),
    ("SELECT COUNT(*) FROM t WHERE a IN (n, 1)", []),
    ("SELECT COUNT(*) FILTER (WHERE n = a), COUNT(*) FILTER (WHERE a IS DISTINCT FROM n) FROM t", []),
    ("SELECT COUNT(*) FROM t WHERE a + 1 = 2 OR a * 2 > n + 3", []),
    ("SELECT COUNT(*) FROM t WHERE (a + n) % 3 = 0 AND c <> 'y'", []),
    ("SELECT c, COUNT(*), SUM(n) FROM t WHERE a > n GROUP BY c", ["c"]),
    ("SELECT SUM(a % 2), AVG(a // 2), SUM(COALESCE(n, 10)), SUM(GREATEST(a, n)), SUM(ABS(a - 2) * n) FROM t", []),
    ("SELECT SUM(a / NULLIF(n, 0)), AVG(POWER(a, 2) + SQRT(a)), COUNT(NULLIF(a, 2)), SUM(CAST(a / 3 AS INTEGER)) FROM t", []),
    ("SELECT o, SUM(CASE WHEN a * 2 > n THEN 1 END), SUM(length(c) * a) FROM t GROUP BY o", ["o"]),
    # pattern matching and string functions on declared values
    ("SELECT COUNT(*) FROM t WHERE c LIKE 'x%'", []),
    ("SELECT COUNT(*) FROM t WHERE c NOT LIKE 'x%' AND c ILIKE '_'", []),
    ("SELECT COUNT(*) FROM t WHERE c ILIKE 'X%' OR c SIMILAR TO '[z]'", []),
    ("SELECT COUNT(*) FROM t WHERE regexp_matches(c, '^[yz]$') OR starts_with(c, 'x')", []),
    ("SELECT COUNT(CASE WHEN c LIKE 'x%' THEN 1 END), SUM(CAST(c LIKE 'y' AS INTEGER) * a) FROM t", []),
    ("SELECT COUNT(*) FROM t WHERE upper(c) = 'X' OR concat(c, a) = 'y3' OR contains(c, 'z')", []),
]


@pytest.mark.parametrize("sql,group_by", ACCEPTED, ids=[s for s, _ in ACCEPTED])
def test_accepted_exact(con, catalog, sql, group_by):
    check_against_duckdb(con, catalog, sql, [g.lower() for g in group_by])


def test_aggregate_blocks_and_kinds(catalog):
    q = compile_query("SELECT COUNT(*), SUM(a), AVG(n), COUNT(*) FROM t", catalog)
    assert [a.kind for a in q.aggregates] == ["count", "sum", "avg"]  # the repeated COUNT(*) is shared
    assert q.output_aggregate == [0, 1, 2, 0]
    assert [len(a.blocks) for a in q.aggregates] == [1, 1, 2]
    assert len(q.blocks) == 4
    assert q.aggregates[2].blocks[0].name.endswith("[sum]") and q.aggregates[2].blocks[1].name.endswith("[count]")
    # COUNT(*) over GROUP BY is exactly a marginal.
    g = compile_query("SELECT n, a, COUNT(*) FROM t GROUP BY n, a", catalog)
    assert g.group_by == ("n", "a") and g.blocks[0].group_by == ("a", "n")
    assert g.blocks[0].is_marginal() and g.blocks[0].num_rows(catalog.get("t").domain) == 25


def test_blocks_weighted_by_sensitivity(catalog):
    q = compile_query("SELECT COUNT(*), SUM(a) FROM t", catalog)
    count, total = q.blocks
    assert count.weight == pytest.approx(1.0)
    assert total.weight == pytest.approx(1 / 16)  # the largest |a| is 4


def test_labels_and_dialects(catalog):
    q = compile_query("SELECT COUNT(*) FROM t WHERE a = 1", catalog, label="q7")
    assert q.aggregates[0].sql == "q7: COUNT(*)"
    pg = compile_query("SELECT c, COUNT(*) FILTER (WHERE n::int >= 2) FROM t GROUP BY 1", catalog, dialect="postgres")
    duck = compile_query("SELECT c, COUNT(*) FILTER (WHERE n >= 2) FROM t GROUP BY c", catalog)
    dom = catalog.get("t").domain
    assert pg.blocks[0].fingerprint(dom) == duck.blocks[0].fingerprint(dom)
    my = compile_query("SELECT `c`, SUM(IF(a > 2, 1, 0)) FROM t GROUP BY `c`", catalog, dialect="mysql")
    duck = compile_query("SELECT c, SUM(CASE WHEN a > 2 THEN 1 ELSE 0 END) FROM t GROUP BY c", catalog)
    assert my.blocks[0].fingerprint(dom) == duck.blocks[0].fingerprint(dom)


def test_between_symmetric(con, catalog):
    """BETWEEN SYMMETRIC (Postgres) accepts the bounds in either order."""
    table = catalog.get("t")
    exact = Exact(con, table)
    sym = compile_query("SELECT COUNT(*) FROM t WHERE n BETWEEN SYMMETRIC 3 AND 1", catalog, dialect="postgres")
    plain = compile_query("SELECT COUNT(*) FROM t WHERE n BETWEEN 1 AND 3", catalog)
    expected = con.execute("SELECT COUNT(*) FROM t WHERE n BETWEEN 1 AND 3").fetchone()[0]
    assert exact.block(sym.blocks[0])[0] == expected == exact.block(plain.blocks[0])[0]


# --- accepted constructs: the template (aliases, HAVING, ORDER BY, LIMIT) ---------------------

TEMPLATE = [
    # (sql, whether the result order is fully determined by the query)
    ("SELECT c AS cc, COUNT(*) AS k FROM t GROUP BY cc ORDER BY k DESC, cc", True),
    ("SELECT c, n, COUNT(*) FROM t GROUP BY 1, 2 ORDER BY 1, 2", True),
    ("SELECT a, SUM(n) AS s, AVG(n) AS m FROM t GROUP BY a HAVING COUNT(*) > 25 ORDER BY a DESC", True),
    ("SELECT o, COUNT(*) FROM t WHERE a < 3 GROUP BY o HAVING SUM(a) >= 10 ORDER BY COUNT(*), o", True),
    ("SELECT a, COUNT(*) AS k FROM t GROUP BY a ORDER BY k DESC, a LIMIT 2", True),
    ("SELECT a, COUNT(*) AS k FROM t GROUP BY a ORDER BY a LIMIT 2 OFFSET 1", True),
    ("SELECT COUNT(*) + 1 AS k1, SUM(a) / COUNT(*) AS mean, 'tag' AS tag FROM t", True),
    ("SELECT c, a + 1 AS a1, COUNT(*) * 2 FROM t GROUP BY c, a", False),
    ("SELECT COUNT(*) AS k, SUM(a) FILTER (WHERE n = 0) AS s0 FROM t WHERE o <> 'mid'", True),
    ("SELECT n, COUNT(*) FROM t GROUP BY n HAVING n IS NOT NULL AND n > 0 ORDER BY n", True),
    ("SELECT c, COUNT(*) FROM t GROUP BY c ORDER BY c NULLS FIRST", True),
    ("SELECT COUNT(*) AS k FROM t HAVING COUNT(*) > 1000000", True),
    # GROUP BY an expression of a declared column: its distinct values on the declared domain
    ("SELECT a // 2 AS b, COUNT(*) AS k, SUM(n) FROM t GROUP BY 1 ORDER BY 1", True),
    ("SELECT a // 2 AS b, COUNT(*) AS k FROM t GROUP BY b ORDER BY b DESC", True),
    ("SELECT CASE WHEN a < 2 THEN 'low' ELSE 'high' END AS band, COUNT(*) FROM t GROUP BY band ORDER BY band", True),
    ("SELECT COALESCE(n, -1) AS nn, AVG(a) FROM t GROUP BY COALESCE(n, -1) ORDER BY COALESCE(n, -1)", True),
    ("SELECT n IS NULL AS missing, COUNT(*) FROM t GROUP BY 1 ORDER BY 1", True),
    ("SELECT upper(c) AS u, n, COUNT(*) FROM t GROUP BY upper(c), n ORDER BY u NULLS LAST, n NULLS LAST", True),
    ("SELECT c LIKE 'x%' AS is_x, COUNT(*) FROM t GROUP BY 1 HAVING COUNT(*) > 0 ORDER BY 1 NULLS LAST", True),
    ("SELECT 'all' AS g, COUNT(*) FROM t GROUP BY 1", True),
    ("SELECT a - 1 AS a1, COUNT(*) FROM t WHERE a + 1 >= n GROUP BY a - 1 ORDER BY a1", True),
    # ... of several columns: one maps its bins onto the groups differently on each slice of the others
    ("SELECT CASE WHEN c = 'x' AND a < 2 THEN 'young x' WHEN n IS NULL THEN 'unknown' ELSE 'other' END AS seg, "
     "COUNT(*), SUM(a), AVG(n) FROM t GROUP BY 1 ORDER BY 1", True),
    ("SELECT a + n AS s, c, COUNT(*) FROM t WHERE o <> 'mid' GROUP BY a + n, c ORDER BY s NULLS LAST, c NULLS LAST",
     True),
    ("SELECT concat(c, '-', o) AS co, COUNT(*) FROM t GROUP BY 1 ORDER BY 1", True),
    ("SELECT a / (a - 2.0) AS z, COUNT(*) FROM t WHERE NULL IS NULL OR NULL GROUP BY 1 ORDER BY 1", True),
]


def _normalize(row):
    return tuple(round(float(v), 9) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in row)


@pytest.mark.parametrize("sql,ordered", TEMPLATE, ids=[s for s, _ in TEMPLATE])
def test_template_matches_duckdb(dense_con, catalog, sql, ordered):
    """Every group is non-empty in `dense_con`, so the full answer equals DuckDB's."""
    compiled = compile_query(sql, catalog)
    result = assemble(compiled, Exact(dense_con, catalog.get("t")).aggregates(compiled))
    expected = dense_con.execute(sql).fetchall()
    got = [_normalize(r) for r in result.rows]
    want = [_normalize(r) for r in expected]
    if not ordered:
        got, want = sorted(got, key=repr), sorted(want, key=repr)
    assert got == want
    assert len(result.columns) == len(dense_con.execute(sql).description)


# --- clamping and the protected table's rows ---------------------------------------------------


def test_clamping_and_excluded_rows(catalog):
    """Out-of-domain integers are clamped; rows that do not fit the declaration are left out."""
    rows = [
        (-3, "x", "lo", 1), (0, "x", "lo", 1), (2, "y", "mid", None), (4, "z", "hi", 3),
        (7, "x", "hi", 9), (100, None, "lo", -5), (5, "y", "mid", 2),
        (None, "x", "lo", 1),      # NULL in non-nullable a: excluded
        (1, "w", "lo", 1),         # undeclared category, no `other`: excluded
        (1, "x", None, 1),         # NULL in non-nullable o: excluded
    ]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER, c VARCHAR, o VARCHAR, n INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    con.execute("""
        CREATE VIEW clamped AS
        SELECT LEAST(GREATEST(a, 0), 4) AS a, c, o, CASE WHEN n IS NULL THEN NULL ELSE LEAST(GREATEST(n, 0), 3) END AS n
        FROM t
        WHERE a IS NOT NULL AND o IS NOT NULL AND (c IS NULL OR c IN ('x', 'y', 'z'))
    """)
    exact = Exact(con, catalog.get("t"))
    cases = [
        ("SELECT a, COUNT(*), SUM(n) FROM {} GROUP BY a", ["a"]),
        ("SELECT COUNT(*), SUM(a), SUM(n), AVG(a) FROM {}", []),
        ("SELECT n, SUM(a) FROM {} WHERE a >= 4 OR a = 0 GROUP BY n", ["n"]),
        ("SELECT c, COUNT(*) FROM {} WHERE n = 3 OR n = 0 GROUP BY c", ["c"]),
    ]
    for template, group_by in cases:
        compiled = compile_query(template.format("t"), catalog)
        want = {r[: len(group_by)]: r[len(group_by):] for r in con.execute(template.format("clamped")).fetchall()}
        answers = exact.aggregates(compiled)
        for i, key in enumerate(group_keys(catalog.get("t"), tuple(group_by))):
            for j, (values, _) in enumerate(answers):
                assert values[i] == pytest.approx(float(want.get(key, (0,) * len(answers))[j] or 0)), (template, key)
    # Concretely: a = -3 and a = 0 share bin 0; 7, 100 and 5 all land in a's top bin.
    compiled = compile_query("SELECT a, COUNT(*) FROM t GROUP BY a", catalog)
    np.testing.assert_array_equal(exact.block(compiled.blocks[0]), [2, 0, 1, 0, 4])


def test_numeric_column_semantics():
    """Numeric bins: GROUP BY shows lower edges, SUM uses midpoints, comparisons at edges."""
    cat = Catalog.from_toml("""
        [tables.m.columns]
        v = { type = "numeric", min = 0, max = 100, bins = 4, nullable = true }
    """)
    con = duckdb.connect()
    con.execute("CREATE TABLE m (v DOUBLE)")
    con.executemany("INSERT INTO m VALUES (?)", [(-5,), (10,), (30,), (49.9,), (50,), (99,), (250,), (None,)])
    exact = Exact(con, cat.get("m"))
    q = compile_query("SELECT v, COUNT(*), SUM(v), COUNT(v) FROM m GROUP BY v", cat)
    assert group_keys(cat.get("m"), ("v",)) == [(0.0,), (25.0,), (50.0,), (75.0,), (None,)]
    np.testing.assert_array_equal(exact.block(q.blocks[0]), [2, 2, 1, 2, 1])
    np.testing.assert_array_equal(exact.block(q.blocks[1]), [25, 75, 62.5, 175, 0])
    np.testing.assert_array_equal(exact.block(q.blocks[2]), [2, 2, 1, 2, 0])
    q = compile_query("SELECT COUNT(*) FROM m WHERE v >= 25 AND v < 75", cat)
    assert exact.block(q.blocks[0])[0] == 3 and q.notes == []
    # Off a bin edge: answered at the nearest edge, which the result's notes name.
    q = compile_query("SELECT COUNT(*) FROM m WHERE v > 30 AND v <= 70.5", cat)
    assert exact.block(q.blocks[0])[0] == 3
    assert q.notes == ["v is binned (width 25): the literal 30 was answered at the nearest bin edge, 25",
                       "v is binned (width 25): the literal 70.5 was answered at the nearest bin edge, 75"]
    assert assemble(q, exact.aggregates(q)).notes == q.notes
    with pytest.raises(CatalogError, match="compare it with <, <=, >, >= or BETWEEN at bin edges instead of ="):
        compile_query("SELECT COUNT(*) FROM m WHERE v = 30", cat)
    strict = Catalog.from_toml("""
        [tables.m.columns]
        v = { type = "numeric", min = 0, max = 100, bins = 4, strict = true }
    """)
    with pytest.raises(CatalogError, match="30 is not a bin edge of 'v'.*declared strict\\): use 25 or 50"):
        compile_query("SELECT COUNT(*) FROM m WHERE v > 30", strict)
    # Expressions of a binned column are evaluated on its bins' midpoints, and the notes say so.
    q = compile_query("SELECT FLOOR(v / 50) AS half, COUNT(*) FROM m GROUP BY 1", cat)
    assert q.groups[0].labels == [0.0, 1.0, None]
    np.testing.assert_array_equal(exact.block(q.blocks[0]), [4, 3, 1])
    assert q.notes == ["FLOOR(v / 50) is evaluated on the bins of v (each bin's midpoint), not on its raw values: "
                       "numeric [0, 100) in 4 bins of width 25, nullable"]


# --- property test ------------------------------------------------------------------------------

COMPARISON_OPS = ["=", "<>", "<", "<=", ">", ">="]


def _literal(column: str, value) -> str:
    if column == "o":
        return f"O('{value}')"
    return f"'{value}'" if column == "c" else str(value)


@st.composite
def comparison(draw):
    column = draw(st.sampled_from(["a", "n", "c", "o"]))
    ops = ["=", "<>"] if column == "c" else COMPARISON_OPS
    op = draw(st.sampled_from(ops))
    values = {"a": A_VALUES, "n": N_VALUES, "c": C_VALUES, "o": O_VALUES}[column]
    lit = _literal(column, draw(st.sampled_from(list(values))))
    if draw(st.booleans()):
        return f"{column} {op} {lit}"
    return f"{lit} {op} {column}"  # literal on the left (the compiler flips the operator)


@st.composite
def between(draw):
    column = draw(st.sampled_from(["a", "n", "o"]))
    values = list({"a": A_VALUES, "n": N_VALUES, "o": O_VALUES}[column])
    lo, hi = draw(st.sampled_from(values)), draw(st.sampled_from(values))  # lo > hi allowed: empty
    neg = "NOT " if draw(st.booleans()) else ""
    return f"{column} {neg}BETWEEN {_literal(column, lo)} AND {_literal(column, hi)}"


@st.composite
def in_list(draw):
    column = draw(st.sampled_from(["a", "n", "c", "o"]))
    values = list({"a": A_VALUES, "n": N_VALUES, "c": C_VALUES, "o": O_VALUES}[column])
    chosen = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
    neg = "NOT " if draw(st.booleans()) else ""
    return f"{column} {neg}IN ({', '.join(_literal(column, v) for v in chosen)})"


null_test = st.builds(lambda c, neg: f"{c} IS {neg}NULL", st.sampled_from(["a", "c", "o", "n"]), st.sampled_from(["", "NOT "]))
atom = st.one_of(
    comparison(), comparison(), comparison(), between(), in_list(), null_test, st.sampled_from(["TRUE", "FALSE"])
)


def _combine(inner):
    return st.one_of(
        st.builds(lambda p, q: f"({p} AND {q})", inner, inner),
        st.builds(lambda p, q: f"({p} OR {q})", inner, inner),
        st.builds(lambda p: f"NOT ({p})", inner),
    )


predicate = st.recursive(atom, _combine, max_leaves=6)
small_predicate = st.recursive(atom, _combine, max_leaves=3)
case_value = st.sampled_from(["a", "n", "1", "2", "-1", "NULL", "(a + n)", "(2 * a)"])


@st.composite
def case_expression(draw):
    if draw(st.booleans()):  # searched CASE
        branches = draw(st.lists(st.tuples(small_predicate, case_value), min_size=1, max_size=3))
        body = " ".join(f"WHEN {p} THEN {v}" for p, v in branches)
        subject = ""
    else:  # simple CASE on a column
        subject = draw(st.sampled_from(["a", "n", "c"]))
        values = list({"a": A_VALUES, "n": N_VALUES, "c": C_VALUES}[subject])
        whens = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3))
        body = " ".join(f"WHEN {_literal(subject, w)} THEN {draw(case_value)}" for w in whens)
        subject += " "
    default = draw(st.one_of(st.none(), case_value))
    tail = f" ELSE {default}" if default is not None else ""
    return f"CASE {subject}{body}{tail} END"


@st.composite
def aggregate(draw):
    kind = draw(st.sampled_from(["count_star", "count_col", "sum", "avg", "sum_case", "count_case", "filter"]))
    if kind == "count_star":
        return "COUNT(*)"
    if kind == "count_col":
        return f"COUNT({draw(st.sampled_from(['a', 'c', 'o', 'n']))})"
    if kind in ("sum", "avg"):
        return f"{kind.upper()}({draw(st.sampled_from(['a', 'n']))})"
    if kind == "sum_case":
        return f"SUM({draw(case_expression())})"
    if kind == "count_case":
        return f"COUNT({draw(case_expression())})"
    inner = draw(st.sampled_from(["COUNT(*)", "SUM(a)", "SUM(n)", "COUNT(n)"]))
    return f"{inner} FILTER (WHERE {draw(small_predicate)})"


@st.composite
def query(draw):
    group_by = draw(st.lists(st.sampled_from(["a", "c", "o", "n"]), unique=True, max_size=3))
    aggs = draw(st.lists(aggregate(), min_size=1, max_size=3))
    where = draw(st.one_of(st.none(), predicate))
    sql = f"SELECT {', '.join(group_by + aggs)} FROM t"
    if where is not None:
        sql += f" WHERE {where}"
    if group_by:
        sql += f" GROUP BY {', '.join(group_by)}"
    return sql, group_by


@settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(query())
def test_property_compiled_blocks_equal_duckdb(con, catalog, generated):
    sql, group_by = generated
    try:
        check_against_duckdb(con, catalog, sql, group_by)
    except NotSupportedError as e:  # predicate expansion limit: a clean refusal is acceptable
        assert "too complex" in str(e)


def test_avg_measures_its_sum_around_the_middle_of_the_declared_range(catalog):
    """AVG(a) for a in [0, 4] measures SUM(a - 2): sensitivity 2, not 4; SUM(a) stays as asked."""
    domain = catalog.get("t").domain
    avg = compile_query(dp_sql("SELECT AVG(a) FROM t"), catalog).aggregates[0]
    assert avg.center == 2.0
    assert avg.blocks[0].sensitivity(domain, 2) == pytest.approx(2.0)
    (total,) = compile_query(dp_sql("SELECT SUM(a) FROM t"), catalog).aggregates[0].blocks
    assert total.sensitivity(domain, 2) == pytest.approx(4.0)
    # n in [0, 3] is nullable: the middle of its non-NULL values, NULL rows contribute nothing
    assert compile_query(dp_sql("SELECT AVG(n) FROM t"), catalog).aggregates[0].center == 1.5
    assert avg.average(np.array([-2.0, 3.0]), np.array([4.0, 0.0]), 1).tolist()[0] == 1.5


# --- date, timestamp and boolean columns ----------------------------------------------------------

EVENTS_TOML = """
[tables.e.columns]
d = { type = "date", min = "2020-01-01", max = "2021-12-31", granularity = "day" }
ts = { type = "timestamp", min = "2020-01-01 00:00:00", max = "2020-01-07 23:00:00", granularity = "hour", nullable = true }
m = { type = "boolean", nullable = true }
k = { type = "categorical", values = ["1", "2", "3"] }
x = { type = "integer", min = 0, max = 9 }
"""


@pytest.fixture(scope="module")
def events():
    """2000 rows (fixed by DuckDB's hash of the row number) over every month, weekday and day of the hours, so no
    group of these queries is empty."""
    con = duckdb.connect()
    con.execute("""
        CREATE TABLE e AS SELECT
            DATE '2020-01-01' + CAST(hash(i, 1) % 731 AS INTEGER) AS d,
            CASE WHEN hash(i, 2) % 10 = 0 THEN NULL
                 ELSE TIMESTAMP '2020-01-01 00:00:00' + to_hours(CAST(hash(i, 3) % 168 AS INTEGER)) END AS ts,
            [TRUE, FALSE, NULL][CAST(hash(i, 4) % 3 + 1 AS INTEGER)] AS m,
            CAST(hash(i, 5) % 3 + 1 AS VARCHAR) AS k,
            CAST(hash(i, 6) % 10 AS INTEGER) AS x
        FROM range(2000) AS r(i)
    """)
    yield Catalog.from_toml(EVENTS_TOML), con
    con.close()


EVENT_QUERIES = [
    # (dpsql's SQL, DuckDB's SQL for the same answer or None for the same text)
    ("SELECT DATE_TRUNC('month', d) AS mo, COUNT(*) AS n, SUM(x) FROM e GROUP BY 1 ORDER BY 1", None),
    ("SELECT EXTRACT(year FROM d) AS y, AVG(x) FROM e GROUP BY y ORDER BY y", None),
    ("SELECT DATE_PART('dow', d) AS dow, COUNT(*) FROM e WHERE m GROUP BY 1 ORDER BY 1", None),
    ("SELECT strftime(d, '%Y-Q') || CAST(quarter(d) AS VARCHAR) AS q, COUNT(*) FROM e GROUP BY 1 ORDER BY 1", None),
    ("SELECT COUNT(*) FROM e WHERE d BETWEEN '2020-03-01' AND '2020-06-30'", None),
    ("SELECT COUNT(*) FROM e WHERE d >= DATE '2021-01-01' AND d < DATE '2021-02-01'", None),
    ("SELECT COUNT(*) FROM e WHERE d + INTERVAL 10 DAY > DATE '2021-06-01'", None),
    ("SELECT COUNT(*) FROM e WHERE d - INTERVAL '1 month' < DATE '2020-02-15' OR last_day(d) = d", None),
    ("SELECT COUNT(*) FROM e WHERE ts >= TIMESTAMP '2020-01-03 00:00:00' AND ts < '2020-01-04 06:00:00'", None),
    ("SELECT DATE_TRUNC('day', ts) AS day, COUNT(*) FROM e GROUP BY 1 ORDER BY 1 NULLS LAST", None),
    ("SELECT EXTRACT(hour FROM ts) < 12 AS morning, COUNT(*) FROM e GROUP BY 1 ORDER BY 1 NULLS LAST", None),
    ("SELECT COUNT(*) FROM e WHERE d < current_date - INTERVAL 30 DAY AND date_diff('day', d, DATE '2021-12-31') < 100",
     None),
    ("SELECT COUNT(*) FROM e WHERE m = TRUE", None),
    ("SELECT COUNT(*) FROM e WHERE m IS TRUE", None),
    ("SELECT COUNT(*) FROM e WHERE m IS NOT TRUE", None),
    ("SELECT COUNT(*) FROM e WHERE NOT m", None),
    ("SELECT COUNT(*) FROM e WHERE m = FALSE OR m IS NULL", None),
    ("SELECT COUNT(*) FROM e WHERE m <> 'false'", None),
    ("SELECT m, COUNT(*), SUM(x) FROM e GROUP BY m ORDER BY m NULLS LAST", None),
    ("SELECT SUM(CAST(m AS INTEGER)), COUNT(m), SUM(m::INT * x) FROM e", None),
    ("SELECT COUNT(*) FROM e WHERE m AND x > 4", None),
    # literals compared by value: integers against numeric-looking declared values
    ("SELECT COUNT(*) FROM e WHERE k IN (2, 3)", "SELECT COUNT(*) FROM e WHERE k IN ('2', '3')"),
    ("SELECT COUNT(*) FROM e WHERE k = 1", "SELECT COUNT(*) FROM e WHERE k = '1'"),
    ("SELECT COUNT(*) FROM e WHERE CAST(k AS INTEGER) >= 2", None),
    ("SELECT SUM(CAST(k AS INTEGER)), AVG(k::DOUBLE * x) FROM e WHERE k::INT IN (1, 3)", None),
]


@pytest.mark.parametrize("sql,reference", EVENT_QUERIES, ids=[s for s, _ in EVENT_QUERIES])
def test_dates_and_booleans_match_duckdb(events, sql, reference):
    """Every group of these queries is non-empty, so the full answer equals DuckDB's."""
    catalog, con = events
    compiled = compile_query(sql, catalog)
    result = assemble(compiled, Exact(con, catalog.get("e")).aggregates(compiled))
    assert [_normalize(r) for r in result.rows] == [_normalize(r) for r in con.execute(reference or sql).fetchall()]


def test_daily_series_has_every_day_in_order(events):
    """GROUP BY a date column: one row per declared day (empty days too), labelled with dates."""
    import datetime as dt
    catalog, con = events
    compiled = compile_query("SELECT d, COUNT(*) FROM e GROUP BY d", catalog)
    result = assemble(compiled, Exact(con, catalog.get("e")).aggregates(compiled))
    assert len(result.rows) == 731 and result.rows[0][0] == dt.date(2020, 1, 1) and result.rows[-1][0] == dt.date(2021, 12, 31)
    counts = dict(con.execute("SELECT d, COUNT(*) FROM e GROUP BY d").fetchall())
    assert all(n == counts.get(day, 0) for day, n in result.rows)


def test_date_and_boolean_refusals(events):
    catalog, _ = events
    cases = [
        ("SELECT COUNT(*) FROM e WHERE d > '2019-06-01'", "outside the declared domain of 'd'"),
        ("SELECT COUNT(*) FROM e WHERE d > 'soon'", "must be a date or timestamp"),
        ("SELECT COUNT(*) FROM e WHERE m = 2", "is boolean: compare it with TRUE or FALSE"),
        ("SELECT SUM(d) FROM e", "SUM\\(d\\) needs a numeric column"),
        ("SELECT COUNT(*) FROM e WHERE k = 2.5", "no declared value reads as it"),
        ("SELECT MEDIAN(d) FROM e", "a quantile needs an integer or numeric column"),
        ("SELECT COUNT(*) FROM e WHERE d > current_date - INTERVAL 30 DAY AND random() < 1", "random"),
        ("SELECT COUNT(*) FROM e WHERE ts = '2020-01-02 05:00:00'", "binned by hour: compare it with <"),
        ("SELECT COUNT(*) FROM e WHERE k = 7", "7: no declared value reads as it"),
    ]
    for sql, message in cases:
        with pytest.raises((ProgrammingError, NotSupportedError), match=message):
            compile_query(sql, catalog)


def test_timestamp_literal_off_a_period_start(events):
    """A timestamp literal inside an hour is answered at the nearest hour, and the notes say so."""
    catalog, con = events
    q = compile_query("SELECT COUNT(*) FROM e WHERE ts >= '2020-01-03 05:40:00'", catalog)
    assert q.notes == ["ts is binned by hour: the literal 2020-01-03 05:40:00 was answered at the nearest period "
                       "start, 2020-01-03T06:00:00"]
    want = con.execute("SELECT COUNT(*) FROM e WHERE ts >= TIMESTAMP '2020-01-03 06:00:00'").fetchone()[0]
    assert Exact(con, catalog.get("e")).block(q.blocks[0])[0] == want


def test_patterns_on_released_keys():
    """LIKE on a key column is evaluated on its released keys; the keys not released are one bin where it is NULL."""
    catalog = Catalog.from_toml('[tables.v.columns]\nurl = { type = "key" }\nn = { type = "integer", min = 0, max = 2 }')
    with pytest.raises(CatalogError, match="keys of 'url' have not been released"):
        compile_query("SELECT COUNT(*) FROM v WHERE url LIKE 'a%'", catalog)
    released = catalog.with_keys({("v", "url"): ("a.com/x", "b.org", "a.com/y")})
    q = compile_query("SELECT COUNT(*) FROM v WHERE url LIKE 'a%' AND n < 2", released)
    domain = released.get("v").domain
    matrix = q.blocks[0].matrix(domain)
    row = np.array([matrix.matvec(cell)[0] for cell in np.eye(12)])
    np.testing.assert_array_equal(row.reshape(4, 3), [[1, 1, 0], [0, 0, 0], [1, 1, 0], [0, 0, 0]])
    assert q.notes == ["url LIKE 'a%' is evaluated on the released keys of url: on the keys not released it is NULL"]
    g = compile_query("SELECT split_part(url, '/', 1) AS host, COUNT(*) FROM v GROUP BY 1", released)
    assert g.groups[0].labels == ["a.com", "b.org", None] and list(g.groups[0].index) == [0, 1, 0, 2]


def test_dense_functions_split_into_few_product_terms():
    from dpsql.sql.evaluation import to_predicate
    from mechanisms.domain import Domain
    domain = Domain(("p", "q", "r"), (3, 4, 2))
    rng = np.random.default_rng(3)
    p, q, r = rng.integers(1, 5, 3), rng.integers(1, 5, 4), rng.integers(1, 5, 2)
    product = np.einsum("i,j,k->ijk", p, q, r).astype(float)
    assert len(to_predicate(product, ("p", "q", "r")).terms) == 1  # a product of per-attribute values
    indicator = (np.add.outer(np.arange(3), np.arange(4)) % 3 == 0)[:, :, None] * np.array([1.0, 0.0])
    for values in (product, indicator, rng.integers(0, 3, (3, 4, 2)).astype(float)):
        pred = to_predicate(values, ("p", "q", "r"))
        np.testing.assert_allclose(pred.dense(("p", "q", "r"), domain), values)


def test_expressions_over_too_many_cells_are_refused():
    catalog = Catalog.from_toml("""
        [tables.w.columns]
        a = { type = "integer", min = 0, max = 999 }
        b = { type = "integer", min = 0, max = 999 }
        c = { type = "integer", min = 0, max = 9 }
    """)
    with pytest.raises(NotSupportedError, match="10000000 combinations of declared values \\(limit 1000000\\)"):
        compile_query("SELECT COUNT(*) FROM w WHERE a + b + c = 7", catalog)


def test_nan_results_form_one_group(dense_con, catalog):
    """As in SQL, every NaN an expression yields falls in one group (which the result relation shows as NULL)."""
    sql = "SELECT (a - 2.0) / (a - 2.0) + a AS z, COUNT(*) FROM t GROUP BY 1 ORDER BY 1"
    compiled = compile_query(sql, catalog)
    labels = compiled.groups[0].labels
    assert len(labels) == 5 and sum(math.isnan(v) for v in labels) == 1
    got = assemble(compiled, Exact(dense_con, catalog.get("t")).aggregates(compiled)).rows
    want = [(None if math.isnan(z) else float(z), float(n)) for z, n in dense_con.execute(sql).fetchall()]
    assert got == want
