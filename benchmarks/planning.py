"""Does planning stay bounded in time and memory, whatever the table's size?

Each case plans one workload on the demo `people` catalog with the table's size
declared public (`rows = N` in the catalog, so AIM and RAP are costed by
simulation) and reads no data: it is `EXPLAIN BEGIN WORKLOAD ... END WORKLOAD`
through a DB-API connection with the session's default planning budget.
Every case runs in a fresh process, so nothing is cached between cases and the
peak resident memory (ru_maxrss) is that case's own; CPU seconds are the
process's CPU time spent in the EXPLAIN (compiling, planning, predicting time).

Also measured: how quickly a cancellation (the shell's Ctrl-C) stops planning
that has no planning budget, and what the budget gives up, by planning the
same workload with the budget lifted (`SET dpsql.planning_seconds = 0`).

    python -m benchmarks.planning            # all cases
    python -m benchmarks.planning --quick    # 1M rows only
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "planning.json"
COMMAND = "python -m benchmarks.planning"
LIFTED_TIMEOUT = 600  # seconds a case planned without a budget may take before it is reported as unfinished
COLUMNS = ["age", "sex", "race", "education", "marital", "region", "hours_per_week", "income"]


def generated(n: int, seed: int = 0) -> list[str]:
    """`n` BI-style queries: COUNT/SUM/AVG, 0-2 GROUP BY columns, an age range filter in 60% of them."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        groups = rng.sample(["sex", "race", "education", "marital", "region"], rng.randint(0, 2))
        aggregate = rng.choice(["COUNT(*)", "SUM(hours_per_week)", "AVG(income)", "COUNT(*)"])
        low = rng.randint(0, 80)
        where = f" WHERE age BETWEEN {low} AND {low + rng.randint(5, 19)}" if rng.random() < 0.6 else ""
        group = f" GROUP BY {', '.join(groups)}" if groups else ""
        out.append(f"SELECT {', '.join(groups + [aggregate])} FROM people{where}{group}")
    return out


def workloads() -> dict[str, list[str]]:
    from dpsql.deployment.demo import DASHBOARD

    return {
        "GROUP BY age, income": ["SELECT age, income, COUNT(*) FROM people GROUP BY age, income"],
        "dashboard, 5 queries": DASHBOARD[:5],
        "dashboard, 10 queries": DASHBOARD[:10],
        "dashboard, 20 queries": DASHBOARD[:20],
        "all 2-way marginals (28)": [f"SELECT {a}, {b}, COUNT(*) FROM people GROUP BY {a}, {b}"
                                     for a, b in itertools.combinations(COLUMNS, 2)],
        "generated, 100 queries": generated(100),
    }


def _session(rows: int):
    import duckdb

    import dpsql
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML

    catalog = PEOPLE_CATALOG_TOML.replace("[tables.people.columns]", f"rows = {rows}\n[tables.people.columns]")
    con = duckdb.connect()  # an empty table: EXPLAIN reads no data
    con.execute("CREATE TABLE people (age INT, sex VARCHAR, race VARCHAR, education VARCHAR, marital VARCHAR, "
                "region VARCHAR, hours_per_week INT, income DOUBLE)")
    return dpsql.connect(con=con, catalog=catalog, epsilon=1.0, delta=1e-9)


def _script(queries: list[str]) -> str:
    return "EXPLAIN BEGIN WORKLOAD;\n" + ";\n".join(queries) + ";\nEND WORKLOAD;"


def run_case(rows: int, name: str, unlimited: bool) -> dict:
    """One case, in this process: plan, and report CPU, wall, peak memory and the plan's outcome."""
    import resource
    import time

    conn = _session(rows)
    if unlimited:
        conn.execute("SET dpsql.planning_seconds = 0")
    wall, cpu = time.perf_counter(), time.process_time()
    plan = conn.execute(_script(workloads()[name])).result.plan
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "rows": rows, "workload": name, "queries": len(workloads()[name]), "unlimited": unlimited,
        "cpu_seconds": round(cpu, 3), "wall_seconds": round(wall, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "chosen": plan.splitlines()[0].split("Plan: ")[1].split(",")[0],
        "budget_reached": "planning budget of" in plan,
        "total_expected_squared_error": _total_error(plan),
    }


