"""Column declarations: `parse_column` checks a TOML or dict declaration and makes its `Column`;
`integer`, `numeric`, `categorical`, `key`, `presence`, `boolean`, `date` and `timestamp` build a
declaration from Python (the types are described in `dpsql.tables.catalog`).
"""

from __future__ import annotations

from typing import Iterable

from dpsql.tables import temporal
from dpsql.tables.columns import BOOLEAN, CATEGORICAL, INTEGER, KEY, NUMERIC, PRESENCE, TEMPORAL, Column, exact_number
from dpsql.errors import CatalogError
from dpsql.tables.temporal import DATE, TIMESTAMP


def integer(low: int, high: int, nullable: bool = False) -> dict:
    """Python-API declaration of an integer column (one bin per value)."""
    return {"type": INTEGER, "min": low, "max": high, "nullable": nullable}


def numeric(low: float, high: float, bins: int, nullable: bool = False) -> dict:
    """Python-API declaration of an equal-width binned numeric column."""
    return {"type": NUMERIC, "min": low, "max": high, "bins": bins, "nullable": nullable}


def categorical(values: Iterable[str], ordered: bool = False, other: str | None = None, nullable: bool = False,
                sizes: Iterable[int] | None = None) -> dict:
    """Python-API declaration of a categorical column (`sizes`: each value's number of rows, public)."""
    decl = {"type": CATEGORICAL, "values": list(values), "ordered": ordered, "nullable": nullable}
    if other is not None:
        decl["other"] = other
    if sizes is not None:
        decl["sizes"] = list(sizes)
    return decl


def boolean(nullable: bool = False) -> dict:
    """Python-API declaration of a boolean column."""
    return {"type": BOOLEAN, "nullable": nullable}


def date(low: str, high: str, granularity: str = "day", nullable: bool = False) -> dict:
    """Python-API declaration of a date column (`dpsql.tables.temporal`)."""
    return {"type": DATE, "min": low, "max": high, "granularity": granularity, "nullable": nullable}


def timestamp(low: str, high: str, granularity: str = "hour", nullable: bool = False) -> dict:
    """Python-API declaration of a timestamp column (`dpsql.tables.temporal`)."""
    return {"type": TIMESTAMP, "min": low, "max": high, "granularity": granularity, "nullable": nullable}


def presence(nullable: bool = True) -> dict:
    """Python-API declaration of a column declared for presence only: COUNT(col) and IS [NOT] NULL, no values."""
    return {"type": PRESENCE, "nullable": nullable}


def key() -> dict:
    """Python-API declaration of a key column (values not declared; released by partition selection)."""
    return {"type": KEY}


_KEYS = {
    KEY: {"type"},
    PRESENCE: {"type", "nullable"},
    INTEGER: {"type", "min", "max", "nullable"},
    NUMERIC: {"type", "min", "max", "bins", "nullable", "strict"},
    CATEGORICAL: {"type", "values", "ordered", "other", "nullable", "sizes"},
    BOOLEAN: {"type", "nullable"},
    DATE: {"type", "min", "max", "granularity", "nullable", "strict"},
    TIMESTAMP: {"type", "min", "max", "granularity", "nullable", "strict"},
}
_KINDS = "integer, numeric, categorical, key, presence, boolean, date or timestamp"


