"""Scalar expressions of declared columns, evaluated by DuckDB on the public domain.

An expression the `ExpressionCompiler` has no rule for (`age / 10`, `FLOOR`, `COALESCE`,
`DATE_TRUNC`, `region LIKE 'N%'`, `a = n`, any DuckDB scalar function) is a function of the
bins of the declared columns it reads. DuckDB computes that function on every cell of those
columns' declared domain (each bin's representative value: `Column.representatives`), in a
locked in-memory database that holds no table at all (`SANDBOX_CONFIG`). Nothing private is
read; the result is a public array over the cells, which the compiler turns into an indicator
(a condition), a value vector (inside SUM/AVG/COUNT) or group labels (GROUP BY).

Functions whose result is not a function of their arguments are refused by name: DuckDB's
volatile functions (random, uuid, nextval, ...) and those reading the session (settings,
variables, the catalog). A dense function over several attributes becomes a `Predicate` (a sum
of Kronecker products) by splitting it into its distinct slices along one attribute
(`to_predicate`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Callable

import duckdb
import numpy as np
from sqlglot import exp

from dpsql.errors import NotSupportedError, ProgrammingError
from dpsql.sql.public import SANDBOX_CONFIG
from mechanisms.domain import Domain
from mechanisms.workload import MAX_PREDICATE_TERMS, Predicate

# An expression is evaluated on at most this many cells (the product of its columns' domain sizes).
MAX_CELLS = 1_000_000
# Functions that read the session rather than their arguments (DuckDB marks them consistent
# within a query, like the clock, which is public and allowed).
_SESSION_FUNCTIONS = frozenset({
    "current_setting", "getvariable", "current_database", "current_schema", "current_schemas", "in_search_path",
    "txid_current", "current_catalog", "current_role", "current_user", "session_user", "user", "version",
    "pragma_version", "getenv",
})
_NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                  "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL")


@dataclass(frozen=True)
class Evaluated:
    """An expression's result on every cell of `attributes` (domain order; arrays shaped by them).

    `sql_type` is DuckDB's type of the result; `present` marks the cells where it is not NULL
    (1.0) and a boolean or numeric result has `numbers` (0 where NULL).
    """

    attributes: tuple[str, ...]
    sql_type: str
    present: np.ndarray
    numbers: np.ndarray | None
    fetched: np.ma.MaskedArray  # flat, as DuckDB returned it

    @property
    def is_boolean(self) -> bool:
        return self.sql_type in ("BOOLEAN", '"NULL"')  # NULL: a condition that is never TRUE nor FALSE

    @property
    def is_scalar(self) -> bool:
        """Whether the result is a scalar (not a list, struct, map or union)."""
        return not re.search(r"\[|\b(STRUCT|MAP|UNION|VARIANT)\b", self.sql_type)

    def labels(self) -> list:
        """Per cell (flat), the value as a result shows it (dates as dates), None where NULL; NaN is one value."""
        data, present = np.ma.getdata(self.fetched), ~np.ma.getmaskarray(self.fetched)
        if self.sql_type == "DATE":
            out = [d.astype("datetime64[D]").item() for d in data]
        elif self.sql_type.startswith("TIMESTAMP"):
            out = [d.astype("datetime64[us]").item() for d in data]
        else:
            out = [v.item() if hasattr(v, "item") else v for v in data]
        return [(_NAN if isinstance(v, float) and math.isnan(v) else v) if p else None for v, p in zip(out, present)]


_NAN = float("nan")  # every NaN label is this one object, so NaN results form one group, as in SQL

# A column reference resolved: the attribute it is a function of, and each bin's value of it.
Resolved = tuple[str, list]


def evaluate(node: exp.Expression, resolve: Callable[[exp.Column], Resolved], domain: Domain) -> Evaluated:
    """`node` evaluated by DuckDB on every cell of the declared columns it reads."""
    _refuse_unevaluable(node)
    columns: dict[str, list] = {}
    rewritten = node.copy()
    for column in list(rewritten.find_all(exp.Column)):
        if isinstance(column.this, exp.Star):
            raise ProgrammingError(f"{node.sql()!r}: * is not a value")
        attribute, values = resolve(column)
        columns.setdefault(attribute, values)
        replacement = exp.column(f"__v{list(columns).index(attribute)}", quoted=True)
        if column is rewritten:
            rewritten = replacement
        else:
            column.replace(replacement)
    attributes = domain.canonical(columns)
    sizes = [len(columns[a]) for a in attributes]
    cells = math.prod(sizes)
    if cells > MAX_CELLS:
        raise NotSupportedError(
            f"{node.sql()!r} reads columns with {cells} combinations of declared values (limit {MAX_CELLS}); "
            "declare coarser columns or split the expression"
        )
    text = rewritten.sql(dialect="duckdb")
    _check_functions(text, node)
    strides = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]
    picks = ", ".join(
        f"${k + 1}[(i // {stride}) % {size} + 1] AS \"__v{list(columns).index(a)}\""
        for k, (a, stride, size) in enumerate(zip(attributes, strides, sizes))
    )
    source = f"(SELECT i{', ' + picks if picks else ''} FROM range({cells}) AS r(i))"
    params = [columns[a] for a in attributes]
    con = _sandbox().cursor()
    try:
        cursor = con.execute(f"SELECT i, ({text}) AS v FROM {source} ORDER BY i", params)
        sql_type = str(cursor.description[1][1])
        fetched = cursor.fetchnumpy()["v"]
    except duckdb.Error as e:
        raise ProgrammingError(
            f"{node.sql()!r} could not be evaluated on the declared values of its columns: {_message(e)}"
        ) from None
    finally:
        con.close()
    present = ~np.ma.getmaskarray(fetched)
    shape = tuple(sizes)
    numbers = None
    if sql_type in ("BOOLEAN", '"NULL"') or sql_type.split("(")[0] in _NUMERIC_TYPES:
        numbers = np.ma.filled(fetched.astype(float), 0.0).astype(float)
        numbers[~present] = 0.0
        numbers = numbers.reshape(shape)
    return Evaluated(attributes, sql_type, present.reshape(shape).astype(float), numbers, fetched)


def _refuse_unevaluable(node: exp.Expression) -> None:
    """Refuse what is not a scalar function of the row's declared columns, naming it."""
    for sub in node.walk():
        if isinstance(sub, (exp.Subquery, exp.Select)):
            raise NotSupportedError(f"{node.sql()!r}: subqueries are not supported inside expressions")
        if isinstance(sub, (exp.Placeholder, exp.Parameter)):
            raise NotSupportedError(f"{node.sql()!r}: parameters are not supported inside expressions; inline the value")
        if isinstance(sub, (exp.AggFunc, exp.Window)):
            raise NotSupportedError(f"{node.sql()!r}: the aggregate {sub.sql()!r} cannot be used inside WHERE, "
                                    "GROUP BY or an aggregate's argument")


