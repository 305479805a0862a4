"""The `dpsql` command line: `dpsql demo`, `dpsql explain`."""

from __future__ import annotations

import argparse
import sys

from dpsql.errors import Error


def _demo(args: argparse.Namespace) -> int:
    from dpsql.demo import run_demo

    run_demo(rows=args.rows, epsilon=args.epsilon, workload_epsilon=args.workload_epsilon, seed=args.seed)
    return 0


def _explain(args: argparse.Namespace) -> int:
    import dpsql

    with dpsql.connect(args.database, catalog=args.catalog, state=":memory:", epsilon=args.epsilon) as conn:
        cur = conn.cursor()
        cur.execute(args.sql if args.sql.strip().upper().startswith("EXPLAIN") else "EXPLAIN " + args.sql)
        for (line,) in cur.fetchall():
            print(line)
        if args.chart:
            print(f"chart written to {conn.session.chart(args.sql, args.chart)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dpsql", description="Differentially private SQL that plans.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the dashboard demo on a generated census-like table")
    demo.add_argument("--rows", type=int, default=1_000_000, help="rows to generate (default 1,000,000)")
    demo.add_argument("--epsilon", type=float, default=1.0, help="total budget ε of the session (δ=1e-9)")
    demo.add_argument("--workload-epsilon", type=float, default=0.5, help="ε spent by the dashboard")
    demo.add_argument("--seed", type=int, default=None, help="noise seed (reproducible runs; testing only)")
    demo.set_defaults(run=_demo)
    explain = sub.add_parser("explain", help="show the plan for a query (reads no data, spends nothing)")
    explain.add_argument("database", help="DuckDB database file")
    explain.add_argument("--catalog", required=True, help="catalog TOML file")
    explain.add_argument("sql", help="query or BEGIN WORKLOAD ... END WORKLOAD script")
    explain.add_argument("--epsilon", type=float, default=1.0, help="budget to plan against (default 1)")
    explain.add_argument("--chart", metavar="PNG", help="also draw expected error vs budget to this file")
    explain.set_defaults(run=_explain)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
