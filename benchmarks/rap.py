"""RAP on ADULT: present error vs the All-0 and per-query Gaussian baselines, and throughput.

Workloads (random attribute sets, fixed seed): 3-way marginals, and 1-of-4 and
2-of-4 thresholds, every consistent query of each (unfiltered); epsilon in
{0.1, 1}, delta = 1/n^2 with n public (as in the RAP papers). RAP runs with its
defaults (n' = 1000, the T·K rule, 1-way marginals first), reading exact counts
from DuckDB through `DuckDBBackend.marginals`. Errors are on normalized answers
(count / n), max and mean absolute over all consistent queries.

Baselines: All-0 answers 0 everywhere; GM answers every query with Gaussian
noise of variance m / (2 rho n^2) (sensitivity 1/n, rho / m each), clipped to
[0, 1] as in the RAP code. RAP and GM answer the same queries under the same
rho (the engine's CKS conversion of (epsilon, 1/n^2), tighter than the
papers' classical formula). GM's error statistics
are simulated with NumPy's normal sampler at that exact variance (nothing is
released). Throughput is n_queries / (RAP's wall time + one pass answering
every query from D'), the figure the RAP papers report (workload size over
runtime); baselines have none (null). RAP records also carry T, K, the phase
times, the process CPU time of the RAP run (all threads), the 1-minute load
average, and the scan rate: queries evaluated on D' (T selection scans and the
answering pass, T·|Q| + |Q|) per second of scanning.

    python -m benchmarks.rap [--quick] [--seed 4] [--epsilons 0.1 1]

writes benchmarks/results/rap.json (a list of records) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import duckdb
import numpy as np

from benchmarks.datasets import load
from dpsql.backends import DuckDBBackend
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.arrays import to_numpy, xp
from mechanisms.noise import RandomSource
from mechanisms.rap import (
    MarginalCounts,
    RAPConfig,
    ThresholdQueries,
    ThresholdWorkload,
    random_thresholds,
    run_rap,
)
from mechanisms.rap.encoding import OneHot

RESULTS = Path(__file__).parent / "results" / "rap.json"

# name -> (number of thresholds, k, r)
WORKLOADS = {
    "3-way marginals (64 random)": (64, 3, 3),
    "1-of-4 thresholds (16 random)": (16, 4, 1),
    "2-of-4 thresholds (16 random)": (16, 4, 2),
}
QUICK = {
    "3-way marginals (8 random)": (8, 3, 3),
    "1-of-4 thresholds (2 random)": (2, 4, 1),
    "2-of-4 thresholds (2 random)": (2, 4, 2),
}


def device() -> str:
    if xp() is not np:
        import cupy  # type: ignore[import-not-found]

        return f"gpu: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}"
    model = platform.processor() or "cpu"
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"cpu: {model}, {os.cpu_count()} cores (shared)"


def evaluate(source: ThresholdQueries, relaxed, n: int, rho: float, seed: int) -> tuple[dict[str, tuple[float, float]], float]:
    """(max, mean) absolute normalized error of RAP, All-0 and GM over every query, streamed,
    and the seconds RAP spent answering every query from D' (the tiles alone, exact counts excluded)."""
    m = source.n_queries
    sigma = math.sqrt(m / (2 * rho)) / n
    rng = np.random.default_rng(seed)
    worst = {"rap": 0.0, "all-0": 0.0, "gm": 0.0}
    total = {"rap": 0.0, "all-0": 0.0, "gm": 0.0}
    answering = 0.0
    encoding = OneHot(source.domain)
    for ev in source.evaluators:
        tiles = ev.synthetic(relaxed, encoding)
        while True:
            tick = time.perf_counter()
            item = next(tiles, None)
            synthetic = None if item is None else to_numpy(item[1]).ravel()
            answering += time.perf_counter() - tick
            if item is None:
                break
            truth = ev.exact_tile(item[0]).ravel() / n
            gm = np.clip(truth + sigma * rng.standard_normal(truth.size), 0.0, 1.0)
            for name, answer in (("rap", synthetic), ("all-0", 0.0), ("gm", gm)):
                error = np.abs(truth - answer)
                worst[name] = max(worst[name], float(error.max()))
                total[name] += float(error.sum())
    return {name: (worst[name], total[name] / m) for name in worst}, answering


