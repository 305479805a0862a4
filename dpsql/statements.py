"""Splitting SQL scripts into statements and recognising dpsql's own statements.

Besides SQL, a script may contain:

- ``BEGIN WORKLOAD [WITH (epsilon = E [, delta = D]) | WITH (rho = R)];`` ...
  ``END WORKLOAD;`` — the queries in between are planned and measured jointly;
- ``EXPLAIN <query>`` and ``EXPLAIN BEGIN WORKLOAD ...`` — show the plan, spend nothing;
- ``SET dpsql.query_epsilon = E`` (or ``query_rho``) — the share new queries spend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dpsql.errors import ProgrammingError


def split_statements(script: str) -> list[str]:
    """Split on semicolons outside quotes and comments; drop empty statements."""
    out, buf = [], []
    i, n = 0, len(script)
    quote: str | None = None
    while i < n:
        ch = script[i]
        if quote:
            buf.append(ch)
            if ch == quote:
                if i + 1 < n and script[i + 1] == quote:  # doubled quote escapes itself
                    buf.append(script[i + 1])
                    i += 1
                else:
                    quote = None
        elif ch in ("'", '"'):
            quote = ch
            buf.append(ch)
        elif script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        elif script.startswith("/*", i):
            end = script.find("*/", i + 2)
            i = n if end < 0 else end + 2
            buf.append(" ")
            continue
        elif ch == ";":
            out.append("".join(buf).strip())
            buf = []
        else:
            buf.append(ch)
        i += 1
    if quote:
        raise ProgrammingError(f"unterminated {quote} quote in the SQL")
    out.append("".join(buf).strip())
    return [s for s in out if s]


@dataclass(frozen=True)
class BeginWorkload:
    explain: bool
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None


@dataclass(frozen=True)
class EndWorkload:
    pass


@dataclass(frozen=True)
class SetOption:
    name: str
    value: float


@dataclass(frozen=True)
class Explain:
    sql: str


@dataclass(frozen=True)
class Sql:
    sql: str


Statement = BeginWorkload | EndWorkload | SetOption | Explain | Sql

_BEGIN = re.compile(r"^(EXPLAIN\s+)?BEGIN\s+WORKLOAD\b\s*(.*)$", re.I | re.S)
_WITH = re.compile(r"^WITH\s*\((.*)\)\s*$", re.I | re.S)
_END = re.compile(r"^END\s+WORKLOAD\s*$", re.I)
_SET = re.compile(r"^SET\s+(?:SESSION\s+)?dpsql\.(\w+)\s*(?:=|TO)\s*(.+?)\s*$", re.I | re.S)
_EXPLAIN = re.compile(r"^EXPLAIN\s+(.*)$", re.I | re.S)
_OPTIONS = {"query_epsilon", "query_rho"}


def _number(text: str, what: str) -> float:
    try:
        value = float(text.strip().strip("'"))
    except ValueError:
        raise ProgrammingError(f"{what} must be a number, got {text.strip()!r}") from None
    if not value > 0 or value == float("inf"):
        raise ProgrammingError(f"{what} must be a positive finite number, got {text.strip()!r}")
    return value


def classify(statement: str) -> Statement:
    """Recognise dpsql statements; anything else is SQL."""
    text = statement.strip()
    m = _BEGIN.match(text)
    if m:
        return _begin(bool(m.group(1)), m.group(2).strip())
    if _END.match(text):
        return EndWorkload()
    m = _SET.match(text)
    if m:
        name = m.group(1).lower()
        if name not in _OPTIONS:
            raise ProgrammingError(f"unknown setting dpsql.{name}; settable: {', '.join(sorted(_OPTIONS))}")
        return SetOption(name, _number(m.group(2), f"dpsql.{name}"))
    m = _EXPLAIN.match(text)
    if m and not re.match(r"^(ANALYZE|ANALYSE)\b", m.group(1), re.I):
        return Explain(m.group(1).strip())
    return Sql(text)


def _begin(explain: bool, rest: str) -> BeginWorkload:
    if not rest:
        return BeginWorkload(explain)
    m = _WITH.match(rest)
    if not m:
        raise ProgrammingError("expected BEGIN WORKLOAD [WITH (epsilon = E, delta = D) | WITH (rho = R)]")
    options: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in m.group(1).split(","))):
        key, _, value = part.partition("=")
        key = key.strip().lower()
        if key not in ("epsilon", "delta", "rho") or not value:
            raise ProgrammingError(f"unknown workload option {part!r}: use epsilon, delta or rho")
        options[key] = _number(value, key)
    if "rho" in options and "epsilon" in options:
        raise ProgrammingError("give a workload either epsilon (and delta) or rho, not both")
    return BeginWorkload(explain, options.get("epsilon"), options.get("delta"), options.get("rho"))
