"""Python DB-API 2.0 (PEP 249): `connect()`, `Connection` and `Cursor`.

A connection opens an existing DuckDB database (read-only, so many analysts and
processes may connect at once) and a budget ledger beside it. Cursors run SQL: DP
answers on protected tables, ordinary SQL on public ones. Each result set is also
available as `cursor.result` with standard errors (`cursor.result.stderr`) and
confidence intervals (`cursor.result.ci(0.95)`), and as a pandas DataFrame
(`cursor.fetchdf()`) or an Arrow table (`cursor.fetch_arrow_table()`). The
module-level names PEP 249 asks for (type objects, constructors, exceptions) are
in `dpsql` itself.
"""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import duckdb

from dpsql import errors
from dpsql.backends import Backend, DuckDBBackend, make_backend
from dpsql.budget.units import Budget, checked
from dpsql.tables.catalog import Catalog
from dpsql.tables.columns import KEY
from dpsql.errors import Error, InterfaceError, NotSupportedError, OperationalError, ProgrammingError
from dpsql.handlers import workloads
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_accounting import ACCOUNTING_MODES
from dpsql.deployment.output_files import OutputFiles
from dpsql.deployment.profile import Profile
from dpsql.answers.result import Result
from dpsql.session import KEY_RELEASES_SHARE, BudgetStatus, Session
from dpsql.sql.column_names import postgres_names
from dpsql.sql.statements import OBJECTIVE_NAMES, BeginWorkload, split_statements
from dpsql.tables.validation import Validations
from dpsql.deployment.workspace import DataTables, Workspace
from mechanisms.arrays import ArrayModuleUnavailable

DEFAULT_EPSILON = 1.0
DEFAULT_DELTA = 1e-9


def _in_memory(database: str) -> bool:
    return database in ("", ":memory:") or database.startswith(":memory:")


def _state_path(database: str, state: str | None) -> str:
    if state is not None:
        return state
    if _in_memory(database):
        return ":memory:"
    return str(Path(database).with_suffix(Path(database).suffix + ".dpsql-state"))


def connect(
    database: str | os.PathLike = ":memory:",
    *,
    catalog: Catalog | dict | str | Path | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    query_epsilon: float | None = None,
    query_rho: float | None = None,
    state: str | None = None,
    seed: int | None = None,
    dialect: str = "duckdb",
    read_only: bool | None = None,
    user: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    backend: str | Backend = "duckdb",
    spark: Any = None,
    profile: str | Path | None = None,
    analyst: str | None = None,
    accounting: str | None = None,
    key_release_delta: float | None = None,
) -> "Connection":
    """Open a DP connection.

    An analyst connects with the data owner's deployment profile and their name:
    ``connect(profile="census.toml", analyst="alice")`` (see `dpsql.deployment.profile`); the
    profile fixes everything else but ``query_epsilon``/``query_rho`` and ``dialect``.

    The other arguments are the data owner's (and tests'). ``database`` is an existing
    DuckDB file (a missing one is an OperationalError) or ``":memory:"``; a file is opened
    read-only unless ``read_only=False`` (dpsql never writes it: analysts' own tables live
    in their workspace). The budget is ``epsilon`` with ``delta`` (zCDP accounting,
    discrete Gaussian noise; δ defaults to 1e-9), or ``rho`` directly, or ``epsilon``
    with ``delta=0`` for pure ε-DP (discrete Laplace noise). ``accounting`` says how a zCDP
    ledger's charges compose: ``"exact"`` (default: a statement may get discrete Laplace noise
    where it errs less, and pure-DP charges alone add up to the declared ε: two privacy filters,
    `mechanisms.privacy_filter`) or ``"zcdp"``
    (`dpsql.budget.ledger_accounting`). With none given, a new ledger gets ε=1, δ=1e-9 and an existing
    one keeps its stored budget. ``key_release_delta`` is the part of a new zCDP ledger's δ set apart, once
    and for all, for releases of keys nobody declared (default: half of δ when the catalog has a key column,
    else none; `dpsql.budget.ledger`). ``query_epsilon`` (default 0.1) or ``query_rho`` is what each
    query that needs new measurements spends. The ledger lives in ``state`` (default:
    ``<database>.dpsql-state`` beside a file database, in memory otherwise).
    ``seed`` makes the noise reproducible: for tests only (never through a profile).
    ``backend="spark"`` measures protected tables in Spark (``spark``: a
    SparkSession or a master URL; default: the configured one) instead of in
    the DuckDB database, which still holds the ledger and public tables; any
    object with a ``marginals`` method (a ``dpsql.backends.Backend``) may be given.
    """
    if profile is not None:
        given = {"database": database != ":memory:", "catalog": catalog is not None, "epsilon": epsilon is not None,
                 "delta": delta is not None, "rho": rho is not None, "state": state is not None,
                 "seed": seed is not None, "read_only": read_only is not None, "user": user is not None,
                 "con": con is not None, "backend": backend != "duckdb", "spark": spark is not None,
                 "accounting": accounting is not None, "key_release_delta": key_release_delta is not None}
        chosen = [name for name, was_given in given.items() if was_given]
        if chosen:
            raise ProgrammingError(f"a profile fixes {', '.join(chosen)}: connect with the profile and an analyst only")
        return _connect_profile(Profile.load(profile), analyst, query_epsilon, query_rho, dialect)
    if analyst is not None:
        raise ProgrammingError("analyst= names an analyst of a profile: give profile= too")
    if isinstance(database, os.PathLike):
        database = os.fspath(database)
    if not isinstance(database, str):
        raise ProgrammingError(f"database must be a path, got {type(database).__name__}")
    return _open(database, catalog=catalog, epsilon=epsilon, delta=delta, rho=rho, query_epsilon=query_epsilon,
                 query_rho=query_rho, state=state, seed=seed, dialect=dialect, read_only=read_only, user=user,
                 con=con, backend=backend, spark=spark, accounting=accounting, key_release_delta=key_release_delta)


