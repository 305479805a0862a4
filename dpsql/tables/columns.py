"""Column declarations: the public domain of one column, and the SQL that bins its values.

The types (``integer``, ``numeric``, ``categorical``, ``key``, ``presence``, ``boolean``, ``date``,
``timestamp``: `dpsql.tables.temporal`) and ``nullable`` are described in `dpsql.tables.catalog`, which
holds the tables. A `Column` knows its bins (`size`,
`labels`, `bin_values`), the SQL binning a row's value (`bin_sql`) and the condition a row
must meet to belong to the protected table (`fits_sql`); `dpsql.tables.column_declarations` makes
one from a TOML or dict declaration. `representatives` are the values expressions are evaluated on, and
`nearest_edge` moves a literal off a bin edge onto the nearest one (unless `strict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Iterable

import numpy as np

from dpsql.tables import temporal
from dpsql.errors import CatalogError
from dpsql.tables.temporal import DATE, TIMESTAMP

INTEGER, NUMERIC, CATEGORICAL, KEY, BOOLEAN = "integer", "numeric", "categorical", "key", "boolean"
PRESENCE = "presence"  # declared for its NULL-ness only: COUNT(col), IS [NOT] NULL
TEMPORAL = (DATE, TIMESTAMP)
COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")
_TRUTH = {"true": True, "t": True, "false": False, "f": False}


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def exact_number(value: Any, what: str) -> Decimal:
    """A declared bound or a compared literal as an exact decimal (a clear error for anything else)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CatalogError(f"{what} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise CatalogError(f"{what} must be finite, got {value!r}")
    return Decimal(str(value))


@dataclass(frozen=True)
class Column:
    """One declared column and its public domain."""

    name: str
    kind: str
    nullable: bool = False
    low: Decimal | None = None  # integer / numeric
    high: Decimal | None = None
    bins: int | None = None  # numeric
    values: tuple[str, ...] = ()  # categorical; a key column's released keys
    ordered: bool = False
    other: str | None = None
    released: bool = False  # a key column: whether its keys were released (its domain is known)
    origin: Any = None  # date / timestamp: the start of the first period (a datetime); `bins` periods
    granularity: str | None = None
    strict: bool = False  # numeric / date / timestamp: refuse literals off a bin edge instead of rounding
    sizes: tuple[int, ...] | None = None  # categorical: each value's number of rows, declared public

    @property
    def sql_type(self) -> str:
        """The SQL type clients are shown for this column (catalog introspection)."""
        return {INTEGER: "BIGINT", NUMERIC: "DOUBLE", BOOLEAN: "BOOLEAN", DATE: "DATE",
                TIMESTAMP: "TIMESTAMP"}.get(self.kind, "VARCHAR")

    @property
    def numeric(self) -> bool:
        """Whether the column's values are numbers (a boolean's are 0 and 1)."""
        return self.kind in (INTEGER, NUMERIC, BOOLEAN)

    @property
    def binned(self) -> bool:
        """Whether a bin stands for many values (expressions are then evaluated on its representative)."""
        return self.kind == NUMERIC or (self.kind in TEMPORAL and not (self.kind == DATE and self.granularity == "day"))

    # --- shape ----------------------------------------------------------
    @property
    def value_bins(self) -> int:
        """Number of non-NULL bins."""
        if self.kind == INTEGER:
            return int(self.high - self.low) + 1
        if self.kind in (NUMERIC, *TEMPORAL):
            return int(self.bins)
        if self.kind == BOOLEAN:
            return 2
        if self.kind == KEY:
            return len(self.values) + 1  # the released keys and every other key
        if self.kind == PRESENCE:
            return 1  # one bin for every value: only whether it is NULL is declared
        return len(self.values)

    @property
    def size(self) -> int:
        return self.value_bins + (1 if self.nullable else 0)

    @property
    def null_bin(self) -> int | None:
        return self.value_bins if self.nullable else None

    @property
    def width(self) -> Decimal:
        return (self.high - self.low) / self.bins

    def edges(self) -> list[Decimal]:
        # (high - low) * k / bins rather than width * k, so the last edge is exactly `high`
        # even when the width does not terminate in decimal (e.g. 100 / 3).
        return [self.low + (self.high - self.low) * k / self.bins for k in range(self.bins + 1)]

    def labels(self) -> list[Any]:
        """The value shown for each bin in GROUP BY output (NULL bin: None)."""
        if self.kind == PRESENCE:
            raise CatalogError(self.presence_only("grouped by"))
        if self.kind == INTEGER:
            out: list[Any] = list(range(int(self.low), int(self.high) + 1))
        elif self.kind == NUMERIC:
            out = [float(e) for e in self.edges()[:-1]]
        elif self.kind == KEY:
            out = [*self.values, None]  # the last bin holds every key not released
        elif self.kind == BOOLEAN:
            out = [False, True]
        elif self.kind in TEMPORAL:
            out = [temporal.shown(self.period(k), self.kind) for k in range(self.value_bins)]
        else:
            out = list(self.values)
        return out + ([None] if self.nullable else [])

    def representatives(self) -> list[Any]:
        """The value each bin stands for when an expression is evaluated on it (`dpsql.sql.evaluation`):
        a numeric bin's midpoint, a period's start, None for the NULL bin and for a key column's
        keys not released."""
        if self.kind == NUMERIC:
            return [float(v) for v in self.bin_values()[: self.value_bins]] + ([None] if self.nullable else [])
        return self.labels()

    def period(self, k: int):
        """The start of a date or timestamp column's k-th period (a datetime)."""
        return temporal.start(self.origin, k, self.granularity)

    @property
    def is_open(self) -> bool:
        """A key column whose keys are not released yet: it has no domain."""
        return self.kind == KEY and not self.released

    def with_keys(self, keys: tuple[str, ...]) -> "Column":
        """This key column with its released keys as its domain."""
        if self.kind != KEY:
            raise CatalogError(f"column {self.name!r} is not a key column")
        return replace(self, values=tuple(keys), released=True)

    def declaration(self) -> str:
        """What the owner declared (a key column: not its released keys)."""
        return "key" if self.kind == KEY else self.describe()

    def describe(self) -> str:
        if self.kind == KEY:
            return f"key, {len(self.values)} released" if self.released else "key, none released yet"
        null = ", nullable" if self.nullable else ""
        if self.kind == PRESENCE:
            return f"presence only (NULL or not){null}"
        if self.kind == BOOLEAN:
            return f"boolean{null}"
        if self.kind in TEMPORAL:
            last = temporal.shown(self.period(self.bins - 1), self.kind)
            return (f"{self.kind} from {temporal.shown(self.origin, self.kind)} to {last} by {self.granularity} "
                    f"({self.bins} periods){null}")
        if self.kind == INTEGER:
            return f"integer {self.low}..{self.high}{null}"
        if self.kind == NUMERIC:
            return f"numeric [{self.low}, {self.high}) in {self.bins} bins of width {self.width}{null}"
        other = f", other={self.other!r}" if self.other else ""
        sizes = f", sizes={list(self.sizes)}" if self.sizes is not None else ""
        return f"categorical {list(self.values)}{other}{sizes}{null}"

    # --- vectors over the bins ---------------------------------------------
    def not_null(self) -> np.ndarray:
        v = np.ones(self.size)
        if self.nullable:
            v[-1] = 0.0
        return v

    def bin_values(self) -> np.ndarray:
        """The number each bin stands for in SUM/AVG (NULL bin: 0)."""
        if self.kind == PRESENCE:
            raise CatalogError(self.presence_only("summed"))
        if not self.numeric:
            raise CatalogError(f"column {self.name!r} is {self.kind}: it has no numeric values to sum")
        if self.kind == BOOLEAN:
            vals = [0.0, 1.0]
        elif self.kind == INTEGER:
            vals = [float(self.low + k) for k in range(self.value_bins)]
        else:
            w = self.width
            vals = [float(self.low + w * k + w / 2) for k in range(self.value_bins)]
        return np.asarray(vals + ([0.0] if self.nullable else []))

    def is_null(self) -> np.ndarray:
        return 1.0 - self.not_null()

    def compare(self, op: str, literal: Any) -> np.ndarray:
        """Indicator over bins of `column <op> literal` (NULL bin never true)."""
        if op not in COMPARISONS:
            raise CatalogError(f"unsupported comparison {op!r}")
        if self.kind == PRESENCE:
            raise CatalogError(self.presence_only("compared with a value"))
        out = np.zeros(self.size)
        if self.kind == KEY:
            if op not in ("=", "<>"):
                raise CatalogError(f"column {self.name!r} is a key column: compare it with =, <> or IN")
            out[self._key_index(literal)] = 1.0
            return 1.0 - out if op == "<>" else out
        if self.kind == CATEGORICAL:
            index = self._category_index(literal)
            if op in ("=", "<>"):
                out[index] = 1.0
                if op == "<>":
                    out[: self.value_bins] = 1.0 - out[: self.value_bins]
                return out
            if not self.ordered:
                raise CatalogError(
                    f"column {self.name!r} is an unordered categorical: use = , <> or IN, "
                    f"or declare it with ordered = true"
                )
            positions = np.arange(self.value_bins)
            out[: self.value_bins] = _apply(op, positions, index)
            return out
        if self.kind == BOOLEAN:
            out[:2] = _apply(op, np.arange(2.0), float(self._truth(literal)))
            return out
        if self.kind in TEMPORAL:
            out[: self.bins] = temporal.compare(self, op, literal)
            return out
        value = exact_number(literal, f"the literal compared with {self.name!r}")
        if not (self.low <= value <= self.high):
            raise CatalogError(
                f"literal {literal} is outside the declared domain of {self.name!r} "
                f"[{self.low}, {self.high}]"
            )
        if self.kind == INTEGER:
            bins = np.asarray([float(self.low + k) for k in range(self.value_bins)])
            out[: self.value_bins] = _apply(op, bins, float(value))
            return out
        return self._numeric_compare(op, value, out)

    def _numeric_compare(self, op: str, value: Decimal, out: np.ndarray) -> np.ndarray:
        edges = self.edges()
        if op in ("=", "<>"):
            raise CatalogError(
                f"column {self.name!r} is binned (width {self.width}): compare it with "
                f"<, <=, >, >= or BETWEEN at bin edges instead of {op}"
            )
        if value not in edges:
            k = int((value - self.low) / self.width)
            lo, hi = edges[k], edges[min(k + 1, len(edges) - 1)]
            raise CatalogError(
                f"{value} is not a bin edge of {self.name!r} (bins of width {self.width} from "
                f"{self.low}): use {lo} or {hi}"
            )
        k = edges.index(value)
        lower_edges = np.arange(self.bins)
        # A bin is [edge_k, edge_k+1): x >= e and x > e both select the bins from e up.
        above = lower_edges >= k
        out[: self.bins] = above if op in (">", ">=") else ~above
        return out

    def nearest_edge(self, literal: Any) -> tuple[Any, str | None]:
        """A literal compared with a binned column, moved to the nearest bin edge if it is not on one, and a
        note saying so (None when it is on one). A `strict` column refuses it instead."""
        if self.kind == NUMERIC:
            value = exact_number(literal, f"the literal compared with {self.name!r}")
            if not self.low <= value <= self.high or value in self.edges():
                return literal, None
            k = int((value - self.low) / self.width)
            lo, hi = self.edges()[k], self.edges()[k + 1]
            if self.strict:
                raise CatalogError(f"{value} is not a bin edge of {self.name!r} (bins of width {self.width} from "
                                   f"{self.low}; declared strict): use {lo} or {hi}")
            edge = lo if value - lo <= hi - value else hi
            shown = int(edge) if edge == edge.to_integral_value() else float(edge)
            return shown, (f"{self.name} is binned (width {self.width}): the literal {literal} was answered at the "
                           f"nearest bin edge, {shown}")
        return temporal.nearest_start(self, literal) if self.kind in TEMPORAL else (literal, None)

    def _truth(self, literal: Any) -> bool:
        if isinstance(literal, bool):
            return literal
        if isinstance(literal, int) and literal in (0, 1):
            return bool(literal)
        if isinstance(literal, str) and literal.strip().lower() in _TRUTH:
            return _TRUTH[literal.strip().lower()]
        raise CatalogError(f"column {self.name!r} is boolean: compare it with TRUE or FALSE, not {literal!r}")

    def one_of(self, literals: Iterable[Any]) -> np.ndarray:
        """Indicator of `column IN (literals)`."""
        out = np.zeros(self.size)
        for lit in literals:
            out = np.maximum(out, self.compare("=", lit))
        return out

    def _key_index(self, literal: Any) -> int:
        if self.is_open:
            raise CatalogError(self.not_released())
        if isinstance(literal, bool) or not isinstance(literal, (str, int)):
            raise CatalogError(f"column {self.name!r} is a key column: compare it with a string or integer literal")
        if str(literal) not in self.values:
            raise CatalogError(f"{literal!r} is not a released key of {self.name!r}: the keys not released are "
                               "counted together, and no answer can single one out")
        return self.values.index(str(literal))

    def presence_only(self, what: str) -> str:
        """Why a presence column cannot be `what` (grouped by, compared, summed), and what works."""
        return (f"column {self.name!r} is declared for presence only (NULL or not), without values: it cannot be "
                f"{what}; count it (COUNT({self.name})) or test it with IS NULL / IS NOT NULL, or declare its domain")

    def not_released(self) -> str:
        """Why an unreleased key column cannot be used, and what to run first."""
        return (f"the keys of {self.name!r} have not been released yet: run SELECT {self.name}, COUNT(*) FROM "
                f"<table> GROUP BY {self.name} first (DP partition selection releases the frequent keys, which "
                "then form the column's domain)")

    def _category_index(self, literal: Any) -> int:
        if isinstance(literal, (int, float)) and not isinstance(literal, bool):
            return self._numbered_index(literal)
        if not isinstance(literal, str):
            raise CatalogError(f"column {self.name!r} is categorical: compare it with a string literal")
        if literal not in self.values:
            shown = ", ".join(repr(v) for v in self.values[:12])
            more = ", ..." if len(self.values) > 12 else ""
            raise CatalogError(
                f"{literal!r} is not a declared value of {self.name!r} (declared: {shown}{more})"
            )
        return self.values.index(literal)

    def _numbered_index(self, literal: int | float) -> int:
        """The one declared value that reads as the number `literal` ('2' for 2): a number compared by value."""
        matches = [i for i, v in enumerate(self.values) if _as_number(v) == literal]
        if len(matches) != 1:
            why = "several declared values read as it" if matches else "no declared value reads as it"
            raise CatalogError(f"column {self.name!r} is categorical: compare it with a string literal "
                               f"({literal!r}: {why})")
        return matches[0]

    # --- SQL ----------------------------------------------------------------
    def bin_sql(self, source: str | None = None, integral: bool = False) -> str:
        """SQL computing this column's bin index (0-based) for a row of the protected table.

        `source` is the SQL of the column's value (default: the column itself), so a
        backend can bin a value it grouped by first. Values are clamped before FLOOR and
        numeric ones divided in DOUBLE, so no value (huge, infinite, NaN) can overflow or
        bin differently in an engine the SQL is transpiled to (Spark's FLOOR is BIGINT).
        An integer column stored as an integer type (`integral`: `StoredType.integral`) is
        clamped by CASE instead, through which DuckDB keeps the column's statistics (grouping by
        the bin then uses a perfect hash: 1.7x faster than LEAST and GREATEST at 10M rows), and
        is not floored; any other stored type (DOUBLE, DECIMAL, BOOLEAN) keeps LEAST and GREATEST,
        which bind on them all.
        """
        col = source or quote_identifier(self.name)
        if self.kind == PRESENCE:
            return f"CAST(CASE WHEN {col} IS NULL THEN 1 ELSE 0 END AS INTEGER)" if self.nullable else "CAST(0 AS INTEGER)"
        if self.kind == KEY:
            cases = " ".join(f"WHEN {quote_string(v)} THEN {i}" for i, v in enumerate(self.values))
            return f"CAST(CASE CAST({col} AS VARCHAR) {cases} ELSE {len(self.values)} END AS INTEGER)" if cases \
                else "CAST(0 AS INTEGER)"
        if self.kind == INTEGER and integral:  # NULL compares neither below nor above: its branch comes last
            null = f"WHEN {col} IS NULL THEN {self.null_bin} " if self.nullable else ""
            return (f"CAST(CASE WHEN {col} < {self.low} THEN 0 WHEN {col} > {self.high} THEN {self.high - self.low} "
                    f"{null}ELSE {col} - {self.low} END AS INTEGER)")
        if self.kind == INTEGER:
            expr = f"FLOOR(LEAST(GREATEST({col}, {self.low}), {self.high})) - {self.low}"
        elif self.kind == BOOLEAN:
            expr = f"CASE WHEN CAST({col} AS BOOLEAN) THEN 1 ELSE 0 END"
        elif self.kind in TEMPORAL:
            period = temporal.period_sql(col, self.origin, self.granularity)
            expr = f"LEAST(GREATEST({period}, 0), {self.bins - 1})"
        elif self.kind == NUMERIC:
            scaled = f"(CAST({col} AS DOUBLE) - {self.low}) / {self.width}"
            expr = f"FLOOR(LEAST(GREATEST({scaled}, 0), {self.bins - 1}))"
        else:
            fallback = str(self.values.index(self.other)) if self.other is not None else "NULL"
            cases = " ".join(f"WHEN {quote_string(v)} THEN {i}" for i, v in enumerate(self.values))
            expr = f"CASE {col} {cases} ELSE {fallback} END"
        if self.nullable:
            expr = f"CASE WHEN {col} IS NULL THEN {self.null_bin} ELSE {expr} END"
        return f"CAST({expr} AS INTEGER)"

    def within_sql(self, bins: np.ndarray, integral: bool = False) -> str | None:
        """SQL condition true exactly for rows whose bin is marked in `bins` (a boolean per bin; None: all
        are). Written on the raw column where that is exact (a contiguous range of bins of an integer
        column stored as an integer type, `integral`; a categorical's values), so the engine can skip
        storage by its statistics; else on `bin_sql`."""
        bins = np.asarray(bins, dtype=bool)
        if bins.all():
            return None
        col = quote_identifier(self.name)
        values = bins[: self.value_bins]
        null = f"{col} IS NULL" if self.nullable and bins[-1] else None
        marked = np.flatnonzero(values)
        if not marked.size:
            return null or "FALSE"
        contiguous = marked[-1] - marked[0] + 1 == marked.size
        if self.kind == INTEGER and integral and contiguous:  # bin b holds the value low + b (ends clamped)
            low, high = int(marked[0]), int(marked[-1])
            parts = ([f"{col} >= {self.low + low}"] if low > 0 else []) + \
                ([f"{col} <= {self.low + high}"] if high < self.value_bins - 1 else [])
            part = " AND ".join(parts) or f"{col} IS NOT NULL"
        elif self.kind == CATEGORICAL and self.other is None:
            part = f"{col} IN ({', '.join(quote_string(self.values[i]) for i in marked)})"
        else:
            part = f"{self.bin_sql(integral=integral)} IN ({', '.join(str(int(i)) for i in marked)})"
        return f"({part} OR {null})" if null else part

    def rank_sql(self) -> str:
        """SQL of what bounding ranks a unit's rows by for this column: its bin, a key column's raw key
        (the same before and after its keys are released, so the rows kept never change)."""
        return f"CAST({quote_identifier(self.name)} AS VARCHAR)" if self.kind == KEY else self.bin_sql()

    def fits_sql(self, stored: StoredType | None = None) -> str | None:
        """SQL condition a row must meet to belong to the protected table, if any; with the `stored`
        column's type, only what that type does not already guarantee (a fact of the schema).

        A categorical without `other` fits exactly when its bin is not NULL; that simple
        CASE is evaluated once per distinct value on dictionary-compressed storage,
        where `IN (...)` is planned as a join and compares every row. An ENUM column of
        declared values only needs no such check, and a NOT NULL one no NULL check.
        """
        stored = stored or StoredType()
        if self.kind == KEY:
            return None  # every key fits: keys not released (and NULL) share the last bin
        if self.kind == CATEGORICAL and self.other is None and not stored.holds_only(self.values):
            return f"{self.bin_sql()} IS NOT NULL"
        return None if self.nullable or stored.not_null else f"{quote_identifier(self.name)} IS NOT NULL"


@dataclass(frozen=True)
class StoredType:
    """What an engine's schema says of a stored column: its ENUM values (None: not an ENUM), whether
    it is NOT NULL, and whether it is of an integer type. Scans use it to leave out the work its type
    makes unnecessary for every row (checks, FLOOR)."""

    enum_values: tuple[str, ...] | None = None
    not_null: bool = False
    integral: bool = False  # an integer type: its values need no FLOOR (`Column.bin_sql`)

    def holds_only(self, values: Iterable[str]) -> bool:
        """Whether every non-NULL value of the column is one of `values`."""
        return self.enum_values is not None and set(self.enum_values) <= set(values)


def _as_number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _apply(op: str, left: np.ndarray, right: float) -> np.ndarray:
    return {
        "=": left == right,
        "<>": left != right,
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[op].astype(float)


__all__ = ["BOOLEAN", "CATEGORICAL", "COMPARISONS", "DATE", "INTEGER", "KEY", "NUMERIC", "PRESENCE", "TIMESTAMP",
           "Column", "StoredType", "quote_identifier", "quote_string"]
