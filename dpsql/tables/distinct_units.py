"""Distinct-unit tables: the distinct (privacy unit, cell) pairs a COUNT(DISTINCT unit) query counts.

``COUNT(DISTINCT customer_id) ... GROUP BY region`` over a table whose unit is ``customer_id`` is
COUNT(*) over this derived table, grouped by the same columns: its counts are linear, so it goes
through the same pipeline under its own name. A unit counts once per cell whatever its rows, so its
rows are not bounded; it keeps at most k of its cells, so it adds at most min(k, cells) pairs (its
`contribution`). Without a GROUP BY that is 1, and the count is every unit with a row meeting the
condition.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from dpsql.errors import ProgrammingError
from dpsql.tables.columns import quote_identifier, quote_string
from dpsql.tables.privacy_units import RANK, UNIT
from dpsql.tables.table import Relation, Stored, Table, Window

FIRST = "__dpsql_first"


@dataclass
class DistinctUnitsTable(Table):
    """The distinct (unit, cell of its columns) pairs of `units_of`'s rows meeting `units_where`."""

    kind = "distinct units"
    counts_distinct_units = True
    holds_bins = True  # its rows hold each column's bin already, not raw values

    units_of: Table | None = None
    units_where: str = "TRUE"
    needs_columns = False

    @classmethod
    def of(cls, table: Table, group: tuple[str, ...], where_sql: str) -> "DistinctUnitsTable":
        """The pairs of `table` (a table with a privacy-unit column of its own) by `group` among the rows
        meeting `where_sql` (SQL over its columns)."""
        digest = hashlib.sha256(f"{group}|{where_sql}".encode()).hexdigest()[:8]
        return cls(f"{table.name}:distinct {table.unit.column}:{digest}", {g: table.columns[g] for g in group},
                   units_of=table, units_where=where_sql)

    @property
    def contribution(self) -> int:
        """One pair per cell of a unit, at most k cells kept."""
        return min(self.units_of.contribution, math.prod(c.size for c in self.columns.values()))

    @property
    def needs_bounding_key(self) -> bool:
        return self.units_of.needs_bounding_key

    @property
    def stored_table(self) -> Table:
        return self.units_of

    def shared_keys_sql(self, relation: Relation = quote_identifier) -> list[str]:
        return self.units_of.shared_keys_sql(relation)

    def signature(self) -> str:
        return (f"{self.units_of.signature()}; distinct units by {list(self.columns)} where {self.units_where}, "
                "at most k cells per unit")

    def source_sql(self, key: str | None, relation: Relation = quote_identifier, stored: Stored = None,
                   window: Window = None) -> str:
        """The distinct (unit, bins) pairs of the base table's rows that fit the catalog, have a unit and meet
        the condition; each column holds its bin. Each unit keeps at most k of its cells: a stream's first k
        by their first row's time (`StreamTable.first_rows_order`), others' by SHA-256 of (secret key, unit, bins)."""
        base = self.units_of
        columns = list(self.columns.values())
        bins = "".join(f", {c.bin_sql()} AS {quote_identifier(c.name)}" for c in columns)
        rows = f"({base.unit_rows_sql(relation, stored)}) AS u WHERE {UNIT} IS NOT NULL AND ({self.units_where})"
        if not columns:
            return f"(SELECT DISTINCT {UNIT} FROM {rows}) AS pairs"
        if not key:
            raise ProgrammingError(f"measuring {self.name!r} needs the ledger's bounding key (it has a privacy unit)")
        names = [quote_identifier(c.name) for c in columns]
        cells = [f"CAST({n} AS VARCHAR)" for n in names]
        if base.time_order is not None:  # a cell is placed by its first row: a later row never evicts a cell counted
            pairs = (f"SELECT {UNIT}{bins}, MIN({base.time_order}) AS {FIRST} FROM {rows} "
                     f"GROUP BY {', '.join(str(i) for i in range(1, len(columns) + 2))}")
            order = ", ".join([FIRST, *names])
        else:
            pairs = f"SELECT DISTINCT {UNIT}{bins} FROM {rows}"
            order = f"SHA256(CONCAT_WS('|', {quote_string(key)}, CAST({UNIT} AS VARCHAR), {', '.join(cells)}))"
        ranked = f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {UNIT} ORDER BY {order}) AS {RANK} FROM ({pairs}) AS d"
        return f"(SELECT {UNIT}, {', '.join(names)} FROM ({ranked}) AS r WHERE {RANK} <= {self.contribution}) AS pairs"
