"""What the shell knows about tables: protected ones from the catalog, public ones from DuckDB.

Used by `.tables`, `.schema` and completion. Protected tables are described
by their declared domains only (public information): the shell never looks
at their data to describe them.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from dpsql.catalog import CATEGORICAL
from dpsql.dbapi import Connection

PROTECTED = "protected"
PUBLIC_TABLE = "public table"
PUBLIC_VIEW = "public view"


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    description: str  # a declared domain, or a DuckDB type
    values: tuple[str, ...] = ()  # declared categorical values


@dataclass(frozen=True)
class TableInfo:
    name: str
    kind: str
    columns: tuple[ColumnInfo, ...]


def describe_tables(conn: Connection) -> list[TableInfo]:
    """Protected tables (catalog order), then public tables and views (by name)."""
    catalog = conn.session.catalog
    out = [
        TableInfo(
            t.name,
            PROTECTED,
            tuple(
                ColumnInfo(c.name, c.describe(), c.values if c.kind == CATEGORICAL else ())
                for c in t.columns.values()
            ),
        )
        for t in catalog.tables.values()
    ]
    try:
        rows = conn.session.con.execute(
            "SELECT t.name, t.kind, c.column_name, c.data_type, c.is_nullable "
            "FROM (SELECT database_name, schema_name, table_name AS name, 'table' AS kind FROM duckdb_tables() "
            "      WHERE NOT internal "
            "      UNION ALL SELECT database_name, schema_name, view_name, 'view' FROM duckdb_views() "
            "      WHERE NOT internal) t "
            "JOIN duckdb_columns() c ON c.database_name = t.database_name AND c.schema_name = t.schema_name "
            "  AND c.table_name = t.name "
            "ORDER BY t.name, c.column_index"
        ).fetchall()
    except duckdb.Error:
        rows = []
    public: dict[str, tuple[str, list[ColumnInfo]]] = {}
    for name, kind, column, data_type, nullable in rows:
        if name in catalog:
            continue
        _, columns = public.setdefault(name, (PUBLIC_TABLE if kind == "table" else PUBLIC_VIEW, []))
        columns.append(ColumnInfo(column, data_type + ("" if nullable else " NOT NULL")))
    out.extend(TableInfo(name, kind, tuple(cols)) for name, (kind, cols) in public.items())
    return out


def find_table(tables: list[TableInfo], name: str) -> TableInfo | None:
    """A table by name, case-insensitively."""
    return next((t for t in tables if t.name.lower() == name.lower()), None)
