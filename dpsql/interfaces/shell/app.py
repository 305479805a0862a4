"""`dpsql shell`: an interactive SQL shell with DP answers, error bars and the budget in view.

Interactive on a terminal (line editing, history, completion, highlighting,
meta commands; see `.help`); otherwise it runs the statements of standard
input or of `-c`, printing in the chosen mode and exiting non-zero at the
first error. Errors are one line and never charge; Ctrl-C cancels a running
statement without charging it. On a terminal, results taller or wider than it
go through a pager (`.pager`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Iterable, TextIO

import duckdb

import dpsql
from dpsql.tables.columns import quote_identifier
from dpsql.interfaces.dbapi import Connection
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, write_people_database
from dpsql.errors import Error, ProgrammingError
from dpsql.interfaces.formatting import footer, render
from dpsql.answers.result import Result
from dpsql.interfaces.shell.commands import command_arguments, command_summaries, run_command
from dpsql.interfaces.shell.input import SqlCompleter, SqlLexer, is_complete, is_meta, make_prompt_session, protected_names
from dpsql.interfaces.shell.runner import Cancelled, StatementRunner
from dpsql.interfaces.shell.schema import PROTECTED, TableInfo, describe_tables
from dpsql.sql.statements import BeginWorkload, EndWorkload, Sql, classify, split_statements

DEMO_ROWS = 1_000_000
INTERACTIVE_MAX_ROWS = 100
EXIT_INTERRUPTED = 130
DEFAULT_PAGER = "less -S"  # wide tables scroll sideways instead of wrapping
_IMPORTED = "__dpsql_import"  # the name a CSV file's rows are registered under in the workspace


def demo_paths(rows: int = DEMO_ROWS) -> tuple[Path, Path]:
    """Where the demo database and its catalog live (or will): in the user's cache directory.

    `$XDG_CACHE_HOME/dpsql` (default `~/.cache/dpsql`); the file name holds the
    row count and the DuckDB version (the generator depends on DuckDB's hash).
    """
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpsql"
    name = f"demo-people-{rows}-duckdb{duckdb.__version__}"
    return base / f"{name}.duckdb", base / f"{name}.toml"


def demo_database(rows: int = DEMO_ROWS) -> tuple[str, Path]:
    """The demo database and its catalog (see `demo_paths`), generated once."""
    database, catalog = demo_paths(rows)
    database.parent.mkdir(parents=True, exist_ok=True)
    if not database.exists():
        write_people_database(database, rows)
    if not catalog.exists() or catalog.read_text() != PEOPLE_CATALOG_TOML:
        catalog.write_text(PEOPLE_CATALOG_TOML)
    return str(database), catalog


def page(text: str, stream: TextIO) -> bool:
    """Show `text` through `$PAGER` (default `less -S`) on the terminal of `stream`; False if no pager ran."""
    command = os.environ.get("PAGER") or (DEFAULT_PAGER if shutil.which("less") else None)
    if command is None:
        return False
    stream.flush()
    try:
        pager = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, text=True,
                                 encoding=getattr(stream, "encoding", None) or "utf-8", errors="backslashreplace")
    except OSError:
        return False
    try:  # as pydoc does: the pager owns the terminal until it quits
        with pager.stdin as pipe:
            try:
                pipe.write(text + "\n")
            except KeyboardInterrupt:
                pass
    except OSError:  # the pager quit before reading everything
        pass
    while True:
        try:
            return pager.wait() != 127  # 127: the shell found no such command
        except KeyboardInterrupt:  # the pager handles Ctrl-C itself
            pass


class _Stopped(Exception):
    """A `.read` file stopped at an error, which was reported."""


class Shell:
    """Runs meta commands and SQL for one connection and prints the results."""

    def __init__(self, conn: Connection, *, mode: str = "table", out: TextIO | None = None,
                 err: TextIO | None = None, interactive: bool = False):
        self.conn = conn
        self.mode = mode
        self.err = err or sys.stderr
        self.timer = False
        self.max_rows = INTERACTIVE_MAX_ROWS if interactive else 0
        self.pager = interactive  # results that do not fit the terminal go through a pager
        self.done = False
        self.workload: list[str] | None = None  # queries of an open BEGIN WORKLOAD
        self.runner = StatementRunner(conn, progress=self.err if interactive else None)
        self._stdout = out or sys.stdout
        self._file: TextIO | None = None
        self._once = False  # the file takes the next result only (.once)
        self._tables: list[TableInfo] | None = None
        self._reading: set[tuple[int, int]] = set()  # (device, inode) of the files being run by .read
        self._composition_told = False

    # --- output -----------------------------------------------------------------------
    @property
    def out(self) -> TextIO:
        return self._file or self._stdout

    def note(self, text: str) -> None:
        """A message for the person at the terminal (never mixed into CSV/JSON data)."""
        self._write(self._info_stream(), text)

    def error(self, text: str) -> None:
        tty = self.err.isatty()
        self._write(self.err, ("\x1b[31merror:\x1b[0m " if tty else "error: ") + text)

    def _info_stream(self) -> TextIO:
        return self.out if self.mode in ("table", "markdown") else self.err

    @staticmethod
    def _write(stream: TextIO, text: str) -> None:
        if text:
            stream.write(text + "\n")
            stream.flush()

    def redirect(self, path: str | None, overwrite: bool = False, once: bool = False) -> None:
        """Send results to a file (`None`: back to standard output), never onto the owner's files
        and never replacing a file without `overwrite` (see `dpsql.deployment.output_files`); with `once`,
        only the next result goes there."""
        self._close_file()
        if path is not None:
            self._file = self.conn.output_files.open(path, overwrite)
            self._once = once

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._once = False

    def show_listing(self, result: Result) -> None:
        """A meta command's listing, in the current mode."""
        self._emit(render(result, self.mode, self.max_rows))

    def _show(self, result: Result, with_charge: bool = True) -> None:
        self._emit(render(result, self.mode, self.max_rows))
        self.note(footer(result, with_charge))
        if with_charge and result.charged:
            self.note_composition_once()
        if self._once:
            self._close_file()

    def _emit(self, text: str) -> None:
        """Result text: through the pager if it is on and the text does not fit the terminal it goes to."""
        if self.pager and self._file is None and self._stdout.isatty() and not _fits(text):
            if page(text, self._stdout):
                return
        self._write(self.out, text)

    def composition_note(self) -> str:
        """Why ε figures do not add up, on a zCDP ledger ("" on a pure ε-DP one, where they do)."""
        delta = self.conn.session.budget_unit.delta
        if not delta:
            return ""
        return f"ε figures do not add up: charges compose in ρ (zCDP), and each ε is its ρ converted at δ={delta:g}"

    def note_composition_once(self) -> None:
        """After the session's first charge: the composition note."""
        if not self._composition_told:
            self._composition_told = True
            self.note(self.composition_note())

    # --- tables (for .tables, .schema, completion) ---------------------------------------
    def tables(self) -> list[TableInfo]:
        if self._tables is None:
            self._tables = describe_tables(self.conn)
        return self._tables

    # --- running input ------------------------------------------------------------------
    def handle(self, text: str) -> bool:
        """Run one complete input (a meta command, or SQL statements); False on error or cancel."""
        try:
            if is_meta(text):
                run_command(self, text)
            elif text.strip().lower() in ("quit", "exit"):
                self.done = True
            else:
                for statement in split_statements(text):
                    self.run_sql(statement)
            return True
        except _Stopped:
            pass
        except Cancelled as e:
            self.note(str(e))
        except Error as e:
            self.error(str(e))
        except duckdb.Error as e:
            self.error(str(e).splitlines()[0])
        except Exception as e:  # a bug: still one line, never a traceback
            self.error(f"internal error ({type(e).__name__}: {e}); please report it")
        return False

    def run_sql(self, sql: str) -> None:
        """Run one statement and print its results, charge and timing."""
        kind = classify(sql)
        queued = self.workload
        if isinstance(kind, EndWorkload):
            self.workload = None  # the session closes the workload whether or not it then runs
        started = time.perf_counter()
        results = self.runner.run(sql, self._on_cancel)
        elapsed = time.perf_counter() - started
        self._tables = None  # DDL may have changed the public tables
        if isinstance(kind, BeginWorkload):
            self.workload = []
            self.note("workload begun: queries are queued until END WORKLOAD; plans and runs them together")
        elif isinstance(kind, EndWorkload):
            self._show_workload(queued or [], results)
        elif self.workload is not None and isinstance(kind, Sql) and not results:
            self.workload.append(sql)
            self.note(f"queued as q{len(self.workload)}")
        else:
            for result in results:
                self._show(result)
        if self.timer:
            self.note(f"Run Time: {elapsed:.3f} s")

    def _show_workload(self, queries: list[str], results: list[Result]) -> None:
        if len(results) != len(queries):  # EXPLAIN BEGIN WORKLOAD: one plan
            for result in results:
                self._show(result)
            return
        for i, (sql, result) in enumerate(zip(queries, results), start=1):
            self.note(f"-- q{i}: {' '.join(sql.split())}")
            self._show(result, with_charge=False)
        if results:
            self.note(f"workload: {results[0].charge_text}")
            if results[0].charged:
                self.note_composition_once()

    def _on_cancel(self, will_not_charge: bool) -> None:
        if will_not_charge:
            self._write(self.err, "cancelling…")
        else:
            self._write(self.err, "too late to cancel: the charge is being recorded; the answer follows")

    def run_lines(self, lines: Iterable[str]) -> int:
        """Non-interactive: run a script line by line; stop at the first error (exit status 1)."""
        buffer = ""
        for line in lines:
            if not buffer and is_meta(line):
                chunk = line
            else:
                buffer += line
                if not is_complete(buffer):
                    continue
                chunk, buffer = buffer, ""
            if chunk.strip() and not self.handle(chunk):
                return 1
            if self.done:
                return 0
        if buffer.strip() and not self.handle(buffer):
            return 1
        return 0

    def run_file(self, path: str) -> None:
        """`.read`: run a file's statements and meta commands as if typed; stop at its first error."""
        with self.conn.output_files.open_read(path) as file:
            found = os.fstat(file.fileno())
            data = file.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ProgrammingError(f"{path!r} is not UTF-8 text") from None
        key = (found.st_dev, found.st_ino)
        if key in self._reading:
            raise ProgrammingError(f"{path!r} is already being read (it reads itself)")
        self._reading.add(key)
        try:
            if self.run_lines(text.splitlines(keepends=True)):
                raise _Stopped
        finally:
            self._reading.discard(key)

    def import_csv(self, path: str, table: str) -> int:
        """`.import`: load a CSV file (first line: column names) into the workspace's public `table`,
        created with the file's columns or, if it exists, appended to by column name. Returns the rows."""
        import pyarrow.csv  # here: slow to load, and most sessions never import

        workspace = self.conn.session.workspace
        if not table.isidentifier():
            raise ProgrammingError(f"{table!r} is not a plain table name (letters, digits and _)")
        if table.lower() in workspace.protected:
            raise ProgrammingError(f"{table!r} is a protected table; .import loads public tables of your workspace")
        with self.conn.output_files.open_read(path) as file:
            try:
                data = pyarrow.csv.read_csv(file)
            except pyarrow.ArrowException as e:
                raise ProgrammingError(f"cannot import {path!r}: {str(e).splitlines()[0]}") from None
        columns = ", ".join(quote_identifier(c) for c in data.column_names)
        con = workspace.prepare(workspace.check(f"SELECT * FROM {quote_identifier(table)}"))  # an owner's copy too
        exists = con.execute("SELECT 1 FROM duckdb_tables() WHERE lower(table_name) = lower(?) "
                             "AND schema_name = current_schema()", [table]).fetchall()
        sql = (f"INSERT INTO {quote_identifier(table)} ({columns}) SELECT {columns} FROM {_IMPORTED}" if exists
               else f"CREATE TABLE {quote_identifier(table)} AS SELECT {columns} FROM {_IMPORTED}")
        workspace.check(sql)
        con.register(_IMPORTED, data)
        try:
            con.execute(sql)
        finally:
            con.unregister(_IMPORTED)
        self._tables = None
        return data.num_rows

    def close(self) -> None:
        self.redirect(None)
        self.conn.close()

    # --- interactive ----------------------------------------------------------------------
    def banner(self, database: str) -> str:
        protected = [t.name for t in self.tables() if t.kind == PROTECTED]
        lines = [f"dpsql {dpsql.__version__} shell on {database}"]
        if protected:
            lines.append(f"protected tables (DP answers only): {', '.join(protected)}")
        else:
            lines.append("no catalog: no table is protected, every table is public (plain DuckDB SQL)")
        lines.append(f"budget: {self._budget_line()}")
        lines.append("End SQL with ';'. .help lists commands, Tab completes, Ctrl-D quits.")
        return "\n".join(lines)

    def _budget_line(self) -> str:
        session = self.conn.session
        status = session.budget()
        total, remaining = status.total, status.remaining
        zcdp = f", δ={total.delta:g} (ρ={remaining.rho:.4g} left of ρ={total.rho:.4g})" if total.delta else ""
        return (f"ε={remaining.epsilon:.4g} left of ε={total.epsilon:.4g}{zcdp}; "
                f"next new query spends ε={session.amount(session.query_share).epsilon:.4g}")

    def _toolbar(self) -> str:
        target = f" → {self._file.name}" if self._file else ""
        return f" {self._budget_line()} · mode {self.mode}{target} · .help "

    def interact(self, database: str) -> int:
        """The read-eval-print loop on a terminal."""
        lexer = SqlLexer(lambda: protected_names(self.tables()))
        completer = SqlCompleter(self.tables, command_summaries, lambda name: command_arguments(name, self.tables))
        prompt = make_prompt_session(lexer, completer)
        self.note(self.banner(database))
        status = 0
        while not self.done:
            message = "dpsql> " if self.workload is None else f"workload({len(self.workload)})> "
            try:
                text = prompt.prompt([("class:prompt", message)], bottom_toolbar=self._toolbar())
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            if not text.strip():
                continue
            try:
                status = 0 if self.handle(text) else 1
            except KeyboardInterrupt:  # between statements, e.g. while printing
                self._write(self.err, "interrupted")
        return status


def _fits(text: str) -> bool:
    """Whether `text` fits the terminal, with room for the footer and the prompt."""
    size = shutil.get_terminal_size()
    lines = text.splitlines()
    return len(lines) <= size.lines - 3 and max(map(len, lines), default=0) <= size.columns


def open_connection(database: str | None, catalog: str | None, epsilon: float | None, delta: float | None,
                    query_epsilon: float | None, state: str | None, spark: str | None = None,
                    profile: str | None = None, analyst: str | None = None) -> tuple[Connection, str]:
    """Connect with the owner's `profile` as `analyst`, or to `database` (default: the demo database);
    returns the connection and a label."""
    if profile is not None:
        chosen = [flag for flag, value in (("DATABASE", database), ("--catalog", catalog), ("--epsilon", epsilon),
                                           ("--delta", delta), ("--state", state), ("--spark", spark)) if value]
        if chosen:
            raise ProgrammingError(f"the profile fixes {', '.join(chosen)}: give --profile and --analyst only")
        conn = dpsql.connect(profile=profile, analyst=analyst, query_epsilon=query_epsilon)
        return conn, f"{Path(profile).stem} (analyst {analyst})"
    if analyst is not None:
        raise ProgrammingError("--analyst names an analyst of a profile: give --profile too")
    if database is None:
        database, demo_catalog = demo_database(DEMO_ROWS)
        catalog = catalog or str(demo_catalog)
        label = f"the demo database ({DEMO_ROWS:,} generated people; {database})"
    else:
        if database != ":memory:" and not Path(database).exists():
            raise ProgrammingError(f"database file {database!r} does not exist")
        label = database
    measure = {} if spark is None else {"backend": "spark", "spark": None if spark == "default" else spark}
    conn = dpsql.connect(database, catalog=catalog, epsilon=epsilon, delta=delta,
                         query_epsilon=query_epsilon, state=state, **measure)
    return conn, label


def main(database: str | None = None, *, catalog: str | None = None, epsilon: float | None = None,
         delta: float | None = None, query_epsilon: float | None = None, state: str | None = None,
         mode: str = "table", command: str | None = None, spark: str | None = None, profile: str | None = None,
         analyst: str | None = None) -> int:
    """Run the shell: interactive on a terminal, else `command` or standard input. Returns the exit status."""
    try:
        conn, label = open_connection(database, catalog, epsilon, delta, query_epsilon, state, spark, profile,
                                      analyst)
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    interactive = command is None and sys.stdin.isatty() and sys.stdout.isatty()
    shell = Shell(conn, mode=mode, interactive=interactive)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the planner's numerical noise is not for the analyst
            if command is not None:
                return 0 if shell.handle(command) else 1
            if interactive:
                return shell.interact(label)
            return shell.run_lines(sys.stdin)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        shell.close()
