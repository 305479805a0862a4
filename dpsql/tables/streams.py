"""Streams: append-only tables whose rows arrive in time, the tables continual queries read.

A stream declares ``time = "<column>"`` and ``append_only = true``: rows are only ever added. With a
privacy unit, each unit keeps its *first* k rows by time (ties by their bins), so a row that arrives
later never evicts one already counted and released windows never change; the unit chooses its rows'
times anyway, so no secret order is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpsql.errors import CatalogError
from dpsql.tables.columns import quote_identifier
from dpsql.tables.privacy_units import UNIT
from dpsql.tables.table import Relation, Stored, Window
from dpsql.tables.unit_bounded import UnitBoundedTable, parse_unit


@dataclass
class StreamTable(UnitBoundedTable):
    """An append-only table ordered by `time_column`, with or without a privacy unit."""

    kind = "stream"

    @classmethod
    def declares(cls, settings: dict) -> bool:
        return settings.get("append_only") is True

    @classmethod
    def declared(cls, name: str, columns: dict, settings: dict) -> "StreamTable":
        unit_column, unit_link = parse_unit(name, settings.get("privacy_unit"))
        return cls(name, columns, settings.get("rows"), settings.get("time"), unit_column, unit_link,
                   settings.get("max_rows_per_unit"))

    def check_declaration(self) -> None:
        if self.time_column is None:
            raise CatalogError(f"table {self.name!r}: append_only is true or false, and needs time = \"<column>\"")
        super().check_declaration()

    @property
    def time_order(self) -> str:
        return quote_identifier(self.time_column)

    def signature_note(self) -> str:
        return f"; append-only by {self.time_column}"

    def rank_order(self, key: str) -> str:
        """A unit's first rows by time, ties by their bins."""
        return ", ".join([self.time_order, *self._bins_as_text()])

    def source_sql(self, key: str | None, relation: Relation = quote_identifier, stored: Stored = None,
                   window: Window = None) -> str:
        """As a unit-bounded table's, ranked by time. With `window` = (prefix, active): only rows meeting
        `prefix` (a time prefix: no later row can rank before them) are ranked, and only units with a row
        meeting `active` (the rows the scan counts): the same ranks as over the whole table, for those rows."""
        if self.unit is None or window is None:
            return super().source_sql(key, relation, stored, window)
        prefix, active = window
        rows = self.unit_rows_sql(relation, stored)
        within = (f" AND {prefix} AND {UNIT} IN (SELECT {UNIT} FROM ({rows}) AS a WHERE {UNIT} IS NOT NULL "
                  f"AND {active})")
        return self._bounded(rows, self.rank_order(key), within)

    def check_stream(self, time_column: str) -> None:
        if self.time_column.lower() != time_column.lower():
            super().check_stream(time_column)
