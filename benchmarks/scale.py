"""Scale: measuring a realistic 10-clique plan at 1M, 10M and 100M rows.

For each size the demo table is generated into a DuckDB database file (and, for
the Spark sizes, exported to Parquet). Then, each step in a fresh process so
that its peak resident memory is its own:

1. timing: dpsql's measurement of the plan (one GROUPING SETS scan, binning and
   the row filter in SQL) and the plain GROUP BY GROUPING SETS of the same
   columns (see `benchmarks.marginal_scan.plain_sql`), interleaved, medians;
2. peak memory of a process that only measures the plan once (and of one that
   only runs the plain query), for DuckDB;
3. the same on Spark in local mode, reading the Parquet copy (1M and 10M rows);
   Spark's peak is the Python driver's plus the JVM's high-water mark.

Writes benchmarks/results/scale.json, a list of records
{"backend", "rows", "cliques", "measure_seconds", "groupby_seconds",
"peak_memory_mb", "groupby_peak_memory_mb", "ratio"}; temporary files are removed.

    python -m benchmarks.scale [--rows 1000000 10000000 100000000] [--spark-rows 1000000 10000000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot

from benchmarks.marginal_scan import (
    PLAN_CLIQUES,
    connect_duckdb,
    interleaved,
    open_people,
    people_table,
    plain_sql,
)
from dpsql.backends import DuckDBBackend

RESULTS = Path(__file__).parent / "results" / "scale.json"


def in_child(step: Callable[..., Any], *args: Any) -> Any:
    """Run `step(*args)` in a fresh process (its own peak memory, its own JVM)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(step, *args).result()


def generate(rows: int, folder: str, parquet: bool) -> float:
    """Write the people table to `folder` (DuckDB file, optionally Parquet); seconds taken."""
    started = time.perf_counter()
    con = open_people(rows, "file", folder)
    if parquet:
        con.execute(f"COPY people TO '{Path(folder) / 'people.parquet'}' (FORMAT parquet)")
    con.close()
    return time.perf_counter() - started


@dataclass
class Engine:
    """The two timed runs on one engine, how to release it, and memory it holds outside
    this process (Spark's JVM)."""

    runs: dict[str, Callable[[], object]]
    close: Callable[[], None]
    outside_peak_mb: Callable[[], float] = lambda: 0.0


def _duckdb(folder: str) -> Engine:
    con = connect_duckdb(str(Path(folder) / "people.duckdb"), read_only=True)
    table, backend = people_table(), DuckDBBackend(con)
    sql = plain_sql(table, PLAN_CLIQUES)
    runs = {"measure": lambda: backend.marginals(table, PLAN_CLIQUES), "groupby": lambda: con.execute(sql).fetchall()}
    return Engine(runs, con.close)


def _spark(folder: str) -> Engine:
    from pyspark.sql import SparkSession

    from dpsql.backends.spark import SparkBackend

    spark = (
        SparkSession.builder.master("local[2]").appName("dpsql-scale").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false").getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(str(Path(folder) / "people.parquet")).createOrReplaceTempView("people")
    table, backend = people_table(), SparkBackend(spark)
    sql = sqlglot.transpile(plain_sql(table, PLAN_CLIQUES), read="duckdb", write="spark")[0]
    runs = {"measure": lambda: backend.marginals(table, PLAN_CLIQUES), "groupby": lambda: spark.sql(sql).collect()}

    def jvm_peak_mb() -> float:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        status = Path(f"/proc/{pid}/status").read_text()
        return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")) / 1024

    return Engine(runs, spark.stop, jvm_peak_mb)


ENGINES = {"duckdb": _duckdb, "spark": _spark}


def timing(engine: str, folder: str, repeats: int) -> dict[str, float]:
    """Median seconds of the plan's measurement and of the plain query, after one warm-up each."""
    opened = ENGINES[engine](folder)
    interleaved(opened.runs, 1)
    medians = interleaved(opened.runs, repeats)
    opened.close()
    return medians


def peak(engine: str, folder: str, run: str) -> float:
    """Peak resident memory (MB) of a fresh process that does only `run`, once."""
    opened = ENGINES[engine](folder)
    opened.runs[run]()
    mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 + opened.outside_peak_mb()
    opened.close()
    return mb


def measure(engine: str, rows: int, folder: str, repeats: int) -> dict[str, Any]:
    medians = in_child(timing, engine, folder, repeats)
    record = {
        "backend": engine, "rows": rows, "cliques": len(PLAN_CLIQUES),
        "measure_seconds": medians["measure"], "groupby_seconds": medians["groupby"],
        "peak_memory_mb": in_child(peak, engine, folder, "measure"),
        "groupby_peak_memory_mb": in_child(peak, engine, folder, "groupby"),
        "ratio": medians["measure"] / medians["groupby"],
    }
    print(f"{engine:7s} {rows:>12,} rows  measure {record['measure_seconds']:7.2f} s  "
          f"plain GROUP BY {record['groupby_seconds']:7.2f} s  ratio {record['ratio']:5.2f}  "
          f"peak {record['peak_memory_mb']:6.0f} MB (plain {record['groupby_peak_memory_mb']:6.0f} MB)", flush=True)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000, 100_000_000])
    parser.add_argument("--spark-rows", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    records = []
    for rows in sorted(set(args.rows) | set(args.spark_rows)):
        with tempfile.TemporaryDirectory(prefix="dpsql-scale-") as folder:
            seconds = in_child(generate, rows, folder, rows in args.spark_rows)
            print(f"generated {rows:,} rows in {seconds:.0f} s", flush=True)
            for engine in ("duckdb", "spark"):
                if rows in (args.rows if engine == "duckdb" else args.spark_rows):
                    records.append(measure(engine, rows, folder, args.repeats))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(records, indent=2) + "\n")


if __name__ == "__main__":
    main()
