"""Unit-bounded tables: rows grouped by a privacy unit, at most k rows of each counted.

The unit is a column of the table, or reached through foreign keys (`dpsql.tables.privacy_units`).
Neighbouring databases differ by all rows of one unit; each unit keeps at most k rows
(``max_rows_per_unit``), chosen in SQL by a keyed hash, rows without a unit are dropped, and
every sensitivity is multiplied by k.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpsql.errors import CatalogError, ProgrammingError
from dpsql.tables.columns import quote_identifier, quote_string
from dpsql.tables.distinct_units import DistinctUnitsTable
from dpsql.tables.privacy_units import (MAX_ROWS_PER_UNIT, RANK, UNIT, Hop, PrivacyUnit, parse_unit, shared_keys_sql,
                                        unit_rows_sql)
from dpsql.tables.table import Relation, Stored, Table, Window


@dataclass
class UnitBoundedTable(Table):
    """A table whose privacy unit is `unit_column`, or reached by `unit_link` (a foreign key to another
    protected table, resolved by the `Catalog`), each unit contributing at most `max_rows_per_unit` rows."""

    kind = "unit-bounded"
    time_order = None  # SQL of the time a stream keeps each unit's first rows by (None: a keyed hash)

    unit_column: str | None = None
    unit_link: Hop | None = None
    max_rows_per_unit: int | None = None
    _unit: PrivacyUnit | None = field(init=False, default=None, repr=False)

    @classmethod
    def declares(cls, settings: dict) -> bool:
        return settings.get("privacy_unit") is not None

    @classmethod
    def declared(cls, name: str, columns: dict, settings: dict) -> "UnitBoundedTable":
        unit_column, unit_link = parse_unit(name, settings.get("privacy_unit"))
        return cls(name, columns, settings.get("rows"), settings.get("time"), unit_column, unit_link,
                   settings.get("max_rows_per_unit"))

    def check_declaration(self) -> None:
        if self.unit_column is not None and self.unit_link is not None:
            raise CatalogError(f"table {self.name!r}: declare the privacy unit as a column or a foreign key, not both")
        bound = self.max_rows_per_unit
        if self.unit_column is None and self.unit_link is None:
            if bound is not None:
                raise CatalogError(f"table {self.name!r}: max_rows_per_unit needs a privacy_unit to bound")
            return
        if isinstance(bound, bool) or not isinstance(bound, int) or not 1 <= bound <= MAX_ROWS_PER_UNIT:
            raise CatalogError(
                f"table {self.name!r}: a privacy unit needs max_rows_per_unit, an integer from 1 to "
                f"{MAX_ROWS_PER_UNIT} (the most rows one unit may contribute)"
            )
        if self.unit_column is not None:
            self._unit = PrivacyUnit(self.unit_column, bound)

    def copied(self, columns: dict) -> "UnitBoundedTable":
        table = super().copied(columns)
        table._unit = self._unit
        return table

    def resolve(self, unit: PrivacyUnit) -> None:
        """Set the unit a foreign-key chain reaches (the `Catalog` follows it)."""
        self._unit = unit

    @property
    def unit(self) -> PrivacyUnit | None:
        if self.unit_link is not None and self._unit is None:
            raise CatalogError(f"table {self.name!r}: its foreign key to a privacy unit was not resolved by a catalog")
        return self._unit

    def unit_columns(self) -> tuple[str, ...]:
        return tuple(c for c in (self.unit_column, self.unit_link.column if self.unit_link else None) if c)

    @property
    def contribution(self) -> int:
        return 1 if self.unit is None else self.unit.bound

    def shared_keys_sql(self, relation: Relation = quote_identifier) -> list[str]:
        return [] if self.unit is None else shared_keys_sql(self.name, self.unit, relation)

    def unit_rows_sql(self, relation: Relation = quote_identifier, stored: Stored = None) -> str:
        """The rows that fit the catalog, with their unit as column `__dpsql_unit` (`unit_rows_sql`)."""
        return unit_rows_sql(self.name, self.unit, self.fits_sql(stored), relation)

    def rank_order(self, key: str) -> str:
        """The order in which a unit's rows are kept: SHA-256 of (secret key, unit, the bins of every
        declared column, a key column's raw key: `Column.rank_sql`). Rows of a unit with equal bins are
        interchangeable in every marginal, so the kept histogram is the same on every scan and engine."""
        parts = [quote_string(key), f"CAST({UNIT} AS VARCHAR)", *self._bins_as_text()]
        return f"SHA256(CONCAT_WS('|', {', '.join(parts)}))"

    def _bins_as_text(self) -> list[str]:
        return [f"CAST({c.rank_sql()} AS VARCHAR)" for c in self.columns.values()]

    def source_sql(self, key: str | None, relation: Relation = quote_identifier, stored: Stored = None,
                   window: Window = None) -> str:
        """The rows that fit the catalog and have a unit, at most k per unit in `rank_order`. The choice
        depends on the unit's own rows only, so one unit changes any histogram by at most k rows."""
        if self.unit is None:
            return super().source_sql(key, relation, stored, window)
        if not key:
            raise ProgrammingError(f"measuring {self.name!r} needs the ledger's bounding key (it has a privacy unit)")
        return self._bounded(self.unit_rows_sql(relation, stored), self.rank_order(key), "")

    def _bounded(self, rows: str, order: str, within: str) -> str:
        ranked = (f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {UNIT} ORDER BY {order}) "
                  f"AS {RANK} FROM ({rows}) AS u WHERE {UNIT} IS NOT NULL{within}")
        return f"(SELECT * FROM ({ranked}) AS r WHERE {RANK} <= {self.unit.bound}) AS bounded"

    def dropped_rows_sql(self, cap: int, relation: Relation = quote_identifier, stored: Stored = None) -> str:
        """One row, column `n`: Σ over units of min(rows − k, cap) for units with more than k rows."""
        if self.unit is None:
            return super().dropped_rows_sql(cap, relation, stored)
        k = self.unit.bound
        per_unit = (f"SELECT {UNIT}, COUNT(*) AS unit_rows FROM ({self.unit_rows_sql(relation, stored)}) AS u "
                    f"WHERE {UNIT} IS NOT NULL GROUP BY {UNIT}")
        return (f"SELECT CAST(COALESCE(SUM(LEAST(unit_rows - {k}, {int(cap)})), 0) AS BIGINT) AS n "
                f"FROM ({per_unit}) AS c WHERE unit_rows > {k}")

    def distinct_units(self, group: tuple[str, ...], where_sql: str) -> Table:
        if self.unit is None or self.unit.path:
            return super().distinct_units(group, where_sql)
        return DistinctUnitsTable.of(self, group, where_sql)
