"""What the shell knows about tables: protected ones from the catalog, public ones from the workspace.

Used by `.tables`, `.schema` and completion. Protected tables are described
by their declared domains only (public information): the shell never looks
at their data to describe them.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpsql.catalog import Table
from dpsql.columns import CATEGORICAL
from dpsql.dbapi import Connection
from dpsql.edge_tables import EDGES, TRIANGLES

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
    out = [TableInfo(t.name, PROTECTED, _protected_columns(t)) for t in catalog.tables.values()]
    rows = conn.session.workspace.describe()
    public: dict[str, tuple[str, list[ColumnInfo]]] = {}
    for name, kind, column, data_type, nullable in rows:
        if name in catalog:
            continue
        _, columns = public.setdefault(name, (PUBLIC_TABLE if kind == "table" else PUBLIC_VIEW, []))
        columns.append(ColumnInfo(column, data_type + ("" if nullable else " NOT NULL")))
    out.extend(TableInfo(name, kind, tuple(cols)) for name, (kind, cols) in sorted(public.items()))
    return out


def _protected_columns(table: Table) -> tuple[ColumnInfo, ...]:
    """A protected table's declared columns; a graph's edge table, its endpoints (which no query reads)."""
    if table.role == EDGES:
        return tuple(ColumnInfo(name, "node id (an edge's end): COUNT(*) counts the edges; query the degrees in "
                                f"{table.graph.nodes}") for name, _, _ in table.stand_in_columns())
    if table.role == TRIANGLES:
        return tuple(ColumnInfo(name, "node id (a triangle's node): COUNT(*) counts the triangles")
                     for name, _, _ in table.stand_in_columns())
    return tuple(ColumnInfo(c.name, c.describe(), c.values if c.kind == CATEGORICAL else ())
                 for c in table.columns.values())


def find_table(tables: list[TableInfo], name: str) -> TableInfo | None:
    """A table by name, case-insensitively."""
    return next((t for t in tables if t.name.lower() == name.lower()), None)
