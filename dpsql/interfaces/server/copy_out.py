"""`COPY (<query>) TO STDOUT`: a query's answer streamed in COPY's text or CSV format (psql's `\\copy (...) TO`).

The query runs as any other (a DP query is charged as one; asking again is free); only its rows' format
differs. Other COPY forms (a table, a file, FROM) are not served: the workspace's allowlist refuses them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from dpsql.errors import NotSupportedError
from dpsql.answers.result import Result
from dpsql.interfaces.server import pgcompat

_COPY_OUT = re.compile(r"^COPY\s*\((?P<query>.*)\)\s*TO\s+STDOUT\b(?P<options>.*)$", re.I | re.S)
_TOKEN = re.compile(r"'(?:[^']|'')*'|\w+")
_SWITCH = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}


@dataclass(frozen=True)
class CopyOut:
    """A parsed `COPY (query) TO STDOUT [WITH] [(options) | CSV | HEADER | DELIMITER 'c' | NULL 'x']`."""

    query: str
    csv: bool = False
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"


def parse(sql: str) -> CopyOut | None:
    """The COPY ... TO STDOUT of a query, or None for any other statement."""
    m = _COPY_OUT.match(pgcompat.strip_leading_comments(sql))
    if m is None:
        return None
    text = m.group("options").strip()
    text = re.sub(r"^WITH\b", "", text, flags=re.I).strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    tokens = [t[1:-1].replace("''", "'") if t.startswith("'") else t for t in _TOKEN.findall(text)]
    csv, header, values = False, False, {}
    while tokens:
        name = tokens.pop(0).lower()
        if name in ("format", "delimiter", "null") and tokens:
            values[name] = tokens.pop(0)
        elif name == "header":
            header = _SWITCH[tokens.pop(0).lower()] if tokens and tokens[0].lower() in _SWITCH else True
        elif name == "csv":
            csv = True
        else:
            raise NotSupportedError(f"COPY (query) TO STDOUT takes FORMAT text or csv, HEADER, DELIMITER and NULL, "
                                    f"not {name.upper()}")
    format_name = values.get("format", "csv" if csv else "text").lower()
    if format_name not in ("text", "csv"):
        raise NotSupportedError(f"COPY (query) TO STDOUT writes FORMAT text or csv, not {format_name}")
    csv = format_name == "csv"
    delimiter = values.get("delimiter", "," if csv else "\t")
    if len(delimiter) != 1:
        raise NotSupportedError("COPY's DELIMITER must be one character")
    return CopyOut(m.group("query"), csv, header, delimiter, values.get("null", "" if csv else "\\N"))


def lines(result: Result, copy: CopyOut) -> Iterator[bytes]:
    """The answer's rows (after a header line if asked) in COPY's format, one line each."""
    if copy.header:
        yield _line([str(c) for c in result.columns], copy)
    for row in result.rows:
        yield _line([None if v is None else pgcompat.encode_text(v).decode() for v in row], copy)


def _line(values: list[str | None], copy: CopyOut) -> bytes:
    return (copy.delimiter.join(_field(v, copy) for v in values) + "\n").encode()


def _field(value: str | None, copy: CopyOut) -> str:
    if value is None:
        return copy.null
    if copy.csv:
        special = value == copy.null or any(ch in value for ch in (copy.delimiter, '"', "\n", "\r"))
        return '"' + value.replace('"', '""') + '"' if special else value
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return escaped.replace(copy.delimiter, "\\" + copy.delimiter)
