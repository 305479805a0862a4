"""EMIT latency of a continual query on a large append-only table, against the exact query (issue 20).

A generated signup stream (`--rows` rows in a DuckDB file: users with 1–3 signups over 52
weeks, 4 regions), declared `time = "signup_time"`, `append_only = true`, a privacy unit
of 3 rows. `CREATE CONTINUAL QUERY weekly AS SELECT region, COUNT(*) ... FOR 52 RELEASES`
once; then every `EMIT weekly` of the horizon (the next window: the scan bounds each unit
that has rows in the windows the due releases cover to its first 3 rows by time, over the
rows up to the window's end only, counts, adds the noise and records it) timed beside the
exact count of the same window by region in plain DuckDB (no bounding). The time strategy
is the planner's choice at T = 52.

    python -m benchmarks.emit_latency [--rows 1000000 10000000] [--emits 52]
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

CATALOG = """
[tables.signups]
privacy_unit = "user_id"
max_rows_per_unit = 3
time = "signup_time"
append_only = true
[tables.signups.columns]
region = { type = "categorical", values = ["N", "E", "S", "W"] }
"""
CREATE = ("CREATE CONTINUAL QUERY weekly AS SELECT region, COUNT(*) AS signups FROM signups GROUP BY region "
          "EMIT EVERY INTERVAL '7 days' ON signup_time FROM '2025-01-06' FOR 52 RELEASES WITH (epsilon = 1)")


def write_stream(path: Path, rows: int) -> None:
    """`rows` signups of rows/2 users (deterministic), checkpointed as an owner's data is stored."""
    con = duckdb.connect(str(path))
    con.execute(f"""CREATE TABLE signups AS SELECT CAST(hash(range) % {max(rows // 2, 1)} AS BIGINT) AS user_id,
        TIMESTAMP '2025-01-06' + CAST(hash(range * 7 + 1) % (52 * 7 * 86400) AS BIGINT) * INTERVAL 1 SECOND
        AS signup_time, ['N', 'E', 'S', 'W'][CAST(hash(range * 13 + 5) % 4 AS BIGINT) + 1] AS region
        FROM range({rows})""")
    con.execute("CHECKPOINT")
    con.close()


def exact_window(con, window: int) -> float:
    """Seconds to count one window by region exactly (best of 3)."""
    sql = (f"SELECT region, COUNT(*) FROM signups WHERE signup_time >= TIMESTAMP '2025-01-06' + {window * 7} * "
           f"INTERVAL 1 DAY AND signup_time < TIMESTAMP '2025-01-06' + {(window + 1) * 7} * INTERVAL 1 DAY "
           "GROUP BY region")
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        con.execute(sql).fetchall()
        best = min(best, time.perf_counter() - start)
    return best


def run(rows: int, emits: int, folder: Path) -> dict:
    path = folder / f"signups_{rows}.duckdb"
    write_stream(path, rows)
    exact_con = duckdb.connect(str(path), read_only=True)
    with dpsql.connect(str(path), catalog=CATALOG, epsilon=2.0, delta=1e-6, state=str(folder / f"l{rows}")) as conn:
        cur = conn.cursor()
        cur.execute(CREATE)
        strategy = dict(cur.fetchall())["time strategy"]
        emit_ms, exact_ms = [], []
        for window in range(emits):
            start = time.perf_counter()
            cur.execute("EMIT weekly").fetchall()
            emit_ms.append(1000 * (time.perf_counter() - start))
            exact_ms.append(1000 * exact_window(exact_con, window))
    exact_con.close()
    return {"rows": rows, "strategy": strategy, "emit_ms": emit_ms, "exact_ms": exact_ms,
            "emit_median_ms": statistics.median(emit_ms), "emit_max_ms": max(emit_ms),
            "exact_median_ms": statistics.median(exact_ms)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--emits", type=int, default=52)
    parser.add_argument("--out", default="benchmarks/results/emit_latency.json")
    args = parser.parse_args()
    records = []
    with tempfile.TemporaryDirectory() as folder:
        for rows in args.rows:
            record = run(rows, args.emits, Path(folder))
            records.append(record)
            print(f"{rows:>11,} rows  {record['strategy']:<20} EMIT median {record['emit_median_ms']:8.1f} ms, "
                  f"slowest {record['emit_max_ms']:8.1f} ms over {args.emits} windows; exact window median "
                  f"{record['exact_median_ms']:6.1f} ms", flush=True)
    Path(args.out).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