def _check_functions(text: str, node: exp.Expression) -> None:
    """Refuse volatile, session-reading and non-scalar functions, by the names DuckDB binds them to."""
    volatile, kinds = _function_kinds()
    con = _sandbox().cursor()
    try:
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [f"SELECT {text}"]).fetchone()[0])
    finally:
        con.close()
    if tree.get("error"):
        raise ProgrammingError(f"{node.sql()!r} does not parse as a DuckDB expression: {tree.get('error_message', '')}")
    for found in _walk(tree):
        cls = found.get("class")
        if cls == "SUBQUERY" or found.get("type") in ("BASE_TABLE", "TABLE_FUNCTION"):
            raise NotSupportedError(f"{node.sql()!r}: subqueries and tables are not supported inside expressions")
        if cls != "FUNCTION" or found.get("is_operator"):
            continue
        name = str(found.get("function_name", "")).lower()
        if name in volatile:
            raise NotSupportedError(
                f"{node.sql()!r}: {name}() is not deterministic, so it is not a function of the declared values; "
                "expressions may use only deterministic functions"
            )
        if name in _SESSION_FUNCTIONS:
            raise NotSupportedError(f"{node.sql()!r}: {name}() reads the session, not the row; it is not allowed")
        if name in kinds and not kinds[name] & {"scalar", "macro"}:
            what = "/".join(sorted(kinds[name]))
            raise NotSupportedError(f"{node.sql()!r}: {name}() is a {what} function, not a scalar function of a row")


