"""Measuring marginals inside DuckDB vs a plain GROUP BY of the same columns.

dpsql computes each clique's marginal as a GROUP BY over the catalog's binning
expressions, with the protected-table row filter, all cliques of a plan in one
GROUPING SETS scan; only (bins, count) rows reach Python. This times that
against DuckDB's plain GROUP BY on the raw columns, side by side, interleaved.

    python -m benchmarks.marginal_scan --rows 10000000
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path

import duckdb

from dpsql.backend import DuckDBBackend
from dpsql.catalog import Catalog
from dpsql.demo_data import PEOPLE_CATALOG_TOML, create_people_table

RESULTS = Path(__file__).parent / "results" / "marginal_scan.json"

ONE_CLIQUE = [("age", "sex", "education")]
PLAN_CLIQUES = [
    ("age",), ("sex",), ("race",), ("education",), ("marital",), ("region",), ("income",),
    ("sex", "education"), ("race", "region"), ("age", "marital"),
]


def _plain_sql(cliques) -> str:
    if len(cliques) == 1:
        cols = ", ".join(cliques[0])
        return f"SELECT {cols}, COUNT(*) FROM people GROUP BY {cols}"
    cols = sorted({c for q in cliques for c in q})
    sets = ", ".join("(" + ", ".join(q) + ")" for q in cliques)
    return f"SELECT {', '.join(cols)}, COUNT(*) FROM people GROUP BY GROUPING SETS ({sets})"


def _time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    t = time.perf_counter()
    create_people_table(con, rows=args.rows)
    print(f"generated {args.rows:,} rows in {time.perf_counter() - t:.1f} s")
    table = Catalog.from_toml(PEOPLE_CATALOG_TOML).get("people")
    backend = DuckDBBackend(con)
    records = []
    for name, cliques in (("one 3-way clique", ONE_CLIQUE), ("10-clique plan, one scan", PLAN_CLIQUES)):
        dp_times, plain_times = [], []
        for _ in range(args.repeats):  # interleaved so machine noise hits both alike
            dp_times.append(_time(lambda: backend.marginals(table, cliques), 1))
            plain_times.append(_time(lambda: con.execute(_plain_sql(cliques)).fetchall(), 1))
        dp, plain = statistics.median(dp_times), statistics.median(plain_times)
        records.append({"case": name, "rows": args.rows, "cliques": len(cliques),
                        "dpsql_seconds": dp, "plain_groupby_seconds": plain, "ratio": dp / plain})
        print(f"{name:28s} dpsql {dp:6.3f} s   plain GROUP BY {plain:6.3f} s   ratio {dp / plain:5.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of the process: {peak:.0f} MB")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"records": records, "peak_memory_mb": peak}, indent=2) + "\n")


if __name__ == "__main__":
    main()
