"""Python DB-API 2.0 (PEP 249): `connect()`, `Connection` and `Cursor`.

A connection opens a DuckDB database and a budget ledger beside it. Cursors
run SQL: DP answers on protected tables, ordinary SQL on public ones. Each
result set is also available as `cursor.result` with standard errors
(`cursor.result.stderr`) and confidence intervals (`cursor.result.ci(0.95)`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import duckdb

from dpsql.backend import Backend, make_backend
from dpsql.catalog import Catalog
from dpsql.errors import Error, InterfaceError, OperationalError, ProgrammingError
from dpsql.ledger import Ledger
from dpsql.result import Result
from dpsql.session import BudgetStatus, Session
from dpsql.statements import OBJECTIVE_NAMES, BeginWorkload
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.measurement import GAUSSIAN, LAPLACE

DEFAULT_EPSILON = 1.0
DEFAULT_DELTA = 1e-9


def _state_path(database: str, state: str | None) -> str:
    if state is not None:
        return state
    if database in ("", ":memory:") or database.startswith(":memory:"):
        return ":memory:"
    return str(Path(database).with_suffix(Path(database).suffix + ".dpsql-state"))


def connect(
    database: str = ":memory:",
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
    read_only: bool = False,
    user: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    backend: str | Backend = "duckdb",
    spark: Any = None,
) -> "Connection":
    """Open a DP connection.

    The budget is ``epsilon`` with ``delta`` (zCDP accounting, discrete
    Gaussian noise; δ defaults to 1e-9), or ``rho`` directly, or ``epsilon``
    with ``delta=0`` for pure ε-DP (discrete Laplace noise). With none given, a
    new ledger gets ε=1, δ=1e-9 and an existing one keeps its stored budget.
    ``query_epsilon`` (default 0.1) or ``query_rho`` is what each query that
    needs new measurements spends. The ledger lives in ``state`` (default:
    ``<database>.dpsql-state`` beside a file database, in memory otherwise).
    ``seed`` makes the noise reproducible: for tests only.
    ``backend="spark"`` measures protected tables in Spark (``spark``: a
    SparkSession or a master URL; default: the configured one) instead of in
    the DuckDB database, which still holds the ledger and public tables; any
    object with a ``marginals`` method (a ``dpsql.backend.Backend``) may be given.
    """
    if rho is not None and epsilon is not None:
        raise ProgrammingError("give either epsilon (with delta) or rho, not both")
    for name, value in (("epsilon", epsilon), ("rho", rho), ("query_epsilon", query_epsilon), ("query_rho", query_rho)):
        if value is not None and not (isinstance(value, (int, float)) and 0 < value < float("inf")):
            raise ProgrammingError(f"{name} must be a positive number, got {value!r}")
    if delta is not None and not (0 <= delta < 1):
        raise ProgrammingError(f"delta must be in [0, 1), got {delta!r}")
    noise = LAPLACE if (delta == 0 and rho is None) else GAUSSIAN
    delta = 0.0 if noise == LAPLACE else (DEFAULT_DELTA if delta is None else float(delta))
    if rho is not None:
        total: float | None = float(rho)
    elif epsilon is not None:
        total = float(epsilon) if noise == LAPLACE else epsilon_delta_to_zcdp(float(epsilon), delta)
    else:
        total = None
    catalog = Catalog.load(catalog)
    measurer = make_backend(backend, spark)
    try:
        data = con or duckdb.connect(database, read_only=read_only)
    except duckdb.Error as e:
        raise OperationalError(f"cannot open database {database!r}: {e}") from None
    state_path = _state_path(database, state)
    ledger = _open_ledger(state_path, noise, total, delta, user)
    session = Session(
        data, catalog, ledger, query_epsilon=query_epsilon, query_rho=query_rho, seed=seed, dialect=dialect,
        backend=measurer,
    )
    return Connection(session, owns_connection=con is None)


def _open_ledger(path: str, noise: str, total: float | None, delta: float, user: str | None) -> Ledger:
    try:
        return Ledger(path, noise, total, delta, who=user)
    except ProgrammingError as e:
        if total is None and "needs a total budget" in str(e):
            default = epsilon_delta_to_zcdp(DEFAULT_EPSILON, delta) if noise == GAUSSIAN else DEFAULT_EPSILON
            return Ledger(path, noise, default, delta, who=user)
        raise


class Connection:
    """A DB-API connection with a privacy budget (`budget`) and a session (`session`)."""

    def __init__(self, session: Session, owns_connection: bool = True):
        self.session = session
        self._owns = owns_connection
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
        return self.session.run_workload(list(queries), begin, weights)

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
        self.session.ledger.close()
        if self._owns:
            self.session.con.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Cursor:
    """A DB-API cursor. `result` is the current result set, with standard errors."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.arraysize = 1
        self._results: list[Result] = []
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
        return self._results[self._index] if self._index < len(self._results) else None

    @property
    def description(self):
        r = self.result
        if r is None or not r.columns:
            return None
        types = r.types or [None] * len(r.columns)
        return [(name, t, None, None, None, None, None) for name, t in zip(r.columns, types)]

    @property
    def rowcount(self) -> int:
        r = self.result
        return len(r.rows) if r is not None and r.columns else -1

    # --- execution -----------------------------------------------------------
    def execute(self, operation: str, parameters: Sequence[Any] | dict | None = None) -> "Cursor":
        self._check()
        if not isinstance(operation, str):
            raise ProgrammingError("the operation must be a SQL string")
        try:
            results = self.connection.session.execute(operation, parameters)
        except Error as e:  # results of earlier statements of a script stay fetchable
            self._results, self._index, self._pos = getattr(e, "partial_results", []), 0, 0
            raise
        except duckdb.Error as e:
            raise OperationalError(str(e).splitlines()[0]) from None
        self._results, self._index, self._pos = results, 0, 0
        return self

    def executemany(self, operation: str, seq_of_parameters: Iterable[Sequence[Any] | dict]) -> "Cursor":
        self._check()
        collected: list[Result] = []
        for params in seq_of_parameters:
            collected.extend(self.connection.session.execute(operation, params))
        self._results, self._index, self._pos = collected[-1:] if collected else [], 0, 0
        return self

    # --- fetching --------------------------------------------------------------
    def _rows(self) -> list[tuple]:
        self._check()
        r = self.result
        if r is None or not r.columns:
            raise ProgrammingError("no result set: execute a query first")
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

    def __iter__(self):
        return self

    def __next__(self):
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row
