"""Backends compute exact marginal count vectors inside the database.

Raw rows never leave the database: each clique becomes a GROUP BY over the
binning expressions of the catalog, all cliques of one plan in a single scan
(GROUPING SETS), and only (bin indices, count) rows come back.
"""

from __future__ import annotations

from typing import Protocol

import duckdb
import numpy as np

from dpsql.catalog import Table, quote_identifier
from dpsql.errors import OperationalError

Clique = tuple[str, ...]


class Backend(Protocol):
    def marginals(self, table: Table, cliques: list[Clique]) -> dict[Clique, np.ndarray]:
        """Exact integer counts of each clique's marginal, flattened in clique order."""


def marginal_sql(table: Table, cliques: list[Clique]) -> tuple[str, list[str]]:
    """One GROUPING SETS query over the binned protected table (DuckDB/ANSI SQL).

    Returns the SQL and the binned column names it groups by; the result has
    those columns, a `grouping` id per row and the count `n`.
    """
    used = [c for c in table.columns if any(c in q for q in cliques)]
    names = [f"b{i}" for i in range(len(used))]
    binned = ", ".join(
        f"{table.columns[c].bin_sql()} AS {n}" for c, n in zip(used, names)
    ) or "1 AS b_none"
    inner = f"SELECT {binned} FROM {quote_identifier(table.name)} WHERE {table.fits_sql()}"
    sets = ", ".join(
        "(" + ", ".join(names[used.index(a)] for a in q) + ")" for q in cliques
    )
    cols = ", ".join(names)
    if not names:
        return f"SELECT 0 AS grouping, COUNT(*) AS n FROM ({inner})", names
    if len(cliques) == 1:  # a plain GROUP BY is cheaper than a single grouping set
        return f"SELECT {cols}, 0 AS grouping, COUNT(*) AS n FROM ({inner}) GROUP BY {cols}", names
    return (
        f"SELECT {cols}, GROUPING({cols}) AS grouping, COUNT(*) AS n "
        f"FROM ({inner}) GROUP BY GROUPING SETS ({sets})",
        names,
    )


class DuckDBBackend:
    """Marginals computed by DuckDB on the connection that holds the protected data."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def marginals(self, table: Table, cliques: list[Clique]) -> dict[Clique, np.ndarray]:
        cliques = list(dict.fromkeys(cliques))
        if not cliques:
            return {}
        sql, names = marginal_sql(table, cliques)
        used = [c for c in table.columns if any(c in q for q in cliques)]
        try:
            result = self.con.execute(sql).fetchnumpy()
        except duckdb.Error as e:
            raise OperationalError(f"computing marginals of {table.name!r} failed: {e}") from None
        out = {}
        grouping = np.asarray(result["grouping"], dtype=np.int64)
        counts = np.asarray(result["n"], dtype=np.int64)
        for q in cliques:
            # GROUPING() sets bit (k-1-i) for column i when it is NOT grouped.
            mask = sum(1 << (len(names) - 1 - used.index(a)) for a in q) if names else 0
            rows = grouping == ((1 << len(names)) - 1 - mask)
            shape = table.domain.shape(q)
            vec = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
            if q:
                idx = tuple(np.asarray(result[names[used.index(a)]], dtype=np.int64)[rows] for a in q)
                np.add.at(vec, np.ravel_multi_index(idx, shape), counts[rows])
            else:
                vec[0] = counts[rows].sum()
            out[q] = vec
        return out
