"""What one ledger charge carries: an `Entry` to append, with the measurements it pays for and at most one
`Record`, a release that is not a measurement (a key set, a continual query, one of its emits, a model).

The ledger (`dpsql.budget.ledger`) appends entries and chains their digests (`chain_digest`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from mechanisms.measurement import Measurement
from mechanisms.privacy_filter import Piece

KEYS, CONTINUAL, EMIT, MODEL = "keys", "continual", "emit", "model"  # the kinds of records
NOISY_MAX = "noisy_max"  # a report-noisy-max pick (`dpsql.handlers.noisy_max`), named by its question
SMALL_COUNTS = "small_counts"  # counts released by a small-group mechanism (`dpsql.handlers.small_counts`), likewise


def released_keys(payload: Any) -> list[str]:
    """The keys a KEYS record released: its payload is the list itself (releases before domains grew) or
    {"keys": [...], "rows": ...} (the rows it counted: `dpsql.tables.key_domains`)."""
    return list(payload["keys"]) if isinstance(payload, dict) else list(payload)


@dataclass(frozen=True)
class Record:
    """A release kept with a charge: `kind` (KEYS, CONTINUAL, EMIT, MODEL, NOISY_MAX, SMALL_COUNTS), the `name`
    it is known by within its table (a column; a continual query; "<query>#<t>"; a model's digest; a question's),
    its JSON-able `payload` and the δ it spent."""

    kind: str
    name: str
    payload: Any
    delta: float = 0.0

    @property
    def text(self) -> str:
        return json.dumps(self.payload, separators=(",", ":"))

    def digest(self) -> str:
        return chain_digest(self.kind, self.name, self.delta, self.text)


@dataclass(frozen=True)
class Entry:
    """A charge to append: what it costs, the statement, the table and the measurements it pays for
    (and a key set it releases)."""

    cost: float
    statement: str
    table: str | None
    signature: str | None
    measurements: list[Measurement]
    detail: str | None = None
    record: Record | None = None
    model: str | None = None  # a released model's JSON (`model_record` makes its record)
    key_counts: tuple[tuple[str, int], ...] = ()  # the table's key columns' released keys it was computed over
    pieces: tuple[Piece, ...] | None = None  # the mechanisms it was (`dpsql.budget.ledger_accounting`); None: ρ = cost


def model_record(spec: dict) -> tuple[Record, str]:
    """A released model's (record, JSON text): the record names and hashes the text, which is stored apart."""
    text = json.dumps(spec, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Record(MODEL, digest[:16], {"kind": spec.get("kind"), "sha256": digest, "chars": len(text)}), text


def chain_digest(*parts) -> str:
    """SHA-256 of JSON-encoded parts: how the hash chain covers a row and what it carries."""
    return hashlib.sha256(json.dumps(parts, default=str, separators=(",", ":")).encode()).hexdigest()


def carried(record: str | None, pieces: str | None) -> list[str]:
    """What a charge's digest covers beyond its row and measurements: its record's digest, its mechanisms."""
    return [*([record] if record is not None else []), *([chain_digest("pieces", pieces)] if pieces else [])]
