"""Post-processing: answers built from the results of several DP queries (`dpsql.sql.flatten.Composite`).

``SELECT AVG(n) FROM (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex) t``, a CTE of DP aggregates
joined with a public table, ``... UNION ALL ...`` of DP selects: each DP part is compiled and answered
as usual (all of them in one plan and one charge), and `apply_outer` then builds the statement's answer
from their results: the parts' rows in order for a UNION [ALL] of DP parts (repeated rows dropped for
UNION), else the outer SQL evaluated over the parts' noisy result relations (and the public tables it
names, copied in) in the locked evaluator that runs every DP query's outer expressions. Everything here
is a function of noisy answers and public data, so it spends nothing; it must run after the charge
(SECURITY.md: nothing derived from noise before its charge): `dry_run` runs it on zeros before, to
refuse what cannot run at all (unknown columns, type errors) with nothing spent.

A column of the answer that passes a part's column through unchanged (``SELECT region, n FROM (...) t
WHERE n > 10 ORDER BY n``, and every column of a UNION of parts) keeps its standard error; a computed
one has none (None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import duckdb
import numpy as np
import pyarrow as pa
from sqlglot import exp

from dpsql.errors import NotSupportedError, OuterExpressionError, ProgrammingError
from dpsql.answers.result import Result, _evaluator, assemble
from dpsql.sql.compiler import CompiledQuery
from dpsql.sql.flatten import PART_PREFIX, Composite

PUBLIC_PREFIX = "__dpsql_public_"
_STDERR = "__dpsql_stderr_"
# DuckDB errors that say the outer SQL cannot run on any answers (not a value it met).
_STATIC_ERRORS = (duckdb.BinderException, duckdb.CatalogException, duckdb.ParserException,
                  duckdb.NotImplementedException)
_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
            "UBIGINT", "FLOAT", "DOUBLE", "DECIMAL", "REAL")


@dataclass
class Outer:
    """What a composite statement does with its parts' results: `sql` over the relations
    ``__dpsql_part_<i>`` and `public` (by name), or for `sql` None the parts' rows in order (`union`
    "all" or "distinct"). `kept` holds, per output column of `sql`, the (part, column) it passes
    through unchanged (None: computed); empty when no column is known to."""

    sql: str | None
    union: str | None = None
    public: dict[str, pa.Table] = field(default_factory=dict)
    kept: list[tuple[int, int] | None] = field(default_factory=list)


@dataclass
class CompositeQuery:
    """A statement answered from several compiled DP queries (`parts`) by `outer`."""

    sql: str
    parts: list[CompiledQuery]
    outer: Outer
    selection = None  # never a key release: a part that needs one is refused when compiled

    @property
    def blocks(self) -> list:
        return [b for p in self.parts for b in p.blocks]


def compile_composite(shape: Composite, sql: str, label: str, compile_part: Callable[[str, str], CompiledQuery],
                      workspace) -> CompositeQuery:
    """Compile a flattened statement's parts (`compile_part(sql, label)`: the session's compiler, with its
    dry run), read the public tables its outer SQL names from the analyst's `workspace`, and dry-run the
    outer SQL on zeros (`dry_run`): whatever cannot run is refused here, before any charge."""
    parts = []
    for i, part in enumerate(shape.parts, start=1):
        compiled = compile_part(part.sql(dialect="duckdb"), f"{label} part {i}" if label else f"part {i}")
        if compiled.selection is not None:
            raise NotSupportedError(f"{compiled.selection.table.column(compiled.selection.column).not_released()}: "
                                    "release its keys with a query of its own first")
        parts.append(compiled)
    public: dict[str, pa.Table] = {}
    if shape.outer is not None:
        workspace.check(shape.outer.sql(dialect="duckdb"))  # the allowlist of public SQL holds here too
        tree, public = public_tables(shape.outer, workspace.prepare(shape.outer))
        shape = Composite(shape.parts, tree, shape.union)
    outer = outer_query(shape, parts, public)
    dry_run(outer, parts)
    return CompositeQuery(sql, parts, outer)


def parts_of(queries: list) -> list[CompiledQuery]:
    """The compiled DP queries behind `queries` (a composite's parts in its place)."""
    return [p for q in queries for p in (q.parts if isinstance(q, CompositeQuery) else [q])]


def answers(queries: list, results: list[Result]) -> list[Result]:
    """One answer per query from the results of `parts_of(queries)` (after their charge): a composite's
    by `apply_outer` over its parts' results."""
    found = iter(results)
    return [apply_outer(q.outer, [next(found) for _ in q.parts]) if isinstance(q, CompositeQuery) else next(found)
            for q in queries]


def outer_query(shape: Composite, parts: list[CompiledQuery], public: dict[str, pa.Table] | None = None) -> Outer:
    """The `Outer` of a flattened statement whose parts compiled to `parts`; `public` holds the public
    tables its SQL reads (`public_tables`)."""
    if shape.outer is None:
        return Outer(None, shape.union)
    tree = shape.outer
    kept = _kept_columns(tree, parts)
    if any(kept):
        tree = tree.copy()
        source = tree.args.get("from_") or tree.args.get("from")
        alias = source.this.alias_or_name
        stderr = [exp.alias_(exp.column(f"{_STDERR}{part}_{column}", table=alias or None, quoted=True),
                             f"{_STDERR}{j}", quoted=True)
                  for j, (part, column) in enumerate(k for k in kept if k is not None)]
        tree.set("expressions", list(tree.expressions) + stderr)
    return Outer(tree.sql(dialect="duckdb"), None, public or {}, kept)


def _kept_columns(tree: exp.Query, parts: list[CompiledQuery]) -> list[tuple[int, int] | None]:
    """Per output column, the part's column it passes through, when the outer SQL is one SELECT over
    one part that neither aggregates nor joins (else nothing is kept)."""
    if not isinstance(tree, exp.Select) or any(tree.args.get(k) for k in (
            "joins", "group", "having", "distinct", "windows", "qualify", "laterals", "pivots")):
        return []
    if any(isinstance(n, (exp.AggFunc, exp.Window, exp.Star)) for e in tree.expressions for n in e.walk()):
        return []
    source = (tree.args.get("from_") or tree.args.get("from"))
    source = source.this if source is not None else None
    inner = source.this if isinstance(source, exp.Subquery) else None
    if not (isinstance(inner, exp.Select) and isinstance(inner.expressions[0], exp.Star) and len(inner.expressions)
            == 1 and not inner.args.get("where") and not inner.args.get("joins")):
        return []
    table = inner.args.get("from_") or inner.args.get("from")
    if table is None or not table.this.name.startswith(PART_PREFIX):
        return []
    part = int(table.this.name[len(PART_PREFIX):])
    names = [n.lower() for n in parts[part].output_names]
    kept = []
    for item in tree.expressions:
        target = item.this if isinstance(item, exp.Alias) else item
        column = names.index(target.name.lower()) if isinstance(target, exp.Column) and names.count(
            target.name.lower()) == 1 else None
        kept.append(None if column is None else (part, column))
    return kept


def public_tables(tree: exp.Query, con: duckdb.DuckDBPyConnection) -> tuple[exp.Query, dict[str, pa.Table]]:
    """The outer SQL with each public table it names read from `con` (the analyst's workspace, where public
    SQL runs) and renamed to a relation of the evaluator (aliased as before)."""
    tree = tree.copy()
    public: dict[str, pa.Table] = {}
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier) or table.name.startswith(PART_PREFIX):
            continue
        name = f"{PUBLIC_PREFIX}{len(public)}"
        plain = exp.Table(this=table.this.copy(), db=table.args.get("db"), catalog=table.args.get("catalog"))
        try:
            rows = con.sql(f"SELECT * FROM {plain.sql(dialect='duckdb')}").arrow()
            public[name] = rows.read_all() if isinstance(rows, pa.RecordBatchReader) else rows  # DuckDB 2 / 1
        except duckdb.Error as e:
            raise ProgrammingError(f"the query over DP answers reads {plain.sql()!r}: {_message(e)}") from None
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name))
        table.replace(exp.Table(this=exp.to_identifier(name), alias=alias))
    return tree, public


