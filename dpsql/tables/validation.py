"""Tables the data owner validated: every row checked once against the catalog, so scans skip the checks.

A scan counts only the rows that fit the catalog (`Table.fits_sql`): a categorical's declared
values, no NULL where none is declared. Stored types make some checks unnecessary (an ENUM of
the declared values, NOT NULL); on plain storage (VARCHAR, nullable, as a CSV import stores it)
they run on every row. `dpsql catalog DATABASE --catalog CATALOG --validate TABLE` checks every
row once and, when all fit, records the fact in `<DATABASE>.dpsql-validated` (an owner's file,
beside the database, as the default ledger is) with what identifies the table as checked: the
catalog's declaration of it, its row count and the database files' size and modification time.
A scan of a validated table whose identification still holds skips the per-row checks; any change
(a write to the database, another declaration) makes scans check again until the owner validates
again. Rows that a false record lets in change which rows are counted, never the privacy guarantee
(see SECURITY.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from dpsql.tables.table import Table
from dpsql.tables.columns import CATEGORICAL, StoredType
from dpsql.errors import OperationalError


def validated_path(database: str) -> Path:
    """Where a database's validated tables are recorded."""
    return Path(database + ".dpsql-validated")


def _files(database: str) -> list:
    """Size and modification time of the database file and its write-ahead log (None: absent)."""
    out = []
    for path in (database, database + ".wal"):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            out.append(None)
            continue
        out.append([st.st_size, st.st_mtime_ns])
    return out


@dataclass(frozen=True)
class Validations:
    """The validated tables of one database file: {table (lower case): its identification when checked}."""

    database: str
    tables: dict[str, dict]

    @classmethod
    def load(cls, database: str) -> "Validations":
        path = validated_path(database)
        try:
            tables = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError) as e:
            raise OperationalError(f"cannot read the validated tables {str(path)!r} ({e}): validate them again "
                                   f"with `dpsql catalog {database} --catalog CATALOG --validate TABLE`") from None
        return cls(database, tables if isinstance(tables, dict) else {})

    def holds(self, table: Table, rows: int) -> bool:
        """Whether `table` (with `rows` rows now) is as the owner validated it: same declaration, same
        row count, database files unchanged."""
        entry = self.tables.get(table.name.lower())
        return (entry is not None and entry.get("signature") == table.signature() and entry.get("rows") == rows
                and entry.get("files") == _files(self.database))

    def record(self, table: Table, rows: int) -> None:
        """Record `table` (all of its `rows` rows fit the catalog) as validated."""
        self.tables[table.name.lower()] = {"signature": table.signature(), "rows": rows, "files": _files(self.database),
                                           "validated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        path = validated_path(self.database)
        temporary = path.with_name(path.name + ".new")
        temporary.write_text(json.dumps(self.tables, indent=1) + "\n")
        os.replace(temporary, path)


def as_validated(table: Table, stored: dict[str, StoredType]) -> dict[str, StoredType]:
    """The stored types as a validated table's rows are known to be: each categorical holds only its
    declared values, each column not declared nullable holds no NULL (`Column.fits_sql` then checks nothing)."""
    out = dict(stored)
    for name, column in table.columns.items():
        kind = stored.get(name, StoredType())
        values = tuple(column.values) if column.kind == CATEGORICAL else kind.enum_values
        out[name] = StoredType(values, kind.not_null or not column.nullable, kind.integral)
    return out
