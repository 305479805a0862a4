"""Which statements are DP queries, and which public statements may run.

A statement that names a protected table (`ProtectedNames.reference`) is a DP
query: it is compiled, never run as written. Any other statement is public SQL,
which runs in the analyst's workspace (`dpsql.deployment.workspace`), a database that holds
no protected data. Public SQL is allowed by an allowlist (`check_public`), not
refused by a blocklist. A statement runs only if

- DuckDB's own parser sees exactly one statement, of a kind in `ALLOWED`;
- sqlglot parses it (as DuckDB SQL) into a node of the same kind: a query, INSERT,
  UPDATE, DELETE/TRUNCATE, CREATE/DROP/ALTER of a TABLE or VIEW, DESCRIBE,
  SUMMARIZE, SHOW TABLES, or a transaction statement;
- every table it reads is named (no file paths, no string naming a protected table)
  or is one of the table functions in `TABLE_FUNCTIONS`.

Everything else is refused before it reaches any database: SET/RESET/PRAGMA (settings,
logging, profiling, resource limits), CALL, macros, functions, sequences, types,
schemas, secrets, ATTACH/DETACH/USE, INSTALL/LOAD, COPY/EXPORT/IMPORT, CHECKPOINT,
VACUUM, PIVOT (it creates types), PREPARE/EXECUTE, and whatever either parser cannot read. The two parsers
must agree, so a statement that one reads differently from the other never runs.
"""

from __future__ import annotations

import re
from typing import Callable

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import TokenType

from dpsql.tables.catalog import Catalog
from dpsql.errors import NotSupportedError

# DuckDB's statement type (by name) -> the sqlglot nodes allowed to carry it.
ALLOWED: dict[str, tuple[type[exp.Expression], ...]] = {
    "SELECT": (exp.Query, exp.Values, exp.Describe, exp.Summarize, exp.Show),
    "INSERT": (exp.Insert,),
    "UPDATE": (exp.Update,),
    "DELETE": (exp.Delete, exp.TruncateTable),
    "CREATE": (exp.Create,),
    "DROP": (exp.Drop,),
    "ALTER": (exp.Alter,),
    "TRANSACTION": (exp.Transaction, exp.Commit, exp.Rollback),
}
OBJECT_KINDS = {"TABLE", "VIEW"}  # what CREATE, DROP and ALTER may name
# The configuration of every DuckDB database that runs analyst-written SQL (the workspace, and the
# evaluation of a DP query's outer expressions): fixed at start, then locked.
SANDBOX_CONFIG = {
    "enable_external_access": False,  # no files, no ATTACH, no extension downloads
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "python_enable_replacements": False,  # no scans of Python objects by variable name
    "lock_configuration": True,
}
TABLE_FUNCTIONS = {"range", "generate_series", "unnest"}
_SAFE_TABLE_FUNCTION_NODES = (exp.GenerateSeries, exp.ExplodingGenerateSeries, exp.Unnest)
_HOW = "public SQL may query, create, change and drop tables and views (see SECURITY.md)"


class ProtectedNames:
    """The protected tables of a catalog, found by name in statements."""

    def __init__(self, catalog: Catalog, dialect: str):
        self.dialect = dialect
        self.names = {t.name.lower(): t.name for t in catalog.tables.values()}  # lower-case name -> table

    def reference(self, text: str) -> str | None:
        """The protected table a statement mentions by name (anywhere but inside strings), if any."""
        return self.scan(text)[0]

    def scan(self, text: str) -> tuple[str | None, list | None]:
        """(the protected table the statement mentions, its tokens — None if it does not tokenize),
        so that a DP query is parsed from the same tokens (`dpsql.sql.compiler.parse_statement`)."""
        try:
            tokens = Dialect.get_or_raise(self.dialect).tokenize(text)
        except Exception:  # untokenizable text: fall back to a word scan
            words = re.findall(r"[A-Za-z_][A-Za-z0-9_$]*", text)
            return next((self.names[w.lower()] for w in words if w.lower() in self.names), None), None
        for tok in tokens:
            if tok.token_type == TokenType.STRING:
                continue
            for part in re.split(r"[.\s]", tok.text):
                if part.lower() in self.names:
                    return self.names[part.lower()], tokens
        return None, tokens


def check_public(text: str, duckdb_types: Callable[[str], list[str]], protected: dict[str, str]) -> exp.Expression:
    """Allow one public statement, or raise NotSupportedError saying why; returns its sqlglot tree.

    `duckdb_types` gives the types (names of DuckDB's StatementType) of the statements
    DuckDB's parser finds in a text; `protected` holds the protected tables' lower-case names.
    """
    try:
        kinds = duckdb_types(text)
    except Exception:  # DuckDB cannot parse it, or names a statement type this client does not know
        raise NotSupportedError(f"this statement does not parse as one DuckDB statement; {_HOW}") from None
    if len(kinds) != 1:
        raise NotSupportedError("one statement at a time: separate statements with ';'")
    kind = kinds[0]
    if kind not in ALLOWED:
        raise NotSupportedError(f"{kind} statements are not allowed: {_HOW}")
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except Exception:
        tree = None
    if tree is None or not isinstance(tree, ALLOWED[kind]) or isinstance(tree, exp.Command):
        raise NotSupportedError(f"this {kind} statement could not be checked, so it does not run; {_HOW}")
    if isinstance(tree, (exp.Create, exp.Drop, exp.Alter)):
        what = str(tree.args.get("kind") or "").upper()
        if what not in OBJECT_KINDS:
            raise NotSupportedError(f"{kind} {what or 'of this kind'} is not allowed: {_HOW}")
    if isinstance(tree, (exp.Summarize, exp.Describe)) and isinstance(tree.this, exp.Literal):
        raise NotSupportedError("reading files is not allowed; public SQL reads tables by name")
    for table in tree.find_all(exp.Table):
        _check_table(table, protected)
    for fn in tree.find_all(exp.Anonymous):
        if fn.name.lower() in ("query", "query_table"):
            raise NotSupportedError(f"{fn.name}() runs SQL text, which cannot be checked: it is not allowed")
    return tree


def _check_table(table: exp.Table, protected: dict[str, str]) -> None:
    source = table.this
    if isinstance(source, exp.Identifier):
        if source.name.strip().lower().rsplit(".", 1)[-1] in protected:  # FROM 'people': a string, not a name
            raise NotSupportedError(f"{source.name!r} names a protected table; query it by name with DP aggregates")
        if re.search(r"[./\\:]", source.name):
            raise NotSupportedError("reading files is not allowed; public SQL reads tables by name")
        return
    if isinstance(source, _SAFE_TABLE_FUNCTION_NODES):
        return
    name = (source.name if isinstance(source, exp.Anonymous) else getattr(source, "sql_name", lambda: "?")()).lower()
    if name not in TABLE_FUNCTIONS:
        raise NotSupportedError(
            f"the table function {name}() is not allowed; public SQL may use {', '.join(sorted(TABLE_FUNCTIONS))}"
        )


__all__ = ["ALLOWED", "ProtectedNames", "SANDBOX_CONFIG", "TABLE_FUNCTIONS", "check_public"]
