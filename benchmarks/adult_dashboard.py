"""End to end: a 200-query SQL dashboard on Adult through DB-API, against per-query noise.

The integer-encoded Adult table (`shared/data/adult`, 48,842 rows, 14 columns)
is loaded into DuckDB and declared as a protected table whose every column is
an integer 0..size−1. The dashboard mixes 1-D ranges on the ordered columns,
2-D boxes, filtered counts and GROUP BY marginals of one to three columns;
it runs as one `BEGIN WORKLOAD WITH (epsilon = …)` through `dpsql.connect`,
and every answer comes back with a standard error.

The baseline spends the same budget adding noise to each query's answers
directly (`PerQuery`, the optimal per-query split). Both are scored against
the exact answers from plain SQL: RMSE over all answer cells (rows of every
result), each query's RMSE, and the share of cells inside their 95% interval.

    python -m benchmarks.adult_dashboard [--epsilon 1.0] [--draws 3]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.measurement import GAUSSIAN, calibrate, query_step
from mechanisms.noise import RandomSource
from mechanisms.reconstruction import LeastSquaresModel
from planner.families import PER_QUERY, PerQuery
from planner.plan import PlannedMeasurement

DATA = Path(__file__).parents[2] / "shared" / "data" / "adult"
TABLE = "adult"
QUERIES = 200


def column_name(raw: str) -> str:
    return raw.replace("-", "_").replace(">", "_over_").lower()


def domain_sizes() -> dict[str, int]:
    raw = json.loads((DATA / "adult-domain.json").read_text())
    return {column_name(k): int(v) for k, v in raw.items()}


def catalog() -> Catalog:
    """Every column an integer 0..size−1 (the CSV is already integer-encoded)."""
    cols = {c: {"type": "integer", "min": 0, "max": n - 1} for c, n in domain_sizes().items()}
    return Catalog.from_dict({"tables": {TABLE: {"columns": cols}}})


def load(con: duckdb.DuckDBPyConnection) -> None:
    """The CSV into table `adult`, columns renamed to SQL-friendly names."""
    raw = json.loads((DATA / "adult-domain.json").read_text())
    select = ", ".join(f'CAST("{k}" AS INTEGER) AS {column_name(k)}' for k in raw)
    con.execute(f"CREATE OR REPLACE TABLE {TABLE} AS SELECT {select} FROM read_csv_auto('{DATA / 'adult.csv'}')")


def dashboard(count: int = QUERIES, seed: int = 0) -> list[str]:
    """`count` range and GROUP BY queries (fixed by `seed`)."""
    rng = np.random.default_rng(seed)
    sizes = domain_sizes()

    def between(col: str, width_max: int | None = None) -> str:
        n = sizes[col]
        a = int(rng.integers(0, n))
        b = int(min(n - 1, a + rng.integers(0, width_max or n)))
        return f"{col} BETWEEN {a} AND {b}"

    ordered = ["age", "hours_per_week", "education_num", "capital_gain", "fnlwgt"]
    small = ["sex", "race", "income_over_50k", "relationship", "marital_status", "workclass"]
    groups = [  # column lists in the table's column order (the order of result rows)
        "sex", "race", "marital_status", "relationship", "workclass", "occupation", "income_over_50k",
        "education_num", "race, sex", "sex, income_over_50k", "education_num, income_over_50k",
        "race, sex, income_over_50k", "relationship, income_over_50k", "marital_status, sex",
    ]
    kinds = [("range", 0.45), ("box", 0.15), ("group", 0.15), ("filtered group", 0.15), ("filter", 0.10)]
    out = []
    for _ in range(count):
        kind = rng.choice([k for k, _ in kinds], p=[p for _, p in kinds])
        if kind == "range":
            col = ordered[int(rng.choice(len(ordered), p=[0.35, 0.25, 0.2, 0.1, 0.1]))]
            out.append(f"SELECT COUNT(*) FROM {TABLE} WHERE {between(col)}")
        elif kind == "box":
            out.append(f"SELECT COUNT(*) FROM {TABLE} WHERE {between('age')} AND {between('education_num')}")
        elif kind == "group":
            out.append(f"SELECT {groups[int(rng.integers(len(groups)))]}, COUNT(*) FROM {TABLE} GROUP BY ALL_COLS")
        elif kind == "filtered group":
            g = small[int(rng.integers(len(small)))]
            out.append(f"SELECT {g}, COUNT(*) FROM {TABLE} WHERE {between('age')} GROUP BY ALL_COLS")
        else:
            a, b = rng.choice(small, 2, replace=False)
            va, vb = int(rng.integers(sizes[a])), int(rng.integers(sizes[b]))
            out.append(f"SELECT COUNT(*) FROM {TABLE} WHERE {a} = {va} AND {b} = {vb}")
    return [q.replace("GROUP BY ALL_COLS", "GROUP BY " + q.split("SELECT ")[1].split(", COUNT")[0]) for q in out]


def truth(con: duckdb.DuckDBPyConnection, queries: list[str]) -> list[np.ndarray]:
    """Exact answers, one value per DP result row (every group, empty ones included)."""
    sizes = domain_sizes()
    out = []
    for q in queries:
        if " GROUP BY " not in q:
            out.append(np.asarray([float(con.execute(q).fetchone()[0])]))
            continue
        cols = [c.strip() for c in q.split(" GROUP BY ")[1].split(",")]
        shape = tuple(sizes[c] for c in cols)
        cube = np.zeros(shape)
        for *keys, n in con.execute(q).fetchall():
            cube[tuple(keys)] = n
        out.append(cube.ravel())
    return out


def _cells(result_rows: list[tuple], groups: int) -> np.ndarray:
    """The COUNT column of a result in group order (GROUP BY rows come in domain order)."""
    return np.asarray([float(r[groups]) for r in result_rows])


def run_planned(
    database: str, queries: list[str], epsilon: float, delta: float, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray], float, str]:
    """The dashboard as one workload through DB-API: (answers, stderrs, seconds, plan text)."""
    script = f"BEGIN WORKLOAD WITH (epsilon = {epsilon});\n" + ";\n".join(queries) + ";\nEND WORKLOAD;"
    with dpsql.connect(database, catalog=catalog(), epsilon=epsilon, delta=delta, state=":memory:", seed=seed) as conn:
        cur = conn.cursor()
        started = time.perf_counter()
        cur.execute(script)
        seconds = time.perf_counter() - started
        answers, errors = [], []
        for q in queries:
            groups = len(q.split(" GROUP BY ")[1].split(",")) if " GROUP BY " in q else 0
            answers.append(_cells(cur.fetchall(), groups))
            errors.append(np.asarray([float(e[groups]) for e in cur.result.stderr]))
            cur.nextset()
        plan = cur.result.plan or ""
    return answers, errors, seconds, plan


def run_per_query(
    con: duckdb.DuckDBPyConnection, queries: list[str], epsilon: float, delta: float, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The same budget spent on noise added to each query's answers (optimal per-query split)."""
    cat = catalog()
    table = cat.get(TABLE)
    compiled = [compile_query(q, cat, label=f"q{i}") for i, q in enumerate(queries)]
    blocks = [b for c in compiled for b in c.blocks]
    rho = epsilon_delta_to_zcdp(epsilon, delta)
    family = PerQuery(table.domain, GAUSSIAN)
    planned = []
    for a in family.allocate(blocks):
        pm = PlannedMeasurement(a.clique, a.block, rho * a.fraction, a.sensitivity, 0.0, PER_QUERY)
        cal = calibrate(GAUSSIAN, a.sensitivity, pm.share, query_step(pm.query(table.domain)))
        planned.append(replace(pm, variance=cal.variance))
    counts = DuckDBBackend(con).marginals(table, list(dict.fromkeys(p.clique for p in planned)))
    rng = RandomSource(seed)
    model = LeastSquaresModel(table.domain, [p.release(counts[p.clique], table.domain, GAUSSIAN, rng) for p in planned])
    answers, errors = [], []
    for c in compiled:
        estimate, variance = model.answer(c.blocks[0])
        answers.append(estimate)
        errors.append(np.sqrt(variance))
    return answers, errors


