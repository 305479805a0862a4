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


__all__ = ["DATE", "GRANULARITIES", "TIMESTAMP", "parse_instant", "period_sql", "periods", "position", "start",
           "truncate"]
