"""A SQLAlchemy dialect for dpsql in the same process, so tools built on SQLAlchemy get DP answers.

``create_engine("dpsql:///census.duckdb?catalog=catalog.toml&epsilon=1")`` connects through
`dpsql.connect`: the URL's path is the database (a relative path after ``dpsql:///``, an
absolute one after ``dpsql:////``; none: in memory) and its query string holds connect's
keyword arguments (``catalog``, ``epsilon``, ``delta``, ``rho``, ``query_epsilon``,
``query_rho``, ``state``, ``read_only``, ``dialect``, or ``profile`` with ``analyst``).
Then ``pandas.read_sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", engine)``
returns DP answers. The dialect is registered as ``dpsql`` through the
``sqlalchemy.dialects`` entry point; it sends SQL text as written and reflects nothing.
"""

from __future__ import annotations

from types import ModuleType

from sqlalchemy.engine import URL, default

from dpsql.budget import checked
from dpsql.errors import ProgrammingError

_NUMBERS = {"epsilon", "delta", "rho", "query_epsilon", "query_rho"}
_SWITCHES = {"true": True, "1": True, "false": False, "0": False}


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