def dry_run(outer: Outer, parts: list[CompiledQuery]) -> Result:
    """`apply_outer` on the parts' results with every DP value 0: refuses (ProgrammingError) what cannot run
    on any answers, before anything is charged; returns the answer's shape (its rows mean nothing)."""
    zeros = [assemble(p, [(np.zeros(p.rows), np.zeros(p.rows)) for _ in p.aggregates]) for p in parts]
    return _apply(outer, zeros, static_only=True)


def apply_outer(outer: Outer, parts: list[Result]) -> Result:
    """The statement's answer from its parts' results (after their charge): see the module docstring.
    A failure on the noisy values is a ProgrammingError that quotes none of them."""
    result = _apply(outer, parts, static_only=False)
    result.charged = sum(p.charged for p in parts)
    result.charge_text = parts[0].charge_text if parts else ""
    result.plan = parts[0].plan if parts else None
    result.answered_by = list(dict.fromkeys(m for p in parts for m in p.answered_by))
    result.notes = list(dict.fromkeys(n for p in parts for n in p.notes))
    return result


def _apply(outer: Outer, parts: list[Result], static_only: bool) -> Result:
    if outer.sql is None:
        return _union(parts, outer.union == "distinct")
    con = _evaluator().cursor()
    try:
        for i, part in enumerate(parts):
            con.register(f"{PART_PREFIX}{i}", _relation(part, i, with_stderr=bool(outer.kept)))
        for name, table in outer.public.items():
            con.register(name, table)
        cursor = con.execute(outer.sql)
        raw = cursor.fetchall()
        described = cursor.description
    except duckdb.Error as e:
        if static_only and not isinstance(e, _STATIC_ERRORS):  # a value's error on zeros: the answers may not
            return _unknown_shape()
        if static_only:
            raise ProgrammingError(f"the query over DP answers cannot run: {_message(e)}") from None
        raise OuterExpressionError("the query over DP answers failed on the noisy values", type(e).__name__) \
            from None  # after the charge: `Executor.answered` says what failed, without DuckDB's message
    except (pa.ArrowException, ValueError, TypeError):  # a value Arrow cannot hold: said without it
        raise ProgrammingError("the DP answers could not be handed to the query over them (a value of a type "
                               "it cannot hold); nothing in them is shown") from None
    finally:
        con.close()
    width = len(described) - sum(k is not None for k in outer.kept)
    kept = outer.kept or [None] * width
    rows, stderr = [], []
    for r in raw:
        rows.append(tuple(r[:width]))
        extra = iter(r[width:])
        stderr.append(tuple(next(extra) if k is not None else None for k in kept))
    types = [str(d[1]) for d in described[:width]]
    dp = [parts[k[0]].dp[k[1]] if k is not None else _numeric(t) for k, t in zip(kept, types)]
    return Result([d[0] for d in described[:width]], rows, stderr, types=types, dp=dp)


