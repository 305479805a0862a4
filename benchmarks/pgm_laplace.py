"""HDMM+PGM under pure ε-DP: the graphical model's L1 loss for Laplace measurements against its L2 loss.

The workload and data of `benchmarks.pgm_linear` (adult's random 3-way range-marginals,
Prefix on numeric attributes, Identity on the others), fewer cliques by default so that a
run fits a few minutes on 2 cores. Planned by `plan_workload` with Laplace noise (budget ε,
pure DP), released with exact discrete Laplace noise (seed = draw), then answered by least
squares (LS), by the graphical model with the L1 loss (the Laplace negative log-likelihood,
what `GraphicalModelEstimator` uses for Laplace measurements: PGM-L1), and by the graphical
model with the Gaussian L2 loss at the same variances (PGM-L2, the loss before this change).
Metrics as in `benchmarks.pgm_linear`: RMSE per workload row (rows pooled), normalized L1
(mean over cliques of ‖Wμ − Wμ̂‖₁ / 2‖Wμ‖₁), share of negative answers.

    python -m benchmarks.pgm_laplace [--epsilons 0.1,1,10] [--draws 1] [--cliques 5] [--max-iters 1000]

writes benchmarks/results/pgm_laplace.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.pgm_linear import DATA, counts, load, scores, workload
from mechanisms.arrays import to_numpy
from mechanisms.measurement import GAUSSIAN, LAPLACE, exact_answer
from mechanisms.noise import RandomSource
from mechanisms.pgm import GraphicalModelEstimator
from mechanisms.reconstruction import LeastSquaresModel
from planner.planner import plan_workload

RESULTS = Path(__file__).parent / "results" / "pgm_laplace.json"
ESTIMATORS = ("least_squares", "pgm_l1", "pgm_l2")


def run(epsilons: list[float], draws: int, cliques: int, max_iters: int, data: Path) -> list[dict]:
    domain, rows = load(data)
    wl = workload(domain, cliques)
    blocks = wl.blocks
    cache: dict = {}

    def marginal(clique):
        if clique not in cache:
            cache[clique] = counts(domain, rows, clique)
        return cache[clique]

    truth = {b.name: to_numpy(b.matrix(domain).matvec(marginal(b.attributes(domain)).astype(float))) for b in blocks}
    records = []
    for eps in epsilons:
        plan = plan_workload(wl, eps, noise=LAPLACE)
        exact = [exact_answer(marginal(pm.clique), pm.query(domain), LAPLACE) for pm in plan.measurements]
        direct = [pm.block for pm in plan.measurements if pm.block is not None]
        for draw in range(draws):
            rng = RandomSource(seed=draw)
            ms = [pm.release(None, domain, LAPLACE, rng, a) for pm, a in zip(plan.measurements, exact)]
            ls = LeastSquaresModel(domain, ms)
            answers = {"least_squares": {b.name: ls.answer(b)[0] for b in blocks}}
            variances = {b.name: ls.answer(b)[1] for b in blocks}
            record = {"epsilon": eps, "draw": draw, "measurements": len(ms),
                      "families": sorted({pm.family for pm in plan.measurements})}
            for name, fitted in (("pgm_l1", ms), ("pgm_l2", [dataclasses.replace(m, noise=GAUSSIAN) for m in ms])):
                started = time.perf_counter()
                pgm = GraphicalModelEstimator(domain, fitted, blocks=direct, exact=ls, max_iters=max_iters)
                answers[name] = {b.name: pgm.estimate(b) for b in blocks}
                record[f"{name}_seconds"] = time.perf_counter() - started
                record[f"{name}_iterations"] = pgm.model.iterations
            for name in ESTIMATORS:
                record[name] = scores(blocks, truth, answers[name], variances)
            records.append(record)
            print(" ".join(f"{n} RMSE {record[n]['rmse']:.2f} L1 {record[n]['l1']:.4f}" for n in ESTIMATORS),
                  f"ε={eps:g} draw {draw}", flush=True)
    return records


def markdown(records: list[dict]) -> str:
    out = ("| ε | draws | RMSE LS | RMSE PGM-L1 | RMSE PGM-L2 | L1 LS | L1 PGM-L1 | L1 PGM-L2 | negative LS "
           "| fit s L1 / L2 (iterations) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for eps in sorted({r["epsilon"] for r in records}):
        rs = [r for r in records if r["epsilon"] == eps]

        def mean(name, key):
            return float(np.mean([r[name][key] for r in rs]))

        out += (f"| {eps:g} | {len(rs)} | " + " | ".join(f"{mean(n, 'rmse'):.2f}" for n in ESTIMATORS) + " | "
                + " | ".join(f"{mean(n, 'l1'):.4f}" for n in ESTIMATORS) + f" | {mean('least_squares', 'negative'):.3f} | "
                + f"{np.mean([r['pgm_l1_seconds'] for r in rs]):.1f} ({np.mean([r['pgm_l1_iterations'] for r in rs]):.0f})"
                + f" / {np.mean([r['pgm_l2_seconds'] for r in rs]):.1f} ({np.mean([r['pgm_l2_iterations'] for r in rs]):.0f}) |\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epsilons", default="0.1,1,10")
    parser.add_argument("--draws", type=int, default=1)
    parser.add_argument("--cliques", type=int, default=5)
    parser.add_argument("--max-iters", type=int, default=1000)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    started = time.perf_counter()
    records = run([float(e) for e in args.epsilons.split(",")], args.draws, args.cliques, args.max_iters, args.data)
    table = markdown(records)
    conditions = {"command": "python -m benchmarks.pgm_laplace " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("data", "out")),
        "seconds": time.perf_counter() - started}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"conditions": conditions, "records": records, "table": table}, indent=1) + "\n")
    print(table)


if __name__ == "__main__":
    main()