def _total_error(plan: str) -> float:
    """Σ over queries of the expected RMSE² (the plan text's per-query lines)."""
    total = 0.0
    for line in plan.splitlines():
        if "expected RMSE" in line or "predicted RMSE" in line:
            total += float(line.rsplit(" ", 1)[1]) ** 2
    return total


def run_cancel(rows: int, after: float = 0.3) -> dict:
    """Plan all 2-way marginals with no planning budget (about a minute), cancel after `after` s: how long
    until it stops."""
    import threading
    import time

    import dpsql

    conn = _session(rows)
    conn.execute("SET dpsql.planning_seconds = 0")
    flag = {"at": None}
    conn.session.cancelled = lambda: flag["at"] is not None

    def cancel():
        flag["at"] = time.perf_counter()

    threading.Timer(after, cancel).start()
    try:
        conn.execute(_script(workloads()["all 2-way marginals (28)"]))
        return {"rows": rows, "cancel_latency_seconds": None}
    except dpsql.OperationalError:
        return {"rows": rows, "cancel_latency_seconds": round(time.perf_counter() - flag["at"], 3)}


def _child(args: list[str], timeout: float = 1800) -> dict | None:
    """One case in a fresh process (None: it ran past `timeout` seconds)."""
    try:
        done = subprocess.run([sys.executable, "-W", "ignore", "-m", "benchmarks.planning", *args],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M declared rows only")
    parser.add_argument("--case", nargs=3, metavar=("ROWS", "WORKLOAD", "UNLIMITED"), help=argparse.SUPPRESS)
    parser.add_argument("--cancel", type=int, metavar="ROWS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(int(args.case[0]), args.case[1], args.case[2] == "1")))
        return
    if args.cancel:
        print(json.dumps(run_cancel(args.cancel)))
        return
    sizes = [1_000_000] if args.quick else [1_000_000, 100_000_000]
    cases = [_child(["--case", str(rows), name, "0"]) for rows in sizes for name in workloads()]
    reached = [(c["rows"], c["workload"]) for c in cases if c["budget_reached"]]
    lifted = [_child(["--case", str(rows), name, "1"], LIFTED_TIMEOUT) or
              {"rows": rows, "workload": name, "cpu_seconds": None} for rows, name in reached]
    cancels = [_child(["--cancel", str(rows)]) for rows in sizes]
    print(f"{'rows':>12} {'workload':28} {'CPU s':>7} {'peak MiB':>9}  chosen (budget reached?)")
    for c in cases:
        print(f"{c['rows']:>12,} {c['workload']:28} {c['cpu_seconds']:>7.2f} {c['peak_rss_mib']:>9.0f}  "
              f"{c['chosen']}{' (budget reached)' if c['budget_reached'] else ''}")
    for c in lifted:
        mine = next(x for x in cases if x["rows"] == c["rows"] and x["workload"] == c["workload"])
        if c["cpu_seconds"] is None:
            print(f"without a budget, {c['workload']} at {c['rows']:,} rows: not done in {LIFTED_TIMEOUT} s")
            continue
        print(f"without a budget, {c['workload']} at {c['rows']:,} rows: {c['cpu_seconds']:.1f} s CPU, "
              f"{c['chosen']}, total expected squared error {c['total_expected_squared_error']:.4g} "
              f"(with the budget: {mine['total_expected_squared_error']:.4g})")
    for c in cancels:
        print(f"cancelled planning stopped {c['cancel_latency_seconds']} s after the cancellation ({c['rows']:,} rows)")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"command": COMMAND, "cases": cases, "without_budget": lifted,
                                   "cancellation": cancels}, indent=1))


if __name__ == "__main__":
    main()
