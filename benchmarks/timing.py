"""Are the planner's time predictions right? Predicted vs measured seconds per phase of a plan.

For each workload (the planner benchmark's, plus the demo dashboard on the
generated people table at two sizes) the plan's predicted scan, release and
reconstruction seconds (`planner.timing.predict`, with DuckDB's scan speed
measured on synthetic data by `dpsql.backends.scan_speed`) are compared with the
measured seconds of the same code paths a session runs: one
`DuckDBBackend.marginals` scan, each measurement's `release` (exact answer and
exact noise; first release of each strategy), and the least-squares fit that
answers every block. Adaptive procedures (AIM, RAP) are left out: their
prediction is the simulated run itself (see the planner benchmark).

    python -m benchmarks.timing
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import duckdb
import numpy as np

from benchmarks.planner import compile_workload, workloads
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.deployment.demo import DASHBOARD
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.backends.scan_speed import duckdb_scan_speed
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.measurement import forget_lattices
from mechanisms.noise import RandomSource
from mechanisms.reconstruction import LeastSquaresModel
from planner.planner import plan_workload
from planner.timing import predict, release_speeds

RESULTS = Path(__file__).parent / "results" / "timing.json"
COMMAND = "python -m benchmarks.timing"


def people(con, rows: int) -> tuple[str, Catalog, list[str]]:
    create_people_table(con, rows=rows, table="people", seed=2026)
    return f"people ({rows:,} rows): demo dashboard", Catalog.from_toml(PEOPLE_CATALOG_TOML), list(DASHBOARD)


def measure_phases(con, catalog: Catalog, queries: list[str], rho: float, delta: float) -> dict:
    table = next(iter(catalog.tables.values()))
    domain = table.domain
    backend = DuckDBBackend(con)
    workload = compile_workload(catalog, queries)
    plan = plan_workload(workload, rho, "gaussian", delta)
    rows = int(backend.marginals(table, [()])[()][0])  # the true size, treated as public
    predicted = predict(plan, domain, rows, duckdb_scan_speed())
    forget_lattices()  # time first releases, as predicted

    started = time.perf_counter()
    counts = backend.marginals(table, [m.clique for m in plan.measurements])
    scan = time.perf_counter() - started
    started = time.perf_counter()
    rng = RandomSource(0)
    released = [pm.release(counts[pm.clique], domain, "gaussian", rng) for pm in plan.measurements]
    release = time.perf_counter() - started
    started = time.perf_counter()
    model = LeastSquaresModel(domain, released)
    for b in workload.blocks:
        model.answer(b)
    reconstruction = time.perf_counter() - started
    return {
        "plan": plan.chosen,
        "rows": rows,
        "measurements": len(plan.measurements),
        "cliques": len({m.clique for m in plan.measurements}),
        "planning_seconds": plan.planning_seconds,
        "predicted": {"scan": predicted.scan, "release": predicted.release, "reconstruction": predicted.reconstruction},
        "measured": {"scan": scan, "release": release, "reconstruction": reconstruction},
    }


def markdown(records: list[dict], load: tuple[float, float]) -> str:
    def cell(r, phase):
        p, m = r["predicted"][phase], r["measured"][phase]
        return f"{p:.3g} / {m:.3g} ({p / m:.2f}x)" if m > 0 else f"{p:.3g} / {m:.3g}"

    rows = [
        f"| {r['workload']} | {r['plan']} | {r['rows']:,} | {r['cliques']} | {cell(r, 'scan')} | "
        f"{cell(r, 'release')} | {cell(r, 'reconstruction')} | {cell_total(r)} |"
        for r in records
    ]
    ratios = np.array([total(r, "predicted") / total(r, "measured") for r in records])
    return "\n".join([
        "# Time predictions",
        "",
        f"`{COMMAND}`. Load average (1 min) {load[0]:.2f} at the start and {load[1]:.2f} at the end, on 2 shared cores.",
        "",
        "Seconds, predicted / measured (ratio), per phase of executing each plan: the DuckDB scan computing "
        "every measured marginal, the release (exact answers and exact noise, first release of each strategy) "
        "and the least-squares reconstruction answering every query.",
        "",
        "| workload | plan | rows | cliques | scan | release | reconstruction | total |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Total predicted / measured: median {np.median(ratios):.2f}x, range {ratios.min():.2f}x to "
        f"{ratios.max():.2f}x over {len(records)} workloads; within 2x on {int(np.sum((ratios >= 0.5) & (ratios <= 2)))}.",
        "",
    ])


def total(r: dict, kind: str) -> float:
    return sum(r[kind].values())


def cell_total(r: dict) -> str:
    p, m = total(r, "predicted"), total(r, "measured")
    return f"{p:.3g} / {m:.3g} ({p / m:.2f}x)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--people-rows", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    rho = epsilon_delta_to_zcdp(args.epsilon, args.delta)
    start_load = os.getloadavg()[0]
    print(duckdb_scan_speed(), release_speeds())
    records = []
    con = duckdb.connect()
    cases = [(name, catalog, queries) for name, catalog, queries, _ in workloads(con)]
    for name, catalog, queries in cases:
        records.append({"workload": name, **measure_phases(con, catalog, queries, rho, args.delta)})
        print(json.dumps(records[-1]), flush=True)
    for rows in args.people_rows:
        people_con = duckdb.connect()
        name, catalog, queries = people(people_con, rows)
        records.append({"workload": name, **measure_phases(people_con, catalog, queries, rho, args.delta)})
        print(json.dumps(records[-1]), flush=True)
        people_con.close()
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(records, indent=2) + "\n")
    args.output.with_suffix(".md").write_text(markdown(records, (start_load, os.getloadavg()[0])))
    print(args.output.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
