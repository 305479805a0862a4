"""`Table`: what every kind of protected table declares and answers the same way.

A protected table is its declared columns (in declaration order, `domain` over the known ones),
optionally its public size (``rows``) and the column of its rows' times. What differs between
kinds (which rows a scan counts, how much one privacy unit can change them, what is refused) is
asked of the table's kind: a subclass in this package, listed in `dpsql.tables.kinds.KINDS`.
The defaults here are those of a row-level table, where one row is the privacy unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Mapping

from dpsql.errors import CatalogError, NotSupportedError, ProgrammingError
from dpsql.tables.columns import KEY, Column, StoredType, quote_identifier
from mechanisms.domain import Domain

if TYPE_CHECKING:
    from dpsql.tables.privacy_units import PrivacyUnit

Relation = Callable[[str], str]  # a table name -> the SQL naming it in the engine
Stored = Mapping[str, StoredType] | None  # declared column -> its stored type (`Table.fits_sql`)
Window = tuple[str, str] | None  # a stream's (time prefix, rows counted): `StreamTable.source_sql`


@dataclass
class Table:
    """A protected table: its declared columns, public size and time column; its kind is its class."""

    kind = "row-level"  # what EXPLAIN and the docs call this kind of table
    scanned_by_rows = True  # its counts come from a GROUP BY over `source_sql` (not edges, not reports)
    holds_reports = False  # its rows are local-DP reports (with or without an opt-in central table)
    answered_by_reports = False  # answered by a local-DP protocol's estimate alone, with no charge
    counts_distinct_units = False  # each row is a distinct (unit, cell) pair: COUNT(DISTINCT unit) is COUNT(*)
    holds_bins = False  # `source_sql`'s columns hold bins already (not raw values to bin)

    name: str
    columns: dict[str, Column]
    public_rows: int | None = None  # the size, declared public by the data owner (planning input only)
    time_column: str | None = None  # the time each row belongs to (continual queries over a stream)
    confident_mode: bool = field(default=False, kw_only=True)  # the owner allows Confident-GNMax (`dpsql.sql.noisy_max`)
    domain: Domain = field(init=False)

    def __post_init__(self) -> None:
        if not self.columns and self.needs_columns:
            raise CatalogError(f"table {self.name!r} declares no columns")
        rows = self.public_rows
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
            raise CatalogError(f"table {self.name!r}: rows (its public size) must be a positive integer")
        if self.time_column is not None and (not isinstance(self.time_column, str) or not self.time_column):
            raise CatalogError(f"table {self.name!r}: time must name the column holding each row's time")
        self.check_declaration()
        lowered = [c.lower() for c in self.columns]
        if len(set(lowered)) != len(lowered):
            # SQL (and DuckDB) identifiers are case-insensitive: these would name one column.
            clash = sorted(c for c in self.columns if lowered.count(c.lower()) > 1)
            raise CatalogError(f"table {self.name!r}: column names differ only in case: {clash}")
        known = [c for c in self.columns.values() if not c.is_open]  # a key column joins once released
        self.domain = Domain(tuple(c.name for c in known), tuple(c.size for c in known))

    needs_columns = True  # a table must declare a column (a graph's edge table declares none)

    def check_declaration(self) -> None:
        """Refuse what this kind cannot be declared with (CatalogError); nothing to check by default."""

    # --- what every kind answers the same way ---------------------------------------------------
    def column(self, name: str) -> Column:
        found = self.columns.get(name) or next(
            (c for c in self.columns.values() if c.name.lower() == name.lower()), None
        )
        if found is None:
            raise CatalogError(
                f"column {name!r} is not declared for protected table {self.name!r}; "
                f"declared columns: {', '.join(self.columns)}"
            )
        return found

    def has_column(self, name: str) -> bool:
        """Whether a bare column name names one of this table's columns."""
        return any(c.lower() == name.lower() for c in self.columns)

    def qualifiers(self, alias: str | None) -> set[str]:
        """The names (lower case) a query may qualify this table's columns with: its name, and `alias`."""
        return {self.name.lower(), (alias or self.name).lower()}

    def qualified(self, qualifier: str, name: str, alias: str | None) -> Column | None:
        """The column `qualifier`.`name` names, where `qualifier` is this table's name or `alias` (else None)."""
        return self.column(name) if qualifier.lower() in {self.name.lower(), (alias or "").lower()} else None

    def with_keys(self, released: dict[str, tuple[str, ...]]) -> "Table":
        """This table with the released key sets ({column: keys}) as its key columns' domains."""
        if not released:
            return self
        columns = {n: c.with_keys(released[n]) if n in released else c for n, c in self.columns.items()}
        return self.copied(columns)

    def copied(self, columns: dict[str, Column]) -> "Table":
        """This table with other `columns` (the same declaration otherwise)."""
        return replace(self, columns=columns)

    def key_counts(self) -> tuple[tuple[str, int], ...]:
        """(column, keys released) of each key column: the key domain this table's measurements are over."""
        return tuple((n, len(c.values) if c.released else 0) for n, c in self.columns.items() if c.kind == KEY)

    def stand_in_columns(self) -> list[tuple[str, str, bool]]:
        """(name, SQL type, nullable) of the columns clients are shown: the declared ones."""
        return [(c.name, c.sql_type, c.nullable) for c in self.columns.values()]

    def stand_in_note(self) -> str | None:
        """What a schema browser says of every stand-in column instead of its domain (None: each column's domain)."""
        return None

    def fits_sql(self, stored: Stored = None) -> str:
        """WHERE condition selecting the rows of the protected table; with the engine's `stored` column
        types, only what they do not guarantee (`Column.fits_sql`)."""
        stored = stored or {}
        parts = [c.fits_sql(stored.get(name)) for name, c in self.columns.items()]
        return " AND ".join(p for p in parts if p) or "TRUE"

    def signature(self) -> str:
        """Identifies the declaration: measurements are only reused under the same one."""
        columns = repr([(c.name, c.declaration()) for c in self.columns.values()]) + self.signature_note()
        return columns if self.unit is None else f"{columns}; {self.unit.describe()}"

    def signature_note(self) -> str:
        """What this kind adds to the signature after the columns ("" for a row-level table)."""
        return ""

    # --- what each kind may answer its own way --------------------------------------------------
    @property
    def unit(self) -> "PrivacyUnit | None":
        """The privacy unit (None: one row is the unit)."""
        return None

    def unit_columns(self) -> tuple[str, ...]:
        """The undeclared columns naming a row's unit (its column, or the foreign key reaching it)."""
        return ()

    @property
    def contribution(self) -> int:
        """The most rows one privacy unit contributes: every sensitivity is multiplied by it."""
        return 1

    def stream_contribution(self, horizon: int) -> int:
        """The most one privacy unit changes a continual query's data (its windows' counts) over `horizon` windows."""
        return self.contribution

    @property
    def needs_bounding_key(self) -> bool:
        """Whether measuring it needs the ledger's secret bounding key (rows are bounded per unit)."""
        return self.unit is not None

    @property
    def stored_table(self) -> "Table":
        """The declared table whose stored rows a scan reads (itself, for a declared table)."""
        return self

    def source_sql(self, key: str | None, relation: Relation = quote_identifier, stored: Stored = None,
                   window: Window = None) -> str:
        """FROM-clause SQL of the rows a measurement counts: here, the rows that fit the catalog.

        `key`: the ledger's secret bounding key (kinds that bound rows per unit need it); `stored`: the
        engine's column types (checks they guarantee are left out); `window`: a continual query's
        (time prefix, rows counted), which only a stream's bounding reads."""
        return f"{relation(self.name)} WHERE {self.fits_sql(stored)}"

    def count_marginals(self, backend, cliques: list[tuple[str, ...]], key: str | None, within) -> dict:
        """Exact counts of each clique's marginal, computed on `backend` (the row scan, by default)."""
        return backend.scan_marginals(self, cliques, key, within)

    def count_windows(self, backend, group: tuple[str, ...], where_sql: str, window_sql: str, first: int,
                      last: int, key: str | None):
        """Exact counts per window and cell of `group` (windows × cells), on `backend` (the row scan)."""
        return backend.scan_windows(self, group, where_sql, window_sql, first, last, key)

    def binding_sql(self, backend, key: str | None) -> str:
        """A query that binds every declared column in the engine, reading no row (the schema check)."""
        return backend.scan_binding_sql(self, key)

    def measured_as(self, lookup: Callable[[str], "Table | None"]) -> "Table":
        """The central table a query over this one is measured and charged on (itself); `lookup` finds a
        protected table by name (`Catalog.get`)."""
        return self

    def check_stream(self, time_column: str) -> None:
        """Refuse a continual query over `time_column` unless this table is a stream on it."""
        raise NotSupportedError(
            f"a continual query needs a stream: declare table {self.name!r} with time = \"{time_column}\" and "
            "append_only = true (each unit then keeps its first rows by time, so released windows never change)")

    owner_promises_bound = False  # the data may break a bound the owner declared: check it before charging

    def explain_note(self) -> str:
        """What EXPLAIN adds below this table's plan ("" by default)."""
        return ""

    def distinct_units(self, group: tuple[str, ...], where_sql: str) -> "Table":
        """The table of distinct (privacy unit, cell of `group`) pairs (`DistinctUnitsTable`): only a table
        with a privacy-unit column of its own has one."""
        raise CatalogError(f"table {self.name!r} has no privacy unit column of its own to count")

    def shared_keys_sql(self, relation: Relation = quote_identifier) -> list[str]:
        """Queries counting (`n` > 0) whether a foreign key this table's unit goes through references a key held
        by rows of several units (`privacy_units.shared_keys_sql`); none without such keys."""
        return []

    def dropped_rows_sql(self, cap: int, relation: Relation = quote_identifier, stored: Stored = None) -> str:
        """SQL of what bounding drops: only a table with a privacy unit bounds rows."""
        raise ProgrammingError(f"table {self.name!r} has no privacy unit: bounding drops no rows")
