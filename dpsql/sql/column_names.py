"""Result column names as PostgreSQL gives them, for every surface a client reads them from (the DB-API's
`cursor.description`, `dpsql serve`'s RowDescription).

PostgreSQL names a select item by its alias; without one, a column reference by the column's name, a
function or aggregate call by the function's name (`count`, `sum`, `avg`, `version`), a cast by what it
casts (or the type's name), CASE as `case`, a scalar subquery by its own column; anything else (`1`,
`a + b`) is `?column?`. DuckDB names them by their text (`count_star()`, `(a + b)`), as dpsql's own shell
shows them; clients written for PostgreSQL read `row["count"]`.
"""

from __future__ import annotations

import re
from functools import lru_cache

import sqlglot
from sqlglot import exp

UNNAMED = "?column?"
# functions sqlglot reads into a node whose name is not the one written
_WRITTEN = {exp.CurrentVersion: "version", exp.TimestampTrunc: "date_trunc", exp.DateTrunc: "date_trunc",
            exp.ApproxDistinct: "approx_count_distinct", exp.CurrentSchema: "current_schema",
            exp.CurrentUser: "current_user", exp.CurrentDate: "current_date",
            exp.CurrentTimestamp: "current_timestamp", exp.Exists: "exists", exp.Array: "array"}
_TYPE_NAMES = {exp.DataType.Type.INT: "int4", exp.DataType.Type.BIGINT: "int8", exp.DataType.Type.SMALLINT: "int2",
               exp.DataType.Type.DOUBLE: "float8", exp.DataType.Type.FLOAT: "float4", exp.DataType.Type.BOOLEAN: "bool",
               exp.DataType.Type.VARCHAR: "varchar", exp.DataType.Type.TEXT: "text",
               exp.DataType.Type.DECIMAL: "numeric", exp.DataType.Type.DATE: "date",
               exp.DataType.Type.TIMESTAMP: "timestamp", exp.DataType.Type.TIMESTAMPTZ: "timestamptz"}


def postgres_names(sql: str, columns: list[str], dp: list[bool] | None = None, dialect: str = "duckdb") -> list[str]:
    """`columns` (a result's, as the engine named them) renamed as PostgreSQL names the select items of the
    query `sql`; a `<name>_stderr` column after a DP column (`Result.with_stderr_columns`) follows its
    column. Unchanged where they cannot be matched to the select list (not a query, `*`)."""
    items = _item_names(sql, dialect)
    if items is None:
        return list(columns)
    dp = dp or []
    names, k = [], 0
    for i, name in enumerate(columns):
        if i > 0 and i - 1 < len(dp) and dp[i - 1] and name == f"{columns[i - 1]}_stderr":
            names.append(f"{names[-1]}_stderr")
            continue
        if k >= len(items):
            return list(columns)
        names.append(items[k])
        k += 1
    return names if k == len(items) else list(columns)


_QUERY = re.compile(r"^[\s(]*(SELECT|WITH)\b", re.I)


@lru_cache(maxsize=512)
def _item_names(sql: str, dialect: str) -> tuple[str, ...] | None:
    if not _QUERY.match(sql):
        return None
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except sqlglot.errors.SqlglotError:
        return None
    while isinstance(tree, exp.SetOperation):  # UNION and the like: the first query names the columns
        tree = tree.this
    if isinstance(tree, exp.Subquery):
        tree = tree.unnest()
    if not isinstance(tree, exp.Select):
        return None
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in tree.expressions):
        return None
    return tuple(item_name(e) for e in tree.expressions)


def item_name(node: exp.Expression) -> str:
    """The name PostgreSQL gives one select item (its FigureColname)."""
    name = _figure(node)
    return UNNAMED if name is None else name


def _figure(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Dot):  # pg_catalog.version(), a qualified call
        return _figure(node.expression)
    if isinstance(node, (exp.Paren, exp.Filter, exp.Window, exp.Bracket)):
        return _figure(node.this)
    if isinstance(node, exp.Cast):
        inner = _figure(node.this)
        return inner if inner is not None else _TYPE_NAMES.get(node.to.this, node.to.this.name.lower())
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Subquery):
        inner = node.unnest()
        return _figure(inner.expressions[0]) if isinstance(inner, exp.Select) and inner.expressions else None
    if isinstance(node, exp.Boolean):
        return "bool"
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    if type(node) in _WRITTEN:
        return _WRITTEN[type(node)]
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return None
