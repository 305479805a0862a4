"""Row-level tables: one row is the privacy unit, and a scan counts every row that fits the catalog."""

from __future__ import annotations

from dataclasses import dataclass

from dpsql.errors import CatalogError
from dpsql.tables.table import Table


@dataclass
class RowTable(Table):
    """A protected table without a privacy unit: neighbouring databases differ in one row."""

    @classmethod
    def declares(cls, settings: dict) -> bool:
        """Any central table without a privacy unit or a stream's append-only order."""
        return True

    @classmethod
    def declared(cls, name: str, columns: dict, settings: dict) -> "RowTable":
        if settings.get("max_rows_per_unit") is not None:
            raise CatalogError(f"table {name!r}: max_rows_per_unit needs a privacy_unit to bound")
        return cls(name, columns, settings.get("rows"), settings.get("time"))
