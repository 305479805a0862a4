"""Accuracy at equal budget against OpenDP and Tumult Analytics, per query kind and per workload.

Every system answers the same queries on adult (`shared/data/adult`, 48,842 rows, every
column an integer 0..size-1, declared so in dpsql's catalog and given to the peers as
public keys and bounds) at the same zCDP budget: ρ = zCDP(ε = 1, δ = 1e-6) ≈ 0.0172 for
the whole workload, add/remove-one-row neighbours. Workloads:

- `bi`: a 10-query BI dashboard: COUNT, SUM and AVG of hours_per_week (0..98) with 0-2
  GROUP BY columns and WHERE ranges on age;
- `ranges`: 128 COUNT queries over random age ranges;
- `marginals`: every 1- and 2-way GROUP BY count over five columns (15 queries);
- `reask`: the BI dashboard asked twice (20 queries; a repeat is a new query to the peers).

dpsql runs each workload as one `BEGIN WORKLOAD WITH (rho = ...)` through DB-API on a
fresh ledger; the peers run in their own environments (`python -m benchmarks.peer_envs
install opendp tumult`; a peer not installed is skipped) with their documented zCDP
configurations (see `peer_sides/*.py`). Scored against the exact answers from DuckDB:
RMSE over every answer cell of a kind (COUNT, SUM, AVG) in a workload, over `--draws`
independent runs; the ratio is dpsql's RMSE over the best peer's (below 1: dpsql better).

    python -m benchmarks.peers [--draws 5] [--workloads bi ranges marginals reask] [--peers opendp tumult]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from benchmarks import peer_envs
from benchmarks.adult_dashboard import DATA, TABLE, catalog, column_name, domain_sizes, load
from mechanisms.accounting import epsilon_delta_to_zcdp

RESULTS = Path(__file__).parent / "results" / "peers.json"
SIDES = Path(__file__).parent / "peer_sides"
EPSILON, DELTA = 1.0, 1e-6
VALUE = "hours_per_week"

# (kind, value column, GROUP BY columns, WHERE ranges [(column, low, high)])
BI = [
    ("count", None, [], []),
    ("sum", VALUE, [], []),
    ("avg", VALUE, [], []),
    ("count", None, ["sex"], []),
    ("sum", VALUE, ["sex"], [("age", 20, 40)]),
    ("avg", VALUE, ["race"], []),
    ("count", None, ["relationship"], [("age", 10, 30)]),
    ("sum", VALUE, ["sex", "race"], []),
    ("avg", VALUE, ["sex", "income_over_50k"], [("age", 15, 84)]),
    ("count", None, ["marital_status"], []),
]
MARGINAL_COLUMNS = ["sex", "race", "relationship", "marital_status", "income_over_50k"]


def workloads() -> dict[str, list[tuple]]:
    rng = np.random.default_rng(0)
    ranges = []
    for _ in range(128):
        low, high = sorted(int(v) for v in rng.integers(0, 85, size=2))
        ranges.append(("count", None, [], [("age", low, high)]))
    marginals = [("count", None, [c], []) for c in MARGINAL_COLUMNS]
    marginals += [("count", None, [a, b], []) for i, a in enumerate(MARGINAL_COLUMNS) for b in MARGINAL_COLUMNS[i + 1:]]
    return {"bi": BI, "ranges": ranges, "marginals": marginals, "reask": BI + BI}


def sql(query: tuple, aggregate_sql: str | None = None) -> str:
    kind, column, groups, where = query
    aggregate = aggregate_sql or {"count": "COUNT(*)", "sum": f"SUM({column})", "avg": f"AVG({column})"}[kind]
    text = f"SELECT {', '.join(groups + [aggregate])} FROM {TABLE}"
    if where:
        text += " WHERE " + " AND ".join(f"{c} BETWEEN {lo} AND {hi}" for c, lo, hi in where)
    if groups:
        text += f" GROUP BY {', '.join(groups)}"
    return text


def _keyed(query: tuple, rows) -> dict[str, float | None]:
    width = len(query[2])
    return {"|".join(str(v) for v in row[:width]): (None if row[width] is None else float(row[width])) for row in rows}


def exact(con, queries) -> list[dict]:
    return [_keyed(q, con.execute(sql(q)).fetchall()) for q in queries]


def dpsql_answers(con, queries, rho: float, draws: int) -> list[list[dict]]:
    out = []
    for draw in range(draws):
        cur = dpsql.connect(con=con, catalog=catalog(), rho=rho, seed=None).cursor()
        cur.execute(f"BEGIN WORKLOAD WITH (rho = {rho!r});\n" + ";\n".join(sql(q) for q in queries) + ";\nEND WORKLOAD;")
        answers = []
        for q in queries:
            answers.append(_keyed(q, cur.fetchall()))
            cur.nextset()
        out.append(answers)
    return out


def peer_answers(peer: str, queries, rho: float, draws: int) -> list[list[dict]] | None:
    sizes = domain_sizes()
    raw = json.loads((DATA / "adult-domain.json").read_text())
    request = {
        "csv": str(DATA / "adult.csv"),
        "rename": {k: column_name(k) for k in raw},
        "keys": {c: list(range(n)) for c, n in sizes.items()},
        "bounds": {c: [0, n - 1] for c, n in sizes.items()},
        "rho": rho, "draws": draws, "rows": 48_842,
        "queries": [{"kind": k, "column": c, "groups": g, "where": w} for k, c, g, w in queries],
    }
    reply = peer_envs.run(peer, SIDES / f"{peer}_queries.py", request)
    return None if reply is None else reply["answers"]


def rmse_by_kind(queries, truth, runs) -> dict[str, float]:
    """RMSE over every (draw, query of the kind, group) cell; a missing answer is an error."""
    squares: dict[str, list[float]] = {}
    for run in runs:
        for q, true, got in zip(queries, truth, run):
            for key, value in true.items():
                if value is None:
                    continue
                answer = got.get(key)
                if answer is None or (isinstance(answer, float) and math.isnan(answer)):
                    raise ValueError(f"no answer for {sql(q)} group {key!r}")
                squares.setdefault(q[0], []).append((answer - value) ** 2)
    return {kind: math.sqrt(sum(v) / len(v)) for kind, v in squares.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--workloads", nargs="+", default=list(workloads()))
    parser.add_argument("--peers", nargs="+", default=list(peer_envs.PEERS))
    args = parser.parse_args()
    rho = epsilon_delta_to_zcdp(EPSILON, DELTA)
    con = duckdb.connect()
    load(con)
    records = []
    for name in args.workloads:
        queries = workloads()[name]
        truth = exact(con, queries)
        started = time.perf_counter()
        systems = {"dpsql": rmse_by_kind(queries, truth, dpsql_answers(con, queries, rho, args.draws))}
        seconds = {"dpsql": time.perf_counter() - started}
        for peer in args.peers:
            started = time.perf_counter()
            runs = peer_answers(peer, queries, rho, args.draws)
            if runs is None:
                print(f"{peer}: not installed (python -m benchmarks.peer_envs install {peer}); skipped")
                continue
            systems[peer] = rmse_by_kind(queries, truth, runs)
            seconds[peer] = time.perf_counter() - started
        for kind in systems["dpsql"]:
            peers = {p: r[kind] for p, r in systems.items() if p != "dpsql"}
            best = min(peers.values()) if peers else None
            record = {"workload": name, "queries": len(queries), "kind": kind, "draws": args.draws, "rho": rho,
                      "dpsql": systems["dpsql"][kind], **peers,
                      "ratio_to_best_peer": None if best is None else systems["dpsql"][kind] / best}
            records.append(record)
            shown = "  ".join(f"{p} {v:10.2f}" for p, v in peers.items())
            ratio = "" if best is None else f"  dpsql/best {record['ratio_to_best_peer']:.3f}"
            print(f"{name:10} {kind:6} dpsql {systems['dpsql'][kind]:10.2f}  {shown}{ratio}", flush=True)
        print(f"{name:10} seconds: " + ", ".join(f"{p} {s:.1f}" for p, s in seconds.items()), flush=True)
    kept = [r for r in (json.loads(RESULTS.read_text()) if RESULTS.exists() else []) if r["workload"] not in args.workloads]
    RESULTS.write_text(json.dumps(kept + records, indent=1) + "\n")  # other workloads' records are kept


if __name__ == "__main__":
    main()
