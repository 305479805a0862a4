"""Backends compute exact marginal count vectors inside the database.

Raw rows never leave the database: each clique becomes a GROUP BY over the
binning expressions of the catalog, all cliques of one plan in a single scan
(GROUPING SETS), and only (bin indices, count) rows come back. The SQL is
written once, in DuckDB's dialect (`marginal_sql`); an engine that speaks
another dialect gets it transpiled by sqlglot (`SQLBackend.dialect`).
"""

from __future__ import annotations

import importlib.util
from typing import Any, Protocol

import duckdb
import numpy as np
import sqlglot

from dpsql.catalog import CATEGORICAL, Column, Table, quote_identifier
from dpsql.errors import InterfaceError, OperationalError, ProgrammingError

Clique = tuple[str, ...]


class Backend(Protocol):
    def marginals(self, table: Table, cliques: list[Clique]) -> dict[Clique, np.ndarray]:
        """Exact integer counts of each clique's marginal, flattened in clique order."""


def _grouped_raw(column: Column) -> bool:
    """Whether to group by the column's raw value and bin the groups afterwards.

    Rows of a categorical without `other` hold only declared values (or NULL), so
    grouping the raw strings gives at most `size` groups, one per bin, and the string
    CASE runs on those groups instead of on every row. Other columns are binned per
    row (cheap arithmetic; their raw values are unbounded).
    """
    return column.kind == CATEGORICAL and column.other is None


def marginal_sql(table: Table, cliques: list[Clique]) -> tuple[str, list[str]]:
    """One scan of the protected table computing every clique's marginal (DuckDB SQL).

    The scan keeps the rows that fit the catalog, bins each used column (a categorical
    without `other` is grouped raw and binned per group: `_grouped_raw`) and counts
    the groups. Returns the SQL and its bin column names; the result has those
    columns, a grouping id `g` and a count `n` per row, several rows of one bin to
    be summed. The id has bit (k-1-i) set when the i-th of the k columns is not
    grouped, as GROUPING() does, spelled with one-argument GROUPING() calls, which
    every engine has.
    """
    source = f"{quote_identifier(table.name)} WHERE {table.fits_sql()}"
    used = [table.columns[c] for c in table.columns if any(c in q for q in cliques)]
    if not used:
        return f"SELECT 0 AS g, COUNT(*) AS n FROM {source}", []
    keys = [f"k{i}" for i in range(len(used))]
    names = [f"b{i}" for i in range(len(used))]
    scan = ", ".join(
        f"{quote_identifier(c.name) if _grouped_raw(c) else c.bin_sql()} AS {k}" for c, k in zip(used, keys)
    )
    if len(cliques) == 1:  # a plain GROUP BY is cheaper than a single grouping set
        group, grouping = ", ".join(keys), "0"
    else:
        index = {c.name: k for c, k in zip(used, keys)}
        group = "GROUPING SETS (" + ", ".join("(" + ", ".join(index[a] for a in q) + ")" for q in cliques) + ")"
        grouping = " + ".join(f"GROUPING({k}) * {1 << (len(keys) - 1 - i)}" for i, k in enumerate(keys))
    counted = (
        f"SELECT {', '.join(keys)}, {grouping} AS g, COUNT(*) AS n "
        f"FROM (SELECT {scan} FROM {source}) GROUP BY {group}"
    )
    binned = ", ".join(f"{c.bin_sql(k) if _grouped_raw(c) else k} AS {b}" for c, k, b in zip(used, keys, names))
    return f"SELECT {binned}, g, n FROM ({counted})", names


def decode_marginals(
    table: Table, cliques: list[Clique], names: list[str], result: dict[str, np.ndarray]
) -> dict[Clique, np.ndarray]:
    """Flattened count vectors (clique order) from the columns of `marginal_sql`'s result."""
    used = [c for c in table.columns if any(c in q for q in cliques)]
    grouping = np.asarray(result["g"], dtype=np.int64)
    counts = np.asarray(result["n"], dtype=np.int64)
    out = {}
    for q in cliques:
        mask = sum(1 << (len(names) - 1 - used.index(a)) for a in q)
        rows = grouping == ((1 << len(names)) - 1 - mask)
        shape = tuple(table.domain.size_of(a) for a in q)  # clique order, as given
        vec = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        if q:
            idx = tuple(np.asarray(result[names[used.index(a)]], dtype=np.int64)[rows] for a in q)
            np.add.at(vec, np.ravel_multi_index(idx, shape), counts[rows])
        else:
            vec[0] = counts[rows].sum()
        out[q] = vec
    return out


class SQLBackend:
    """A backend that runs `marginal_sql`, transpiled from DuckDB to `dialect`.

    A subclass names its engine, its sqlglot `dialect`, the exception types by which
    the engine refuses or fails a query (`errors`), and implements `fetch`.
    """

    engine = "DuckDB"
    dialect = "duckdb"
    errors: tuple[type[Exception], ...] = ()

    def marginals(self, table: Table, cliques: list[Clique]) -> dict[Clique, np.ndarray]:
        cliques = list(dict.fromkeys(cliques))
        if not cliques:
            return {}
        sql, names = marginal_sql(table, cliques)
        if self.dialect != "duckdb":
            sql = sqlglot.transpile(sql, read="duckdb", write=self.dialect)[0]
        try:
            result = self.fetch(sql, names + ["g", "n"])
        except self.errors as e:  # nothing has been charged yet: the caller charges after this
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise OperationalError(f"computing marginals of {table.name!r} on {self.engine} failed: {first}") from None
        return decode_marginals(table, cliques, names, result)

    def fetch(self, sql: str, columns: list[str]) -> dict[str, np.ndarray]:
        """Run `sql` in the engine; each named result column as an integer array (NULL: any value)."""
        raise NotImplementedError


class DuckDBBackend(SQLBackend):
    """Marginals computed by DuckDB on the connection that holds the protected data."""

    errors = (duckdb.Error,)

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def fetch(self, sql: str, columns: list[str]) -> dict[str, np.ndarray]:
        result = self.con.execute(sql).fetchnumpy()
        return {c: np.ma.getdata(result[c]) for c in columns}


def make_backend(backend: str | Backend, spark: Any = None) -> Backend | None:
    """The backend `connect` asks for: "duckdb" (None: the session's own connection),
    "spark" (on the session or master URL `spark`), or a `Backend` object for any other engine."""
    if spark is not None and backend != "spark":
        raise ProgrammingError("spark= is only used with backend='spark'")
    if backend == "duckdb":
        return None
    if backend == "spark":
        if importlib.util.find_spec("pyspark") is None:
            raise InterfaceError("backend='spark' needs pyspark: pip install 'dpsql[spark]'")
        from dpsql.spark_backend import SparkBackend

        return SparkBackend(spark)
    if isinstance(backend, str) or not hasattr(backend, "marginals"):
        raise ProgrammingError(f"unknown backend {backend!r}: use 'duckdb', 'spark' or a Backend object")
    return backend
