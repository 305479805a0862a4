"""Date and timestamp domains: a public range cut into periods of one granularity.

A ``date`` column (granularity ``day``, ``month`` or ``year``) or a ``timestamp`` column
(also ``hour``, ``minute`` or ``second``) declares ``min`` and ``max``; its bins are the
periods from the one holding ``min`` to the one holding ``max``, in time order, so a
date column is an ordered integer-like axis (range trees apply to time series). A
value outside the range is clamped into the first or last period, as integers are.
Each bin stands for its period's start (the label GROUP BY shows, and the value
expressions are evaluated on); a bin holds one value exactly when it is a day of a
date column (`exact`).
"""

from __future__ import annotations

import datetime as dt
import re
from fractions import Fraction
from typing import Any

import numpy as np

from dpsql.errors import CatalogError

DATE, TIMESTAMP = "date", "timestamp"
_SECONDS = {"day": 86_400, "hour": 3_600, "minute": 60, "second": 1}
GRANULARITIES = {DATE: ("year", "month", "day"), TIMESTAMP: ("year", "month", "day", "hour", "minute", "second")}
MAX_PERIODS = 1_000_000


def parse_instant(value: Any, what: str) -> dt.datetime:
    """A TOML date/datetime, a Python date/datetime or an ISO string, as a naive datetime."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            raise CatalogError(f"{what} must be a time without a time zone, got {value!r}")
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?", value.strip()):
        try:
            return dt.datetime.fromisoformat(value.strip().replace(" ", "T"))
        except ValueError:
            pass
    raise CatalogError(f"{what} must be a date or timestamp ('YYYY-MM-DD' or 'YYYY-MM-DD hh:mm:ss'), got {value!r}")


def truncate(t: dt.datetime, granularity: str) -> dt.datetime:
    """The start of the period of `granularity` holding `t`."""
    if granularity == "year":
        return dt.datetime(t.year, 1, 1)
    if granularity == "month":
        return dt.datetime(t.year, t.month, 1)
    seconds = _SECONDS[granularity]
    return dt.datetime.min + dt.timedelta(seconds=(t - dt.datetime.min) // dt.timedelta(seconds=seconds) * seconds)


def start(origin: dt.datetime, k: int, granularity: str) -> dt.datetime:
    """The start of the k-th period after `origin` (itself a period start)."""
    if granularity in ("year", "month"):
        months = origin.year * 12 + origin.month - 1 + k * (12 if granularity == "year" else 1)
        return dt.datetime(months // 12, months % 12 + 1, 1)
    return origin + dt.timedelta(seconds=k * _SECONDS[granularity])


def position(t: dt.datetime, origin: dt.datetime, granularity: str) -> Fraction:
    """How many periods `t` lies after `origin` (fractional inside a period)."""
    if granularity in ("year", "month"):
        months = (t.year - origin.year) * 12 + t.month - origin.month
        base = start(origin, months, "month")
        within = Fraction((t - base) // dt.timedelta(microseconds=1),
                          (start(base, 1, "month") - base) // dt.timedelta(microseconds=1))
        total = months + within
        return total / 12 if granularity == "year" else total
    return Fraction((t - origin) // dt.timedelta(microseconds=1), _SECONDS[granularity] * 1_000_000)


def periods(low: dt.datetime, high: dt.datetime, granularity: str) -> int:
    """Number of periods from the one holding `low` to the one holding `high`."""
    return int(position(truncate(high, granularity), truncate(low, granularity), granularity)) + 1


def period_sql(col: str, origin: dt.datetime, granularity: str) -> str:
    """SQL of the (unclamped) period index of a row's value: whole periods since `origin`."""
    if granularity in ("year", "month"):
        months = f"(EXTRACT(YEAR FROM {col}) * 12 + EXTRACT(MONTH FROM {col}) - {origin.year * 12 + origin.month})"
        return f"FLOOR({months} / 12)" if granularity == "year" else months
    epoch = (origin - dt.datetime(1970, 1, 1)).total_seconds()
    return f"FLOOR((EPOCH(CAST({col} AS TIMESTAMP)) - {epoch!r}) / {_SECONDS[granularity]})"


def literal_sql(t: dt.datetime, kind: str) -> str:
    """A SQL literal of the value `t` for a column of `kind`."""
    return f"DATE '{t.date().isoformat()}'" if kind == DATE else f"TIMESTAMP '{t.isoformat(sep=' ')}'"


def shown(t: dt.datetime, kind: str) -> dt.date | dt.datetime:
    """`t` as a value of the column's type (a date column shows dates)."""
    return t.date() if kind == DATE else t


def compare(column, op: str, literal: Any) -> np.ndarray:
    """Indicator over a date or timestamp column's periods (not its NULL bin) of `column <op> literal`."""
    at = _position_of(column, literal)
    if at.denominator != 1:
        low, high = column.period(int(at)), column.period(int(at) + 1)
        raise CatalogError(f"{literal} is not a period start of {column.name!r} (periods of one "
                           f"{column.granularity}): use {shown(low, column.kind)} or {shown(high, column.kind)}")
    positions = np.arange(column.bins)
    if not column.binned:  # one day per bin: compared as integers
        return {"=": positions == at, "<>": positions != at, "<": positions < at, "<=": positions <= at,
                ">": positions > at, ">=": positions >= at}[op].astype(float)
    if op in ("=", "<>"):
        raise CatalogError(f"column {column.name!r} is binned by {column.granularity}: compare it with <, <=, >, >= "
                           f"or BETWEEN at period starts instead of {op}")
    above = positions >= at  # as a numeric bin: x >= e and x > e both select the periods from e up
    return (above if op in (">", ">=") else ~above).astype(float)


def nearest_start(column, literal: Any) -> tuple[Any, str | None]:
    """A literal moved to the nearest period start if it is inside a period, and a note saying so (None when
    it is a period start); refused for a `strict` column (`Column.nearest_edge`)."""
    at = _position_of(column, literal)
    if at.denominator == 1:
        return literal, None
    low, high = column.period(int(at)), column.period(int(at) + 1)
    if column.strict:
        raise CatalogError(f"{literal} is not a period start of {column.name!r} (periods of one "
                           f"{column.granularity}; declared strict): use {shown(low, column.kind)} or "
                           f"{shown(high, column.kind)}")
    edge = shown(low if at - int(at) <= Fraction(1, 2) else high, column.kind)
    return edge.isoformat(), (f"{column.name} is binned by {column.granularity}: the literal {literal} was answered "
                              f"at the nearest period start, {edge.isoformat()}")


def _position_of(column, literal: Any) -> Fraction:
    """Periods from the column's first period start to a date or timestamp literal, checked against the domain."""
    t = parse_instant(literal, f"the literal compared with {column.name!r}")
    at = position(t, column.origin, column.granularity)
    top = column.bins - (0 if column.binned else 1)
    if not 0 <= at <= top:
        raise CatalogError(f"literal {literal} is outside the declared domain of {column.name!r} "
                           f"[{shown(column.origin, column.kind)}, {shown(column.period(top), column.kind)}]")
    return at


__all__ = ["compare", "nearest_start", "DATE", "GRANULARITIES", "TIMESTAMP", "parse_instant", "period_sql", "periods", "position", "start",
           "truncate"]
