"""The planning budget, counted in work rather than time, and cancellation while planning.

Planning reads no data, but some of it is costly: optimizing strategies (HDMM,
the optimal factorization, range and marginal planners) and simulating the
adaptive procedures (AIM, RAP). A `PlanningLimit` bounds it. The cheap, essential
part (per-query and identity-marginal plans, and the expected errors of the
chosen plan) always runs; optional work is checked at every checkpoint of the
computation (`mechanisms.interruption`) and abandoned once the budget is spent,
the best plan found so far being used — the plan's notes say what was left out.
`cancelled` (e.g. the shell's Ctrl-C) stops everything at the next checkpoint.

The budget is counted in **work**: each checkpoint announces its iteration's
estimated operations (from sizes alone), and `seconds` of budget are
`seconds × REFERENCE_RATE` operations — about a second of planning on an
unloaded 2-core machine of 2025. So the same workload gets the same plan on a
fast machine, a slow one and a busy one (a clock-based budget gave worse plans
under load). As a guard against a badly wrong estimate, planning-thread CPU time
past `BACKSTOP` times the budget also stops optional work; the note then says so,
since that plan may depend on the machine.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from mechanisms.interruption import Interrupted, stopping_when

REFERENCE_RATE = 2e9  # operations per second of budget
CALL_WORK = 2e5  # the fixed cost of an iteration (Python and dispatch), in operations
BACKSTOP = 20.0  # CPU time past this many times the budget stops optional work whatever the estimates


class OutOfTime(Interrupted):
    """The planning budget is spent: optional work stops."""


class PlanningCancelled(Interrupted):
    """The caller cancelled planning."""


class PlanningLimit:
    """`seconds` of planning work (None: no limit), and an optional cancellation test."""

    def __init__(self, seconds: float | None = None, cancelled: Callable[[], bool] | None = None):
        self.seconds = seconds
        self.cancelled = cancelled
        self.work = 0.0  # operations announced so far
        self.started = time.thread_time()
        self.backstopped = False
        self.skipped: dict[str, int] = {}  # optional work left out, and how often

    def check_cancelled(self, work: float = 0.0) -> None:
        """Count `work`; raise if cancelled."""
        self.work += work + CALL_WORK
        if self.cancelled is not None and self.cancelled():
            raise PlanningCancelled("planning was cancelled")

    def check(self, work: float = 0.0) -> None:
        """Count `work`; raise if cancelled, or if it would overrun the budget (for optional work)."""
        self.check_cancelled(work)
        if self.seconds is None:
            return
        if self.work > self.seconds * REFERENCE_RATE:
            raise OutOfTime(f"the planning budget of {self.seconds:g} s is spent")
        if time.thread_time() - self.started > BACKSTOP * self.seconds:
            self.backstopped = True
            raise OutOfTime(f"planning took over {BACKSTOP:g}× its budget of {self.seconds:g} s")

    @contextmanager
    def essential(self) -> Iterator[None]:
        """Work that always runs: only cancellation stops it (its work still counts)."""
        with stopping_when(self.check_cancelled):
            yield

    @contextmanager
    def optional(self) -> Iterator[None]:
        """Work that stops when the budget is spent (raising `OutOfTime`) or when cancelled."""
        self.check()
        with stopping_when(self.check):
            yield

    def skip(self, what: str) -> None:
        """Record optional work left out for lack of budget."""
        self.skipped[what] = self.skipped.get(what, 0) + 1

    def note(self) -> str | None:
        """What the budget left out, for EXPLAIN (None: nothing)."""
        if not self.skipped:
            return None
        left = ", ".join(f"{what} ({n}×)" if n > 1 else what for what, n in self.skipped.items())
        why = (f"planning took over {BACKSTOP:g}× its budget of {self.seconds:g} s of CPU time (this plan may differ "
               "on another machine)" if self.backstopped else f"planning budget of {self.seconds:g} s reached")
        return (f"{why}: the best plan found so far is used; not considered: {left} "
                "(SET dpsql.planning_seconds = 0 lifts the budget)")


__all__ = ["BACKSTOP", "CALL_WORK", "PlanningLimit", "OutOfTime", "PlanningCancelled", "REFERENCE_RATE"]
