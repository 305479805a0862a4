"""What a failure of the ledger's database file means, said so a person can act on it.

DuckDB reports a full disk as an IO or transaction error quoting the system's "No space left on
device", and a damaged file as "Corrupt database file" (a block's checksum), a storage version it
does not know, or a file that is not a DuckDB database. Either way the ledger is left as it was:
a charge whose commit failed is not in it (and its answer is not released), and a corrupt file
is neither read nor replaced — dpsql never starts a new ledger, with a fresh budget, in its place.
"""

from __future__ import annotations

import duckdb

from dpsql.errors import OperationalError

_FULL = ("no space left on device", "disk is full", "disk full")
_CORRUPT = ("corrupt", "checksum", "storage version", "not a valid duckdb database", "serialization error",
            "invalid block", "invalid database")


def ledger_error(path: str, error: duckdb.Error) -> OperationalError:
    """The dpsql error for DuckDB's `error` on the ledger file at `path`."""
    text = str(error).lower()
    if any(sign in text for sign in _FULL):
        return OperationalError(f"the ledger's disk is full: {path!r} could not be written, so nothing was charged "
                                "or answered and the ledger is as it was; free space on its disk, then ask again")
    if any(sign in text for sign in _CORRUPT):
        return OperationalError(f"the ledger file {path!r} is corrupt (DuckDB could not read it): restore it from a "
                                "backup; until then dpsql neither reads nor replaces it (its budget is never reset)")
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return OperationalError(f"the ledger {path!r} could not be read or written ({first}); nothing was charged")
