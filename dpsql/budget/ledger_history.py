"""The ledger's history as budget checks compose it, read from the state once per state it is in.

A first answer checks its charge several times (the share before planning, each noise the planner
weighs, the plan, the charge itself), and each check composes the whole history
(`dpsql.budget.ledger_accounting.read_history`). `KnownHistory` keeps the last history read with what
identifies the state it was read from, and reads again only when that state may have changed:

- within one hold of the lock (`StateFile.lease`) and with no append begun by this ledger since, nobody
  can have written (every writer holds the lock): the kept history is returned without a query;
- otherwise the chain's head (the last charge's seq and hash: `chain_head`) is read under the lock: every
  charge, its pieces and its record's δ are appended with a new ledger row in one transaction, and the
  head's hash covers them all (chained), so an unchanged head is an unchanged history; a changed one
  (another process's charge, this one's) reads the history again, in full, as before.

Every check still runs under the lock, on the history as the state holds it at that moment.
"""

from __future__ import annotations

from typing import Callable

from mechanisms.privacy_filter import History


class KnownHistory:
    """The last history a ledger read, and the state it was read in (see the module docstring)."""

    def __init__(self):
        self._kept: tuple[int, int, tuple, History] | None = None  # (lease, appends, head, history)

    def read(self, lease: int, appends: int, head: Callable[[], tuple],
             read: Callable[[], tuple[tuple, History]]) -> History:
        """The history of the state open under the lock: kept, or read again (`read()`: the head and the
        history). `lease` counts the ledger's takings of the lock, `appends` the appends it began (rolled-back
        ones included); `head()` reads the chain's head."""
        kept = self._kept
        if kept is not None and kept[:2] == (lease, appends):
            return kept[3]
        if kept is not None and kept[0] != lease and kept[2] == head():
            self._kept = (lease, appends, *kept[2:])
            return kept[3]
        now, history = read()
        self._kept = (lease, appends, now, history)
        return history