def score(answers: list[np.ndarray], errors: list[np.ndarray], exact: list[np.ndarray]) -> dict:
    diff = np.concatenate([a - t for a, t in zip(answers, exact)])
    err = np.concatenate(errors)
    per_query = [float(np.sqrt(np.mean((a - t) ** 2))) for a, t in zip(answers, exact)]
    return {
        "rmse_cells": float(np.sqrt(np.mean(diff**2))),
        "expected_rmse_cells": float(np.sqrt(np.mean(err**2))),
        "mean_query_rmse": float(np.mean(per_query)),
        "coverage_95": float(np.mean(np.abs(diff) <= 1.959964 * err)),
        "cells": int(diff.size),
    }


def simulate(epsilon: float = 1.0, delta: float = 1e-9, draws: int = 3, count: int = QUERIES, workdir: Path | None = None) -> dict:
    """Run both mechanisms `draws` times (seeds 0..draws−1) and summarize."""
    workdir = workdir or Path("/tmp")
    database = str(workdir / "adult_dashboard.duckdb")
    con = duckdb.connect(database)
    load(con)
    queries = dashboard(count)
    exact = truth(con, queries)
    planned_scores, baseline_scores, seconds, plan = [], [], [], ""
    for seed in range(draws):
        con.close()
        answers, errors, secs, plan = run_planned(database, queries, epsilon, delta, seed)
        seconds.append(secs)
        planned_scores.append(score(answers, errors, exact))
        con = duckdb.connect(database)
        baseline_scores.append(score(*run_per_query(con, queries, epsilon, delta, seed), exact))
    con.close()

    def mean(scores: list[dict]) -> dict:
        return {k: float(np.mean([s[k] for s in scores])) for k in scores[0]}

    planned, baseline = mean(planned_scores), mean(baseline_scores)
    return {
        "queries": len(queries),
        "epsilon": epsilon,
        "delta": delta,
        "draws": draws,
        "planned": planned,
        "per_query": baseline,
        "rmse_ratio_per_query_over_planned": baseline["rmse_cells"] / planned["rmse_cells"],
        "workload_seconds": float(np.mean(seconds)),
        "plan": plan,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--draws", type=int, default=3)
    args = parser.parse_args()
    out = simulate(args.epsilon, args.delta, args.draws)
    print(out["plan"])
    print(f"\n{out['queries']} queries, ε={args.epsilon}, δ={args.delta}, {out['draws']} draws")
    print(f"{'mechanism':<12} {'RMSE(cells)':>12} {'expected':>10} {'mean q RMSE':>12} {'95% cover':>10}")
    for name in ("planned", "per_query"):
        s = out[name]
        print(f"{name:<12} {s['rmse_cells']:>12.2f} {s['expected_rmse_cells']:>10.2f} {s['mean_query_rmse']:>12.2f} {s['coverage_95']:>10.3f}")
    print(f"per-query RMSE / planned RMSE = {out['rmse_ratio_per_query_over_planned']:.2f}; workload {out['workload_seconds']:.1f} s")


if __name__ == "__main__":
    main()
