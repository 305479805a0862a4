"""Running one statement so that Ctrl-C cancels it without spending budget.

The statement runs in a worker thread while the main thread shows progress
and listens for Ctrl-C. A statement can be cancelled until its charge is
about to be recorded: cancelling interrupts the running DuckDB query, and the
session asks the statement's token (`Session.before_charge`) right before it
charges, so a cancelled statement never charges. Once a
charge has started, the statement runs to the end (its answer is paid for,
so it is shown).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, TextIO

from dpsql.interfaces.dbapi import Connection
from dpsql.errors import OperationalError
from dpsql.answers.result import Result

_PROGRESS_DELAY = 0.5  # seconds before progress is shown
_TICK = 0.1
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_BAR = 20


class Cancelled(OperationalError):
    """The statement was cancelled before anything was charged."""


class CancelToken:
    """Cancellation up to the point of no return: the statement's first charge."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._charging = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> bool:
        """Cancel unless a charge has begun; True if the statement will not charge."""
        with self._lock:
            if not self._charging:
                self._cancelled = True
            return self._cancelled

    def before_charge(self) -> None:
        """Called by the session before it charges: refuse if cancelled, else pass the point of no return."""
        with self._lock:
            if self._cancelled:
                raise Cancelled("statement cancelled; nothing was charged")
            self._charging = True


class StatementRunner:
    """Runs statements of one connection cancellably, with a progress line on a terminal."""

    def __init__(self, conn: Connection, progress: TextIO | None = None) -> None:
        self.conn = conn
        self.progress = progress if progress is not None and progress.isatty() else None
        self._shown = False
        self._stage: tuple[float, str] | None = None  # progress reported by an adaptive release (AIM, RAP)
        if self.progress is not None:  # lets the engine report how far a scan has got
            getattr(conn.session.backend, "show_progress", lambda: None)()

    def run(self, statement: str, on_cancel: Callable[[bool], None]) -> list[Result]:
        """Execute one statement; Ctrl-C calls `on_cancel(will_not_charge)` and cancels if still possible.

        Raises `Cancelled` when the statement was cancelled, else what the statement raised;
        a statement that finished before a cancellation could stop it returns its results.
        """
        token = CancelToken()
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                outcome["results"] = self.conn.session.execute(statement)
            except BaseException as e:  # handed to the main thread
                outcome["error"] = e
            finally:
                done.set()

        self.conn.session.before_charge = token.before_charge
        self.conn.session.cancelled = lambda: token.cancelled
        self.conn.session.progress = self._report
        self._stage = None
        started = time.monotonic()
        threading.Thread(target=work, name="dpsql-statement", daemon=True).start()
        try:
            self._wait(done, token, started, on_cancel)
        finally:
            self._clear_progress()
            self.conn.session.before_charge = None
            self.conn.session.cancelled = None
            self.conn.session.progress = None
        if "error" in outcome:
            if token.cancelled:
                raise Cancelled("statement cancelled; nothing was charged")
            raise outcome["error"]
        return outcome["results"]

    def _wait(self, done: threading.Event, token: CancelToken,
              started: float, on_cancel: Callable[[bool], None]) -> None:
        # An Event, not Thread.join: a join interrupted by Ctrl-C can mark a running thread as finished.
        tick = 0
        while not done.is_set():
            try:
                if token.cancelled:  # also stops a scan that began after Ctrl-C
                    self.conn.session.interrupt()
                done.wait(_TICK)
                tick += 1
                if time.monotonic() - started > _PROGRESS_DELAY:
                    self._show_progress(tick, time.monotonic() - started)
            except KeyboardInterrupt:
                self._clear_progress()
                on_cancel(token.cancel())

    def _report(self, fraction: float, message: str) -> None:
        self._stage = (fraction, message)

    def _show_progress(self, tick: int, elapsed: float) -> None:
        if self.progress is None:
            return
        percent = self.conn.session.scan_progress()
        line = f"{_SPINNER[tick % len(_SPINNER)]} {elapsed:5.1f} s"
        stage = self._stage
        if percent >= 0:
            done = int(_BAR * min(percent, 100.0) / 100)
            line += f"  scanning [{'#' * done}{'-' * (_BAR - done)}] {percent:3.0f}%"
        elif stage is not None:
            done = int(_BAR * min(stage[0], 1.0))
            line += f"  [{'#' * done}{'-' * (_BAR - done)}] {100 * stage[0]:3.0f}%  {stage[1][:40]}"
        else:
            line += "  planning and measuring"
        self.progress.write(f"\r{line}  (Ctrl-C cancels)\x1b[K")
        self._shown = True
        self.progress.flush()

    def _clear_progress(self) -> None:
        if self._shown and self.progress is not None:
            self.progress.write("\r\x1b[K")
            self.progress.flush()
        self._shown = False
