"""Checkpoints in long computations, where a caller may stop them.

Optimizers and simulated mechanisms (HDMM's and the factorization's iterations,
AIM's rounds and graphical-model fits, RAP's rounds and projections) call
`checkpoint()` once per iteration. It does nothing unless the caller installed a
check for the current context with `stopping_when(check)`: then `check()` runs
and may raise (a subclass of `Interrupted`) to abandon the computation — how the
planner enforces its time budget and how Ctrl-C stops planning at once. The
check lives in a context variable, so it belongs to the thread (and context)
that installed it and never outlives the `with` block.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

_check: ContextVar[Callable[[], None] | None] = ContextVar("dpsql_checkpoint", default=None)


class Interrupted(Exception):
    """A computation was stopped at a checkpoint."""


def checkpoint() -> None:
    """Let the installed check (if any) stop the computation here."""
    check = _check.get()
    if check is not None:
        check()


@contextmanager
def stopping_when(check: Callable[[], None] | None) -> Iterator[None]:
    """Run the block with `check` called at every checkpoint (None: no check)."""
    token = _check.set(check)
    try:
        yield
    finally:
        _check.reset(token)


__all__ = ["Interrupted", "checkpoint", "stopping_when"]
