"""`dpsql.register(con, ...)`: DP answers from plain DuckDB SQL on an existing connection.

After ``register(con, catalog=..., epsilon=...)`` the DuckDB connection
``con`` has these table functions (temporary macros, gone when ``con`` closes):

- ``dp_query(sql)``: a DP query's answer, with a ``<column>_stderr`` column
  after each DP column;
- ``dp_explain(sql)``: the plan, one line per row, reading no data;
- ``dp_workload([sql, ...], epsilon := E)``: plans and measures the queries
  together and returns one row per query (its number, text and row count);
  ``dp_query`` then answers them for free, and ``dp_ledger()`` shows the charge;
  with ``explain := true`` it returns the workload's plan instead, spending nothing;
- ``dp_budget()``: total, spent and remaining budget;
- ``dp_ledger()``: every charge;
- ``dp_emit(name)``: the next window of a continual query (``EMIT name``): each evaluation
  releases one more window (free: its horizon was charged), so run it once per window;
- ``dp_continual(name)``: every window of a continual query so far (``SHOW CONTINUAL name``).

How it works: the DuckDB Python API has scalar Python functions but no
Python table functions. Each macro calls a Python scalar function
(``dpsql_*``) that runs the statement on a dpsql connection opened on a
cursor of ``con`` and returns the answer as a ``VALUES`` query, which
DuckDB's ``query()`` table function runs. DuckDB evaluates that function
while binding the statement, so a statement that merely mentions
``dp_query`` (even DuckDB's own ``EXPLAIN`` or ``DESCRIBE`` of it) runs the
DP query: a repeat is answered from the model for free, so this never
charges twice.

The ledger is the one ``dpsql.connect`` uses for the same database file
(``<database>.dpsql-state`` unless ``state=`` says otherwise), so budget
spent here and through the DB-API or the shell adds up.

Trust boundary: ``con`` itself stays a raw DuckDB connection; it can read the
protected tables and the ledger file directly. Registering DP functions on it
is for code that is already trusted with the data (the data owner, a
publishing pipeline) and wants DP releases with shared budget accounting. An
analyst who must only see DP answers gets a dpsql connection or the shell,
and no access to the database files.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import duckdb

from dpsql.tables.catalog import Catalog
from dpsql.tables.columns import quote_identifier, quote_string
from dpsql.interfaces.dbapi import Connection, connect
from dpsql.errors import ProgrammingError
from dpsql.interfaces.formatting import dp_columns, stderr_name
from dpsql.answers.result import Result
from dpsql.sql.statements import BeginWorkload, EndWorkload, Explain, Sql, classify, split_statements

_MACROS = {
    "dp_query": ("sql", "dpsql_query(sql)"),
    "dp_explain": ("sql", "dpsql_explain(sql)"),
    "dp_workload": ("queries, epsilon := NULL, explain := false", "dpsql_workload(queries, epsilon, explain)"),
    "dp_budget": ("", "dpsql_budget()"),
    "dp_ledger": ("", "dpsql_ledger()"),
    "dp_emit": ("name", "dpsql_emit(name)"),
    "dp_continual": ("name", "dpsql_continual(name)"),
}


def _literal(value: Any, sql_type: str | None) -> str:
    """`value` as a SQL literal of `sql_type`."""
    if value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = "TRUE" if value else "FALSE"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        text = quote_string(repr(value) if math.isfinite(value) else str(value))
    else:
        text = quote_string(str(value))
    return f"CAST({text} AS {sql_type})" if sql_type else text


def relation_sql(columns: list[str], types: list[str | None], rows: list[list[Any]]) -> str:
    """A SELECT producing exactly these typed rows (also when there are none)."""
    names = ", ".join(quote_identifier(c) for c in columns)
    if not rows:
        nulls = ", ".join(f"{_literal(None, t or 'VARCHAR')} AS {quote_identifier(c)}" for c, t in zip(columns, types))
        return f"SELECT {nulls} LIMIT 0"
    values = ",\n".join("(" + ", ".join(_literal(v, t) for v, t in zip(row, types)) + ")" for row in rows)
    return f"SELECT * FROM (VALUES {values}) AS dp_answer({names})"


def result_sql(result: Result) -> str:
    """A result as a relation: its columns, each DP column followed by `<column>_stderr`."""
    flags = dp_columns(result)
    declared = result.types or [None] * len(result.columns)
    columns: list[str] = []
    types: list[str | None] = []
    for name, sql_type, dp in zip(result.columns, declared, flags):
        columns.append(name)
        types.append(sql_type)
        if dp:
            columns.append(stderr_name(name))
            types.append("DOUBLE")
    stderr = result.stderr or [(None,) * len(result.columns)] * len(result.rows)
    rows = []
    for row, errs in zip(result.rows, stderr):
        record: list[Any] = []
        for v, e, dp in zip(row, errs, flags):
            record.extend([v, e] if dp else [v])
        rows.append(record)
    return relation_sql(columns, types, rows)


class _Functions:
    """The Python side of the macros, bound to one dpsql connection."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def _run(self, sql: str) -> list[Result]:
        cursor = self.conn.cursor()
        cursor.execute(sql)
        results = [cursor.result] if cursor.result is not None else []
        while cursor.nextset():
            results.append(cursor.result)
        return results

    @staticmethod
    def _one_statement(sql: str | None, function: str) -> str:
        """The single non-workload statement in `sql`, checked before anything runs."""
        statements = split_statements(sql or "")
        if len(statements) != 1:
            raise ProgrammingError(f"{function} takes exactly one statement; use dp_workload for several queries")
        if isinstance(classify(statements[0]), (BeginWorkload, EndWorkload)):
            raise ProgrammingError(f"{function} takes one query; run a workload with dp_workload([...])")
        return statements[0]

    def query(self, sql: str | None) -> str:
        results = self._run(self._one_statement(sql, "dp_query"))
        if len(results) != 1:
            raise ProgrammingError("dp_query needs a statement that returns a result")
        return result_sql(results[0])

    def explain(self, sql: str | None) -> str:
        statement = self._one_statement(sql, "dp_explain")
        if not isinstance(classify(statement), Explain):
            statement = "EXPLAIN " + statement
        return self._plan(self._run(statement)[0])

    @staticmethod
    def _plan(result: Result) -> str:
        return relation_sql(["plan"], ["VARCHAR"], [list(r) for r in result.rows])

    def workload(self, queries: list[str] | None, epsilon: float | None, explain: bool | None) -> str:
        if not queries:
            raise ProgrammingError("dp_workload needs a non-empty list of queries")
        checked = [self._one_statement(q, "each dp_workload query") for q in queries]
        if not all(isinstance(classify(q), Sql) for q in checked):
            raise ProgrammingError("dp_workload takes plain SELECT queries (no SET or EXPLAIN)")
        option = "" if epsilon is None else f" WITH (epsilon = {float(epsilon)!r})"
        body = ";\n".join(checked)
        results = self._run(f"{'EXPLAIN ' if explain else ''}BEGIN WORKLOAD{option};\n{body};\nEND WORKLOAD;")
        if explain:
            return self._plan(results[0])
        rows = [[i, sql, len(r.rows)] for i, (sql, r) in enumerate(zip(checked, results), start=1)]
        return relation_sql(["query", "sql", "result_rows"], ["INTEGER", "VARCHAR", "BIGINT"], rows)

    def emit(self, name: str | None) -> str:
        return result_sql(self._run(f"EMIT {self._name(name)}")[0])

    def continual(self, name: str | None) -> str:
        return result_sql(self._run(f"SHOW CONTINUAL {self._name(name)}")[0])

    @staticmethod
    def _name(name: str | None) -> str:
        if not name or not name.replace("_", "a").isalnum():
            raise ProgrammingError(f"a continual query's name is a word, got {name!r}")
        return name

    def budget(self) -> str:
        status = self.conn.budget
        rows = [[what, a.epsilon, a.delta, a.rho]
                for what, a in (("total", status.total), ("spent", status.spent), ("remaining", status.remaining))]
        return relation_sql(["budget", "epsilon", "delta", "rho"], ["VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE"], rows)

    def ledger(self) -> str:
        session = self.conn.session
        rows = [[c.seq, c.at, c.who, c.table, c.statement, c.epsilon(session.amount),
                 session.amount(c.cost).rho, c.detail] for c in session.ledger.charges()]
        return relation_sql(
            ["seq", "charged_at", "who", "table_name", "statement", "epsilon", "rho", "strategy"],
            ["BIGINT", "TIMESTAMP", "VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "VARCHAR"],
            rows,
        )


def _database_path(con: duckdb.DuckDBPyConnection) -> str:
    """The file of `con`'s current database (':memory:' for an in-memory one)."""
    row = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()
    return row[0] if row and row[0] else ":memory:"


def register(
    con: duckdb.DuckDBPyConnection,
    *,
    catalog: Catalog | dict | str | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    query_epsilon: float | None = None,
    state: str | None = None,
    seed: int | None = None,
) -> Connection:
    """Install `dp_query`, `dp_explain`, `dp_workload`, `dp_budget`, `dp_ledger`, `dp_emit` and `dp_continual`
    into `con`.

    Budget arguments are those of `dpsql.connect`; the ledger is the one
    `dpsql.connect` uses for the same database (or `state`). Returns the dpsql
    connection behind the functions (a DB-API connection on a cursor of `con`).
    """
    conn = connect(_database_path(con), con=con.cursor(), catalog=catalog, epsilon=epsilon, delta=delta,
                   rho=rho, query_epsilon=query_epsilon, state=state, seed=seed)
    functions = _Functions(conn)
    scalar: dict[str, tuple[Callable[..., str], list[str]]] = {
        "dpsql_query": (functions.query, ["VARCHAR"]),
        "dpsql_explain": (functions.explain, ["VARCHAR"]),
        "dpsql_workload": (functions.workload, ["VARCHAR[]", "DOUBLE", "BOOLEAN"]),
        "dpsql_budget": (functions.budget, []),
        "dpsql_ledger": (functions.ledger, []),
        "dpsql_emit": (functions.emit, ["VARCHAR"]),
        "dpsql_continual": (functions.continual, ["VARCHAR"]),
    }
    existing = {r[0] for r in con.execute("SELECT function_name FROM duckdb_functions()").fetchall()}
    for name, (function, parameters) in scalar.items():
        if name in existing:
            con.remove_function(name)
        # Not marked as having side effects: query() needs an argument it can fold while binding.
        con.create_function(name, function, parameters, "VARCHAR", null_handling="special")
    for name, (parameters, call) in _MACROS.items():
        con.execute(f"CREATE OR REPLACE TEMP MACRO {name}({parameters}) AS TABLE FROM query({call})")
    return conn
