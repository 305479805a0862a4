"""Results of pure, costly computations kept across calls in one process, their work replayed on a hit.

Strategy optimizations (range-tree weights, HDMM's operators, the optimal factorization) depend
only on public declarations: the domain's sizes and the queries' matrices. Asked again by another
statement or connection of the same process, they are taken from a `WorkCache`, keyed by a digest
of exactly what they read. A computation announces its work at checkpoints
(`mechanisms.interruption`), and a planning budget counted in work decides what runs: so a hit
announces, checkpoint by checkpoint, the very work the computation announced when it ran. A budget
therefore stops (or lets through) a hit exactly where it stopped (or let through) the computation,
and a plan never depends on what the process planned before. A computation that was stopped keeps
the work it announced until it stopped, so a budget that stops it again costs no computing.

Only pure computations belong here: the result and the sequence of announced work must be functions
of the key alone (seeded randomness is fine). Values are shared: callers must not mutate them.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

from mechanisms.interruption import Interrupted, checkpoint, recording

T = TypeVar("T")
_ALL: "weakref.WeakSet[WorkCache]" = weakref.WeakSet()


class WorkCache:
    """A bounded map key -> (value, announced work), least recently used out first, safe across threads:
    at most `entries` values and, with `size` (a value's bytes), at most `max_bytes` in all.

    A computation stopped at a checkpoint (`Interrupted`) leaves the work it announced up to there: asked
    again, that work is announced first, and the computation runs only if no check stops it there (its
    first announcements, the same, are then not checked twice)."""

    def __init__(self, entries: int = 128, max_bytes: int | None = None, size: Callable[[object], int] | None = None):
        self.entries, self.max_bytes, self.size = entries, max_bytes, size
        self._items: OrderedDict[Hashable, tuple[bool, object, tuple[float, ...], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        _ALL.add(self)

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`'s value, computed once per key (while kept); a hit announces the same work again."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
        checked = 0
        if found is not None:
            done, value, work, _ = found
            for w in work:
                checkpoint(w)
            if done:
                return value  # type: ignore[return-value]
            checked = len(work)  # stopped there before, not now: computed, its first work checked already
        announced: list[float] = []
        try:
            with recording(announced, checked):
                value = compute()
        except Interrupted:
            self._keep(key, False, None, announced, 0)
            raise
        nbytes = self.size(value) if self.size is not None else 0
        if self.max_bytes is None or nbytes <= self.max_bytes:
            self._keep(key, True, value, announced, nbytes)
        return value

    def _keep(self, key: Hashable, done: bool, value: object, announced: list[float], nbytes: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[3]
            self._items[key] = (done, value, tuple(announced), nbytes)
            self._bytes += nbytes
            while len(self._items) > self.entries or (self.max_bytes is not None and self._bytes > self.max_bytes):
                self._bytes -= self._items.popitem(last=False)[1][3]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


def clear_all() -> None:
    """Forget every kept computation of this process (memory back; plans are the same either way)."""
    for cache in list(_ALL):
        cache.clear()


__all__ = ["WorkCache", "clear_all"]
