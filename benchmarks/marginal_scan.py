"""Measuring marginals inside DuckDB vs a plain GROUP BY of the same columns.

dpsql computes each clique's marginal as a GROUP BY over the catalog's binning
expressions, with the protected-table row filter, all cliques of a plan in one
GROUPING SETS scan; only (bins, count) rows reach Python. This times that
against DuckDB's plain GROUP BY of the same columns, side by side, interleaved.
The plain query groups the raw columns, except that a numeric column is grouped
by FLOOR(x / width): grouping raw doubles gives one group per distinct value,
not a histogram, and would flatter dpsql.

    python -m benchmarks.marginal_scan --rows 10000000 [--storage memory]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.tables.table import Table
from dpsql.tables.columns import NUMERIC
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

RESULTS = Path(__file__).parent / "results" / "marginal_scan.json"
MEMORY_LIMIT = "6GB"  # DuckDB's cap, well under the 24 GiB machine shared with other work

ONE_CLIQUE = [("age", "sex", "education")]
# The demo dashboard's plan (planner of this repository), its 10 largest distinct cliques.
PLAN_CLIQUES = [
    ("age", "education", "income"), ("age", "sex", "hours_per_week"), ("age", "marital"),
    ("age", "education"), ("region", "income"), ("sex", "education"), ("race", "region"),
    ("age",), ("income",), ("hours_per_week",),
]


def people_table() -> Table:
    return Catalog.from_toml(PEOPLE_CATALOG_TOML).get("people")


def plain_sql(table: Table, cliques: list[tuple[str, ...]]) -> str:
    """The plain GROUP BY (GROUPING SETS for several cliques) a non-private analyst would run."""

    def key(name: str) -> str:
        column = table.columns[name]
        return f"FLOOR({name} / {column.width})" if column.kind == NUMERIC else name

    if len(cliques) == 1:
        keys = ", ".join(key(a) for a in cliques[0])
        return f"SELECT {keys}, COUNT(*) FROM {table.name} GROUP BY {keys}"
    sets = ", ".join("(" + ", ".join(key(a) for a in q) + ")" for q in cliques)
    return f"SELECT COUNT(*) FROM {table.name} GROUP BY GROUPING SETS ({sets})"


def interleaved(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each run, the runs taken in turn so machine noise hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) for name, t in times.items()}


def connect_duckdb(database: str, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection capped at MEMORY_LIMIT, without a progress bar."""
    con = duckdb.connect(database, read_only=read_only)
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    return con


def open_people(rows: int, storage: str, folder: str) -> duckdb.DuckDBPyConnection:
    """A connection holding `rows` generated people: in a database file (compressed, as a
    data owner keeps one; reopened, as dpsql would open it) or in memory (uncompressed)."""
    if storage == "memory":
        con = connect_duckdb(":memory:")
        create_people_table(con, rows=rows)
        return con
    path = str(Path(folder) / "people.duckdb")
    with connect_duckdb(path) as con:
        create_people_table(con, rows=rows)
    return connect_duckdb(path, read_only=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--storage", choices=["file", "memory"], default="file")
    args = parser.parse_args()
    table = people_table()
    records = []
    with tempfile.TemporaryDirectory(prefix="dpsql-scan-") as folder:
        con = open_people(args.rows, args.storage, folder)
        backend = DuckDBBackend(con)
        for name, cliques in (("one 3-way clique", ONE_CLIQUE), ("10-clique plan, one scan", PLAN_CLIQUES)):
            sql = plain_sql(table, cliques)
            medians = interleaved({
                "dpsql": lambda cliques=cliques: backend.marginals(table, cliques),
                "plain": lambda sql=sql: con.execute(sql).fetchall(),
            }, args.repeats)
            dp, plain = medians["dpsql"], medians["plain"]
            records.append({"case": name, "rows": args.rows, "storage": args.storage, "cliques": len(cliques),
                            "dpsql_seconds": dp, "plain_groupby_seconds": plain, "ratio": dp / plain})
            print(f"{name:28s} dpsql {dp:6.3f} s   plain GROUP BY {plain:6.3f} s   ratio {dp / plain:5.2f}")
        con.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of the process: {peak:.0f} MB")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"records": records, "peak_memory_mb": peak}, indent=2) + "\n")


if __name__ == "__main__":
    main()