def run(workloads: dict, epsilons: list[float], seed: int, config: RAPConfig) -> list[dict]:
    con = duckdb.connect()
    catalog = load(con, "adult")
    table = catalog.get("adult")
    domain = table.domain
    n = con.execute("SELECT COUNT(*) FROM adult").fetchone()[0]
    delta = 1.0 / n**2
    counts = MarginalCounts(domain, lambda cliques: DuckDBBackend(con).marginals(table, cliques))
    where = device()
    records = []
    for name, (count, k, r) in workloads.items():
        workload = ThresholdWorkload(domain, random_thresholds(domain, count, k, r, seed=seed))
        m = workload.n_queries
        for epsilon in epsilons:
            rho = epsilon_delta_to_zcdp(epsilon, delta)
            source = ThresholdQueries(workload)
            load_before = os.getloadavg()[0]
            start, cpu_start = time.perf_counter(), time.process_time()
            result = run_rap(source, counts, rho, RandomSource(), config, rows=n)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            errors, answering = evaluate(source, result.model.relaxed, n, rho, seed)
            release = result.release
            evaluated = (release.rounds if release.per_round < m else 0) * m + m
            detail = {
                "delta": delta,
                "rho": rho,
                "rounds": release.rounds,
                "per_round": release.per_round,
                "seconds": seconds,
                "answer_seconds": answering,
                "cpu_seconds": cpu,
                "phases": result.seconds,
                "queries_evaluated": evaluated,
                "scan_queries_per_second": evaluated / (result.seconds["select"] + answering),
                "load_average": [load_before, os.getloadavg()[0]],
            }
            print(f"{name}, eps={epsilon}: {m} queries, T={release.rounds}, K={release.per_round}, {seconds + answering:.1f}s")
            for mechanism, (worst, mean) in errors.items():
                record = {
                    "workload": name,
                    "epsilon": epsilon,
                    "mechanism": mechanism,
                    "max_error": worst,
                    "mean_error": mean,
                    "n_queries": m,
                    "queries_per_second": m / (seconds + answering) if mechanism == "rap" else None,
                    "device": where,
                }
                records.append(record | (detail if mechanism == "rap" else {"delta": delta, "rho": rho}))
                print(f"    {mechanism:6s} max {worst:.4f}  mean {mean:.3e}")
            print(f"    details: {json.dumps(detail)}")
    return records


def table(records: list[dict]) -> str:
    lines = [
        "| workload | ε | queries | T, K | RAP max | All-0 max | GM max | RAP mean | All-0 mean | GM mean | RAP s (CPU s) | RAP queries/s | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keyed = {(r["workload"], r["epsilon"], r["mechanism"]): r for r in records}
    for workload, epsilon in dict.fromkeys((r["workload"], r["epsilon"]) for r in records):
        rap, zero, gm = (keyed[workload, epsilon, m] for m in ("rap", "all-0", "gm"))
        lines.append(
            f"| {workload} | {epsilon:g} | {rap['n_queries']:,} | {rap['rounds']}, {rap['per_round']} | "
            f"{rap['max_error']:.4f} | {zero['max_error']:.4f} | {gm['max_error']:.4f} | "
            f"{rap['mean_error']:.2e} | {zero['mean_error']:.2e} | {gm['mean_error']:.2e} | "
            f"{rap['seconds'] + rap['answer_seconds']:.0f} ({rap['cpu_seconds']:.0f}) | {rap['queries_per_second']:,.0f} | "
            f"{rap['load_average'][0]:.1f}–{rap['load_average'][1]:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small workloads (a smoke run, not the reported figures)")
    parser.add_argument("--seed", type=int, default=4, help="workload seed (RAP's noise is cryptographic)")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    config = RAPConfig(synthetic_rows=200) if args.quick else RAPConfig()
    records = run(QUICK if args.quick else WORKLOADS, args.epsilons, args.seed, config)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(records, indent=2) + "\n")
    print(table(records))


if __name__ == "__main__":
    main()
