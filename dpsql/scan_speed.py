"""How fast DuckDB computes marginals on this machine, measured on synthetic data of our own.

The planner predicts a plan's scan time as rows × (a + b × cliques) + c × cells
(`planner.timing.ScanSpeed`). The constants are fitted once per process from
three timed calls of the very code that measures (`DuckDBBackend.marginals`)
on a generated table in a private in-memory database: nothing is read from a
protected table, so the prediction costs no privacy.
"""

from __future__ import annotations

import time
from functools import cache

import duckdb
import numpy as np

from dpsql.backend import DuckDBBackend
from dpsql.catalog import Catalog
from planner.timing import ScanSpeed

_ROWS = 200_000
_SIZES = {"a": 10, "b": 12, "c": 16, "d": 20, "e": 8, "f": 30}
_CATALOG = "[tables.calibration]\n[tables.calibration.columns]\n" + "\n".join(
    f'{name} = {{ type = "integer", min = 0, max = {n - 1} }}' for name, n in _SIZES.items()
)


def _timed(backend: DuckDBBackend, table, cliques) -> float:
    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        backend.marginals(table, cliques)
        best = min(best, time.perf_counter() - started)
    return best


@cache
def duckdb_scan_speed() -> ScanSpeed:
    """Seconds per row, per row and clique, and per output cell of a DuckDB marginal scan."""
    con = duckdb.connect()
    columns = ", ".join(f"(hash(i, {k}) % {n})::INTEGER AS {name}" for k, (name, n) in enumerate(_SIZES.items()))
    con.execute(f"CREATE TABLE calibration AS SELECT {columns} FROM range({_ROWS}) AS r(i)")
    table = Catalog.from_toml(_CATALOG).get("calibration")
    backend = DuckDBBackend(con)
    domain = table.domain
    runs = [[("a",)], [(name,) for name in _SIZES], [("a", "b", "c", "d")]]
    times = [_timed(backend, table, cliques) for cliques in runs]
    design = np.array([[_ROWS, _ROWS * len(cs), sum(domain.size(c) for c in cs)] for cs in runs], dtype=float)
    per_row, per_row_clique, per_cell = np.maximum(np.linalg.lstsq(design, np.array(times), rcond=None)[0], 0.0)
    con.close()
    return ScanSpeed(float(per_row), float(per_row_clique), float(per_cell))


__all__ = ["duckdb_scan_speed"]
