"""The types of a statement's parameters ($1, $2, ...), inferred from where they stand, as PostgreSQL does.

A client that prepares `SELECT COUNT(*) FROM people WHERE age > $1` without naming the type of
$1 (OID 0, as node-postgres and pg8000 send every parameter, and asyncpg asks the server) gets
the type PostgreSQL would infer: that of the column it is compared with (`age`: int4); a cast
(`$1::int`) names it; a value inserted, its target column's; `LIMIT $1` is int8. The server reports these in ParameterDescription and
decodes untyped text parameters by them, so '25' compared with an integer column is the number 25.
A parameter that stands nowhere telling stays unknown (0): text.
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from dpsql.interfaces.server import pgcompat

_CAST_OIDS = {
    "TINYINT": pgcompat.INT2, "SMALLINT": pgcompat.INT2, "INT": pgcompat.INT4, "BIGINT": pgcompat.INT8,
    "FLOAT": pgcompat.FLOAT4, "DOUBLE": pgcompat.FLOAT8, "DECIMAL": pgcompat.NUMERIC, "BOOLEAN": pgcompat.BOOL,
    "TEXT": pgcompat.TEXT, "VARCHAR": pgcompat.VARCHAR, "CHAR": pgcompat.TEXT, "DATE": pgcompat.DATE,
    "TIMESTAMP": pgcompat.TIMESTAMP, "TIMESTAMPTZ": pgcompat.TIMESTAMPTZ, "UUID": pgcompat.UUID,
    "JSON": pgcompat.JSON, "INTERVAL": pgcompat.INTERVAL, "TIME": pgcompat.TIME, "VARBINARY": pgcompat.BYTEA,
    "BLOB": pgcompat.BYTEA,
}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike, exp.Is)

ColumnTypes = dict[str, dict[str, str]]  # lower table name -> lower column name -> DuckDB type


def tables_named(tree: exp.Expression) -> list[str]:
    """The (lower) names of the tables a statement reads, whose column types `infer` needs."""
    return sorted({t.name.lower() for t in tree.find_all(exp.Table) if t.name})


def infer(tree: exp.Expression, columns: ColumnTypes) -> dict[int, int]:
    """Parameter number -> type OID, for each parameter whose context tells its type."""
    aliases = {t.alias_or_name.lower(): t.name.lower() for t in tree.find_all(exp.Table) if t.name}
    column_type = _column_lookup(aliases, columns)
    inserted = _inserted_columns(tree, columns)
    types: dict[int, int] = {}
    for placeholder in tree.find_all(exp.Placeholder):
        if not placeholder.name.isdigit():
            continue
        oid = _context_type(placeholder, column_type, inserted)
        if oid:
            types.setdefault(int(placeholder.name), oid)
    return types


def _inserted_columns(tree: exp.Expression, columns: ColumnTypes) -> list[int]:
    """The type OIDs of an INSERT's target columns, in the order its VALUES give them ([] for other statements)."""
    if not isinstance(tree, exp.Insert) or not isinstance(tree.expression, exp.Values):
        return []
    target = tree.this
    table = (target.this if isinstance(target, exp.Schema) else target).name.lower()
    known = columns.get(table, {})
    names = [c.name.lower() for c in target.expressions] if isinstance(target, exp.Schema) else list(known)
    return [pgcompat.type_oid(known[n]) if n in known else 0 for n in names]


def _context_type(placeholder: exp.Placeholder, column_type: Callable[[exp.Column], int], inserted: list[int]) -> int:
    parent = placeholder.parent
    if inserted and isinstance(parent, exp.Tuple) and isinstance(parent.parent, exp.Values):
        position = next(i for i, e in enumerate(parent.expressions) if e is placeholder)
        return inserted[position] if position < len(inserted) else 0
    if isinstance(parent, (exp.Cast, exp.TryCast)) and parent.this is placeholder:
        return _CAST_OIDS.get(parent.to.this.name, 0)
    if isinstance(parent, (exp.Limit, exp.Offset)):
        return pgcompat.INT8
    if isinstance(parent, _COMPARISONS):
        other = parent.expression if parent.this is placeholder else parent.this
        return column_type(other) if isinstance(other, exp.Column) else 0
    if isinstance(parent, exp.Between) and isinstance(parent.this, exp.Column):
        return column_type(parent.this)
    if isinstance(parent, exp.In) and placeholder is not parent.this and isinstance(parent.this, exp.Column):
        return column_type(parent.this)
    return 0


def _column_lookup(aliases: dict[str, str], columns: ColumnTypes) -> Callable[[exp.Column], int]:
    def column_type(column: exp.Column) -> int:
        name = column.name.lower()
        if column.table:
            found = columns.get(aliases.get(column.table.lower(), column.table.lower()), {}).get(name)
        else:
            found = next((columns[t][name] for t in aliases.values() if name in columns.get(t, {})), None)
        return pgcompat.type_oid(found) if found else 0

    return column_type
