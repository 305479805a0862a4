"""Plain SQL beside protected tables: which statements mention one, and which others may run.

A session sends statements that mention no protected table to DuckDB as they
are. `ProtectedNames` knows the protected tables and the views over them, finds
a statement's reference to one (`reference`: names in any position, not string
contents), and refuses public statements that could read a protected table
another way (`check_public`): by a string naming it, through table functions
or files, statistics views that show exact sizes, or commands sqlglot cannot
look inside.
"""

from __future__ import annotations

import re

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from dpsql.catalog import Catalog
from dpsql.errors import NotSupportedError

_REFUSED_KEYWORDS = {"ATTACH", "DETACH", "EXPORT", "IMPORT", "INSTALL", "LOAD", "PRAGMA", "CHECKPOINT"}
_ALLOWED_TABLE_FUNCTIONS = {"range", "generate_series", "unnest"}
_STATISTICS_VIEWS = {"duckdb_tables", "pg_class"}  # they show exact row counts


class ProtectedNames:
    """The protected tables of a catalog on a connection, plus views whose definition mentions one."""

    def __init__(self, con: duckdb.DuckDBPyConnection, catalog: Catalog, dialect: str):
        self.dialect = dialect
        self.names = _protected_names(con, catalog)  # lower-case name -> protected table

    def reference(self, text: str) -> str | None:
        """The protected table a statement mentions by name (anywhere but inside strings), if any."""
        try:
            tokens = Dialect.get_or_raise(self.dialect).tokenize(text)
        except Exception:  # untokenizable text: fall back to a word scan
            tokens = None
        if tokens is None:
            words = re.findall(r"[A-Za-z_][A-Za-z0-9_$]*", text)
            return next((self.names[w.lower()] for w in words if w.lower() in self.names), None)
        for tok in tokens:
            if tok.token_type == TokenType.STRING:
                continue  # table functions that take names as strings are refused by check_public
            for part in re.split(r"[.\s]", tok.text):
                if part.lower() in self.names:
                    return self.names[part.lower()]
        return None

    def check_public(self, text: str) -> None:
        """Refuse a statement without protected names that could still read a protected table."""
        if not self.names:
            return
        first = text.split(None, 1)[0].upper() if text.split() else ""
        if first in _REFUSED_KEYWORDS:
            raise NotSupportedError(f"{first} is not allowed in a session with protected tables")
        tree = _parse_or_none(text, self.dialect)
        if tree is None:
            raise NotSupportedError(
                "this statement could not be checked (it does not parse); in a session with protected "
                "tables only statements that parse can run"
            )
        if isinstance(tree, exp.Command):  # CALL, PREPARE, EXECUTE, ...: sqlglot cannot look inside
            raise NotSupportedError(f"{str(tree.this).upper()} is not allowed in a session with protected tables")
        if isinstance(tree, exp.Copy):
            raise NotSupportedError("COPY is not allowed in a session with protected tables")
        for literal in tree.find_all(exp.Literal):  # DuckDB reads a table named by a string ('people')
            if literal.is_string and literal.name.strip().lower().rsplit(".", 1)[-1] in self.names:
                raise NotSupportedError(f"the string {literal.name!r} names a protected table; query it by name "
                                        f"with DP aggregates")
        for table in tree.find_all(exp.Table):
            _check_table(table, self.names)
        for fn in tree.find_all(exp.Anonymous):
            if fn.name.lower() in ("query", "query_table"):
                raise NotSupportedError(f"{fn.name}() is not allowed in a session with protected tables")


def _check_table(table: exp.Table, names: dict[str, str]) -> None:
    if table.name.lower() in names:  # FROM 'people': a string, not a name
        raise NotSupportedError(f"{table.name!r} names a protected table; query it by name with DP aggregates")
    if table.name.lower() in _STATISTICS_VIEWS:
        raise NotSupportedError(f"{table.name} shows exact table sizes; it is not allowed in a session "
                                f"with protected tables")
    source = table.this
    if isinstance(source, exp.Func):  # table functions can read files and other tables by name
        name = (source.name if isinstance(source, exp.Anonymous) else source.sql_name()).lower()
        if name not in _ALLOWED_TABLE_FUNCTIONS:
            raise NotSupportedError(f"the table function {name}() is not allowed in a session with protected tables")
    elif isinstance(source, exp.Identifier) and source.quoted and re.search(r"[./\\]", source.name):
        raise NotSupportedError("reading files by name is not allowed in a session with protected tables")


def _protected_names(con: duckdb.DuckDBPyConnection, catalog: Catalog) -> dict[str, str]:
    """Protected table names, plus views whose definition mentions one (name -> table)."""
    names = {t.name.lower(): t.name for t in catalog.tables.values()}
    try:
        views = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
    except duckdb.Error:
        views = []
    changed = True
    while changed:
        changed = False
        for view, text in views:
            hit = next((n for n in names if re.search(rf"\b{re.escape(n)}\b", text or "", re.I)), None)
            if hit and view.lower() not in names:
                names[view.lower()] = names[hit]
                changed = True
    return names


def _parse_or_none(sql: str, dialect: str) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(sql, read=dialect)
    except Exception:  # DuckDB may accept what sqlglot cannot parse
        return None


__all__ = ["ProtectedNames"]
