"""How fast DuckDB computes marginals on this machine, measured on synthetic data of our own.

The planner predicts a plan's scan time as s + rows × (a + b × cliques) + c × cells
(`planner.timing.ScanSpeed`). The constants are fitted once per machine from
four timed calls of the very code that measures (`DuckDBBackend.marginals`)
on generated tables in a private in-memory database: nothing is read from a
protected table, so the prediction costs no privacy.
"""

from __future__ import annotations

import time
from functools import cache

import duckdb
import numpy as np

from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from planner.speed_cache import machine_cached
from planner.timing import ScanSpeed

_ROWS = (200_000, 20_000)  # two table sizes separate the per-query overhead from the per-row cost
_SIZES = {"a": 10, "b": 12, "c": 16, "d": 20, "e": 8, "f": 30}
_COLUMNS = "\n".join(f'{name} = {{ type = "integer", min = 0, max = {n - 1} }}' for name, n in _SIZES.items())
_CATALOG = "".join(f"[tables.{t}]\n[tables.{t}.columns]\n{_COLUMNS}\n" for t in ("calibration0", "calibration1"))


def _timed(backend: DuckDBBackend, table, cliques) -> float:
    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        backend.marginals(table, cliques)
        best = min(best, time.perf_counter() - started)
    return best


@cache
def duckdb_scan_speed() -> ScanSpeed:
    """Seconds per scan, per row, per row and clique, and per output cell of a DuckDB marginal scan
    (measured once per machine, kept by `planner.speed_cache`)."""
    return machine_cached("duckdb-scan", ScanSpeed, _measure_scan_speed)


def _measure_scan_speed() -> ScanSpeed:
    con = duckdb.connect()
    columns = ", ".join(f"(hash(i, {k}) % {n})::INTEGER AS {name}" for k, (name, n) in enumerate(_SIZES.items()))
    catalog = Catalog.from_toml(_CATALOG)
    backend = DuckDBBackend(con)
    design, seconds = [], []
    for t, rows in enumerate(_ROWS):
        con.execute(f"CREATE TABLE calibration{t} AS SELECT {columns} FROM range({rows}) AS r(i)")
        table = catalog.get(f"calibration{t}")
        runs = [[("a",)], [(name,) for name in _SIZES], [("a", "b", "c", "d")]] if t == 0 else [[("a",)]]
        for cliques in runs:
            design.append([1.0, rows, rows * len(cliques), sum(table.domain.size(c) for c in cliques)])
            seconds.append(_timed(backend, table, cliques))
    fitted = np.maximum(np.linalg.lstsq(np.array(design), np.array(seconds), rcond=None)[0], 0.0)
    con.close()
    return ScanSpeed(*(float(v) for v in fitted))


__all__ = ["duckdb_scan_speed"]
