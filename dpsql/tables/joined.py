"""Joined tables: protected tables joined along the keys that link them to one privacy unit.

``SELECT c.region, COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id GROUP BY
c.region`` joins two protected tables whose rows belong to the same person: the join is answered
as one derived table whose columns are the parts' declared columns, named ``<part>.<column>``
(the part is the table's name, or its alias where one table is joined to itself).

A join is answered only along declared keys (`declared_pairs`): the columns holding both tables'
unit (a unit column, or a foreign key straight to one), or a foreign key a table's ``privacy_unit``
declares (its first hop) and the key it references. The tables must reach the same unit (units with the same column name are the same
person). In SQL every joined row also pairs rows *of one unit* (the parts' units are compared), so
removing a unit's rows from every table removes only that unit's joined rows, whatever the keys'
multiplicities. Each unit then keeps at most K joined rows, chosen by the same keyed hash as a
unit-bounded table's (deterministic: every scan keeps the same rows): K is what the owner declares
for the tables joined (``[[joins]] tables = [...], max_rows_per_unit = K``), or else the product of
the parts' own bounds, the most rows a unit could have in the join if each table held it to its
bound. Every sensitivity is K.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from dpsql.errors import CatalogError, NotSupportedError
from dpsql.tables.columns import Column, quote_identifier
from dpsql.tables.privacy_units import MAX_ROWS_PER_UNIT, UNIT, PrivacyUnit, unit_rows_sql
from dpsql.tables.table import Relation, Stored, Table
from dpsql.tables.unit_bounded import UnitBoundedTable

INNER, LEFT = "JOIN", "LEFT JOIN"


@dataclass(frozen=True)
class JoinPart:
    """One table of a join: its `label` (the prefix of its columns), the table, how it is joined to the
    parts before it (`how`: INNER or LEFT; the first part: ""), and on which equalities
    ((earlier part's label, its column, this part's column), declared keys only)."""

    label: str
    table: Table
    how: str = ""
    on: tuple[tuple[str, str, str], ...] = ()


def unit_root(table: Table) -> str:
    """What identifies a table's privacy unit across tables: its unit column's name (lower case)."""
    return table.unit.column.lower()


def check_joinable(tables: list[Table]) -> None:
    """Refuse tables a join cannot bound: one without a privacy unit, or tables of different units."""
    for table in tables:
        if table.unit is None:
            raise NotSupportedError(
                f"table {table.name!r} has no privacy unit: joins of two protected tables need one on each, to bound "
                "what one person contributes; declare its privacy_unit (and max_rows_per_unit) to join it with "
                "other protected tables")
    roots = {unit_root(t) for t in tables}
    if len(roots) > 1:
        raise NotSupportedError(f"the joined tables have different privacy units ({', '.join(sorted(roots))}): "
                                "only tables of the same unit join")


def unit_holder(table: Table) -> str | None:
    """The column of `table` that holds its unit's value: its own unit column, or a foreign key straight to
    the unit column of the table that declares it (None: the unit is further along its keys)."""
    unit = table.unit
    if not unit.path:
        return unit.column.lower()
    hop = unit.path[0]
    return hop.column.lower() if len(unit.path) == 1 and hop.key.lower() == unit.column.lower() else None


def declared_pairs(left: Table, right: Table) -> set[tuple[str, str]]:
    """The (left column, right column) equalities a join of `left` and `right` may use: the columns holding
    both tables' unit (`unit_holder`), or a foreign key one declares into the other (its first hop) and the
    key it references."""
    pairs = set()
    lu, ru = left.unit, right.unit
    if (lh := unit_holder(left)) is not None and (rh := unit_holder(right)) is not None:
        pairs.add((lh, rh))
    if lu.path and lu.path[0].table.lower() == right.name.lower():
        pairs.add((lu.path[0].column.lower(), lu.path[0].key.lower()))
    if ru.path and ru.path[0].table.lower() == left.name.lower():
        pairs.add((ru.path[0].key.lower(), ru.path[0].column.lower()))
    return pairs


def how_to_declare(left: Table, right: Table) -> str:
    """What declaration would let `left` and `right` join (said in a refusal)."""
    return (f"protected tables join only on declared keys: {left.name} and {right.name} join on their own "
            f"privacy-unit columns, or on a foreign key one of them declares as its privacy_unit = "
            f"{{ foreign_key = \"<column>\", references = \"<the other table>.<key>\" }} and that key")


@dataclass
class JoinedTable(UnitBoundedTable):
    """Protected tables joined along declared keys, each unit keeping at most `joined_bound` joined rows."""

    kind = "join"
    needs_columns = False

    parts: tuple[JoinPart, ...] = ()
    joined_bound: int = 1
    bound_declared: bool = False  # the owner declared `joined_bound` (else: the product of the parts' bounds)
    _labels: dict[str, str] = field(init=False, default_factory=dict, repr=False)

    @classmethod
    def of(cls, parts: list[JoinPart], declared_bound: int | None) -> "JoinedTable":
        """The join of `parts` (checked: every part has a unit, the same one, joined on declared keys)."""
        check_joinable([p.table for p in parts])
        bound = declared_bound or math.prod(p.table.unit.bound for p in parts)
        if bound > MAX_ROWS_PER_UNIT:
            raise NotSupportedError(
                f"one unit may have up to {bound:,} rows in this join (the product of the tables' bounds): declare "
                f"a smaller bound for it in the catalog ([[joins]] tables = [...], max_rows_per_unit = K)")
        columns = {}
        for p in parts:
            for c in p.table.columns.values():
                if c.is_open:
                    continue
                name = f"{p.label}.{c.name}"
                columns[name] = replace(c, name=name, nullable=c.nullable or p.how == LEFT)
        name = " ".join(
            p.label if not p.how else
            f"{p.how} {p.label} ON " + " AND ".join(f"{a}.{x} = {p.label}.{y}" for a, x, y in p.on)
            for p in parts)
        table = cls(name, columns, parts=tuple(parts), joined_bound=bound, bound_declared=declared_bound is not None)
        table.resolve(PrivacyUnit(parts[0].table.unit.column, bound))
        return table

    def __post_init__(self) -> None:
        super().__post_init__()
        self._labels = {p.label.lower(): p.label for p in self.parts}

    def copied(self, columns: dict) -> "JoinedTable":
        raise CatalogError("a join's key columns are its tables' (join after releasing them)")

    def with_alias(self, alias: str, label: str) -> None:
        """Let `alias` name part `label` in the query's SQL."""
        self._labels[alias.lower()] = label

    def has_column(self, name: str) -> bool:
        return any(c.lower().split(".", 1)[1] == name.lower() or c.lower() == name.lower() for c in self.columns)

    def qualifiers(self, alias: str | None) -> set[str]:
        return set(self._labels)

    def qualified(self, qualifier: str, name: str, alias: str | None) -> Column | None:
        label = self._labels.get(qualifier.lower())
        return None if label is None else self.column(f"{label}.{name}")

    def column(self, name: str) -> Column:
        """A joined column by ``<part>.<column>``, or by its bare name where one part declares it."""
        found = self.columns.get(name) or next((c for c in self.columns.values() if c.name.lower() == name.lower()),
                                               None)
        if found is None:
            matches = [c for c in self.columns.values() if c.name.lower().split(".", 1)[1] == name.lower()]
            if len(matches) > 1:
                raise CatalogError(f"column {name!r} is ambiguous in this join: qualify it with its table's name or "
                                   "alias")
            found = matches[0] if matches else None
        if found is None:
            raise CatalogError(f"column {name!r} is not declared for the joined protected tables; declared columns: "
                               f"{', '.join(self.columns)}")
        return found

    def signature_note(self) -> str:
        return "; join of " + " | ".join(f"{p.label}: {p.table.signature()}" for p in self.parts)

    def explain_note(self) -> str:
        why = ("as the catalog declares for these tables" if self.bound_declared else
               "the product of the tables' own bounds: " + " × ".join(str(p.table.unit.bound) for p in self.parts))
        return (f"join along declared keys, rows of one unit only: each unit keeps at most {self.joined_bound} joined "
                f"rows ({why}), chosen by the ledger's keyed hash, so one unit changes any count by at most "
                f"{self.joined_bound} (the \"rows per unit\" above)")

    def shared_keys_sql(self, relation: Relation = quote_identifier) -> list[str]:
        return [q for p in self.parts for q in p.table.shared_keys_sql(relation)]

    def unit_rows_sql(self, relation: Relation = quote_identifier, stored: Stored = None) -> str:
        """The joined rows, each part's rows fitting its own declaration, every equality declared and the
        parts' units equal; their unit (the first part's) as `__dpsql_unit`, each column as ``<part>.<column>``."""
        def part_sql(i: int) -> str:
            table = self.parts[i].table
            return f"({unit_rows_sql(table.name, table.unit, table.fits_sql(), relation)}) AS j{i}"

        index = {p.label: i for i, p in enumerate(self.parts)}
        sql = f"FROM {part_sql(0)}"
        for i, p in enumerate(self.parts[1:], start=1):
            on = [f"j{index[a]}.{quote_identifier(x)} = j{i}.{quote_identifier(y)}" for a, x, y in p.on]
            # units compared as text: with `=` DuckDB casts across types, and text units '1' and '01' of one
            # table would both pair with the integer unit 1 of another (one person in two units' rows)
            on += [f"CAST(j{index[a]}.{UNIT} AS VARCHAR) = CAST(j{i}.{UNIT} AS VARCHAR)"
                   for a in dict.fromkeys(a for a, _, _ in p.on)]
            sql += f" {p.how} {part_sql(i)} ON {' AND '.join(on)}"
        picked = [f"j{index[p.label]}.{quote_identifier(c.name)} AS {quote_identifier(f'{p.label}.{c.name}')}"
                  for p in self.parts for c in p.table.columns.values() if not c.is_open]
        return f"SELECT {', '.join(picked)}, j0.{UNIT} AS {UNIT} {sql}"
