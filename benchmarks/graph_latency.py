"""Node-DP SQL over an edge table: first-answer and EMIT latency against exact DuckDB (issue 20, item 4).

A generated contact graph (`--edges` edges in a DuckDB file, ids over edges/3 people, one
arrival time each over 12 weeks): every node keeps at most `--bound` edges in time order
(so the declared bound holds and continual queries are allowed; the engine still checks
it on each EMIT). Timed, each the median of `--repeats` on a fresh connection:

- `SELECT degree, COUNT(*) FROM contact_degrees GROUP BY degree`: the edge list is read
  (cleaned and numbered in SQL), projected in Python, counted, noised and charged;
- `EMIT weekly` of a continual degree histogram (12 releases): the edges up to the window,
  the bound check and the difference sequence of the due windows;
- beside the exact degree histogram in plain DuckDB (no projection, no cleaning).

    python -m benchmarks.graph_latency [--edges 100000 1000000] [--bound 8]
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

EXACT = ("SELECT degree, COUNT(*) FROM (SELECT x, COUNT(*) AS degree FROM (SELECT person_a AS x FROM contacts UNION "
         "ALL SELECT person_b FROM contacts) GROUP BY x) GROUP BY degree")


def catalog(bound: int) -> str:
    return (f'[graphs.contacts]\nsource = "person_a"\ntarget = "person_b"\nmax_degree = {bound}\n'
            'degrees = "contact_degrees"\ntime = "since"\nbound = "declared"\n')


def write_graph(path: Path, edges: int, bound: int) -> int:
    """Random distinct edges with arrival times, each node's first `bound` (in time order) kept; returns the count."""
    con = duckdb.connect(str(path))
    people = max(edges // 3, 10)
    con.execute(f"""CREATE TABLE raw AS SELECT DISTINCT least(a, b) AS person_a, greatest(a, b) AS person_b,
        TIMESTAMP '2025-01-06' + CAST(hash(a * 31 + b) % (12 * 7 * 86400) AS BIGINT) * INTERVAL 1 SECOND AS since
        FROM (SELECT CAST(hash(range) % {people} AS BIGINT) AS a, CAST(hash(range * 7 + 3) % {people} AS BIGINT)
        AS b FROM range({edges})) WHERE a <> b""")
    # keep an edge when it is among the first `bound` edges (by time) of both its ends: degrees ≤ bound
    con.execute(f"""CREATE TABLE contacts AS SELECT person_a, person_b, since FROM (SELECT *,
        ROW_NUMBER() OVER (PARTITION BY person_a ORDER BY since, person_b) AS ra,
        ROW_NUMBER() OVER (PARTITION BY person_b ORDER BY since, person_a) AS rb FROM raw) AS r
        WHERE ra + (SELECT COUNT(*) FROM raw AS o WHERE o.person_b = r.person_a AND (o.since, o.person_a) <
        (r.since, r.person_b)) <= {bound} AND rb + (SELECT COUNT(*) FROM raw AS o WHERE o.person_a = r.person_b
        AND (o.since, o.person_b) < (r.since, r.person_a)) <= {bound}""")
    con.execute("DROP TABLE raw")
    con.execute("CHECKPOINT")
    count = con.execute("SELECT COUNT(*) FROM contacts").fetchone()[0]
    con.close()
    return count


def timed(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(folder: Path, edges: int, bound: int, repeats: int) -> dict:
    path = folder / f"graph{edges}.duckdb"
    kept = write_graph(path, edges, bound)
    exact = duckdb.connect(str(path), read_only=True)
    exact_s = timed(lambda: exact.execute(EXACT).fetchall(), repeats)
    exact.close()

    def first_answer():
        (folder / "state").unlink(missing_ok=True)
        with dpsql.connect(str(path), catalog=catalog(bound), epsilon=5.0, delta=1e-9,
                           state=str(folder / "state")) as conn:
            conn.cursor().execute("SELECT degree, COUNT(*) FROM contact_degrees GROUP BY degree").fetchall()

    def emit():
        (folder / "state").unlink(missing_ok=True)
        with dpsql.connect(str(path), catalog=catalog(bound), epsilon=5.0, delta=1e-9,
                           state=str(folder / "state")) as conn:
            cur = conn.cursor()
            cur.execute("CREATE CONTINUAL QUERY weekly AS SELECT degree, COUNT(*) FROM contact_degrees GROUP BY "
                        "degree EMIT EVERY INTERVAL '7 days' ON since FROM '2025-01-06' FOR 12 RELEASES")
            start = time.perf_counter()
            cur.execute("EMIT weekly").fetchall()
            return time.perf_counter() - start

    first_s = timed(first_answer, repeats)
    emit_s = statistics.median(emit() for _ in range(repeats))
    return {"edges": kept, "bound": bound, "exact_ms": 1e3 * exact_s, "first_ms": 1e3 * first_s,
            "emit_ms": 1e3 * emit_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--bound", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for edges in args.edges:
            rows.append(measure(Path(folder), edges, args.bound, args.repeats))
            r = rows[-1]
            print(f"| {r['edges']:,} | {r['bound']} | {r['exact_ms']:.1f} | {r['first_ms']:.0f} | {r['emit_ms']:.0f} |",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
