"""Interactive latency: dpsql's answers against the exact DuckDB query, side by side in one run.

On the demo `people` table (1M and 10M rows, generated deterministically into a DuckDB
database file, checkpointed and opened again read-only, as an owner's database is), stored
as `create_people_table` stores it: categoricals as ENUMs of the declared values and NOT NULL
where the catalog has no NULLs, so the scan needs no per-row checks of the catalog (see
`dpsql.columns.StoredType`); with `--strings`, as a CSV import stores it (VARCHAR, nullable:
the checks run, once per distinct value of the dictionary-compressed strings),
for a few single-clique queries:

- exact: the same query in plain DuckDB SQL (the catalog's clamping and NULL rules
  written out), best of 5;
- first answer: a fresh DB-API connection and ledger, the query measured and answered
  (plan, scan, noise, charge), median of 5 fresh connections;
- re-ask: the same query again on that connection (answered free from the model), median of 20;
- EXPLAIN: a fresh connection, the plan with its expected error and predicted time (no data
  read), median of 5.

Goals (issue 17): re-ask <= 5 ms, first answer <= exact + 50 ms, EXPLAIN <= 30 ms.

    python -m benchmarks.latency [--rows 1000000 10000000] [--strings]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

import dpsql
from dpsql.demo_data import PEOPLE_CATALOG_TOML, create_people_table

RESULTS = Path(__file__).parent / "results" / "latency{}.json"  # "-strings" with --strings
# (DP query, the exact query with the catalog's semantics: hours_per_week clamped to 0..99, NULLs left out)
QUERIES = [
    ("SELECT sex, COUNT(*) FROM people GROUP BY sex",
     "SELECT sex, COUNT(*) FROM people GROUP BY sex"),
    ("SELECT education, COUNT(*) FROM people WHERE age BETWEEN 30 AND 39 GROUP BY education",
     "SELECT education, COUNT(*) FROM people WHERE age BETWEEN 30 AND 39 GROUP BY education"),
    ("SELECT sex, AVG(hours_per_week) FROM people GROUP BY sex",
     "SELECT sex, AVG(LEAST(GREATEST(hours_per_week, 0), 99)) FROM people GROUP BY sex"),
]


def _seconds(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _connect(con: duckdb.DuckDBPyConnection, seed: int):
    return dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=10.0, delta=1e-9, query_epsilon=0.1,
                         seed=seed)


def measure(con: duckdb.DuckDBPyConnection, dp_sql: str, exact_sql: str) -> dict:
    exact = min(_seconds(lambda: con.execute(exact_sql).fetchall()) for _ in range(5))
    first, reask, explain = [], [], []
    for seed in range(5):
        cur = _connect(con, seed).cursor()
        first.append(_seconds(lambda: (cur.execute(dp_sql), cur.fetchall())))
        reask += [_seconds(lambda: (cur.execute(dp_sql), cur.fetchall())) for _ in range(4)]
        cur = _connect(con, 100 + seed).cursor()
        explain.append(_seconds(lambda: (cur.execute("EXPLAIN " + dp_sql), cur.fetchall())))
    return {"exact_ms": exact * 1e3, "first_ms": statistics.median(first) * 1e3,
            "reask_ms": statistics.median(reask) * 1e3, "explain_ms": statistics.median(explain) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--strings", action="store_true",
                        help="store the categoricals as nullable VARCHAR (as a CSV import does), not typed")
    args = parser.parse_args()
    rows_out = []
    for rows in args.rows:
        path = Path(tempfile.mkdtemp(prefix="dpsql-latency-")) / "people.duckdb"
        con = duckdb.connect(str(path))
        create_people_table(con, rows=rows, typed=not args.strings)
        con.execute("CHECKPOINT")
        con.close()
        con = duckdb.connect(str(path), read_only=True)  # opened as an owner's database is
        _connect(con, 999).cursor().execute(QUERIES[0][0])  # warm imports and DuckDB once
        for dp_sql, exact_sql in QUERIES:
            r = {"rows": rows, "storage": "strings" if args.strings else "typed", "query": dp_sql,
                 **measure(con, dp_sql, exact_sql)}
            rows_out.append(r)
            print(f"{rows:>10,} exact {r['exact_ms']:7.1f} ms | first {r['first_ms']:7.1f} ms "
                  f"(exact + {r['first_ms'] - r['exact_ms']:5.1f}) | re-ask {r['reask_ms']:5.1f} ms | "
                  f"EXPLAIN {r['explain_ms']:6.1f} ms | {dp_sql}", flush=True)
        con.close()
        path.unlink()
    Path(str(RESULTS).format("-strings" if args.strings else "")).write_text(json.dumps(rows_out, indent=1) + "\n")


if __name__ == "__main__":
    main()