def _walk(tree):
    if isinstance(tree, dict):
        yield tree
        for value in tree.values():
            yield from _walk(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _walk(value)


@cache
def _function_kinds() -> tuple[frozenset[str], dict[str, set[str]]]:
    """(names with a volatile overload, per function name its function types) of DuckDB's functions."""
    con = _sandbox().cursor()
    try:
        rows = con.execute("SELECT lower(function_name), function_type, stability FROM duckdb_functions()").fetchall()
    finally:
        con.close()
    kinds: dict[str, set[str]] = {}
    for name, kind, _ in rows:
        kinds.setdefault(name, set()).add(kind)
    return frozenset(n for n, _, s in rows if s == "VOLATILE"), kinds


@cache
def _sandbox() -> duckdb.DuckDBPyConnection:
    """An empty in-memory DuckDB, locked like the workspace: expressions run here on public values only."""
    return duckdb.connect(":memory:", config=SANDBOX_CONFIG)


def _message(e: Exception) -> str:
    """DuckDB's message without its error-class prefix (the analyst's expression is what failed)."""
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    return re.sub(r"^[A-Za-z ]*Error: ", "", first)


# --- dense functions as sums of Kronecker products -------------------------------------------------

def to_predicate(values: np.ndarray, attributes: tuple[str, ...]) -> Predicate:
    """The function `values` (one axis per attribute) as a Predicate: split along the attribute with
    the fewest distinct (proportional) slices, each slice a vector over it times the function, over
    the other attributes, that weighs it; recursively. OverflowError past MAX_PREDICATE_TERMS terms."""
    values = np.asarray(values, dtype=float)
    if not attributes:
        return Predicate.constant(float(values))
    terms = _terms(values, tuple(attributes))
    if len(terms) > MAX_PREDICATE_TERMS:
        raise OverflowError(f"predicate expands to {len(terms)} product terms (limit {MAX_PREDICATE_TERMS})")
    return Predicate._from([(1.0, factors) for factors in terms]) if terms else Predicate.constant(0.0)


def _terms(values: np.ndarray, attributes: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
    if not np.any(values):
        return []
    if len(attributes) == 1:
        return [{attributes[0]: values}]
    best = None
    for axis in range(len(attributes)):
        rows = np.moveaxis(values, axis, -1).reshape(-1, values.shape[axis])
        weights, directions = _proportional(rows)
        if best is None or len(directions) < len(best[2]):
            best = (axis, weights, directions)
    axis, weights, directions = best
    rest = attributes[:axis] + attributes[axis + 1:]
    rest_shape = values.shape[:axis] + values.shape[axis + 1:]
    out = []
    for j, direction in enumerate(directions):
        for factors in _terms(weights[j].reshape(rest_shape), rest):
            out.append({**factors, attributes[axis]: direction})
            if len(out) > MAX_PREDICATE_TERMS:
                return out
    return out


def _proportional(rows: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Group the nonzero rows by direction: rows[i] = w_j[i] * directions[j]."""
    directions: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    index: dict[bytes, int] = {}
    for i, row in enumerate(rows):
        nonzero = np.flatnonzero(row)
        if not nonzero.size:
            continue
        scale = row[nonzero[0]]
        with np.errstate(invalid="ignore", divide="ignore"):
            direction = row / scale
        key = np.round(direction, 12).tobytes()
        if key not in index:
            index[key] = len(directions)
            directions.append(direction)
            weights.append(np.zeros(len(rows)))
        weights[index[key]][i] = scale
    return weights, directions


__all__ = ["Evaluated", "MAX_CELLS", "evaluate", "to_predicate"]
