"""Time series over a date column: what EXPLAIN plans, and what evaluating expressions costs.

A synthetic `sales` table (100,000 rows over 3,653 days, 2015–2024) is declared with a
`date` column by day. For a monthly series, and for a dashboard of month, quarter and year
series plus a last-quarter count, it prints the planner's alternatives (range trees among them:
GROUP BY DATE_TRUNC maps the days densely onto months). It then times the compilation of
expressions that DuckDB evaluates on the declared domain (`dpsql.sql.evaluation`).

    python -m benchmarks.time_series
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import duckdb

import dpsql
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query

CATALOG = """
[tables.sales]
rows = 100000
[tables.sales.columns]
day = { type = "date", min = "2015-01-01", max = "2024-12-31", granularity = "day" }
amount = { type = "integer", min = 0, max = 99 }
region = { type = "categorical", values = ["N", "S", "E", "W"] }
"""
WORKLOADS = {
    "monthly series": "SELECT DATE_TRUNC('month', day) AS month, COUNT(*) FROM sales GROUP BY 1",
    "month, quarter and year series, last quarter": (
        "BEGIN WORKLOAD; SELECT DATE_TRUNC('month', day) AS m, COUNT(*) FROM sales GROUP BY 1; "
        "SELECT DATE_TRUNC('quarter', day) AS q, COUNT(*) FROM sales GROUP BY 1; "
        "SELECT EXTRACT(year FROM day) AS y, COUNT(*) FROM sales GROUP BY 1; "
        "SELECT COUNT(*) FROM sales WHERE day >= '2024-10-01'; END WORKLOAD"),
}
EXPRESSIONS = [
    "SELECT DATE_TRUNC('month', day) AS m, COUNT(*) FROM sales GROUP BY 1",
    "SELECT COUNT(*) FROM sales WHERE region LIKE 'N%' AND amount % 10 = 0",
    "SELECT CASE WHEN region = 'N' AND amount < 50 THEN 'a' ELSE 'b' END AS s, COUNT(*) FROM sales GROUP BY 1",
    "SELECT COUNT(*) FROM sales WHERE day + INTERVAL 30 DAY > DATE '2024-06-01' AND amount > 20",
]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "sales.duckdb")
        con = duckdb.connect(path)
        con.execute("""CREATE TABLE sales AS SELECT DATE '2015-01-01' + CAST(hash(i) % 3653 AS INTEGER) AS day,
            CAST(hash(i, 2) % 100 AS INTEGER) AS amount, ['N', 'S', 'E', 'W'][CAST(hash(i, 3) % 4 + 1 AS INTEGER)]
            AS region FROM range(100000) AS r(i)""")
        con.close()
        cur = dpsql.connect(path, catalog=CATALOG, epsilon=1.0, state=str(Path(tmp) / "state"), seed=7).cursor()
        cur.execute("SET dpsql.planning_seconds = 0")
        for name, sql in WORKLOADS.items():
            cur.execute(f"EXPLAIN {sql}")
            lines = [r[0] for r in cur.fetchall()]
            start = next(i for i, line in enumerate(lines) if "alternatives" in line)
            print(f"## {name}")
            print("\n".join(line.strip() for line in lines[start + 1:] if line.startswith("    ")))
    catalog = Catalog.from_toml(CATALOG)
    print("## compile time of expressions evaluated on the declared domain")
    for sql in EXPRESSIONS:
        compile_query(sql, catalog)  # warm: DuckDB's function list, the sandbox
        start = time.perf_counter()
        for _ in range(5):
            compile_query(sql, catalog)
        print(f"{(time.perf_counter() - start) / 5 * 1000:7.1f} ms  {sql}")


if __name__ == "__main__":
    main()
