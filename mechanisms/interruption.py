"""Checkpoints in long computations, where a caller may stop them, and the work they announce.

Optimizers and simulated mechanisms (HDMM's and the factorization's iterations,
AIM's rounds and graphical-model fits, RAP's rounds and projections) call
`checkpoint(work)` once per iteration, before it runs. `work` estimates the
iteration's cost in arithmetic operations, from the sizes involved only (an n × n
eigendecomposition is about 10n³), never from a clock: a budget counted in work
stops a computation at the same iteration on every machine and under any load.
`checkpoint` does nothing unless the caller installed a check for the current
context with `stopping_when(check)`: then `check(work)` runs and may raise (a
subclass of `Interrupted`) to abandon the computation — how the planner enforces
its budget and how Ctrl-C stops planning at once. The check lives in a context
variable, so it belongs to the thread (and context) that installed it and never
outlives the `with` block.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

_check: ContextVar[Callable[[float], None] | None] = ContextVar("dpsql_checkpoint", default=None)


class Interrupted(Exception):
    """A computation was stopped at a checkpoint."""


def checkpoint(work: float = 0.0) -> None:
    """Let the installed check (if any) stop the computation here, before `work` more operations."""
    check = _check.get()
    if check is not None:
        check(work)


@contextmanager
def stopping_when(check: Callable[[float], None] | None) -> Iterator[None]:
    """Run the block with `check(work)` called at every checkpoint (None: no check)."""
    token = _check.set(check)
    try:
        yield
    finally:
        _check.reset(token)


@contextmanager
def recording(announced: list[float], checked: int = 0) -> Iterator[None]:
    """Run the block with every checkpoint's work appended to `announced`, still checked by the installed
    check, except the first `checked` ones (the caller checked them already)."""
    outer = _check.get()

    def record(work: float) -> None:
        announced.append(work)
        if outer is not None and len(announced) > checked:
            outer(work)

    with stopping_when(record):
        yield


__all__ = ["Interrupted", "checkpoint", "recording", "stopping_when"]
