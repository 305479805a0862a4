"""The planning time budget, and cancellation while planning.

Planning reads no data, but some of it is costly: optimizing strategies (HDMM,
the optimal factorization, range and marginal planners) and simulating the
adaptive procedures (AIM, RAP). A `Deadline` bounds it. The cheap, essential
part (per-query and identity-marginal plans, and the expected errors of the
chosen plan) always runs; optional work is checked at every checkpoint of the
computation (`mechanisms.interruption`) and abandoned once the budget is spent,
the best plan found so far being used — the plan's notes say what was left out.
`cancelled` (e.g. the shell's Ctrl-C) stops everything at the next checkpoint.

Time is the planning thread's CPU time, so the budget means the same on a busy
machine as on an idle one.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from mechanisms.interruption import Interrupted, stopping_when


class OutOfTime(Interrupted):
    """The planning time budget is spent: optional work stops."""


class PlanningCancelled(Interrupted):
    """The caller cancelled planning."""


class Deadline:
    """`seconds` of planning-thread CPU time (None: no limit), and an optional cancellation test."""

    def __init__(self, seconds: float | None = None, cancelled: Callable[[], bool] | None = None):
        self.seconds = seconds
        self.cancelled = cancelled
        self.started = time.thread_time()
        self.skipped: dict[str, int] = {}  # optional work left out, and how often

    @property
    def expired(self) -> bool:
        return self.seconds is not None and time.thread_time() - self.started >= self.seconds

    def check_cancelled(self) -> None:
        if self.cancelled is not None and self.cancelled():
            raise PlanningCancelled("planning was cancelled")

    def check(self) -> None:
        """Raise if cancelled, or if the budget is spent (for optional work)."""
        self.check_cancelled()
        if self.expired:
            raise OutOfTime(f"the planning time budget of {self.seconds:g} s is spent")

    @contextmanager
    def essential(self) -> Iterator[None]:
        """Work that always runs: only cancellation stops it."""
        with stopping_when(self.check_cancelled):
            yield

    @contextmanager
    def optional(self) -> Iterator[None]:
        """Work that stops when the budget is spent (raising `OutOfTime`) or when cancelled."""
        self.check()
        with stopping_when(self.check):
            yield

    def skip(self, what: str) -> None:
        """Record optional work left out for lack of time."""
        self.skipped[what] = self.skipped.get(what, 0) + 1

    def note(self) -> str | None:
        """What the budget left out, for EXPLAIN (None: nothing)."""
        if not self.skipped:
            return None
        left = ", ".join(f"{what} ({n}×)" if n > 1 else what for what, n in self.skipped.items())
        return (f"planning time budget of {self.seconds:g} s reached: the best plan found so far is used; not "
                f"considered: {left} (SET dpsql.planning_seconds = 0 lifts the budget)")


__all__ = ["Deadline", "OutOfTime", "PlanningCancelled"]
