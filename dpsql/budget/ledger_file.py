"""The ledger's state file: one DuckDB database, opened only under an exclusive cross-process lock.

Every operation holds an exclusive lock on ``<state>.lock`` and opens the database only while
holding it, so a check-and-append is atomic across processes. Opening the database costs
milliseconds, so a statement holds it (`StateFile.holding`): its operations share one connection,
opened at the first under the lock and closed, the lock released, when the statement ends.
`version` identifies the state as the last writer left it (the files' identity, size and times).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import ExitStack, contextmanager
from typing import Iterator

import duckdb

from dpsql.errors import OperationalError
from dpsql.budget.ledger_errors import ledger_error


class StateFile:
    """The state database at `path` (":memory:": one in-memory connection, no lock), for `Ledger`."""

    def _open_state(self, path: str) -> None:
        self.path = path
        self.opened_version: tuple | None = None  # the version when this ledger's last operation began
        self.written_version: tuple | None = None  # ... and when it ended
        self._holds = 0  # nested `holding` blocks
        self.lease = 0  # how many times this object took the lock: one number per hold (in memory: 0)
        self._held: tuple[ExitStack, duckdb.DuckDBPyConnection] | None = None  # the held connection
        self._memory = duckdb.connect(":memory:") if path == ":memory:" else None
        self._instance: duckdb.DuckDBPyConnection | None = None  # where the file is attached: see `_attached`

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Hold the state for the block (one statement): its operations share one connection, opened at
        the first under the exclusive lock and kept, the lock held, until the block ends (other processes'
        operations wait meanwhile). Nested holds are one. Nothing changes for atomicity or durability: a
        charge is committed (and checkpointed) before `charge_all` returns, as without a hold."""
        if self._memory is not None:
            yield
            return
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            if not self._holds:
                self._let_go()

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """Within a hold, let the state go for the block (a long release, planning that may run for
        minutes), so other processes need not wait for it; it is taken again at the next operation."""
        holds, self._holds = self._holds, 0
        try:
            self._let_go()
            yield
        finally:
            self._holds = holds

    def _let_go(self) -> None:
        """Close the held connection and release the lock (if held)."""
        held, self._held = self._held, None
        if held is not None:
            held[0].close()

    @contextmanager
    def _open(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The state database, held exclusively (across processes) for the block's duration, or for the
        `holding` block's."""
        if self._memory is not None:
            yield self._memory
            return
        if not self._holds:
            with self._locked() as con:
                yield con
            return
        if self._held is None:
            stack = ExitStack()
            self._held = stack, stack.enter_context(self._locked())
        self.opened_version = self.version()  # under the lock: as the last operation left it
        try:
            yield self._held[1]
        except duckdb.Error as e:  # the connection may be unusable (a failed commit): open again next time
            try:
                self._let_go()
            except OperationalError:
                pass
            raise ledger_error(self.path, e) from None
        finally:
            self.written_version = self.version()

    @contextmanager
    def _locked(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the state database, the lock held until the block ends."""
        try:
            lock = open(self.path + ".lock", "a+")
        except OSError as e:
            raise OperationalError(f"cannot open the ledger lock {self.path + '.lock'!r}: {e}") from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.lease += 1
            self.opened_version = self.version()  # under the lock: the state as the last writer left it
            try:
                con = self._attached()
                try:
                    yield con
                finally:
                    self._detach(con)
            except duckdb.Error as e:  # a full disk, a corrupt file: said as such (`ledger_error`)
                raise ledger_error(self.path, e) from None
            finally:
                self.written_version = self.version()  # still under the lock: exactly the state just left

    def version(self) -> tuple | None:
        """What changes whenever any process writes the state (its file and write-ahead log); None in
        memory (only this connection writes it). `opened_version` and `written_version` are the versions
        when this ledger's last operation began and ended (both under the lock): a version seen
        earlier equal to `opened_version` means nobody else wrote in between."""
        if self._memory is not None:
            return None
        signature = []
        for path in (self.path, self.path + ".wal"):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                signature.append(None)
                continue
            signature.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        return tuple(signature)

    def _attached(self) -> duckdb.DuckDBPyConnection:
        """A cursor with the state database attached (and in use), in a private in-memory DuckDB instance
        made once: attaching a file costs a few milliseconds where starting an instance costs tens. Detached
        (`_detach`), the file is closed and checkpointed as a closed connection's is."""
        if self._instance is None:
            self._instance = duckdb.connect(":memory:", config={"autoload_known_extensions": False,
                                                                "autoinstall_known_extensions": False})
        con = self._instance.cursor()
        try:
            con.execute(f"ATTACH '{self.path.replace(chr(39), chr(39) * 2)}' AS state")
            con.execute("USE state")
        except BaseException:
            self._drop_instance()
            raise
        return con

    def _detach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Close the state database; if DuckDB cannot (a failed commit invalidated it), close the whole
        instance, which releases the file all the same (and rolls back whatever was not committed)."""
        try:
            con.execute("USE memory")
            con.execute("DETACH state")
            con.close()
        except BaseException:
            self._drop_instance()
            raise

    def _drop_instance(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            try:
                instance.close()
            except duckdb.Error:
                pass

    def close(self) -> None:
        self._let_go()
        self._drop_instance()
        if self._memory is not None:
            self._memory.close()


_ROWS_PER_INSERT = 64  # rows per INSERT statement (each row one parameter list)


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the state holds table `name` (ledgers written before it existed do not)."""
    return bool(con.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = ?", [name])
                .fetchone()[0])


def events_column(con: duckdb.DuckDBPyConnection) -> str:
    """The budget's `events` column, or NULL in a ledger written before it existed (opened to read only)."""
    return "events" if con.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_name = "
                                   "'dpsql_budget' AND column_name = 'events'").fetchone()[0] else "NULL"


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple]) -> None:
    """Insert `rows` (each a full row of `table`, in order) in INSERT statements of many rows each: one
    statement per row costs a DuckDB round trip (about a millisecond) each."""
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start:start + _ROWS_PER_INSERT]
        row = "(" + ", ".join("?" * len(chunk[0])) + ")"
        con.execute(f"INSERT INTO {table} VALUES " + ", ".join([row] * len(chunk)), [v for r in chunk for v in r])
