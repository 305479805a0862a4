"""Does the planner pick well? Measured RMSE of its plan vs single families and per-query noise.

For each workload (SQL dashboards over ../shared/data/adult, nist_taxi and
synthetic domains) at ε=1, δ=1e-9, the noise is drawn `--draws` times for:
the planner's plan, each single strategy family used for the whole workload,
and per-query noise (each query answered alone, the budget split optimally —
what per-query DP SQL systems do). RMSE is per output row, each query in units
of its sensitivity (all queries here are counts).

    python -m benchmarks.planner --draws 50
"""

from __future__ import annotations

import argparse
import json
import time
from itertools import combinations
from pathlib import Path

import duckdb
import numpy as np

from benchmarks.datasets import load
from benchmarks.simulate import exact, per_query_squared_errors, plan_squared_errors, workload_rmse
from dpsql.backend import DuckDBBackend
from dpsql.catalog import Catalog, quote_identifier
from dpsql.compiler import compile_query
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.workload import Workload
from planner.families import FAMILIES, MARGINALS
from planner.planner import plan_workload

RESULTS = Path(__file__).parent / "results" / "planner.json"
NOISE = "gaussian"


def q(name: str) -> str:
    return quote_identifier(name)


def ranges(rng, table, column, n, count):
    out = []
    for _ in range(count):
        lo, hi = sorted(rng.integers(0, n, size=2))
        out.append(f"SELECT COUNT(*) FROM {table} WHERE {q(column)} BETWEEN {lo} AND {hi}")
    return out


def boxes(rng, table, a, na, b, nb, count):
    out = []
    for _ in range(count):
        lo1, hi1 = sorted(rng.integers(0, na, size=2))
        lo2, hi2 = sorted(rng.integers(0, nb, size=2))
        out.append(f"SELECT COUNT(*) FROM {table} WHERE {q(a)} BETWEEN {lo1} AND {hi1} AND {q(b)} BETWEEN {lo2} AND {hi2}")
    return out


def group_bys(table, attribute_sets):
    return [f"SELECT {', '.join(map(q, s))}, COUNT(*) FROM {table} GROUP BY {', '.join(map(q, s))}" for s in attribute_sets]


