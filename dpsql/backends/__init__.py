"""Backends: the engines that compute exact marginals of protected tables, in one scan each.

A backend implements `base.Backend`: ``marginals(table, cliques, key)`` (exact integer
counts per clique; `key` bounds a table with a privacy unit), ``dropped_rows(table, cap)``,
and, where the engine can, ``interrupt()`` and ``progress()``. Only dpsql's SQL ever runs
on a backend: `base.marginal_sql` writes it from the catalog, in DuckDB's dialect, and
`base.SQLBackend` transpiles it with sqlglot for other engines, checks the schema before the
first scan, and reports any failure as one fixed message (the cause goes to the owner's log).

`BACKENDS` is the registry by name (what ``dpsql.connect(backend=...)`` and the shell's
``--spark`` choose); ``"duckdb"`` is the embedded default, measured on the data's own
DuckDB database. To add an engine: subclass `SQLBackend` in a module here (its ``engine``
name, sqlglot ``dialect``, ``errors`` and ``fetch(sql, columns)``; ``relation(name)`` if it
names tables otherwise), and add a loader to `BACKENDS` (import it lazily if it needs an
optional dependency, as Spark does); `tests/test_backends.py` runs the same suite on each.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

from dpsql.backends.duckdb import DuckDBBackend
from dpsql.backends.base import SCAN_FAILED, Backend, SQLBackend, marginal_sql
from dpsql.errors import InterfaceError, ProgrammingError


def _spark(spark: Any = None) -> Backend:
    if importlib.util.find_spec("pyspark") is None:
        raise InterfaceError("backend='spark' needs pyspark: pip install 'dpsql[spark]'")
    from dpsql.backends.spark import SparkBackend

    return SparkBackend(spark)


# name -> a loader taking the engine's session (or None for the default); "duckdb" measures on
# the data's own database, which the connection opens, so it needs no loader.
BACKENDS: dict[str, Callable[[Any], Backend] | None] = {"duckdb": None, "spark": _spark}


def make_backend(backend: str | Backend, spark: Any = None) -> Backend | None:
    """The backend `connect` asks for: "duckdb" (None: the session's own connection),
    "spark" (on the session or master URL `spark`), or a `Backend` object for any other engine."""
    if spark is not None and backend != "spark":
        raise ProgrammingError("spark= is only used with backend='spark'")
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ProgrammingError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)} or a Backend object")
        loader = BACKENDS[backend]
        return None if loader is None else loader(spark)
    if not hasattr(backend, "marginals"):
        raise ProgrammingError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)} or a Backend object")
    return backend


__all__ = ["BACKENDS", "SCAN_FAILED", "Backend", "DuckDBBackend", "SQLBackend", "make_backend", "marginal_sql"]
