"""`dpsql demo`: a census-like table, a 22-query dashboard, answers beside the truth.

The demo owns its data (generated deterministically, no download), so it can
print the exact answer next to each private one. The true values are
computed under the same catalog semantics (clamping, bins), from exact
marginals: they are what the DP answers estimate.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

import duckdb
import numpy as np

import dpsql
from dpsql.backends import DuckDBBackend
from dpsql.sql.compiler import CompiledQuery, compile_query
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.answers.result import Result, aggregate_answers, assemble
from mechanisms.arrays import to_numpy

DASHBOARD = [
    "SELECT COUNT(*) AS people FROM people",
    "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex",
    "SELECT race, COUNT(*) AS n FROM people GROUP BY race",
    "SELECT education, COUNT(*) AS n FROM people GROUP BY education",
    "SELECT marital, COUNT(*) AS n FROM people GROUP BY marital",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region",
    "SELECT age, COUNT(*) AS n FROM people GROUP BY age",
    "SELECT COUNT(*) AS children FROM people WHERE age < 18",
    "SELECT COUNT(*) AS working_age FROM people WHERE age BETWEEN 18 AND 64",
    "SELECT COUNT(*) AS seniors FROM people WHERE age >= 65",
    "SELECT COUNT(*) AS thirties FROM people WHERE age BETWEEN 30 AND 39",
    "SELECT sex, education, COUNT(*) AS n FROM people GROUP BY sex, education",
    "SELECT region, race, COUNT(*) AS n FROM people GROUP BY region, race",
    "SELECT education, AVG(income) AS avg_income FROM people WHERE age >= 25 GROUP BY education",
    "SELECT sex, AVG(hours_per_week) AS avg_hours FROM people WHERE age BETWEEN 25 AND 64 GROUP BY sex",
    "SELECT COUNT(*) AS high_income FROM people WHERE income >= 100000",
    "SELECT COUNT(*) FILTER (WHERE hours_per_week IS NULL) AS no_hours, COUNT(hours_per_week) AS with_hours FROM people",
    "SELECT marital, COUNT(*) AS adults FROM people WHERE age >= 18 GROUP BY marital",
    "SELECT SUM(CASE WHEN education IN ('Bachelors', 'Masters', 'Doctorate') THEN 1 ELSE 0 END) AS graduates "
    "FROM people WHERE age >= 25",
    "SELECT region, SUM(income) AS total_income FROM people GROUP BY region",
    "SELECT COUNT(*) AS young_married FROM people WHERE age BETWEEN 18 AND 24 AND marital = 'Married'",
    "SELECT income, COUNT(*) AS n FROM people GROUP BY income HAVING COUNT(*) > 10000 ORDER BY n DESC",
]

SHOWN_ROWS = 8


def true_result(query: CompiledQuery, backend: DuckDBBackend) -> Result:
    """The exact answer under the catalog's semantics (the demo owns its data)."""
    cliques = [b.attributes(query.table.domain) for b in query.blocks]
    return assemble(query, aggregate_answers(query, _ExactAnswers(query.table.domain, backend.marginals(query.table,
                                                                                                          cliques))))


class _ExactAnswers:
    """Each block's exact answer from the table's marginals, with no error: what `aggregate_answers` turns
    into the exact AVG, variance or quantile."""

    def __init__(self, domain, counts):
        self.domain, self.counts = domain, counts

    def answer(self, block) -> tuple[np.ndarray, np.ndarray]:
        clique = block.attributes(self.domain)
        value = np.asarray(to_numpy(block.matrix(self.domain).matvec(self.counts[clique].astype(float))), dtype=float)
        return value, np.zeros(len(value))

    def covariance(self, first, second) -> np.ndarray:
        return np.zeros(first.num_rows(self.domain))


def _fmt(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def print_comparison(sql: str, dp: Result, truth: Result, out: TextIO) -> None:
    keys = [i for i, e in enumerate(dp.stderr[0] if dp.stderr else []) if e is None]
    truth_by_key = {tuple(r[i] for i in keys): r for r in truth.rows}
    ci = dp.ci(0.95)
    out.write(f"\n  {sql}\n")
    header = " | ".join(dp.columns)
    out.write(f"    {header}   (DP value ± 95% half-width  [true])\n")
    for row, err, interval in list(zip(dp.rows, dp.stderr, ci))[:SHOWN_ROWS]:
        true_row = truth_by_key.get(tuple(row[i] for i in keys))
        cells = []
        for j, v in enumerate(row):
            if err[j] is None:
                cells.append(_fmt(v))
                continue
            half = (interval[j][1] - interval[j][0]) / 2 if interval[j] else float("nan")
            true_v = _fmt(true_row[j]) if true_row is not None else "-"
            cells.append(f"{_fmt(v)} ± {half:,.1f}  [{true_v}]")
        out.write("    " + " | ".join(cells) + "\n")
    if len(dp.rows) > SHOWN_ROWS:
        out.write(f"    ... {len(dp.rows) - SHOWN_ROWS} more rows\n")


def run_demo(rows: int = 1_000_000, epsilon: float = 1.0, workload_epsilon: float = 0.5,
             seed: int | None = None, out: TextIO = sys.stdout) -> dict:
    """Generate the data, run the dashboard as one workload, print answers vs truth."""
    started = time.perf_counter()
    con = duckdb.connect()
    create_people_table(con, rows=rows)
    out.write(f"Generated table people: {rows:,} rows in {time.perf_counter() - started:.1f} s\n")
    conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=epsilon, delta=1e-9, seed=seed)
    cur = conn.cursor()
    script = f"BEGIN WORKLOAD WITH (epsilon = {workload_epsilon});\n" + ";\n".join(DASHBOARD) + ";\nEND WORKLOAD;"
    t0 = time.perf_counter()
    cur.execute(script)
    workload_seconds = time.perf_counter() - t0
    first = cur.result
    out.write(f"\nDashboard of {len(DASHBOARD)} queries, planned and measured once "
              f"({workload_seconds:.1f} s): {first.charge_text}\n")
    out.write("\n" + (first.plan or "") + "\n")
    backend = DuckDBBackend(con)
    index = 0
    while True:
        query = compile_query(DASHBOARD[index], conn.session.catalog)
        print_comparison(DASHBOARD[index], cur.result, true_result(query, backend), out)
        index += 1
        if not cur.nextset():
            break
    out.write("\nAsking query 2 again (answered from the model, free):\n")
    cur.execute(DASHBOARD[1])
    out.write(f"  {cur.result.charge_text}\n")
    adhoc = "SELECT race, AVG(income) AS avg_income FROM people WHERE age >= 25 GROUP BY race"
    cur.execute(adhoc)
    out.write("\nA new ad-hoc query spends the per-query share:\n")
    print_comparison(adhoc, cur.result, true_result(compile_query(adhoc, conn.session.catalog), backend), out)
    out.write(f"  {cur.result.charge_text}\n")
    b = conn.budget
    out.write(f"\nBudget: total {b.total}; spent {b.spent}; remaining {b.remaining}\n")
    total = time.perf_counter() - started
    out.write(f"Demo finished in {total:.1f} s\n")
    conn.close()
    return {"seconds": total, "workload_seconds": workload_seconds, "spent_epsilon": b.spent.epsilon}
