"""HDMM+PGM on adult: least squares against the graphical model on 3-way range-marginals (issue #22, item 2).

Workload (the seed's, McKenna's thesis §4.6.1): 15 random 3-way cliques of adult (seed 0; a
clique is drawn again when the junction tree over all of them would pass 3·10⁶ cells), each
⊗ of Prefix on numeric attributes (`hdmm_tables.ADULT_NUMERIC`) and Identity on the others.
Measured by the planner (`plan_workload`, Gaussian noise, ρ from ε at δ = 1e-9, no adaptive
procedure), released with exact discrete Gaussian noise (seed = draw), then answered from the
same measurements by least squares (`LeastSquaresModel`) and by the graphical model
(`GraphicalModelEstimator`: accelerated mirror descent, `--max-iters`).

Per ε and draw: RMSE per workload row (all rows pooled), the seed's normalized L1 error
(mean over cliques of ‖Wμ − Wμ̂‖₁ / 2‖Wμ‖₁), the fraction of negative answers, the coverage of
answer ± 1.96·sd (the least-squares sd for both estimators), the blocks where the graphical
model's RMSE is at most least squares', and run times. `auto` is `AutoEstimator`: per block,
the graphical model where at least 90% of its answers lie in least squares' 95% intervals,
else least squares (post-processing of released values only).

    python -m benchmarks.pgm_linear [--epsilons 0.1,0.3,1,10] [--draws 3] [--max-iters 500]
                                    [--data DIR] [--array-module numpy|cupy|auto] [--out FILE]

writes benchmarks/results/pgm_linear.json (records and a markdown table) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.arrays import set_array_module, to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.matrices import Prefix
from mechanisms.measurement import GAUSSIAN, exact_answer
from mechanisms.noise import RandomSource
from mechanisms.pgm import AutoEstimator, GraphicalModelEstimator
from mechanisms.pgm.junction_tree import model_size
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Block, Term, Workload
from planner.planner import plan_workload

ADULT_NUMERIC = {"age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week"}  # as benchmarks.hdmm_tables
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult"  # as benchmarks.datasets
RESULTS = Path(__file__).parent / "results" / "pgm_linear.json"
DELTA = 1e-9
CLIQUES, SEED, TREE_CELLS = 15, 0, 3_000_000
Z95 = 1.959963984540054


def load(data: Path) -> tuple[Domain, np.ndarray]:
    sizes = json.loads((data / "adult-domain.json").read_text())
    rows = np.loadtxt(data / "adult.csv", delimiter=",", skiprows=1, dtype=np.int64)
    return Domain(tuple(sizes), tuple(sizes.values())), rows


def counts(domain: Domain, rows: np.ndarray, clique: tuple[str, ...]) -> np.ndarray:
    """Exact integer marginal of the rows on `clique`."""
    if not clique:
        return np.asarray([len(rows)], dtype=np.int64)
    columns = [domain.attributes.index(a) for a in clique]
    flat = np.ravel_multi_index(tuple(rows[:, c] for c in columns), domain.shape(clique))
    return np.bincount(flat, minlength=domain.size(clique)).astype(np.int64)


def workload(domain: Domain, cliques_wanted: int = CLIQUES) -> Workload:
    """`cliques_wanted` (15) random 3-way range-marginals whose joint junction tree stays under TREE_CELLS."""
    rng = np.random.default_rng(SEED)
    cliques: list[tuple[str, ...]] = []
    while len(cliques) < cliques_wanted:
        picked = sorted(rng.choice(len(domain.attributes), 3, replace=False))
        clique = tuple(domain.attributes[i] for i in picked)
        if clique not in cliques and model_size(domain, cliques + [clique]) <= TREE_CELLS:
            cliques.append(clique)
    blocks = [
        Block(" × ".join(c), c, [Term(1.0, {a: Prefix(domain.size_of(a)) for a in c if a in ADULT_NUMERIC})])
        for c in cliques
    ]
    return Workload(domain, blocks)


def scores(blocks: list[Block], truth: dict, answers: dict, variances: dict) -> dict:
    rows = sum(truth[b.name].size for b in blocks)
    squared = sum(float(np.sum((answers[b.name] - truth[b.name]) ** 2)) for b in blocks)
    l1 = [float(np.abs(answers[b.name] - truth[b.name]).sum() / (2 * np.abs(truth[b.name]).sum())) for b in blocks]
    negative = sum(int((answers[b.name] < 0).sum()) for b in blocks)
    covered = sum(
        int((np.abs(answers[b.name] - truth[b.name]) <= Z95 * np.sqrt(variances[b.name])).sum()) for b in blocks
    )
    return {
        "rmse": float(np.sqrt(squared / rows)),
        "l1": float(np.mean(l1)),
        "negative": negative / rows,
        "coverage": covered / rows,
        "block_rmse": {b.name: float(np.sqrt(np.mean((answers[b.name] - truth[b.name]) ** 2))) for b in blocks},
    }


def run(epsilons: list[float], draws: int, max_iters: int, data: Path) -> list[dict]:
    domain, rows = load(data)
    wl = workload(domain)
    blocks = wl.blocks
    cache: dict = {}

    def marginal(clique):
        if clique not in cache:
            cache[clique] = counts(domain, rows, clique)
        return cache[clique]

    truth = {b.name: to_numpy(b.matrix(domain).matvec(marginal(b.attributes(domain)).astype(float))) for b in blocks}
    records = []
    for eps in epsilons:
        rho = epsilon_delta_to_zcdp(eps, DELTA)
        started = time.perf_counter()
        plan = plan_workload(wl, rho)
        plan_seconds = time.perf_counter() - started
        exact = [exact_answer(marginal(pm.clique), pm.query(domain), GAUSSIAN) for pm in plan.measurements]
        direct = [pm.block for pm in plan.measurements if pm.block is not None]
        families = sorted({pm.family for pm in plan.measurements})
        for draw in range(draws):
            rng = RandomSource(seed=draw)
            ms = [pm.release(None, domain, GAUSSIAN, rng, a) for pm, a in zip(plan.measurements, exact)]
            started = time.perf_counter()
            ls = LeastSquaresModel(domain, ms)
            ls_answers = {b.name: ls.answer(b) for b in blocks}
            ls_seconds = time.perf_counter() - started
            started = time.perf_counter()
            pgm = GraphicalModelEstimator(domain, ms, blocks=direct, exact=ls, max_iters=max_iters)
            pgm_answers = {b.name: pgm.estimate(b) for b in blocks}
            pgm_seconds = time.perf_counter() - started
            variances = {b.name: ls_answers[b.name][1] for b in blocks}
            least = {b.name: ls_answers[b.name][0] for b in blocks}
            chooser = AutoEstimator(pgm)
            picked = {b.name: chooser.source(b) is pgm for b in blocks}
            auto = {b.name: pgm_answers[b.name] if picked[b.name] else least[b.name] for b in blocks}
            record = {
                "epsilon": eps,
                "rho": rho,
                "draw": draw,
                "measurements": len(ms),
                "families": families,
                "skipped": len(pgm.skipped),
                "tree_cells": int(pgm.model.tree.size),
                "iterations": pgm.model.iterations,
                "plan_seconds": plan_seconds,
                "least_squares_seconds": ls_seconds,
                "pgm_seconds": pgm_seconds,
                "least_squares": scores(blocks, truth, least, variances),
                "pgm": scores(blocks, truth, pgm_answers, variances),
                "auto": scores(blocks, truth, auto, variances),
                "auto_pgm_blocks": int(sum(picked.values())),
                "block_negative_least_squares": {b.name: float((least[b.name] < 0).mean()) for b in blocks},
            }
            record["pgm_wins"] = int(sum(
                record["pgm"]["block_rmse"][b.name] <= record["least_squares"]["block_rmse"][b.name] for b in blocks
            ))
            records.append(record)
            print(_line(record), flush=True)
    return records


def _line(r: dict) -> str:
    ls, pgm = r["least_squares"], r["pgm"]
    return (
        f"ε={r['epsilon']:g} draw {r['draw']}: RMSE {ls['rmse']:.2f} vs {pgm['rmse']:.2f}, L1 {ls['l1']:.4f} vs "
        f"{pgm['l1']:.4f}, negative {ls['negative']:.3f} vs {pgm['negative']:.3f}, coverage {ls['coverage']:.3f} vs "
        f"{pgm['coverage']:.3f}, {r['pgm_wins']}/{CLIQUES} blocks, fit {r['pgm_seconds']:.1f} s ({r['iterations']} it)"
    )


def markdown(records: list[dict]) -> str:
    head = (
        "| ε | RMSE LS | RMSE PGM | RMSE auto | L1 LS | L1 PGM | L1 auto | negative LS | negative PGM "
        "| 95% cover LS | 95% cover PGM | blocks PGM ≤ LS | auto's PGM blocks | fit s (iterations) | LS s |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for eps in sorted({r["epsilon"] for r in records}):
        rs = [r for r in records if r["epsilon"] == eps]

        def mean(kind, key):
            return float(np.mean([r[kind][key] for r in rs]))

        lines.append(
            f"| {eps:g} | {mean('least_squares', 'rmse'):.2f} | {mean('pgm', 'rmse'):.2f} | {mean('auto', 'rmse'):.2f} "
            f"| {mean('least_squares', 'l1'):.4f} | {mean('pgm', 'l1'):.4f} | {mean('auto', 'l1'):.4f} "
            f"| {mean('least_squares', 'negative'):.3f} | {mean('pgm', 'negative'):.3f} "
            f"| {mean('least_squares', 'coverage'):.3f} | {mean('pgm', 'coverage'):.3f} "
            f"| {np.mean([r['pgm_wins'] for r in rs]):.1f}/{CLIQUES} | {np.mean([r['auto_pgm_blocks'] for r in rs]):.1f} "
            f"| {np.mean([r['pgm_seconds'] for r in rs]):.1f} ({np.mean([r['iterations'] for r in rs]):.0f}) "
            f"| {np.mean([r['least_squares_seconds'] for r in rs]):.2f} |"
        )
    return head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epsilons", default="0.1,0.3,1,10")
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--max-iters", type=int, default=500)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--array-module", default="numpy")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    set_array_module(args.array_module)
    started = time.perf_counter()
    records: list[dict] = []
    for eps in [float(e) for e in args.epsilons.split(",")]:
        records += run([eps], args.draws, args.max_iters, args.data)
        save(args, records, started)
    print(markdown(records))


def _gpu() -> str | None:
    if xp().__name__ != "cupy":
        return None
    name = xp().cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def save(args: argparse.Namespace, records: list[dict], started: float) -> None:
    table = markdown(records)
    conditions = {
        "command": "python -m benchmarks.pgm_linear " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("data", "out")
        ),
        "array_module": xp().__name__,
        "machine": platform.processor() or platform.machine(),
        "gpu": _gpu(),
        "python": platform.python_version(),
        "seconds": time.perf_counter() - started,
        "delta": DELTA,
        "cliques": CLIQUES,
        "tree_cells_cap": TREE_CELLS,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"conditions": conditions, "records": records, "table": table}, indent=1))


if __name__ == "__main__":
    main()
