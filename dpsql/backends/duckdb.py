"""The embedded backend: DuckDB computes the marginals, on a connection that only dpsql uses."""

from __future__ import annotations

import duckdb
import numpy as np

from dpsql.backends.base import SQLBackend
from dpsql.columns import quote_identifier


class DuckDBBackend(SQLBackend):
    """Marginals computed by DuckDB, on a connection of the data's database that only dpsql uses.

    The connection's search path is DuckDB's built-in schema alone, so every function and
    operator the scan calls is the built-in one (a macro stored in the database is never on
    the path), and each table is named with its database and schema.
    """

    errors = (duckdb.Error,)

    def __init__(self, con: duckdb.DuckDBPyConnection):
        """Measure in `con`'s database, on a new connection of its own."""
        super().__init__()
        self.con = con = con.cursor()
        self.database, self.schema = con.execute("SELECT current_database(), current_schema()").fetchone()
        con.execute("SET search_path = 'system.main'")

    def relation(self, name: str) -> str:
        return ".".join(quote_identifier(p) for p in (self.database, self.schema, name))

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
