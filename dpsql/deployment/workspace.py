"""The analyst's workspace: the database where public SQL runs, apart from the protected data.

Every statement an analyst sends that is not a DP query runs here, and only here:
a DuckDB database in memory, of its own (a separate DuckDB instance, so no setting,
object, log or memory limit is shared with the database that holds the data). Its
configuration is fixed when it starts and then locked: no file access (no reading
or writing files, no ATTACH), no extensions, no scans of Python variables.

The owner's public tables (tables of the database that the catalog does not
declare) appear here as copies, made the first time a statement names them; a
public view is re-created here from its definition, which must pass the same
allowlist as the analyst's own SQL, so a view over a protected table never
appears. Whatever the analyst creates or changes stays in this workspace and is
gone when the connection closes: the owner's database is never written. A statement
runs at most `statement_timeout` seconds (`[workspace]` in the profile; default 30).

So that clients' catalog queries (`information_schema`, `pg_catalog`, DBeaver's or
SQLAlchemy's reflection) see the protected tables, each one has an empty stand-in here
with its declared columns only (`declare_protected`); statements that name a protected
table never run here (the session sends them to the DP compiler), so a stand-in is
only ever read by catalog queries, and it holds no data.
"""

from __future__ import annotations

import itertools
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import duckdb
from sqlglot import exp

from dpsql.tables.table import Table
from dpsql.tables.columns import quote_identifier
from dpsql.errors import Error, IntegrityError, NotSupportedError, OperationalError, ProgrammingError
from dpsql.sql.public import SANDBOX_CONFIG, check_public
from dpsql.answers.result import Result

_MAX_VIEW_DEPTH = 16
# Public statements that return no rows (unless they have a RETURNING clause).
_NO_ROWS = (exp.Insert, exp.Update, exp.Delete, exp.TruncateTable, exp.Create, exp.Drop, exp.Alter, exp.Transaction,
            exp.Commit, exp.Rollback)
# Settings a workspace starts with unless the owner's profile says otherwise ([workspace]): DuckDB's own
# default memory limit is 80% of the machine, for each analyst's connection.
WORKSPACE_DEFAULTS = {"memory_limit": "1GB"}
# Seconds a public statement may run before it is stopped ([workspace] statement_timeout; 0: no limit).
# DuckDB has no statement timeout of its own: a timer interrupts the workspace's connection.
STATEMENT_TIMEOUT = 30.0
# How schema browsers (table remarks, psql's \dt+) tell the tables apart.
PROTECTED_COMMENT = "protected: answered with differential privacy (aggregates only), within your budget"
PUBLIC_COMMENT = "public: a copy of the data owner's table, in your workspace"


@dataclass(frozen=True)
class DataObject:
    """A public table or view of the owner's database."""

    schema: str
    name: str
    kind: str  # "table" or "view"
    definition: str | None = None  # a view's CREATE VIEW statement


