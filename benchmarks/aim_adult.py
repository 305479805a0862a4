"""AIM (and MST, MWEM+PGM) on adult_hd: all 455 3-way marginals, δ=1e-9, several ε and seeds.

Error is the AIM paper's workload error: the mean over workload marginals of
‖p − p̂‖₁ between the normalized true marginal p and the normalized estimate p̂,
from the model's own marginals (`model_error`) and from synthetic rows sampled
from it (`synthetic_error`; as many rows as the model's estimated total).
`seconds` is the wall time of the mechanism plus the synthetic sampling, and
`cpu_seconds` its CPU time (exact marginals are computed in NumPy, standing in
for the database; evaluation is not timed). Reference (private-pgm's numpy
AIM on 2 cores, ε=1): model 0.121, synthetic 0.128 in 129 s (250 iterations)
and 482 s (1000); its MST: 0.184 in 60 s.

    python -m benchmarks.aim_adult                       # ε=1, 5 seeds; ε=0.1 and 10
    python -m benchmarks.aim_adult --epsilons 1 --seeds 0 --mechanisms aim
    python -m benchmarks.aim_adult --mechanisms mwem --out results/mwem_pgm.json   # the MWEM+PGM baseline
"""

from __future__ import annotations

import argparse
import json
import os
import time
from itertools import combinations
from pathlib import Path

import numpy as np

from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.aim import aim
from mechanisms.domain import Domain
from mechanisms.mst import mst
from mechanisms.mwem_pgm import mwem_pgm
from mechanisms.noise import RandomSource

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult_hd"
RESULTS = Path(__file__).parent / "results" / "aim_adult.json"
DELTA = 1e-9


def load() -> tuple[Domain, np.ndarray]:
    """The integer-encoded table and its domain (columns in the CSV's order)."""
    sizes = json.loads((DATA / "adult-domain.json").read_text())
    with open(DATA / "adult.csv") as f:
        header = f.readline().strip().split(",")
    rows = np.loadtxt(DATA / "adult.csv", delimiter=",", skiprows=1, dtype=np.int64)
    return Domain(tuple(header), tuple(sizes[c] for c in header)), rows


def marginal_counts(domain: Domain, rows: np.ndarray, clique) -> np.ndarray:
    """Exact counts of a clique's marginal, flattened in domain order."""
    columns = [domain.attributes.index(a) for a in clique]
    index = np.ravel_multi_index(tuple(rows[:, c] for c in columns), domain.shape(clique))
    return np.bincount(index, minlength=domain.size(clique))


def workload_error(truth: list[np.ndarray], estimates: list[np.ndarray]) -> float:
    """Mean over marginals of the L1 distance between normalized tables."""
    return float(np.mean([np.abs(t / t.sum() - e / e.sum()).sum() for t, e in zip(truth, estimates)]))


def run(
    mechanism: str, epsilon: float, seed: int, domain: Domain, rows: np.ndarray, workload, max_model_size: float,
    rounds: int | None = None,
) -> dict:
    rho = epsilon_delta_to_zcdp(epsilon, DELTA)
    rng = RandomSource(seed)
    marginal = lambda clique: marginal_counts(domain, rows, clique)  # noqa: E731
    start, cpu = time.perf_counter(), time.process_time()
    if mechanism == "aim":
        result = aim(domain, marginal, rho, [(c, 1.0) for c in workload], rng, max_model_size=max_model_size)
    elif mechanism == "mwem":
        result = mwem_pgm(domain, marginal, rho, workload, rng, rounds=rounds)
    else:
        result = mst(domain, marginal, rho, rng)
    synthetic = result.model.sample(rng=seed)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    truth = [marginal_counts(domain, rows, c).astype(float) for c in workload]
    model = [result.model.project(c).ravel() for c in workload]
    synth = [marginal_counts(domain, synthetic, c).astype(float) for c in workload]
    return {
        "mechanism": mechanism,
        "epsilon": epsilon,
        "seed": seed,
        "model_error": workload_error(truth, model),
        "synthetic_error": workload_error(truth, synth),
        "seconds": seconds,
        "cpu_seconds": cpu,
        "load_average": os.getloadavg()[0],
        "max_model_size": max_model_size if mechanism == "aim" else None,
        "rho": rho,
        "charged_rho": result.rho,
        "rounds": len(getattr(result, "rounds", getattr(result, "chosen", []))),
        "model_cells": result.model.tree.size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 0.1, 10.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--mechanisms", nargs="+", default=["aim", "mst"], choices=["aim", "mst", "mwem"])
    parser.add_argument("--rounds", type=int, default=None, help="MWEM+PGM's rounds (default: one per attribute)")
    parser.add_argument("--max-model-size", type=float, default=80.0, help="AIM's model cap in MB (default 80)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    domain, rows = load()
    workload = list(combinations(domain.attributes, 3))
    print(f"adult_hd: {len(rows):,} rows, {len(domain)} attributes, {len(workload)} 3-way marginals, "
          f"{os.cpu_count()} CPUs")
    print(f"{'mechanism':9s} {'eps':>5s} {'seed':>4s} {'model':>7s} {'synth':>7s} {'sec':>7s} {'cpu s':>7s} {'rounds':>6s}")
    records = []
    for mechanism in args.mechanisms:
        for epsilon in args.epsilons:
            for seed in args.seeds:
                r = run(mechanism, epsilon, seed, domain, rows, workload, args.max_model_size, args.rounds)
                records.append(r)
                print(f"{mechanism:9s} {epsilon:5g} {seed:4d} {r['model_error']:7.4f} {r['synthetic_error']:7.4f} "
                      f"{r['seconds']:7.1f} {r['cpu_seconds']:7.1f} {r['rounds']:6d}", flush=True)
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
