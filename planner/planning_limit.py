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
unloaded 2-core machine of 2025. Only the work count decides what optional work
runs, so the same workload gets the same plan on a fast machine, a slow one and a
busy one (a clock-based budget gave worse plans under load).

A last-resort **backstop** guards against an estimate that is badly wrong: the
planning thread's CPU time spent *inside optional work* past `BACKSTOP` times the
budget (never less than `BACKSTOP_MIN` seconds) also stops it, and the note then says
the plan may depend on the machine. It never decides a plan the work budget allows
on any machine that runs optional work within `BACKSTOP`× the reference rate: the
work budget lets optional work use at most `seconds` of reference work, which took
at most 2.9 CPU seconds per budget second at the slowest site on a shared 2-core
machine (`benchmarks/planning_work.py`, RESULTS.md), and CPU time, unlike the
clock, does not grow with the number of other processes — so a loaded machine
(load 40 on 2 cores) stays 30× below it. Essential work is not timed: the budget
never stops it, so it must not eat into the backstop either.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from mechanisms.interruption import Interrupted, stopping_when

REFERENCE_RATE = 2e9  # operations per second of budget
CALL_WORK = 2e5  # the fixed cost of an iteration (Python and dispatch), in operations
BACKSTOP = 100.0  # CPU time in optional work past this many times the budget stops it whatever the estimates
BACKSTOP_MIN = 30.0  # seconds: the backstop never stops optional work sooner


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
        self.optional_cpu = 0.0  # planning-thread CPU seconds spent in finished optional work
        self._optional_since: float | None = None  # thread CPU time when the current optional work began
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
        if self._optional_since is not None and self.optional_cpu + time.thread_time() - self._optional_since \
                > max(BACKSTOP * self.seconds, BACKSTOP_MIN):
            self.backstopped = True
            raise OutOfTime(f"optional planning work took over {self.backstop_seconds:g} s of CPU time")

    @property
    def backstop_seconds(self) -> float:
        """CPU seconds of optional work past which the backstop stops it."""
        return max(BACKSTOP * (self.seconds or 0.0), BACKSTOP_MIN)

    @contextmanager
    def essential(self) -> Iterator[None]:
        """Work that always runs: only cancellation stops it (its work still counts)."""
        with stopping_when(self.check_cancelled):
            yield

    @contextmanager
    def optional(self) -> Iterator[None]:
        """Work that stops when the budget is spent (raising `OutOfTime`) or when cancelled; its CPU time counts
        towards the backstop."""
        if self._optional_since is not None:  # nested: the outer one times it
            with stopping_when(self.check):
                yield
            return
        self._optional_since = time.thread_time()
        try:
            self.check()
            with stopping_when(self.check):
                yield
        finally:
            self.optional_cpu += time.thread_time() - self._optional_since
            self._optional_since = None

    def skip(self, what: str) -> None:
        """Record optional work left out for lack of budget."""
        self.skipped[what] = self.skipped.get(what, 0) + 1

    def note(self) -> str | None:
        """What the budget left out, for EXPLAIN (None: nothing)."""
        if not self.skipped:
            return None
        left = ", ".join(f"{what} ({n}×)" if n > 1 else what for what, n in self.skipped.items())
        why = (f"optional planning work took over {self.backstop_seconds:g} s of CPU time, {BACKSTOP:g}× its budget of "
               f"{self.seconds:g} s of work: a work estimate is far off (this plan may differ on another machine)"
               if self.backstopped else f"planning budget of {self.seconds:g} s reached")
        return (f"{why}: the best plan found so far is used; not considered: {left} "
                "(SET dpsql.planning_seconds = 0 lifts the budget)")


__all__ = ["BACKSTOP", "BACKSTOP_MIN", "CALL_WORK", "PlanningLimit", "OutOfTime", "PlanningCancelled", "REFERENCE_RATE"]
