"""Results of pure, costly computations kept across calls in one process, their work replayed on a hit.

Strategy optimizations (range-tree weights, HDMM's operators, the optimal factorization) depend
only on public declarations: the domain's sizes and the queries' matrices. Asked again by another
statement or connection of the same process, they are taken from a `WorkCache`, keyed by a digest
of exactly what they read. A computation announces its work at checkpoints
(`mechanisms.interruption`), and a planning budget counted in work decides what runs: so a hit
announces, checkpoint by checkpoint, the very work the computation announced when it ran. A budget
therefore stops (or lets through) a hit exactly where it stopped (or let through) the computation,
and a plan never depends on what the process planned before. A computation that was stopped
(raised) is not kept.

Only pure computations belong here: the result and the sequence of announced work must be functions
of the key alone (seeded randomness is fine). Values are shared: callers must not mutate them.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

from mechanisms.interruption import checkpoint, recording

T = TypeVar("T")
_ALL: "weakref.WeakSet[WorkCache]" = weakref.WeakSet()


class WorkCache:
    """A bounded map key -> (value, announced work), least recently used out first, safe across threads:
    at most `entries` values and, with `size` (a value's bytes), at most `max_bytes` in all."""

    def __init__(self, entries: int = 128, max_bytes: int | None = None, size: Callable[[object], int] | None = None):
        self.entries, self.max_bytes, self.size = entries, max_bytes, size
        self._items: OrderedDict[Hashable, tuple[object, tuple[float, ...], int]] = OrderedDict()
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
        if found is not None:
            value, work, _ = found
            for w in work:
                checkpoint(w)
            return value  # type: ignore[return-value]
        announced: list[float] = []
        with recording(announced):
            value = compute()
        nbytes = self.size(value) if self.size is not None else 0
        if self.max_bytes is not None and nbytes > self.max_bytes:
            return value
        with self._lock:
            if key not in self._items:
                self._items[key] = (value, tuple(announced), nbytes)
                self._bytes += nbytes
            while len(self._items) > self.entries or (self.max_bytes is not None and self._bytes > self.max_bytes):
                self._bytes -= self._items.popitem(last=False)[1][2]
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


def clear_all() -> None:
    """Forget every kept computation of this process (memory back; plans are the same either way)."""
    for cache in list(_ALL):
        cache.clear()


__all__ = ["WorkCache", "clear_all"]