def _connect_profile(profile: Profile, name: str | None, query_epsilon: float | None, query_rho: float | None,
                     dialect: str) -> "Connection":
    """An analyst's connection, everything but their per-query share and dialect from the owner's profile."""
    who = profile.analyst(name)
    profile.analyst_files().check_directory()
    if profile.log is not None:
        _log_to(profile.log)
    backend, spark = "duckdb", None
    if profile.data_engine == "spark":
        from dpsql.backends.spark import profile_session

        backend, spark = "spark", profile_session(profile.spark_master, profile.spark_tables)
    budget = profile.budget
    return _open(
        profile.database, catalog=profile.catalog, epsilon=budget.get("epsilon"), delta=budget.get("delta"),
        rho=budget.get("rho"), query_epsilon=query_epsilon if query_epsilon is not None or query_rho is not None
        else budget.get("query_epsilon"), query_rho=query_rho if query_rho is not None else budget.get("query_rho"),
        state=profile.ledger, seed=None, dialect=dialect, read_only=profile.read_only, user=who.name,
        engine=profile.engine, key_delta=budget.get("key_delta"), accounting=budget.get("accounting"),
        key_release_delta=budget.get("key_release_delta"),
        workspace=profile.workspace, allowance=(who.epsilon, who.rho),
        owner_files=profile.owner_files(), output_dir=profile.output_dir,
        confined=True, backend=backend, spark=spark,
    )


def _log_to(path: Path) -> None:
    """Send dpsql's log (failed scans and their causes) to the owner's file, once per file."""
    logger = logging.getLogger("dpsql")
    if not any(isinstance(h, logging.FileHandler) and Path(h.baseFilename) == path for h in logger.handlers):
        try:
            handler = logging.FileHandler(path, encoding="utf-8")
        except OSError as e:
            raise OperationalError(f"cannot open the profile's log {str(path)!r}: {e.strerror}") from None
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(min(logger.level or logging.INFO, logging.INFO))


