"""The planner's expected RMSE against the certified linear bound, on every workload of `benchmarks.planner`.

Planning only (no noise is drawn, so no sampling error): each workload is
planned as `benchmarks.planner` plans it (the table's size given, no planning
limit) and its expected RMSE per row (exact for linear plans) is set beside
`benchmarks.planner.linear_bound_rmse`, the lowest RMSE any linear strategy can
reach. One JSON record per workload on stdout; run it with two checkouts on
PYTHONPATH to compare them.

    PYTHONPATH=. python -m benchmarks.linear_bound_ratios --skip "8 attributes" thresholds d=10
"""

from __future__ import annotations

import argparse
import json
import time

import duckdb

from benchmarks.planner import NOISE, compile_workload, linear_bound_rmse, workload_rmse, workloads
from dpsql.backends import DuckDBBackend
from mechanisms.accounting import epsilon_delta_to_zcdp
from planner.planner import plan_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", nargs="*", default=[], help="leave out workloads whose name contains any of these")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    args = parser.parse_args()
    con = duckdb.connect()
    rho = epsilon_delta_to_zcdp(args.epsilon, args.delta)
    for name, catalog, queries, range_or_marginal in workloads(con):
        if any(s in name for s in args.skip):
            continue
        workload = compile_workload(catalog, queries)
        record: dict = {"workload": name}
        started = time.process_time()
        bound = linear_bound_rmse(workload, rho) if range_or_marginal else None
        record["bound_cpu"] = time.process_time() - started
        record["linear_bound_rmse"], record["linear_bound"] = (None, None) if bound is None else bound
        table = next(iter(catalog.tables.values()))
        rows = int(DuckDBBackend(con).marginals(table, [()])[()][0])  # public, as in benchmarks.planner
        started = time.process_time()
        plan = plan_workload(workload, rho, NOISE, args.delta, rows=rows)
        record["plan_cpu"] = time.process_time() - started
        record["planner_family"] = plan.chosen
        record["planner_expected_rmse"] = workload_rmse({n: e**2 for n, e in plan.expected_rmse.items()}, workload)
        record["expected_rmse"] = {a.name: a.rmse for a in plan.alternatives}
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
