"""The embedded backend: DuckDB computes the marginals, on a connection that only dpsql uses."""

from __future__ import annotations

import duckdb
import numpy as np

from dpsql.backends.base import SQLBackend
from dpsql.tables.table import Table
from dpsql.tables.columns import StoredType, quote_identifier
from dpsql.tables.validation import Validations, as_validated


_INTEGER_TYPES = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint", "uinteger", "ubigint",
                  "uhugeint"}


class DuckDBBackend(SQLBackend):
    """Marginals computed by DuckDB, on a connection of the data's database that only dpsql uses.

    The connection's search path is DuckDB's built-in schema alone, so every function and
    operator the scan calls is the built-in one (a macro stored in the database is never on
    the path), and each table is named with its database and schema.
    """

    errors = (duckdb.Error,)

    def __init__(self, con: duckdb.DuckDBPyConnection, validations: Validations | None = None):
        """Measure in `con`'s database, on a new connection of its own; `validations`: the tables the owner
        validated in it (`dpsql.tables.validation`)."""
        super().__init__()
        self.con = con = con.cursor()
        self.database, self.schema = con.execute("SELECT current_database(), current_schema()").fetchone()
        con.execute("SET search_path = 'system.main'")
        self.validations = validations

    def relation(self, name: str) -> str:
        return ".".join(quote_identifier(p) for p in (self.database, self.schema, name))

    def stored_types(self, table: Table) -> dict[str, StoredType]:
        try:
            stored = self.con.sql(f"SELECT * FROM {self.relation(table.name)} LIMIT 0")
            not_null = {name.lower() for name, nullable in self.con.execute(
                "SELECT column_name, is_nullable FROM duckdb_columns() WHERE database_name = ? AND schema_name = ? "
                "AND table_name = ?", [self.database, self.schema, table.name]).fetchall() if not nullable}
        except duckdb.Error:
            return {}  # the scan itself reports what is wrong
        types = {name.lower(): kind for name, kind in zip(stored.columns, stored.types)}
        out = {}
        for name in table.columns:
            kind = types.get(name.lower())
            if kind is not None:
                values = tuple(str(v) for v in dict(kind.children)["values"]) if kind.id == "enum" else None
                out[name] = StoredType(values, name.lower() in not_null, kind.id in _INTEGER_TYPES)
        return out

    def marginal_types(self, table: Table) -> tuple[dict[str, StoredType], bool]:
        """The stored types, or, for a table the owner validated and that is unchanged since (its row count,
        read from metadata, and the database files), the types its rows were found to have."""
        stored = self.stored_types(table)
        if self.validations is None or table.name.lower() not in self.validations.tables:
            return stored, False
        try:
            rows = self.con.execute(f"SELECT COUNT(*) FROM {self.relation(table.name)}").fetchone()[0]
        except duckdb.Error:
            return stored, False  # the scan itself reports what is wrong
        return (as_validated(table, stored), True) if self.validations.holds(table, rows) else (stored, False)

    def fetch(self, sql: str, columns: list[str]) -> dict[str, np.ndarray]:
        result = self.con.execute(sql).fetchnumpy()
        return {c: np.ma.getdata(result[c]) for c in columns}

    def interrupt(self) -> None:
        self.con.interrupt()

    def progress(self) -> float:
        try:
            return float(self.con.query_progress())
        except duckdb.Error:
            return -1.0

    def close(self) -> None:
        self.con.close()

    def show_progress(self) -> None:
        """Let DuckDB track how far a scan has got (for `progress`)."""
        self.con.execute("SET enable_progress_bar = true")
        self.con.execute("SET enable_progress_bar_print = false")


__all__ = ["DuckDBBackend"]