def parse_column(name: str, decl: dict) -> Column:
    """Validate one column declaration (a TOML inline table or a dict)."""
    if not isinstance(decl, dict) or "type" not in decl:
        raise CatalogError(f"column {name!r}: a declaration needs a type ({_KINDS})")
    kind = decl["type"]
    if kind not in _KEYS:
        raise CatalogError(f"column {name!r}: unknown type {kind!r} (use {_KINDS})")
    unknown = set(decl) - _KEYS[kind]
    if unknown:
        raise CatalogError(f"column {name!r}: unknown keys {sorted(unknown)} for type {kind}")
    nullable = decl.get("nullable", False)
    if not isinstance(nullable, bool):
        raise CatalogError(f"column {name!r}: nullable must be true or false")
    strict = decl.get("strict", False)
    if not isinstance(strict, bool):
        raise CatalogError(f"column {name!r}: strict must be true or false")
    if kind in (KEY, PRESENCE):
        return Column(name, kind, nullable if kind == PRESENCE else False)
    if kind == BOOLEAN:
        return Column(name, kind, nullable)
    if kind in TEMPORAL:
        return _temporal_column(name, kind, decl, nullable, strict)
    if kind == CATEGORICAL:
        values = decl.get("values")
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise CatalogError(f"column {name!r}: values must be a non-empty list of strings")
        if len(set(values)) != len(values):
            raise CatalogError(f"column {name!r}: values must be distinct")
        if not isinstance(decl.get("ordered", False), bool):
            raise CatalogError(f"column {name!r}: ordered must be true or false")
        other = decl.get("other")
        if other is not None and other not in values:
            raise CatalogError(f"column {name!r}: other = {other!r} must be one of the declared values")
        return Column(name, kind, nullable, values=tuple(values), ordered=bool(decl.get("ordered", False)), other=other,
                      sizes=_sizes(name, decl.get("sizes"), values, nullable))
    for key in ("min", "max"):
        if key not in decl:
            raise CatalogError(f"column {name!r}: {kind} columns need {key}")
    low, high = exact_number(decl["min"], f"{name}.min"), exact_number(decl["max"], f"{name}.max")
    if kind == INTEGER:
        if low != low.to_integral_value() or high != high.to_integral_value() or high < low:
            raise CatalogError(f"column {name!r}: integer bounds must be integers with min <= max")
        if high - low + 1 > 1_000_000:
            raise CatalogError(f"column {name!r}: more than 10^6 values; declare it numeric with bins")
        return Column(name, kind, nullable, low=low, high=high)
    bins = decl.get("bins")
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= 1_000_000:
        raise CatalogError(f"column {name!r}: numeric columns need bins, an integer from 1 to 10^6")
    if not high > low:
        raise CatalogError(f"column {name!r}: numeric columns need min < max")
    return Column(name, kind, nullable, low=low, high=high, bins=bins, strict=strict)


def _sizes(name: str, sizes, values: list[str], nullable: bool) -> tuple[int, ...] | None:
    """A categorical column's public group sizes: one non-negative integer per declared value."""
    if sizes is None:
        return None
    if not isinstance(sizes, list) or len(sizes) != len(values) or \
            not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes):
        raise CatalogError(f"column {name!r}: sizes must list one non-negative integer per value "
                           f"({len(values)} values)")
    if nullable:
        raise CatalogError(f"column {name!r}: sizes declare every row's group, so the column cannot be nullable")
    return tuple(sizes)


def _temporal_column(name: str, kind: str, decl: dict, nullable: bool, strict: bool) -> Column:
    granularity = decl.get("granularity", "day")
    if granularity not in temporal.GRANULARITIES[kind]:
        raise CatalogError(f"column {name!r}: granularity must be one of {', '.join(temporal.GRANULARITIES[kind])} "
                           f"for a {kind} column")
    for key in ("min", "max"):
        if key not in decl:
            raise CatalogError(f"column {name!r}: {kind} columns need {key}")
    low = temporal.parse_instant(decl["min"], f"{name}.min")
    high = temporal.parse_instant(decl["max"], f"{name}.max")
    if high < low:
        raise CatalogError(f"column {name!r}: min must not be after max")
    periods = temporal.periods(low, high, granularity)
    if periods > temporal.MAX_PERIODS:
        raise CatalogError(f"column {name!r}: more than 10^6 periods of one {granularity}; use a coarser granularity")
    return Column(name, kind, nullable, bins=periods, origin=temporal.truncate(low, granularity),
                  granularity=granularity, strict=strict)


__all__ = ["boolean", "categorical", "date", "integer", "key", "numeric", "parse_column", "presence", "timestamp"]
