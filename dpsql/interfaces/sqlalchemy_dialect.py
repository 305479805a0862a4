"""A SQLAlchemy dialect for dpsql in the same process, so tools built on SQLAlchemy get DP answers.

``create_engine("dpsql:///census.duckdb?catalog=catalog.toml&epsilon=1")`` connects through
`dpsql.connect`: the URL's path is the database (a relative path after ``dpsql:///``, an
absolute one after ``dpsql:////``; none: in memory) and its query string holds connect's
keyword arguments (``catalog``, ``epsilon``, ``delta``, ``rho``, ``query_epsilon``,
``query_rho``, ``state``, ``read_only``, ``dialect``, or ``profile`` with ``analyst``).
Then ``pandas.read_sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", engine)``
returns DP answers. The dialect is registered as ``dpsql`` through the
``sqlalchemy.dialects`` entry point; it sends SQL text as written. ``inspect(engine)`` lists the
protected tables with their declared columns only (commented as protected), and the public
tables and views the analyst can query (the owner's and the workspace's own): nothing is read.
"""

from __future__ import annotations

from types import ModuleType

import re

from sqlalchemy import types
from sqlalchemy.engine import URL, default

from dpsql.budget.units import checked
from dpsql.errors import ProgrammingError
from dpsql.deployment.workspace import PROTECTED_COMMENT, PUBLIC_COMMENT

_NUMBERS = {"epsilon", "delta", "rho", "query_epsilon", "query_rho"}
_SWITCHES = {"true": True, "1": True, "false": False, "0": False}
_TYPES = {"BOOLEAN": types.Boolean, "TINYINT": types.SmallInteger, "SMALLINT": types.SmallInteger,
          "INTEGER": types.Integer, "BIGINT": types.BigInteger, "HUGEINT": types.Numeric, "FLOAT": types.Float,
          "DOUBLE": types.Float, "VARCHAR": types.String, "DATE": types.Date, "TIME": types.Time,
          "TIMESTAMP": types.DateTime, "TIMESTAMP WITH TIME ZONE": lambda: types.DateTime(timezone=True),
          "INTERVAL": types.Interval, "BLOB": types.LargeBinary, "UUID": types.Uuid, "JSON": types.JSON}


class DpsqlDialect(default.DefaultDialect):
    """SQLAlchemy's ``dpsql://`` URLs: a `dpsql.connect` connection per pooled connection."""

    name = "dpsql"
    driver = "dpsql"
    default_paramstyle = "qmark"
    supports_statement_cache = True
    supports_native_boolean = True
    supports_native_decimal = True

    @classmethod
    def import_dbapi(cls) -> ModuleType:
        import dpsql

        return dpsql

    def create_connect_args(self, url: URL) -> tuple[list, dict]:
        """`dpsql.connect`'s arguments: the URL's database, and its query string as keywords."""
        kwargs: dict = {}
        for name, value in url.query.items():
            if not isinstance(value, str):
                raise ProgrammingError(f"{name} is given more than once in the URL")
            if name in _NUMBERS:
                kwargs[name] = checked(name.removeprefix("query_"), value, name)
            elif name == "read_only":
                if value.lower() not in _SWITCHES:
                    raise ProgrammingError(f"read_only must be true or false, got {value!r}")
                kwargs[name] = _SWITCHES[value.lower()]
            else:
                kwargs[name] = value
        return ([url.database] if url.database else []), kwargs

    # --- reflection (`sqlalchemy.inspect`): from the catalog and the workspace, never the data ---------------
    def _relations(self, connection) -> dict[str, tuple[str, list[tuple[str, str, bool]]]]:
        """name -> (kind: "protected", "table" or "view"; [(column, SQL type, nullable)])."""
        session = connection.connection.dbapi_connection.session
        found: dict[str, tuple[str, list]] = {}
        for table, kind, column, sql_type, nullable in session.workspace.describe():
            found.setdefault(table, (kind, []))[1].append((column, sql_type, bool(nullable)))
        for table in session.declared.tables.values():
            found[table.name] = ("protected", table.stand_in_columns())
        return found

    def get_schema_names(self, connection, **kw) -> list[str]:
        return ["main"]

    def get_table_names(self, connection, schema=None, **kw) -> list[str]:
        return sorted(name for name, (kind, _) in self._relations(connection).items() if kind != "view")

    def get_view_names(self, connection, schema=None, **kw) -> list[str]:
        return sorted(name for name, (kind, _) in self._relations(connection).items() if kind == "view")

    def has_table(self, connection, table_name, schema=None, **kw) -> bool:
        return table_name in self._relations(connection)

    def get_columns(self, connection, table_name, schema=None, **kw) -> list[dict]:
        relation = self._relations(connection).get(table_name)
        if relation is None:
            from sqlalchemy.exc import NoSuchTableError

            raise NoSuchTableError(table_name)
        return [{"name": name, "type": _sqlalchemy_type(sql_type), "nullable": nullable, "default": None}
                for name, sql_type, nullable in relation[1]]

    def get_table_comment(self, connection, table_name, schema=None, **kw) -> dict:
        kind = self._relations(connection).get(table_name, ("", []))[0]
        return {"text": PROTECTED_COMMENT if kind == "protected" else PUBLIC_COMMENT if kind else None}

    def get_pk_constraint(self, connection, table_name, schema=None, **kw) -> dict:
        return {"constrained_columns": [], "name": None}

    def get_foreign_keys(self, connection, table_name, schema=None, **kw) -> list:
        return []

    def get_indexes(self, connection, table_name, schema=None, **kw) -> list:
        return []


def _sqlalchemy_type(sql_type: str) -> types.TypeEngine:
    decimal = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", sql_type.upper())
    if decimal:
        return types.Numeric(int(decimal.group(1)), int(decimal.group(2)))
    made = _TYPES.get(sql_type.upper())
    return made() if made is not None else types.NullType()
