"""PostgreSQL's binary formats of dates, times, timestamps, numerics, UUIDs and JSON (what asyncpg and
JDBC ask for), beside `pgcompat`'s fixed-width numbers. Reference: PostgreSQL's `*_send`/`*_recv` functions.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import uuid

DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, UUID, JSON = 1082, 1083, 1114, 1184, 1186, 1700, 2950, 114
TYPES = frozenset({DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, UUID, JSON})

_EPOCH = dt.datetime(2000, 1, 1)
_EPOCH_UTC = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
_NUMERIC_SIGNS = {0x0000: 1, 0x4000: -1}
_NUMERIC_NAN = 0xC000


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def encode(value, oid: int) -> bytes:
    """`value` (as DuckDB returns it) in the binary format of type `oid` (one of `TYPES`)."""
    if oid == DATE:
        return struct.pack("!i", (value - _EPOCH.date()).days)
    if oid == TIME:
        return struct.pack("!q", ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond)
    if oid == TIMESTAMP:
        return struct.pack("!q", _micros(value.replace(tzinfo=None) - _EPOCH))
    if oid == TIMESTAMPTZ:
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return struct.pack("!q", _micros(aware - _EPOCH_UTC))
    if oid == INTERVAL:
        return struct.pack("!qii", value.seconds * 1_000_000 + value.microseconds, value.days, 0)
    if oid == UUID:
        return uuid.UUID(str(value)).bytes
    if oid == JSON:
        return str(value).encode()
    return _numeric(decimal.Decimal(str(value)) if not isinstance(value, decimal.Decimal) else value)


def _numeric(number: decimal.Decimal) -> bytes:
    if number.is_nan():
        return struct.pack("!hhHh", 0, 0, _NUMERIC_NAN, 0)
    sign, digits, exponent = number.as_tuple()
    scale = max(0, -exponent)
    text = ("".join(map(str, digits)) + "0" * max(0, exponent)).zfill(scale + 1)  # the unscaled integer's digits
    integral, fraction = (text[:-scale] if scale else text) or "0", text[-scale:] if scale else ""
    integral = integral.zfill((len(integral) + 3) // 4 * 4)
    fraction = fraction.ljust((len(fraction) + 3) // 4 * 4, "0")
    groups = [int(integral[i:i + 4]) for i in range(0, len(integral), 4)]
    weight = len(groups) - 1
    groups += [int(fraction[i:i + 4]) for i in range(0, len(fraction), 4)]
    while groups and groups[0] == 0:  # leading zero groups
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHh{len(groups)}h", len(groups), weight, 0x4000 if sign else 0, scale, *groups)


def decode(raw: bytes, oid: int):
    """A binary parameter of type `oid` (one of `TYPES`) as a value dpsql binds: a number, or text that
    the engine casts (dates, times, UUIDs, JSON)."""
    if oid == DATE:
        return (_EPOCH.date() + dt.timedelta(days=struct.unpack("!i", raw)[0])).isoformat()
    if oid == TIME:
        return (dt.datetime.min + dt.timedelta(microseconds=struct.unpack("!q", raw)[0])).time().isoformat()
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        moment = (_EPOCH_UTC if oid == TIMESTAMPTZ else _EPOCH) + dt.timedelta(microseconds=struct.unpack("!q", raw)[0])
        return moment.isoformat(sep=" ")
    if oid == INTERVAL:
        micros, days, months = struct.unpack("!qii", raw)
        return f"{months} months {days} days {micros} microseconds"
    if oid == UUID:
        return str(uuid.UUID(bytes=raw))
    if oid == JSON:
        return raw.decode()
    count, weight, sign, scale = struct.unpack("!hhHh", raw[:8])
    if sign == _NUMERIC_NAN:
        return float("nan")
    groups = struct.unpack(f"!{count}h", raw[8:8 + 2 * count])
    number = sum(decimal.Decimal(g) * decimal.Decimal(10000) ** (weight - i) for i, g in enumerate(groups))
    number = -number if _NUMERIC_SIGNS.get(sign, 1) < 0 else number
    return int(number) if scale == 0 else float(number)
