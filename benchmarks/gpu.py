"""NumPy against CuPy on dpsql's heavy array paths, side by side in one process, answers compared.

Every case builds its inputs once on the host (adult from `--data`, seeded noise), then runs
the same dpsql code under `set_array_module("numpy")` and under `set_array_module("cupy")`:
seconds are the median of the case's repeats; on CuPy one warm-up run (kernel compilation,
memory pool) comes first, untimed, and the clock is read after `Device().synchronize()`. Inputs
start on the host and answers end there (`to_numpy`), so transfers are part of every CuPy
time. `max_rel_diff` compares every answer value: max |numpy − cupy| / max |numpy|.

    lsq_adult      least squares on a 3-way marginal of adult (`CliqueLeastSquares`, one
                   Kronecker strategy of p-Identity factors, as OPT⊗ returns): x̂, a block's
                   estimate and variances
    lsq_scale      the same on a side³-cell synthetic clique (the 10⁹-cell path of RESULTS.md)
    lsq_union      two strategies on one clique above DENSE_LIMIT cells: preconditioned CG
    opt0_gaussian  HDMM OPT₀, Gaussian (`mechanisms.hdmm.optimize`): 2-D all-range workload
                   on side² cells, one eigendecomposition per iteration, fixed iterations
    opt0_laplace   HDMM OPT₀, Laplace p-Identity on the implicit ALL RANGE gram of n cells
                   (L-BFGS-B on the host, objective and gradient in the array module)
    pgm            Private-PGM mirror descent (`GraphicalModel.fit`, fixed iterations) on
                   noisy adult marginals forming a junction tree, as AIM fits its models
    rap_scan       RAP's selection scan: every consistent query of random 3-way marginals
                   answered on a relaxed D' of 1000 rows (float32)
    rap            RAP end to end on adult (`benchmarks.rap.run`, DuckDB counts); its noise
                   is fresh on each side, so errors are reported, not compared. GPU target
                   (RESULTS.md): more than 28,000 queries/s
    kron_matvec    a Kronecker product of three dense factors applied to a few columns
    range_tree     range-tree least squares (H2 pinv on n cells): host code, CuPy only
                   adds transfers

    python -m benchmarks.gpu [--quick] [--data ../shared/data] [--out PATH] [--cases NAME ...]

Sizes (FULL) are for a GPU machine with 16 dedicated cores: about two minutes in all;
`--quick` is a smoke run of a few seconds per case. Without CuPy or a GPU only the NumPy side
runs and the JSON says why. BLAS uses every core unless OPENBLAS_NUM_THREADS (or OMP/MKL) is
set: on a shared, loaded machine set it to 1 (two BLAS threads on two busy cores ran the small
products here 70x slower). The JSON (written after every case, so a timeout keeps what ran) is
{"machine": {...}, "records": [one per case: name, sizes, numpy_seconds, cupy_seconds,
speedup, max_rel_diff, device, ...]}.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # before NumPy loads
    os.environ.setdefault(_var, str(os.cpu_count() or 1))

import argparse
import json
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np

from benchmarks import aim_adult, datasets, rap
from mechanisms.arrays import set_array_module, to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.hdmm import OPT0, optimize
from mechanisms.hdmm.opt0 import opt0_laplace, p_identity_strategy
from mechanisms.hdmm.workload import GramOperator, KronGram, all_range_gram
from mechanisms.matrices import Dense, Kronecker
from mechanisms.measurement import Measurement
from mechanisms.pgm.estimation import LinearMeasurement
from mechanisms.pgm.model import GraphicalModel
from mechanisms.rap import RAPConfig, ThresholdQueries, ThresholdWorkload, random_thresholds
from mechanisms.rap.encoding import OneHot, uniform_relaxed
from mechanisms.ranges.trees import hierarchical
from mechanisms.reconstruction.clique import CliqueLeastSquares
from mechanisms.workload import Block, Term

RESULTS = Path(__file__).parent / "results" / "gpu.json"
GPU_TARGET = 28_000  # RAP queries/s (RESULTS.md, issue 6)

# Sizes: full (an H200 next to 16 cores, about a minute of NumPy in all) and --quick (2 cores).
FULL = {
    "lsq_scale": {"side": 384},
    "lsq_union": {"clique": ("age", "hours-per-week")},
    "opt0_gaussian": {"side": 40, "iterations": 20},
    "opt0_laplace": {"n": 4096, "iterations": 40},
    "pgm": {"large": True, "iterations": 50},
    "rap_scan": {"thresholds": 64},
    "rap": {"thresholds": 16, "epsilon": 1.0, "synthetic_rows": 1000},
    "kron_matvec": {"side": 256, "columns": 2},
    "range_tree": {"n": 1 << 22},
}
QUICK = {
    "lsq_scale": {"side": 96},
    "lsq_union": {"clique": ("marital-status", "occupation", "native-country")},
    "opt0_gaussian": {"side": 20, "iterations": 10},
    "opt0_laplace": {"n": 1024, "iterations": 20},
    "pgm": {"large": False, "iterations": 10},
    "rap_scan": {"thresholds": 8},
    "rap": {"thresholds": 4, "epsilon": 0.1, "synthetic_rows": 200},
    "kron_matvec": {"side": 64, "columns": 4},
    "range_tree": {"n": 1 << 16},
}
# Marginals of adult forming a tree (each shares one attribute with an earlier one), so the
# junction tree's cliques are exactly these; the large variant moves `sex` into the first one
# (1.7M cells; 2.6M measured cells in all, against 1.8M).
PGM_CLIQUES = [
    ("age", "fnlwgt", "capital-gain"),
    ("age", "capital-loss", "hours-per-week"),
    ("occupation", "hours-per-week", "native-country"),
    ("education-num", "occupation", "income>50K"),
    ("workclass", "marital-status", "relationship", "income>50K"),
    ("race", "sex", "native-country"),
]
PGM_CLIQUES_LARGE = [("age", "fnlwgt", "capital-gain", "sex"), *PGM_CLIQUES[1:5], ("race", "native-country")]
LSQ_CLIQUE = ("age", "fnlwgt", "hours-per-week")
NOISE_VARIANCE = 4.0  # of the synthetic strategy measurements (least-squares cases)


@dataclass
class Case:
    """One path: `run()` does the work in the active array module and returns NumPy answers.

    `run` returns (answers, details): answers are compared across modules (None: not
    comparable), details are recorded per side. `work` is (unit, count) for a rate.
    """

    name: str
    sizes: dict
    run: Callable[[], tuple[object, dict]]
    repeats: int = 3
    work: tuple[str, int] | None = None
    note: str = ""


# --- inputs -----------------------------------------------------------------------------------------

def kron_factors(sizes, seed: int) -> list[np.ndarray]:
    """Explicit p-Identity factors (p = n // 16), as HDMM's OPT⊗ returns, from a seeded Θ."""
    rng = np.random.default_rng(seed)
    return [p_identity_strategy(rng.uniform(0.0, 1.0, (max(1, n // 16), n))) for n in sizes]


def kron_measurement(factors, x_parts, seed: int) -> np.ndarray:
    """Noisy answers (⊗ factors)·x + N(0, NOISE_VARIANCE), for x given as an array or as ⊗ x_parts."""
    rng = np.random.default_rng(seed)
    if isinstance(x_parts, np.ndarray):  # built while the array module is NumPy
        exact = to_numpy(Kronecker([Dense(f) for f in factors]).matvec(x_parts.astype(float)))
    else:  # A(⊗ x_i) = ⊗ (A_i x_i): no side³ vector of the data is ever needed
        exact = np.ones(1)
        for f, part in zip(factors, x_parts):
            exact = np.multiply.outer(exact, f @ part).reshape(-1)
    return exact + rng.normal(0.0, np.sqrt(NOISE_VARIANCE), exact.size)


def strategy_lsq(domain: Domain, clique, strategies, values, block: Block):
    """`CliqueLeastSquares` from host inputs (factors and noisy answers per strategy), with a block's
    estimate and variances."""
    measurements = [
        Measurement(clique, "gaussian", 1.0, NOISE_VARIANCE, y, strategy=Kronecker([Dense(f) for f in factors]))
        for factors, y in zip(strategies, values)
    ]
    lsq = CliqueLeastSquares(domain, clique, measurements)
    return lsq, lsq.estimate(block), lsq.variance(block)


# --- cases ------------------------------------------------------------------------------------------

def lsq_adult(domain: Domain, rows: np.ndarray) -> Case:
    sizes = domain.shape(LSQ_CLIQUE)
    factors = kron_factors(sizes, seed=1)
    y = kron_measurement(factors, aim_adult.marginal_counts(domain, rows, LSQ_CLIQUE), seed=2)

    def run():
        block = Block("age x hours", ("age", "hours-per-week"), [Term(1.0, {})])
        lsq, estimate, variance = strategy_lsq(domain, LSQ_CLIQUE, [factors], [y], block)
        return [lsq.solution(), estimate, variance], {}

    return Case("lsq_adult", {"clique": list(LSQ_CLIQUE), "cells": int(np.prod(sizes)), "measurements": y.size}, run)


def lsq_scale(domain: Domain, rows: np.ndarray, side: int) -> Case:
    clique = ("x", "y", "z")
    cube = Domain(clique, (side,) * 3)
    factors = kron_factors((side,) * 3, seed=3)
    rng = np.random.default_rng(4)
    y = kron_measurement(factors, [rng.poisson(50.0, side).astype(float) for _ in clique], seed=5)

    def run():
        block = Block("x by z", ("x", "z"), [Term(1.0, {})])
        lsq, estimate, variance = strategy_lsq(cube, clique, [factors], [y], block)
        return [lsq.solution(), estimate, variance], {}

    return Case("lsq_scale", {"side": side, "cells": side**3, "measurements": y.size}, run)


def lsq_union(domain: Domain, rows: np.ndarray, clique) -> Case:
    sizes = domain.shape(clique)
    x = aim_adult.marginal_counts(domain, rows, clique)
    strategies = [kron_factors(sizes, seed=6), kron_factors(sizes, seed=7)]
    values = [kron_measurement(f, x, seed=8 + i) for i, f in enumerate(strategies)]

    def run():
        block = Block("first attribute", (clique[0],), [Term(1.0, {})])
        _, estimate, variance = strategy_lsq(domain, tuple(clique), strategies, values, block)
        return [estimate, variance], {}

    return Case("lsq_union", {"clique": list(clique), "cells": int(np.prod(sizes)), "strategies": 2}, run, repeats=2)


def opt0_gaussian(domain: Domain, rows: np.ndarray, side: int, iterations: int) -> Case:
    gram = KronGram.product([all_range_gram(side), all_range_gram(side)], (side * (side + 1) // 2) ** 2)

    def run():
        best = optimize(gram, 2, operators=(OPT0,), explicit_limit=side**2, max_iter=iterations, gap_tol=0.0).best
        return [best.error, best.strategy.lower_bound], {"iterations": best.strategy.iterations}

    return Case("opt0_gaussian", {"workload": "2-D all ranges", "side": side, "cells": side**2,
                                  "iterations": iterations}, run, repeats=2)


def opt0_laplace_case(domain: Domain, rows: np.ndarray, n: int, iterations: int) -> Case:
    def run():
        result = opt0_laplace(GramOperator.all_range(n), restarts=1, seed=0, max_iter=iterations)
        return [result.error], {"iterations": result.iterations}

    return Case("opt0_laplace", {"workload": "ALL RANGE (implicit gram)", "n": n, "p": n // 16,
                                 "max_iter": iterations}, run, repeats=2)


def pgm(domain: Domain, rows: np.ndarray, large: bool, iterations: int) -> Case:
    cliques = [domain.canonical(c) for c in (PGM_CLIQUES_LARGE if large else PGM_CLIQUES)]
    cliques += [(a,) for a in domain.attributes]
    rng = np.random.default_rng(10)
    sigma = 10.0
    measurements = [
        LinearMeasurement(c, aim_adult.marginal_counts(domain, rows, c) + rng.normal(0.0, sigma, domain.size(c)), sigma**2)
        for c in cliques
    ]

    def run():
        model = GraphicalModel.fit(domain, measurements, total=float(len(rows)), max_iters=iterations, tol=0.0)
        answers = np.concatenate([model.project(c).ravel() for c in cliques])
        return answers, {"iterations": model.iterations, "loss": model.loss, "model_cells": model.tree.size}

    cells = sum(domain.size(c) for c in cliques)
    return Case("pgm", {"cliques": len(cliques), "measured_cells": cells,
                        "largest_clique": max(domain.size(c) for c in cliques), "iterations": iterations}, run, repeats=2)


def rap_scan(domain: Domain, rows: np.ndarray, thresholds: int) -> Case:
    source = ThresholdQueries(ThresholdWorkload(domain, random_thresholds(domain, thresholds, 3, 3, seed=4)))
    encoding = OneHot(domain)

    def run():
        relaxed = uniform_relaxed(1000, encoding, seed=11)
        parts = [to_numpy(answers).ravel() for ev in source.evaluators for _, answers in ev.synthetic(relaxed, encoding)]
        return np.concatenate(parts).astype(np.float64), {}

    return Case("rap_scan", {"workload": f"3-way marginals ({thresholds} random)", "queries": source.n_queries,
                             "synthetic_rows": 1000}, run, work=("queries", source.n_queries))


def rap_end_to_end(domain: Domain, rows: np.ndarray, thresholds: int, epsilon: float, synthetic_rows: int) -> Case:
    name = f"3-way marginals ({thresholds} random)"

    def run():
        config = RAPConfig(synthetic_rows=synthetic_rows)
        record = next(r for r in rap.run({name: (thresholds, 3, 3)}, [epsilon], 4, config) if r["mechanism"] == "rap")
        keep = ("n_queries", "rounds", "per_round", "queries_per_second", "scan_queries_per_second",
                "max_error", "mean_error", "phases")
        return None, {k: record[k] for k in keep}

    return Case("rap", {"workload": name, "epsilon": epsilon, "synthetic_rows": synthetic_rows}, run, repeats=1,
                note="fresh cryptographic noise on each side: errors reported, not compared")


def kron_matvec(domain: Domain, rows: np.ndarray, side: int, columns: int) -> Case:
    rng = np.random.default_rng(12)
    factors = [rng.standard_normal((side, side)) for _ in range(3)]
    x = rng.standard_normal((side**3, columns))

    def run():
        return to_numpy(Kronecker([Dense(f) for f in factors]).matvec(x)), {}

    return Case("kron_matvec", {"side": side, "cells": side**3, "columns": columns}, run)


def range_tree(domain: Domain, rows: np.ndarray, n: int) -> Case:
    y = np.random.default_rng(13).normal(100.0, 10.0, hierarchical(n, 2).shape[0])

    def run():
        return to_numpy(hierarchical(n, 2).pinv().matvec(y)), {}

    return Case("range_tree", {"n": n, "branching": 2, "measurements": y.size}, run,
                note="range trees compute on the host (ranges/trees.py): CuPy only adds transfers")


# name -> maker(domain, rows, **sizes[name]), in the order they run (the paths first)
CASES: dict[str, Callable[..., Case]] = {
    "lsq_adult": lsq_adult,
    "lsq_scale": lsq_scale,
    "pgm": pgm,
    "rap_scan": rap_scan,
    "opt0_gaussian": opt0_gaussian,
    "opt0_laplace": opt0_laplace_case,
    "rap": rap_end_to_end,
    "lsq_union": lsq_union,
    "kron_matvec": kron_matvec,
    "range_tree": range_tree,
}


# --- measuring ---------------------------------------------------------------------------------------

def synchronize() -> None:
    if xp() is not np:
        xp().cuda.Device().synchronize()


def timed(case: Case, warm_up: bool) -> dict:
    """Median seconds of the case's repeats in the active module, its answers and details."""
    if warm_up:
        case.run()
        synchronize()
    seconds = []
    for _ in range(case.repeats):
        start = time.perf_counter()
        answers, details = case.run()
        synchronize()
        seconds.append(time.perf_counter() - start)
    return {"seconds": float(np.median(seconds)), "runs": seconds, "answers": answers, "details": details}


def flat(answers) -> np.ndarray:
    if isinstance(answers, (list, tuple)):
        return np.concatenate([flat(a) for a in answers]) if answers else np.zeros(0)
    return np.asarray(to_numpy(answers), dtype=np.float64).ravel()


def max_rel_diff(a, b) -> float:
    """max |a − b| / max |a| over every answer value (0 when both are all zero)."""
    a, b = flat(a), flat(b)
    if a.shape != b.shape:
        return float("inf")
    scale = float(np.abs(a).max()) if a.size else 0.0
    diff = float(np.abs(a - b).max()) if a.size else 0.0
    return diff / scale if scale > 0 else diff


def side(case: Case, module: str) -> dict:
    """Run one case on one module; a failure is recorded, not raised."""
    set_array_module(module)
    try:
        return timed(case, warm_up=module == "cupy")
    except Exception as error:  # noqa: BLE001 - the other cases and the other module still run
        return {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()[-3000:]}
    finally:
        if module == "cupy":
            xp().get_default_memory_pool().free_all_blocks()
        set_array_module("numpy")


def measure(case: Case, gpu: bool, devices: dict) -> dict:
    record = {"name": case.name, "sizes": case.sizes, "repeats": case.repeats, "device": devices}
    if case.note:
        record["note"] = case.note
    results = {"numpy": side(case, "numpy")}
    if gpu:
        results["cupy"] = side(case, "cupy")
    for module, result in results.items():
        if "error" in result:
            record[f"{module}_error"] = result["error"]
            record[f"{module}_traceback"] = result["traceback"]
            continue
        record[f"{module}_seconds"] = result["seconds"]
        record[f"{module}_runs"] = result["runs"]
        record.update({f"{module}_{k}": v for k, v in result["details"].items()})
        if case.work:
            unit, count = case.work
            record[f"{module}_{unit}_per_second"] = count / result["seconds"]
    if "numpy_seconds" in record and "cupy_seconds" in record:
        record["speedup"] = record["numpy_seconds"] / record["cupy_seconds"]
        answers = results["numpy"]["answers"], results["cupy"]["answers"]
        record["max_rel_diff"] = None if answers[0] is None else max_rel_diff(*answers)
    if case.name == "rap" and "cupy_queries_per_second" in record:
        record["gpu_target_queries_per_second"] = GPU_TARGET
        record["gpu_target_met"] = record["cupy_queries_per_second"] > GPU_TARGET
    return record


def gpu_available() -> tuple[bool, str]:
    try:
        module = set_array_module("cupy")
    except RuntimeError as error:
        return False, f"cupy unavailable: {error}"
    finally:
        set_array_module("numpy")
    return True, f"cupy {module.__version__}"


def devices(gpu: bool) -> dict:
    out = {"numpy": rap.device()}
    if gpu:
        set_array_module("cupy")
        try:
            out["cupy"] = rap.device()
        finally:
            set_array_module("numpy")
    return out


def summary_line(r: dict) -> str:
    def seconds(module):
        return f"{r[module + '_seconds']:.3f}s" if module + "_seconds" in r else r.get(module + "_error", "–")[:80]

    line = f"{r['name']:14s} numpy {seconds('numpy')}  cupy {seconds('cupy')}"
    if "speedup" in r:
        diff = r["max_rel_diff"]
        line += f"  speedup {r['speedup']:.2f}x  max_rel_diff {'n/a' if diff is None else f'{diff:.2e}'}"
    for key in ("numpy_queries_per_second", "cupy_queries_per_second"):
        if key in r:
            line += f"  {key.split('_')[0]} {r[key]:,.0f} q/s"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run on 2 cores, not figures)")
    parser.add_argument("--data", type=Path, default=datasets.DATA, help="folder holding adult/ (default ../shared/data)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = parser.parse_args()
    datasets.DATA = args.data.resolve()  # benchmarks.rap loads adult through benchmarks.datasets
    aim_adult.DATA = datasets.DATA / "adult"
    set_array_module("numpy")
    gpu, status = gpu_available()
    machine = {
        "cupy": status,
        "devices": devices(gpu),
        "cpu_count": os.cpu_count(),
        "blas_threads": os.environ["OPENBLAS_NUM_THREADS"],
        "numpy": np.__version__,
        "duckdb": duckdb.__version__,
        "quick": args.quick,
    }
    print(json.dumps(machine), flush=True)
    domain, rows = aim_adult.load()
    print(f"adult: {len(rows):,} rows, {len(domain)} attributes", flush=True)
    output = {"machine": machine, "records": []}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sizes = QUICK if args.quick else FULL
    for name in args.cases:
        started = time.perf_counter()
        print(f"{name}: building inputs", flush=True)
        case = CASES[name](domain, rows, **sizes.get(name, {}))
        record = measure(case, gpu, machine["devices"])
        record["wall_seconds"] = time.perf_counter() - started
        output["records"].append(record)
        args.out.write_text(json.dumps(output, indent=1) + "\n")
        print(summary_line(record) + f"  ({record['wall_seconds']:.0f}s in all)", flush=True)
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