def synthetic_table(con, name: str, sizes: dict[str, int], rows: int, seed: int) -> Catalog:
    """A public synthetic table (a random correlated distribution), for domain-shaped workloads."""
    rng = np.random.default_rng(seed)
    cols = {}
    previous = None
    for c, n in sizes.items():
        base = rng.dirichlet(np.ones(n) * 0.5)
        values = rng.choice(n, size=rows, p=base)
        if previous is not None:  # correlate with the previous column
            mix = rng.random(rows) < 0.3
            values = np.where(mix, (previous * n) // max(previous.max() + 1, 1), values)
        cols[c] = values.astype(np.int32)
        previous = cols[c]
    con.register(f"{name}_src", cols)
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM {name}_src")
    catalog = Catalog()
    catalog.add_table(name, {c: {"type": "integer", "min": 0, "max": n - 1} for c, n in sizes.items()})
    return catalog


def workloads(con) -> list[tuple[str, Catalog, list[str]]]:
    rng = np.random.default_rng(2026)
    adult = load(con, "adult")
    a = adult.get("adult").domain
    taxi = load(con, "nist_taxi")
    t = taxi.get("nist_taxi").domain
    syn1 = synthetic_table(con, "syn1d", {"x": 1024}, 200_000, 1)
    syn10 = synthetic_table(con, "syn10", {f"c{i}": 10 for i in range(10)}, 200_000, 2)
    mixed = (
        group_bys("adult", [("sex",), ("race",), ("education-num",), ("marital-status",), ("workclass",), ("income>50K",)])
        + ranges(rng, "adult", "age", a.size_of("age"), 50)
        + group_bys("adult", [("sex", "race"), ("education-num", "income>50K"), ("sex", "income>50K")])
        + [f"SELECT race, COUNT(*) FROM adult WHERE sex = {s} GROUP BY race" for s in (0, 1)]
        + ranges(rng, "adult", "hours-per-week", a.size_of("hours-per-week"), 20)
    )
    filtered = [
        f"SELECT race, COUNT(*) FROM adult WHERE age BETWEEN {lo} AND {hi} GROUP BY race"
        for lo, hi in (sorted(rng.integers(0, a.size_of("age"), size=2)) for _ in range(100))
    ]
    taxi_ranges = []
    for col in ("fare", "tips", "trip_total", "trip_seconds", "trip_miles"):
        taxi_ranges += ranges(rng, "nist_taxi", col, 11, 20)
    taxi_ranges += boxes(rng, "nist_taxi", "fare", 11, "tips", 11, 20)
    return [
        ("adult: 128 age ranges", adult, ranges(rng, "adult", "age", a.size_of("age"), 128)),
        ("adult: hours prefix (CDF)", adult,
         [f'SELECT COUNT(*) FROM adult WHERE "hours-per-week" <= {k}' for k in range(a.size_of("hours-per-week"))]),
        ("adult: 100 age x hours boxes", adult,
         boxes(rng, "adult", "age", a.size_of("age"), "hours-per-week", a.size_of("hours-per-week"), 100)),
        ("adult: all 1-way marginals", adult, group_bys("adult", [(c,) for c in a.attributes])),
        ("adult: 2-way marginals of 6 attributes", adult,
         group_bys("adult", combinations(["workclass", "education-num", "marital-status", "race", "sex", "income>50K"], 2))),
        ("adult: 3-way marginals of 5 attributes", adult,
         group_bys("adult", combinations(["workclass", "marital-status", "race", "sex", "income>50K"], 3))),
        ("adult: mixed dashboard", adult, mixed),
        ("adult: race by 100 age ranges", adult, filtered),
        ("taxi: all 1-way marginals", taxi, group_bys("nist_taxi", [(c,) for c in t.attributes])),
        ("taxi: 2-way marginals of 5 attributes", taxi,
         group_bys("nist_taxi", combinations(["shift", "payment_type", "fare", "tips", "trip_seconds"], 2))),
        ("taxi: range dashboard", taxi, taxi_ranges),
        ("taxi: pickup x dropoff", taxi,
         group_bys("nist_taxi", [("pickup_community_area", "dropoff_community_area"),
                                 ("pickup_community_area",), ("dropoff_community_area",)])),
        ("synthetic: 200 ranges on 1024 values", syn1, ranges(rng, "syn1d", "x", 1024, 200)),
        ("synthetic: all 2-way marginals, d=10", syn10,
         group_bys("syn10", combinations([f"c{i}" for i in range(10)], 2))),
    ]


def evaluate(con, name: str, catalog: Catalog, queries: list[str], rho: float, delta: float, draws: int) -> dict:
    table = next(iter(catalog.tables.values()))
    blocks = {}
    for i, sql in enumerate(queries):
        for b in compile_query(sql, catalog, label=f"q{i}").blocks:
            blocks.setdefault(b.fingerprint(table.domain), b)
    workload = Workload(table.domain, list(blocks.values()))
    started = time.perf_counter()
    plan = plan_workload(workload, rho, NOISE, delta)
    planning = time.perf_counter() - started
    singles = {cls.name: plan_workload(workload, rho, NOISE, delta, families=[cls.name]) for cls in FAMILIES}
    cliques = {m.clique for p in [plan, *singles.values()] for m in p.measurements}
    truth = exact(table, workload, DuckDBBackend(con), cliques)
    measured = {"planner": workload_rmse(plan_squared_errors(plan, workload, truth, draws, NOISE), workload)}
    for fam, p in singles.items():
        measured[fam] = workload_rmse(plan_squared_errors(p, workload, truth, draws, NOISE), workload)
    per_query = workload_rmse(per_query_squared_errors(workload, truth, rho, draws, NOISE), workload)
    best = min(singles, key=measured.get)
    return {
        "workload": name,
        "n_queries": len(queries),
        "planner_family": plan.chosen,
        "planner_rmse": measured["planner"],
        "best_family": best,
        "best_family_rmse": measured[best],
        "per_query_rmse": per_query,
        "identity_rmse": measured[MARGINALS],
        "family_rmse": {fam: measured[fam] for fam in singles},
        "planner_expected_rmse": float(np.sqrt(np.mean(
            [plan.expected_rmse[b.name] ** 2 for b in workload.blocks for _ in range(b.num_rows(table.domain))]))),
        "planning_seconds": planning,
        "draws": draws,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--only", help="run only workloads whose name contains this text")
    args = parser.parse_args()
    rho = epsilon_delta_to_zcdp(args.epsilon, args.delta)
    con = duckdb.connect()
    records = []
    header = f"{'workload':42s} {'n':>4s} {'planner':>16s} {'best family':>22s} {'per-query':>10s} {'identity':>9s} {'vs best':>8s} {'vs p-q':>7s}"
    print(header)
    for name, catalog, queries in workloads(con):
        if args.only and args.only not in name:
            continue
        r = evaluate(con, name, catalog, queries, rho, args.delta, args.draws)
        records.append(r)
        print(f"{name:42s} {r['n_queries']:4d} {r['planner_family'][:8]:>8s} {r['planner_rmse']:7.3g} "
              f"{r['best_family'][:12]:>12s} {r['best_family_rmse']:9.3g} {r['per_query_rmse']:10.3g} "
              f"{r['identity_rmse']:9.3g} {r['planner_rmse'] / r['best_family_rmse']:8.3f} "
              f"{r['per_query_rmse'] / r['planner_rmse']:7.2f}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(records, indent=2) + "\n")


if __name__ == "__main__":
    main()
