"""Privacy units: the column whose value is one person, reached directly or along foreign keys.

A table declares ``privacy_unit = "customer_id"``, or reaches the unit of another protected table
through a foreign key (``privacy_unit = { foreign_key = "order_id", references = "orders.id" }``);
the catalog follows the chain (`Catalog`) and the table's rows get their unit in SQL (`unit_rows_sql`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from dpsql.errors import CatalogError
from dpsql.tables.columns import quote_identifier

MAX_ROWS_PER_UNIT = 1_000_000
UNIT, RANK = "__dpsql_unit", "__dpsql_rank"  # the scan's columns: each row's unit, its rank within the unit
Relation = Callable[[str], str]  # a table name -> the SQL naming it in the engine


@dataclass(frozen=True)
class Hop:
    """One foreign-key step: `column` of the current table equals `key` of protected `table`."""

    column: str
    table: str
    key: str


@dataclass(frozen=True)
class PrivacyUnit:
    """A table's privacy unit: `column` of the last hop's table (of the table itself without
    hops), and `bound`, the most rows one unit may contribute to this table."""

    column: str
    bound: int
    path: tuple[Hop, ...] = ()

    def describe(self) -> str:
        hops = "".join(f"{h.column} -> {h.table}.{h.key}, " for h in self.path)
        return f"privacy unit {hops}{self.column}, at most {self.bound} rows per unit"


def parse_unit(table: str, unit: Any) -> tuple[str | None, Hop | None]:
    """Validate a `privacy_unit` declaration: (unit column, foreign-key hop), one of them None."""
    if unit is None:
        return None, None
    if isinstance(unit, str):
        if not unit:
            raise CatalogError(f"table {table!r}: privacy_unit must name a column")
        return unit, None
    if not isinstance(unit, dict) or set(unit) != {"foreign_key", "references"}:
        raise CatalogError(
            f"table {table!r}: privacy_unit is a column name, or "
            '{ foreign_key = "<column>", references = "<protected table>.<column>" }'
        )
    column, target = unit["foreign_key"], unit["references"]
    parts = target.split(".") if isinstance(target, str) else []
    if not isinstance(column, str) or not column or len(parts) != 2 or not all(parts):
        raise CatalogError(
            f"table {table!r}: privacy_unit's foreign_key must name a column and references must read "
            f"'<protected table>.<column>'"
        )
    return None, Hop(column, parts[0], parts[1])


def shared_keys_sql(name: str, unit: PrivacyUnit, relation: Relation = quote_identifier) -> list[str]:
    """Queries counting (column `n`: 0 or 1) whether a row of table `name` reaching `unit` through foreign
    keys belongs to several units: one per foreign key of the path, whether a key it references is held by
    rows of several units, and one over the scan's own join (`unit_rows_sql`), whether a foreign-key value
    of `name` finds rows of several units there. A referenced key must be unique to one unit (a primary key):
    otherwise a row of the linking table belongs to several units, and removing one unit moves another's
    counts too. The last query sees what the scan sees: keys that differ as stored ('10', '010') may both
    equal one foreign key once the join casts them (10)."""
    if not unit.path:
        return []
    out = []
    for i, hop in enumerate(unit.path):
        rest = PrivacyUnit(unit.column, unit.bound, unit.path[i + 1:])
        out.append(_several_units(unit_rows_sql(hop.table, rest, "TRUE", relation), quote_identifier(hop.key)))
    out.append(_several_units(unit_rows_sql(name, unit, "TRUE", relation), quote_identifier(unit.path[0].column)))
    return out


def _several_units(rows: str, key: str) -> str:
    """SQL counting (`n`: 0 or 1) whether a value of column `key` of `rows` goes with several units."""
    return (f"SELECT COUNT(*) AS n FROM (SELECT {key} FROM ({rows}) AS k WHERE {key} IS NOT NULL AND "
            f"{UNIT} IS NOT NULL GROUP BY {key} HAVING COUNT(DISTINCT {UNIT}) > 1 LIMIT 1) AS shared")


def unit_rows_sql(name: str, unit: PrivacyUnit, fits: str, relation: Relation = quote_identifier) -> str:
    """The rows of table `name` meeting `fits`, with their privacy unit as column `__dpsql_unit`.

    A linked table reaches its unit by joining along its foreign keys; a row whose key
    finds no row gets no unit, and one whose key finds several counts once per match.
    """
    rows = f"SELECT * FROM {relation(name)} WHERE {fits}"
    if not unit.path:
        return f"SELECT *, {quote_identifier(unit.column)} AS {UNIT} FROM ({rows}) AS t"
    joins, previous = [], "t"
    for i, hop in enumerate(unit.path, start=1):
        joins.append(
            f"JOIN {relation(hop.table)} AS p{i} ON {previous}.{quote_identifier(hop.column)} "
            f"= p{i}.{quote_identifier(hop.key)}"
        )
        previous = f"p{i}"
    return f"SELECT t.*, {previous}.{quote_identifier(unit.column)} AS {UNIT} FROM ({rows}) AS t {' '.join(joins)}"