class DataTables:
    """The public tables and views of the owner's DuckDB database, read on the owner's connection.

    Only dpsql's own SQL runs on `con`, with fully qualified names; a table the catalog
    protects is never read, and a view is never evaluated here (see `Workspace`).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, protected: dict[str, str]):
        self.con = con
        self.database, self.schema = con.execute("SELECT current_database(), current_schema()").fetchone()
        self.protected = protected

    def objects(self) -> dict[tuple[str, str], DataObject]:
        """(lower schema, lower name) -> the object, for every public table and view."""
        rows = self.con.execute(
            "SELECT schema_name, table_name, 'table', NULL FROM duckdb_tables() WHERE database_name = ? "
            "AND NOT internal UNION ALL SELECT schema_name, view_name, 'view', sql FROM duckdb_views() "
            "WHERE database_name = ? AND NOT internal", [self.database, self.database]).fetchall()
        return {(s.lower(), n.lower()): DataObject(s, n, k, d) for s, n, k, d in rows
                if n.lower() not in self.protected}

    def columns(self) -> list[tuple[str, str, str, bool]]:
        """(table, column, type, nullable) of every public table and view (metadata only)."""
        public = {(s, n) for s, n in self.objects()}
        rows = self.con.execute(
            "SELECT schema_name, table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
            "WHERE database_name = ? ORDER BY table_name, column_index", [self.database]).fetchall()
        return [(t, c, d, n) for s, t, c, d, n in rows if (s.lower(), t.lower()) in public]

    def reader(self, table: DataObject):
        """The rows of a public base table, as an Arrow stream."""
        assert table.kind == "table" and table.name.lower() not in self.protected
        name = ".".join(quote_identifier(p) for p in (self.database, table.schema, table.name))
        return self.con.sql(f"SELECT * FROM {name}").to_arrow_reader()


class Workspace:
    """An analyst's own in-memory DuckDB database, where allowed public SQL runs."""

    def __init__(self, data: DataTables | None, protected: dict[str, str], settings: dict[str, Any] | None = None):
        self.data = data
        self.protected = protected
        settings = dict(settings or {})
        self.statement_timeout = float(settings.pop("statement_timeout", STATEMENT_TIMEOUT))
        try:
            self.con = duckdb.connect(":memory:", config={**WORKSPACE_DEFAULTS, **settings, **SANDBOX_CONFIG})
        except duckdb.Error as e:
            raise OperationalError(f"cannot start the workspace with the profile's settings: {e}") from None
        self._copies = itertools.count()
        self._timing = threading.Lock()  # a statement's timer interrupts only while that statement runs
        self._running = self._timed_out = False

    def declare_protected(self, tables: Sequence[Table]) -> None:
        """An empty stand-in for each protected table, with its declared columns (see the module docstring)."""
        for table in tables:
            columns = ", ".join(f"{quote_identifier(name)} {sql_type}{'' if nullable else ' NOT NULL'}"
                                for name, sql_type, nullable in table.stand_in_columns())
            self.con.execute(f"CREATE TABLE {quote_identifier(table.name)} ({columns})")
            self._comment(quote_identifier(table.name), PROTECTED_COMMENT)

    def _comment(self, table: str, text: str) -> None:
        self.con.execute(f"COMMENT ON TABLE {table} IS '{text.replace(chr(39), chr(39) * 2)}'")

    def prepare_for_clients(self, statements: Sequence[str]) -> None:
        """Run dpsql's own set-up statements here (e.g. the catalog functions PostgreSQL clients call)."""
        for statement in statements:
            self.con.execute(statement)

    def check(self, sql: str) -> exp.Expression:
        """The statement's tree if the allowlist allows it, else NotSupportedError (see `dpsql.sql.public`)."""
        return check_public(sql, self._statement_types, self.protected)

    def run(self, sql: str, params: Sequence[Any] | dict | None = None, explain: bool = False) -> Result:
        """One allowed public statement (EXPLAIN of it with `explain`), as a result."""
        tree = self.check(sql)
        self._bring(tree)
        with self._time_limit():
            try:
                cursor = self.con.execute(("EXPLAIN " if explain else "") + sql, params or None)
                description = cursor.description
                rows = cursor.fetchall() if description else []
            except duckdb.Error as e:
                if self._timed_out:
                    raise OperationalError(
                        f"the statement ran longer than the workspace's statement_timeout ({self.statement_timeout:g} "
                        "s) and was stopped; narrow it, or ask the data owner for a longer [workspace] "
                        "statement_timeout"
                    ) from None
                raise duckdb_error(e) from None
        columns = [d[0] for d in description] if description else []
        types = [str(d[1]) for d in description] if description else []
        if not explain and isinstance(tree, _NO_ROWS) and not tree.args.get("returning"):
            # DuckDB answers these with a status table: a `Count` column (the rows changed) or `Success`
            changed = rows[0][0] if columns == ["Count"] and len(rows) == 1 else -1
            return Result([], [], kind="public", rowcount=changed)
        return Result(columns, rows, [(None,) * len(columns)] * len(rows), kind="public", types=types)

    def describe_query(self, sql: str) -> Result | None:
        """The columns an allowed public query would return, without running it (None: not a query, or
        not known before its parameters are: a parameter stands as NULL here, which rarely binds)."""
        tree = self.check(sql)
        if self._statement_types(sql)[0] != "SELECT":
            return None
        self._bring(tree)
        with_parameters = tree.find(exp.Placeholder) is not None
        if with_parameters:
            sql = tree.transform(lambda node: exp.null() if isinstance(node, exp.Placeholder) else node).sql("duckdb")
        try:
            relation = self.con.sql(sql)  # bound, not run: a query's relation runs when fetched
        except duckdb.Error as e:
            if with_parameters:
                return None
            raise duckdb_error(e) from None
        return Result(list(relation.columns), [], kind="public", types=[str(t) for t in relation.types])

    def bring_public(self) -> None:
        """Copy in every public table (and viewable view) of the owner's database not here yet, so that catalog
        queries list them beside the protected stand-ins; one that cannot be copied (a view that does not pass
        the allowlist, a table over the memory limit) stays out."""
        if self.data is None:
            return
        for found in self.data.objects().values():
            if self._viewable(found) and not self._exists(found.schema, found.name):
                try:
                    self._copy(found, 0)
                except (Error, duckdb.Error):
                    continue

    def prepare(self, tree: exp.Expression) -> duckdb.DuckDBPyConnection:
        """The workspace connection, with the public tables a DP query joins brought in."""
        self._bring(tree)
        return self.con

    def column_types(self, tree: exp.Expression, tables: Sequence[str]) -> dict[str, dict[str, str]]:
        """Lower table name -> lower column name -> type, for the named `tables` of a statement (the public
        ones it names brought in; a protected table's stand-in has its declared columns). Metadata only."""
        self._bring(tree)
        rows = self.con.execute(
            "SELECT lower(table_name), lower(column_name), data_type FROM duckdb_columns() "
            "WHERE lower(table_name) IN (SELECT unnest(?::VARCHAR[])) ORDER BY column_index", [list(tables)]).fetchall()
        found: dict[str, dict[str, str]] = {}
        for table, column, sql_type in rows:
            found.setdefault(table, {}).setdefault(column, sql_type)
        return found

    def describe(self) -> list[tuple[str, str, str, str, bool]]:
        """(table, kind, column, type, nullable) of the workspace's tables and the owner's public ones."""
        rows = self.con.execute(
            "SELECT c.table_name, CASE WHEN v.view_name IS NULL THEN 'table' ELSE 'view' END, c.column_name, "
            "c.data_type, c.is_nullable FROM duckdb_columns() c LEFT JOIN duckdb_views() v "
            "ON v.database_name = c.database_name AND v.schema_name = c.schema_name AND v.view_name = c.table_name "
            "WHERE NOT c.internal "
            "ORDER BY c.table_name, c.column_index").fetchall()
        rows = [r for r in rows if r[0].lower() not in self.protected]  # the stand-ins: described by the catalog
        mine = {r[0].lower() for r in rows}
        if self.data is not None:
            kinds = {o.name.lower(): o.kind for o in self.data.objects().values() if self._viewable(o)}
            rows += [(t, kinds[t.lower()], c, d, n) for t, c, d, n in self.data.columns()
                     if t.lower() not in mine and t.lower() in kinds]
        return rows

    def _viewable(self, found: DataObject) -> bool:
        """Whether a public object of the data may appear here (a view: if its definition passes the allowlist)."""
        if found.kind != "view":
            return True
        try:
            self.check((found.definition or "").strip().rstrip(";"))
        except Error:
            return False
        return True

    def interrupt(self) -> None:
        self.con.interrupt()

    @contextmanager
    def _time_limit(self) -> Iterator[None]:
        """Interrupt the block's statement once it has run `statement_timeout` seconds (0: never)."""
        if self.statement_timeout <= 0:
            yield
            return

        def expire() -> None:
            with self._timing:
                if self._running:
                    self._timed_out = True
                    self.con.interrupt()

        timer = threading.Timer(self.statement_timeout, expire)
        timer.daemon = True
        with self._timing:
            self._running, self._timed_out = True, False
        timer.start()
        try:
            yield
        finally:
            with self._timing:
                self._running = False
            timer.cancel()

    def close(self) -> None:
        self.con.close()
        if self.data is not None:
            self.data.con.close()

    def _statement_types(self, text: str) -> list[str]:
        return [s.type.name for s in self.con.extract_statements(text)]

    def _exists(self, schema: str | None, name: str) -> bool:
        found = self.con.execute(
            "SELECT 1 FROM duckdb_tables() WHERE lower(table_name) = lower(?) AND (? IS NULL OR lower(schema_name) "
            "= lower(?)) UNION ALL SELECT 1 FROM duckdb_views() WHERE NOT internal AND lower(view_name) = lower(?) "
            "AND (? IS NULL OR lower(schema_name) = lower(?))", [name, schema, schema] * 2).fetchall()
        return bool(found)

    def _bring(self, tree: exp.Expression, depth: int = 0) -> None:
        """Copy in the owner's public tables (and re-create the views) that `tree` names, once."""
        if self.data is None:
            return
        created = tree.this if isinstance(tree, exp.Create) else None
        local = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        wanted = [t for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier) and not t.catalog
                  and t is not created and not (created is not None and t in created.find_all(exp.Table))
                  and t.name.lower() not in local and t.name.lower() not in self.protected]
        if not wanted:
            return
        available = self.data.objects()
        for table in wanted:
            schema = table.db or None
            found = available.get(((schema or self.data.schema).lower(), table.name.lower()))
            if found is None or self._exists(schema, table.name):
                continue
            if depth > _MAX_VIEW_DEPTH:
                raise NotSupportedError(f"the public view {found.name!r} nests views too deeply to be shown")
            self._copy(found, depth)

    def _copy(self, found: DataObject, depth: int) -> None:
        name = quote_identifier(found.schema) + "." + quote_identifier(found.name)
        self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(found.schema)}")
        if found.kind == "view":
            definition = (found.definition or "").strip().rstrip(";")
            try:
                tree = self.check(definition)
                self._bring(tree, depth + 1)
                self.con.execute(definition)
            except (Error, duckdb.Error) as e:
                reason = str(e).splitlines()[0] if isinstance(e, Error) else "its definition does not run here"
                raise NotSupportedError(
                    f"the view {found.name!r} of the database is not available to public SQL ({reason}); "
                    "query protected tables with DP aggregates"
                ) from None
            return
        source = f"__dpsql_copy_{next(self._copies)}"
        self.con.register(source, self.data.reader(found))
        try:
            self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM {source}")
            self._comment(name, PUBLIC_COMMENT)
        finally:
            self.con.unregister(source)


def duckdb_error(e: Exception) -> Error:
    """A DuckDB error of a public statement as the DB-API error it is (first line of its message)."""
    message = str(e).splitlines()[0] if str(e) else type(e).__name__
    if isinstance(e, (duckdb.ParserException, duckdb.CatalogException, duckdb.BinderException)):
        return ProgrammingError(message)
    if isinstance(e, duckdb.ConstraintException):
        return IntegrityError(message)
    return OperationalError(message)


__all__ = ["DataTables", "Workspace"]
