"""Planning and one release of taxi's range dashboard in two checkouts: CPU time, peak memory, expected error.

Each checkout (a directory put first on PYTHONPATH) plans `benchmarks.planner`'s "taxi: range dashboard"
as that benchmark does (the table's size given, no planning limit) in a fresh process (cold caches,
OPENBLAS_NUM_THREADS=1), then releases the plan once as `benchmarks.simulate` does: the exact answers, noise
drawn with seed 0, every block answered by least squares. Checkouts alternate, `--rounds` times. Recorded:
CPU seconds of planning and of the release (the data scan for the exact counts is left out: the same in both),
the peak resident memory after each, the expected RMSE (exact for linear plans), the measured RMSE of the one
draw, the strategy's type and bytes, and, in the first round, the characters of its ledger spec
(`mechanisms.matrices.to_spec`, what a ledger stores with the measurement).

    PYTHONPATH=. python -m benchmarks.strategy_release --checkout before=/path/to/main --checkout after=. \\
        --rounds 3 --output benchmarks/results/strategy_release.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

WORKLOAD = "taxi: range dashboard"


def measure(spec_size: bool) -> dict:
    """One run in this process (imports from whatever checkout PYTHONPATH names first)."""
    import resource
    import time

    import duckdb
    import numpy as np

    from benchmarks.planner import NOISE, compile_workload, workloads
    from benchmarks.simulate import exact, plan_squared_errors, workload_rmse
    from dpsql.backends import DuckDBBackend
    from mechanisms.accounting import epsilon_delta_to_zcdp
    from mechanisms.matrices import to_spec
    from planner.planner import plan_workload

    def peak_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    con = duckdb.connect()
    rho = epsilon_delta_to_zcdp(1.0, 1e-9)
    _, catalog, queries, _ = next(w for w in workloads(con) if w[0] == WORKLOAD)
    workload = compile_workload(catalog, queries)
    table = next(iter(catalog.tables.values()))
    backend = DuckDBBackend(con)
    rows = int(backend.marginals(table, [()])[()][0])  # public, as in benchmarks.planner
    record: dict = {"checkout": os.environ["PYTHONPATH"].split(os.pathsep)[0], "rss_before_mb": peak_mb()}
    started = time.process_time()
    plan = plan_workload(workload, rho, NOISE, 1e-9, rows=rows)
    record["plan_cpu"] = time.process_time() - started
    record["rss_after_plan_mb"] = peak_mb()
    record["family"] = plan.chosen
    record["expected_rmse"] = workload_rmse({n: e**2 for n, e in plan.expected_rmse.items()}, workload)
    truth = exact(table, workload, backend, {m.clique for m in plan.measurements})
    started = time.process_time()
    squared = plan_squared_errors(plan, workload, truth, 1, NOISE)
    record["release_cpu"] = time.process_time() - started
    record["rss_after_release_mb"] = peak_mb()
    record["measured_rmse_seed0"] = workload_rmse(squared, workload)
    strategies = [m.strategy for m in plan.measurements if m.strategy is not None]
    record["strategies"] = [f"{type(s).__name__}{s.shape}" for s in strategies]
    record["strategy_bytes"] = sum(v.nbytes for s in strategies for v in vars(s).values() if isinstance(v, np.ndarray))
    if spec_size:
        record["ledger_spec_chars"] = sum(len(json.dumps(to_spec(s))) for s in strategies)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", default=[], help="NAME=DIRECTORY (repeat; alternated)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--spec-size", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.spec_size)))
        return
    checkouts = [c.split("=", 1) for c in args.checkout]
    records = []
    for round_ in range(args.rounds):
        for name, directory in checkouts:
            env = {**os.environ, "PYTHONPATH": str(Path(directory).resolve()), "OPENBLAS_NUM_THREADS": "1"}
            command = [sys.executable, "-P", str(Path(__file__).resolve()), "--worker"]  # -P: not this directory
            child = subprocess.run(command + ["--spec-size"] * (round_ == 0), env=env, capture_output=True,
                                   text=True, check=False)
            if child.returncode:
                raise RuntimeError(f"{name} failed:\n{child.stderr}")
            record = {"name": name, "round": round_, "load": os.getloadavg()[0], **json.loads(child.stdout)}
            records.append(record)
            print(json.dumps(record), flush=True)
    if args.output:
        args.output.write_text(json.dumps(records, indent=2) + "\n")


if __name__ == "__main__":
    main()