def _union(parts: list[Result], distinct: bool) -> Result:
    """The parts' rows in order, under the first part's column names; repeated rows dropped for UNION."""
    first = parts[0]
    for i, part in enumerate(parts[1:], start=2):
        if len(part.columns) != len(first.columns):
            raise ProgrammingError(f"the selects of a UNION must have as many columns each: the first has "
                                   f"{len(first.columns)}, select {i} has {len(part.columns)}")
        for j, (a, b) in enumerate(zip(first.types, part.types)):
            if _numeric(a) != _numeric(b) and "NULL" not in (a, b):
                raise ProgrammingError(f"column {j + 1} of the UNION is {a} in the first select but {b} in select "
                                       f"{i}: cast one of them")
    rows, stderr, seen = [], [], set()
    for part in parts:
        errors = part.stderr or [(None,) * len(part.columns)] * len(part.rows)
        for row, err in zip(part.rows, errors):
            if distinct and row in seen:
                continue
            seen.add(row)
            rows.append(row)
            stderr.append(err)
    types = [a if all(p.types[j] == a for p in parts) else ("DOUBLE" if _numeric(a) else "VARCHAR")
             for j, a in enumerate(first.types)]
    dp = [any(p.dp[j] for p in parts) for j in range(len(first.columns))]
    return Result(list(first.columns), rows, stderr, types=types, dp=dp)


def _relation(part: Result, index: int, with_stderr: bool) -> pa.Table:
    """A part's result as a relation: its columns (and, for kept columns, their standard errors)."""
    columns = list(zip(*part.rows)) if part.rows else [()] * len(part.columns)
    arrays, names = [], []
    for j, name in enumerate(part.columns):
        arrays.append(_array(columns[j], part.types[j] if j < len(part.types) else "DOUBLE"))
        names.append(name)
    if with_stderr:
        errors = list(zip(*part.stderr)) if part.stderr else [(None,) * len(part.rows)] * len(part.columns)
        for j in range(len(part.columns)):
            arrays.append(pa.array([None if e is None else float(e) for e in errors[j]], type=pa.float64()))
            names.append(f"{_STDERR}{index}_{j}")
    return pa.Table.from_arrays(arrays, names=names)


def _array(values, sql_type: str) -> pa.Array:
    if _numeric(sql_type) and not sql_type.startswith(("DECIMAL", "HUGEINT", "UBIGINT")):
        integer = sql_type in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER")
        return pa.array(values, type=pa.int64() if integer else pa.float64())
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def _numeric(sql_type: str) -> bool:
    return sql_type.upper().startswith(_NUMERIC)


def _unknown_shape() -> Result:
    return Result([], [], kind="dp")


def _message(e: Exception) -> str:
    """DuckDB's message (first line) without its "Binder Error:"-style prefix."""
    line = str(e).splitlines()[0] if str(e) else type(e).__name__
    return re.sub(r"^[A-Za-z ]*Error: ", "", line)


__all__ = ["CompositeQuery", "Outer", "answers", "apply_outer", "compile_composite", "dry_run", "outer_query",
           "parts_of", "public_tables"]
