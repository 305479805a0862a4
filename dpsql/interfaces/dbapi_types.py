"""PEP 249 type objects and constructors.

A column's type code in `cursor.description` is DuckDB's name of its type (``"VARCHAR"``,
``"DECIMAL(18,3)"``, ``"TIMESTAMP WITH TIME ZONE"``); it compares equal to the type object
of its kind: ``description[0][1] == dpsql.STRING``. Parameters take Python's own values,
so the constructors are the standard library's types.
"""

from __future__ import annotations

import datetime
import re


class DBAPITypeObject:
    """The DuckDB type names of one kind of column; equal to each of their type codes."""

    def __init__(self, *names: str):
        self.names = frozenset(names)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DBAPITypeObject):
            return self.names == other.names
        return isinstance(other, str) and re.sub(r"\(.*\)$", "", other).strip().upper() in self.names

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        return f"DBAPITypeObject({', '.join(sorted(self.names))})"


STRING = DBAPITypeObject("VARCHAR", "ENUM", "JSON")
BINARY = DBAPITypeObject("BLOB")
NUMBER = DBAPITypeObject(
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
    "UHUGEINT", "VARINT", "BIGNUM", "FLOAT", "DOUBLE", "DECIMAL",
)
DATETIME = DBAPITypeObject(
    "DATE", "TIME", "TIME WITH TIME ZONE", "TIME_NS", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_S",
    "TIMESTAMP_MS", "TIMESTAMP_NS",
)
ROWID = DBAPITypeObject()  # DuckDB has no row-id type: its rowid pseudo-column is a BIGINT (NUMBER)

Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime
Binary = bytes


def DateFromTicks(ticks: float) -> datetime.date:  # noqa: N802 - the names are fixed by PEP 249
    """The local date of a POSIX timestamp."""
    return datetime.date.fromtimestamp(ticks)


def TimeFromTicks(ticks: float) -> datetime.time:  # noqa: N802
    """The local time of day of a POSIX timestamp."""
    return datetime.datetime.fromtimestamp(ticks).time()


def TimestampFromTicks(ticks: float) -> datetime.datetime:  # noqa: N802
    """The local date and time of a POSIX timestamp."""
    return datetime.datetime.fromtimestamp(ticks)


__all__ = ["STRING", "BINARY", "NUMBER", "DATETIME", "ROWID", "Date", "Time", "Timestamp", "DateFromTicks",
           "TimeFromTicks", "TimestampFromTicks", "Binary"]
