"""Empirical RMSE vs the planner's expected RMSE on the demo dashboard.

The dashboard is planned once; its marginals are computed exactly once; then
the noise is drawn `--draws` times (exact samplers, seeded), the model refit
and every block answered. The empirical RMSE of each block over the draws is
compared with the planner's exact expected RMSE, which is computed from the
plan alone (no data).

    python -m benchmarks.demo_rmse --rows 1000000 --draws 200
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import duckdb
import numpy as np

from benchmarks.simulate import exact, plan_squared_errors
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.deployment.demo import DASHBOARD
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.measurement import GAUSSIAN
from mechanisms.workload import Workload
from planner.planner import plan_workload

RESULTS = Path(__file__).parent / "results" / "demo_rmse.json"


def simulate(rows: int, draws: int, epsilon: float, delta: float) -> tuple[str, list[dict], float]:
    """Plan the dashboard, measure it `draws` times; per-block expected vs empirical RMSE."""
    con = duckdb.connect()
    create_people_table(con, rows=rows)
    catalog = Catalog.from_toml(PEOPLE_CATALOG_TOML)
    table = catalog.get("people")
    blocks = {}
    for i, sql in enumerate(DASHBOARD, start=1):
        for b in compile_query(sql, catalog, label=f"q{i}").blocks:
            blocks.setdefault(b.fingerprint(table.domain), b)
    workload = Workload(table.domain, list(blocks.values()))
    plan = plan_workload(workload, epsilon_delta_to_zcdp(epsilon, delta), GAUSSIAN, delta)
    truth = exact(table, workload, DuckDBBackend(con), {m.clique for m in plan.measurements})
    started = time.perf_counter()
    squared = plan_squared_errors(plan, workload, truth, draws, GAUSSIAN)
    seconds = time.perf_counter() - started
    records = []
    for b in workload.blocks:
        expected = plan.expected_rmse[b.name]
        empirical = squared[b.name] ** 0.5
        records.append({"block": b.name, "rows": b.num_rows(table.domain), "expected_rmse": expected,
                        "empirical_rmse": empirical, "ratio": empirical / expected})
    return plan.chosen, records, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--epsilon", type=float, default=0.5)
    parser.add_argument("--delta", type=float, default=1e-9)
    args = parser.parse_args()
    chosen, records, seconds = simulate(args.rows, args.draws, args.epsilon, args.delta)
    print(f"{'block':60s} {'expected':>10s} {'empirical':>10s} {'ratio':>7s}")
    for r in records:
        print(f"{r['block'][:60]:60s} {r['expected_rmse']:10.4g} {r['empirical_rmse']:10.4g} {r['ratio']:7.3f}")
    ratios = np.array([r["ratio"] for r in records])
    # Over D draws one row's empirical MSE has relative sd sqrt(2/D); its square root about half that.
    tolerance = 3 * 0.5 * (2 / args.draws) ** 0.5
    summary = {"rows": args.rows, "draws": args.draws, "epsilon": args.epsilon, "delta": args.delta,
               "plan": chosen, "mean_ratio": float(ratios.mean()), "min_ratio": float(ratios.min()),
               "max_ratio": float(ratios.max()), "one_row_3sd_tolerance": tolerance,
               "seconds_for_draws": seconds}
    print(json.dumps(summary, indent=2))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"summary": summary, "blocks": records}, indent=2) + "\n")


if __name__ == "__main__":
    main()