def _open(
    database: str, *, catalog, epsilon, delta, rho, query_epsilon, query_rho, state, seed, dialect, read_only, user,
    con=None, backend: str | Backend = "duckdb", spark: Any = None, engine: dict | None = None,
    workspace: dict | None = None, allowance: tuple[float | None, float | None] = (None, None),
    owner_files: list = (), output_dir: Path | None = None, confined: bool = False, key_delta: float | None = None,
    accounting: str | None = None, key_release_delta: float | None = None,
) -> "Connection":
    for name, value in (("epsilon", epsilon), ("rho", rho), ("query_epsilon", query_epsilon), ("query_rho", query_rho),
                        ("delta", delta), ("delta", key_release_delta)):
        if value is not None:
            checked(name.removeprefix("query_"), value, name)
    if accounting is not None and accounting not in ACCOUNTING_MODES:
        raise ProgrammingError(f"accounting must be one of {', '.join(map(repr, ACCOUNTING_MODES))}, "
                               f"got {accounting!r}")
    unit, total = Budget.requested(epsilon, delta, rho, DEFAULT_DELTA)
    catalog = Catalog.load(catalog)
    measurer = make_backend(backend, spark)
    if con is None and not _in_memory(database) and not Path(database).exists():
        raise OperationalError(f"database file {database!r} does not exist (dpsql opens the data owner's database; "
                               "it never creates one)")
    if read_only is None:
        read_only = not _in_memory(database)
    try:
        data = con or duckdb.connect(database, read_only=read_only, config=dict(engine or {}))
    except duckdb.Error as e:
        raise OperationalError(f"cannot open database {database!r}: {e}") from None
    state_path = _state_path(database, state)
    releases_keys = key_delta is not None or any(
        c.kind == KEY for t in catalog.tables.values() for c in t.columns.values())
    ledger = _open_ledger(state_path, unit, total, user, key_release_delta,
                          unit.delta * KEY_RELEASES_SHARE if releases_keys else 0.0)
    if accounting is not None:
        ledger.accounting = accounting
    allowed_epsilon, allowed_rho = allowance
    if allowed_epsilon is not None or allowed_rho is not None:
        ledger.limit = ledger.unit.share(allowed_epsilon, allowed_rho)
    names = {t.name.lower(): t.name for t in catalog.tables.values()}
    # Three connections that never see analyst SQL: the scan's, and the one copying public tables
    # into the workspace; the analyst's SQL runs in the workspace, a database of its own.
    session = Session(
        Workspace(DataTables(data.cursor(), names), names, workspace), catalog, ledger,
        measurer or DuckDBBackend(data, _validations(data)), query_epsilon=query_epsilon, query_rho=query_rho,
        seed=seed, dialect=dialect, key_delta=key_delta, analyst=confined,
    )
    owned = [*_database_files(data), state_path, *([catalog.path] if catalog.path else []), *owner_files]
    return Connection(session, data if con is None else None, OutputFiles(owned, output_dir, confined))


def _validations(con: duckdb.DuckDBPyConnection) -> Validations | None:
    """The tables the owner validated in the data's database file (`dpsql.tables.validation`); None in memory."""
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return Validations.load(row[0]) if row and row[0] else None


