"""EXPLAIN PARETO on adult: the (ε, expected RMSE) front of two workloads, linear plans exact, AIM/RAP by BO.

Workloads over the adult table (`benchmarks.datasets`, 48,842 rows, 14 columns), Gaussian
noise, δ = 1e-9, ε on 13 quarter-decades from 0.01 to 10:

- marginals: the 1-way marginals of 8 categorical columns and 10 of their 2-way marginals
  (18 GROUP BY queries); AIM is searched over (ε, max model size, rounds) by Bayesian
  optimization on public stand-in data (`planner.pareto.adaptive_front`), at most
  `--evaluations` simulations, and compared with as many points of a random design (the
  planner's configuration and a Latin hypercube) by hypervolume in (log ε, log RMSE);
- ranges: 160 random ranges on age and 160 on hours-per-week (320 COUNT(*) queries); RAP is
  searched over (ε, T, K, synthetic rows) under a planning budget (`--rap-seconds` of work).

The linear fronts are exact (one plan, scaled); the adaptive points are simulations on
synthetic data of adult's domain and size (the row count is taken as public, as the catalog's
`rows` declaration makes it) — never on adult itself. RMSE is per row in units of each query's
sensitivity (the planner's objective). Timings are wall seconds on this machine (2 shared cores).

    python -m benchmarks.pareto [--quick] [--evaluations 12] [--rap-seconds 120]

writes benchmarks/results/pareto.json and prints the markdown tables for RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from itertools import combinations
from pathlib import Path

import duckdb
import numpy as np

from benchmarks.datasets import load
from dpsql.sql.compiler import compile_query
from mechanisms.workload import Workload
from planner.planning_limit import PlanningLimit
from planner.bayes_front import hypervolume
from planner.pareto import (
    DEFAULT_EPSILONS,
    PLANNER,
    Front,
    adaptive_front,
    budget_for_rmse,
    linear_front,
    to_budget,
)

RESULTS = Path(__file__).parent / "results" / "pareto.json"
DELTA = 1e-9
CATEGORICAL = ["workclass", "education-num", "marital-status", "occupation", "relationship", "race", "sex",
               "income>50K"]


def marginal_workload(catalog) -> Workload:
    queries = [f'SELECT "{a}", COUNT(*) FROM adult GROUP BY "{a}"' for a in CATEGORICAL]
    queries += [f'SELECT "{a}", "{b}", COUNT(*) FROM adult GROUP BY "{a}", "{b}"'
                for a, b in list(combinations(CATEGORICAL, 2))[:10]]
    return _compile(catalog, queries)


def range_workload(catalog, seed: int = 0) -> Workload:
    rng = np.random.default_rng(seed)
    queries = []
    for column, size in (("age", 85), ("hours-per-week", 99)):
        for _ in range(160):
            lo, hi = sorted(int(v) for v in rng.integers(0, size, 2))
            queries.append(f'SELECT COUNT(*) FROM adult WHERE "{column}" BETWEEN {lo} AND {hi}')
    return _compile(catalog, queries)


def _compile(catalog, queries: list[str]) -> Workload:
    blocks = [b for i, q in enumerate(queries) for b in compile_query(q, catalog, label=f"q{i}").blocks]
    return Workload(catalog.get("adult").domain, blocks)


def _log_points(points) -> list[tuple[float, float]]:
    return [(math.log(p.epsilon), math.log(p.rmse)) for p in points if math.isfinite(p.rmse)]


def _record(front: Front) -> list[dict]:
    return [{"epsilon": p.epsilon, "rho": p.budget, "rmse": p.rmse, "strategy": p.strategy, "detail": p.detail,
             "exact": p.exact} for p in front.points]


def _curves(front: Front) -> dict:
    return {name: [{"epsilon": p.epsilon, "rmse": p.rmse, "settings": dict(p.settings)} for p in points]
            for name, points in front.curves.items()}


def run(name: str, workload: Workload, rows: int, procedure: str, evaluations: int, seconds: float,
        compare_random: bool) -> dict:
    started = time.perf_counter()
    linear = linear_front(workload, DEFAULT_EPSILONS, "gaussian", DELTA)
    linear_seconds = time.perf_counter() - started
    started = time.perf_counter()
    search = adaptive_front(workload, rows, DEFAULT_EPSILONS, "gaussian", DELTA, procedures=[procedure],
                            max_evaluations=evaluations, limit=PlanningLimit(seconds), linear=linear)
    search_seconds = time.perf_counter() - started
    front = linear.merged(search)
    points = search.curves.get(procedure, [])
    record = {
        "workload": name, "queries": len(workload.blocks), "rows": rows, "delta": DELTA,
        "linear_seconds": linear_seconds, "laws": linear.laws, "planner_plan": linear.curves[PLANNER][0].detail,
        "procedure": procedure, "evaluations": search.evaluations, "search_seconds": search_seconds,
        "search_notes": search.notes, "adaptive": _curves(search).get(procedure, []),
        "front": _record(front), "budget_for_rmse": {},
    }
    for target in (50.0, 10.0, 2.0):
        alone = budget_for_rmse(linear, target, PLANNER)
        best = budget_for_rmse(front, target)
        record["budget_for_rmse"][str(target)] = {
            "linear_epsilon": alone.epsilon if alone else None,
            "front_epsilon": best.epsilon if best else None, "front_strategy": best.strategy if best else None,
        }
    if compare_random and points:
        started = time.perf_counter()
        random = adaptive_front(workload, rows, DEFAULT_EPSILONS, "gaussian", DELTA, procedures=[procedure],
                                max_evaluations=evaluations, initial=evaluations, limit=PlanningLimit(seconds),
                                linear=linear)
        random_points = random.curves.get(procedure, [])
        both = _log_points(points) + _log_points(random_points)
        ys = [y for _, y in both]
        reference = (math.log(DEFAULT_EPSILONS[-1]) + 0.05 * math.log(DEFAULT_EPSILONS[-1] / DEFAULT_EPSILONS[0]),
                     max(ys) + 0.25 * (max(ys) - min(ys)))
        record["random"] = {
            "evaluations": random.evaluations, "seconds": time.perf_counter() - started,
            "hypervolume_bo": hypervolume(_log_points(points), reference),
            "hypervolume_random": hypervolume(_log_points(random_points), reference),
            "reference": reference,
        }
    return record


def markdown(records: list[dict]) -> str:
    out = []
    for r in records:
        proc = r["procedure"].upper()
        families = sorted((n for n in r["laws"] if n != PLANNER), key=lambda n: r["laws"][n])
        runner = next(n for n in families if r["laws"][n] > r["laws"][PLANNER] * (1 + 1e-6))
        out.append(f"### {r['workload']} ({r['queries']} queries): linear front in {r['linear_seconds']:.1f} s, "
                   f"{proc} searched with {r['evaluations']} simulations in {r['search_seconds']:.0f} s")
        out.append("")
        out.append(f"| ε | ρ | planner ({r['planner_plan']}) | {runner} | per-query | {proc}, best simulated at ≤ ε "
                   f"(settings) | front at ε |")
        out.append("|---:|---:|---:|---:|---:|---|---|")
        for eps in DEFAULT_EPSILONS[::2]:
            rho = to_budget(eps, "gaussian", DELTA)
            at = {n: r["laws"][n] * rho**-0.5 for n in (PLANNER, runner, "per-query")}
            done = [a for a in r["adaptive"] if a["epsilon"] <= eps * (1 + 1e-9) and math.isfinite(a["rmse"])]
            best = min(done, key=lambda a: a["rmse"], default=None)
            shown = "–" if best is None else (
                f"{best['rmse']:.4g} (ε={best['epsilon']:.3g}; "
                + ", ".join(f"{k}={v:.3g}" for k, v in best["settings"].items() if k != "epsilon") + ")")
            reached = [p for p in r["front"] if p["epsilon"] <= eps * (1 + 1e-9)]
            winner = reached[-1] if reached else None
            front = "–" if winner is None else f"{winner['rmse']:.4g} ({winner['strategy']}, ε={winner['epsilon']:.3g})"
            out.append(f"| {eps:.3g} | {rho:.3g} | {at[PLANNER]:.4g} | {at[runner]:.4g} | {at['per-query']:.4g} | "
                       f"{shown} | {front} |")
        out.append("")
        targets = "; ".join(
            f"RMSE ≤ {float(t):g}: ε = {v['linear_epsilon']:.3g} linear, {v['front_epsilon']:.3g} on the front "
            f"({v['front_strategy']})" for t, v in r["budget_for_rmse"].items() if v["front_epsilon"] is not None
        )
        out.append(f"`budget_for_rmse`: {targets}.")
        if "random" in r:
            x = r["random"]
            out.append(f"Hypervolume in (log ε, log RMSE): {r['evaluations']} BO points {x['hypervolume_bo']:.3f}, "
                       f"{x['evaluations']} points of a random design (the planner's configuration and a Latin "
                       f"hypercube) {x['hypervolume_random']:.3f} ({x['seconds']:.0f} s).")
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 evaluations, no random baseline, RAP for 30 s")
    parser.add_argument("--evaluations", type=int, default=12)
    parser.add_argument("--aim-seconds", type=float, default=240.0)
    parser.add_argument("--rap-seconds", type=float, default=120.0)
    args = parser.parse_args()
    evaluations = 6 if args.quick else args.evaluations
    con = duckdb.connect()
    catalog = load(con, "adult")
    rows = int(con.execute("SELECT COUNT(*) FROM adult").fetchone()[0])
    records = [
        run("marginals", marginal_workload(catalog), rows, "aim", evaluations, args.aim_seconds, not args.quick),
        run("ranges", range_workload(catalog), rows, "rap", evaluations,
            30.0 if args.quick else args.rap_seconds, False),
    ]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": platform.machine(), "python": platform.python_version(),
                                   "records": records}, indent=1))
    print(markdown(records))


if __name__ == "__main__":
    main()