def _database_files(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The files of the databases attached to the data's DuckDB instance."""
    return [path for (path,) in con.execute("SELECT path FROM duckdb_databases() WHERE path IS NOT NULL").fetchall()]


def _open_ledger(path: str, unit: Budget, total: float | None, user: str | None, events: float | None,
                 default_events: float) -> Ledger:
    """The ledger at `path`; a new one with `events` of δ set apart for key releases (else `default_events`)."""
    split = {"events": events, "default_events": default_events}
    try:
        return Ledger(path, unit.noise, total, unit.delta, who=user, **split)
    except ProgrammingError as e:
        if total is None and "needs a total budget" in str(e):
            return Ledger(path, unit.noise, unit.share(DEFAULT_EPSILON), unit.delta, who=user, **split)
        raise


class Connection:
    """A DB-API connection with a privacy budget (`budget`) and a session (`session`)."""

    # PEP 249's optional extension: the exceptions as attributes of the connection
    Warning = errors.Warning
    Error = errors.Error
    InterfaceError = errors.InterfaceError
    DatabaseError = errors.DatabaseError
    DataError = errors.DataError
    OperationalError = errors.OperationalError
    IntegrityError = errors.IntegrityError
    InternalError = errors.InternalError
    ProgrammingError = errors.ProgrammingError
    NotSupportedError = errors.NotSupportedError

    def __init__(self, session: Session, data: duckdb.DuckDBPyConnection | None = None,
                 output_files: OutputFiles | None = None):
        self.session = session
        self._data = data  # the data's database, when this connection opened it
        self.output_files = output_files or OutputFiles()  # where its surfaces may write files
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise InterfaceError("the connection is closed")

    @property
    def budget(self) -> BudgetStatus:
        """Total, spent and remaining budget, each with `.rho`, `.epsilon` and `.delta`."""
        self._check()
        return self.session.budget()

    @property
    def ledger(self):
        return self.session.ledger

    def cursor(self) -> "Cursor":
        self._check()
        return Cursor(self)

    def execute(self, sql: str, parameters: Sequence[Any] | dict | None = None) -> "Cursor":
        """Shortcut: a new cursor with `sql` executed."""
        return self.cursor().execute(sql, parameters)

    def workload(
        self,
        queries: Sequence[str],
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        max_rmse: float | None = None,
        objective: str | None = None,
        weights: Sequence[float] | None = None,
        explain: bool = False,
    ) -> list[Result]:
        """Plan and measure `queries` jointly (like BEGIN WORKLOAD ... END WORKLOAD).

        Size it by `epsilon`/`rho`, or by `max_rmse` (the least budget giving every
        query that RMSE, in units of its sensitivity); `objective` is "total" or "max";
        `weights` weigh each query's errors. With `explain`, returns the plan only.
        """
        self._check()
        if objective is not None and objective not in OBJECTIVE_NAMES:
            raise ProgrammingError(f"objective must be one of {', '.join(OBJECTIVE_NAMES)}")
        begin = BeginWorkload(explain, epsilon, delta, rho, max_rmse, objective)
        try:
            return workloads.run_workload(self.session, list(queries), begin, weights)
        except ArrayModuleUnavailable as e:  # DPSQL_ARRAY_MODULE asks for an array module this machine lacks
            raise NotSupportedError(str(e)) from None

    def dropped_rows(
        self, table: str, *, epsilon: float | None = None, rho: float | None = None, cap: int | None = None
    ) -> Result:
        """A charged DP count of the rows bounding to a table's privacy unit drops
        (each unit's count capped at `cap`, default its bound: see `Session.dropped_rows`)."""
        self._check()
        return self.session.dropped_rows(table, epsilon, rho, cap)

    def commit(self) -> None:
        """Charges commit as they happen; public changes are auto-committed by DuckDB."""
        self._check()

    def rollback(self) -> None:
        """Spent budget cannot be rolled back; this only checks the connection is open."""
        self._check()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.session.close()
        if self._data is not None:
            self._data.close()

    def __enter__(self) -> "Connection":
        """`with dpsql.connect(...) as conn:` closes the connection at the end (as psycopg does)."""
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Cursor:
    """A DB-API cursor. `result` is the current result set, with standard errors."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.arraysize = 1
        self._results: list[Result] = []
        self._statements: list[str] = []  # the statement of each result, where they pair up one to one
        self._index = 0
        self._pos = 0
        self._closed = False

    # --- state ----------------------------------------------------------------
    def _check(self) -> None:
        if self._closed:
            raise InterfaceError("the cursor is closed")
        self.connection._check()

    @property
    def result(self) -> Result | None:
        """The current result set, with standard errors; None after a statement that returns no rows."""
        if self._index < len(self._results) and self._results[self._index].columns:
            return self._results[self._index]
        return None

    @property
    def description(self) -> list[tuple] | None:
        """A (name, type_code, None, None, None, None, None) tuple per column of the result set
        (None without one); a type code compares equal to its kind: `dpsql.STRING`, `dpsql.NUMBER`... Names are
        PostgreSQL's (`count` for COUNT(*): `dpsql.sql.column_names`)."""
        r = self.result
        if r is None:
            return None
        names = r.columns
        if self._index < len(self._statements):
            names = postgres_names(self._statements[self._index], r.columns, r.dp, self.connection.session.dialect)
        return [(name, t, None, None, None, None, None) for name, t in zip(names, _column_types(r))]

    @property
    def rowcount(self) -> int:
        """The rows of the result set, or the rows the statement changed; -1 where not known."""
        if self._index >= len(self._results):
            return -1
        r = self._results[self._index]
        return len(r.rows) if r.columns else r.rowcount

    # --- execution -----------------------------------------------------------
    def execute(self, operation: str, parameters: Sequence[Any] | dict | None = None) -> "Cursor":
        """Run a statement (`?` parameters), or a script of statements: one result set each (`nextset`)."""
        self._check()
        if not isinstance(operation, str):
            raise ProgrammingError("the operation must be a SQL string")
        try:
            results = self.connection.session.execute(operation, parameters)
        except Error as e:  # results of earlier statements of a script stay fetchable
            self._hold(getattr(e, "partial_results", []))
            raise
        except duckdb.Error as e:
            self._hold([])
            raise OperationalError(str(e).splitlines()[0]) from None
        self._hold(results)
        statements = split_statements(operation)
        self._statements = statements if len(statements) == len(results) else []
        return self

    def executemany(self, operation: str, seq_of_parameters: Iterable[Sequence[Any] | dict]) -> "Cursor":
        """Run `operation` once per set of parameters; `rowcount` is then the rows changed in all (-1: unknown)."""
        self._check()
        self._hold([])
        total = 0
        for params in seq_of_parameters:
            self.execute(operation, params)
            changed = self._results[-1].rowcount if self._results and not self._results[-1].columns else -1
            total = total + changed if total >= 0 and changed >= 0 else -1
        if self._results and not self._results[-1].columns:
            self._results[-1].rowcount = total
        return self

    def _hold(self, results: list[Result]) -> None:
        self._results, self._index, self._pos, self._statements = results, 0, 0, []

    # --- fetching --------------------------------------------------------------
    def _rows(self) -> list[tuple]:
        self._check()
        r = self.result
        if r is None:
            raise ProgrammingError("no result set to fetch: the statement returned no rows (or none ran)")
        return r.rows

    def fetchone(self):
        rows = self._rows()
        if self._pos >= len(rows):
            return None
        self._pos += 1
        return rows[self._pos - 1]

    def fetchmany(self, size: int | None = None) -> list[tuple]:
        rows = self._rows()
        size = self.arraysize if size is None else size
        out = rows[self._pos : self._pos + size]
        self._pos += len(out)
        return out

    def fetchall(self) -> list[tuple]:
        rows = self._rows()
        out = rows[self._pos :]
        self._pos = len(rows)
        return out

    def fetch_arrow_table(self):
        """The rest of the result set as a pyarrow Table (the column names and values, as `fetchall`)."""
        pa = _optional_module("pyarrow", "fetch_arrow_table")
        rows = self.fetchall()
        result = self.result
        values = list(zip(*rows)) if rows else [()] * len(result.columns)
        arrays = [pa.array(column, type=_arrow_type(pa, t)) for column, t in zip(values, _column_types(result))]
        return pa.Table.from_arrays(arrays, names=result.columns)

    def fetchdf(self):
        """The rest of the result set as a pandas DataFrame (the column names and values, as `fetchall`)."""
        _optional_module("pandas", "fetchdf")
        return self.fetch_arrow_table().to_pandas()

    def nextset(self) -> bool | None:
        """Advance to the next result set (one per query of a workload)."""
        self._check()
        if self._index + 1 < len(self._results):
            self._index += 1
            self._pos = 0
            return True
        return None

    def setinputsizes(self, sizes) -> None:
        pass

    def setoutputsize(self, size, column=None) -> None:
        pass

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> "Cursor":
        """`with connection.cursor() as cur:` closes the cursor at the end (as sqlite3 and psycopg do)."""
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):
        return self

    def __next__(self):
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row


def _column_types(result: Result) -> list[str | None]:
    """The DuckDB type name of each column of a result (None where it has none)."""
    return [*result.types, *[None] * (len(result.columns) - len(result.types))]


def _arrow_type(pa, duckdb_type: str | None):
    """The Arrow type of a scalar DuckDB type, or None (Arrow infers it from the values)."""
    return {
        "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INTEGER": pa.int32(),
        "BIGINT": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "VARCHAR": pa.string(),
        "BLOB": pa.binary(), "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us"),
    }.get(duckdb_type or "")


def _optional_module(name: str, method: str):
    """Import an optional dependency of a cursor method, or say how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(f"Cursor.{method}() needs {name}: pip install {name}") from None
