"""DPareto as the seed ran it: Bayesian optimization against random search, by hypervolume, over seeds.

    python -m benchmarks.dpareto [--objectives svt aim] [--points 32] [--seeds 10] [--aim-points 16] [--aim-seeds 3]

Avent's dissertation Ch. 3 (Table 3.4, Fig. 3.7) compares DPareto's front with random search's by the
hypervolume of the empirical (ε, error) front, repeated over seeds. Here both searches are
`planner.bayes_front.bayes_front` (BAYES: a 4-point Latin-hypercube start, then expected hypervolume
improvement under a GP on log error; RANDOM: i.i.d. uniform settings), and the hypervolume is in
(log ε, log error) with one reference point per objective, fixed over all runs (the largest log ε
plus 5% of its range; the worst log error seen plus 25% of the spread). Because both searches are
sequential, the first n points of a 32-point run are an n-point run: hypervolumes are reported
at n = 8, 12, 16, 24, 32 (Fig. 3.7's curves), and the difference BO − RS with its 95% t-interval over
the seeds (Table 3.4's statistic) and the number of seeds where BO wins.

Objectives:
- `svt`: the seed's own sparse-vector example (§3.3, Alg. 3.1): m = 100 binary queries, 10 true,
  threshold 1/2, noise b split as b₁ = b/(1 + (2C)^⅓) (threshold) and b₂ = b − b₁ (queries), at most
  C positives; ε = (1 + (2C)^⅓)(1 + (2C)^⅔)/b (App. 3.A); error 1 − F1 averaged over 50 random query
  orders (floored at 10⁻³ for the log). Knobs: ε log-uniform in [0.05, 100] (so b follows from ε and
  C; the seed draws b log-uniform in [10⁻², 10²]) and C in [1, 30].
- `aim`: dpsql's EXPLAIN PARETO search over AIM (ε, max model size, rounds) on public stand-in data
  (`planner.pareto.adaptive_front`), a small workload: the 1- and 2-way marginals of relationship,
  race, sex and income>50K on adult's domain and size (48,842 rows, δ = 1e-9). Each simulation takes
  several seconds on the shared cores, so this objective runs fewer points and seeds (`--aim-points`,
  `--aim-seeds`): a reduced protocol, said so in the output; its front comes back sorted by ε, so
  only whole runs are compared.

Writes benchmarks/results/dpareto.json.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from itertools import combinations
from pathlib import Path

import numpy as np
from scipy.stats import t as student

from planner.bayes_front import BAYES, RANDOM, Knob, bayes_front, hypervolume

RESULTS = Path(__file__).parent / "results" / "dpareto.json"
PREFIXES = (8, 12, 16, 24, 32)
QUERIES, TRUE_QUERIES, ORDERS = 100, 10, 50
ERROR_FLOOR = 1e-3


def svt_error(epsilon: float, cap: int, seed: int) -> float:
    """1 − F1 of Alg. 3.1 at (ε, C), averaged over ORDERS random query orders (seeded by the setting)."""
    k = (2 * cap) ** (1 / 3)
    b = (1 + k) * (1 + k * k) / epsilon
    b1 = b / (1 + k)
    b2 = b - b1
    key = hash((round(epsilon, 12), cap, seed)) & 0xFFFFFFFF
    rng = np.random.default_rng(key)
    truth = np.zeros(QUERIES)
    truth[:TRUE_QUERIES] = 1.0
    answers = np.array([rng.permutation(truth) for _ in range(ORDERS)])
    above = answers + rng.laplace(0.0, b2, answers.shape) >= 0.5 + rng.laplace(0.0, b1, (ORDERS, 1))
    positive = above & (np.cumsum(above, axis=1) <= cap)
    tp = (positive & (answers == 1)).sum(axis=1)
    fp = (positive & (answers == 0)).sum(axis=1)
    fn = TRUE_QUERIES - tp
    f1 = np.where(tp > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    return max(1.0 - float(f1.mean()), ERROR_FLOOR)


def svt_runs(points: int, seed: int, search: str) -> list[tuple[float, float]]:
    knobs = [Knob("epsilon", 0.05, 100.0), Knob("C", 1, 30, log=False, integer=True)]
    done, _ = bayes_front(lambda s: svt_error(s["epsilon"], int(s["C"]), seed), knobs, points, seed=seed,
                          search=search)
    return [(e.epsilon, e.rmse) for e in done]


def aim_runs(points: int, seed: int, search: str) -> list[tuple[float, float]]:
    import duckdb

    from benchmarks.datasets import load
    from benchmarks.pareto import DELTA, _compile
    from planner.pareto import DEFAULT_EPSILONS, adaptive_front, linear_front
    from planner.planning_limit import PlanningLimit

    con = duckdb.connect()
    catalog = load(con, "adult")
    rows = int(con.execute("SELECT COUNT(*) FROM adult").fetchone()[0])
    columns = ["relationship", "race", "sex", "income>50K"]
    queries = [f'SELECT "{a}", COUNT(*) FROM adult GROUP BY "{a}"' for a in columns]
    queries += [f'SELECT "{a}", "{b}", COUNT(*) FROM adult GROUP BY "{a}", "{b}"' for a, b in combinations(columns, 2)]
    workload = _compile(catalog, queries)
    linear = linear_front(workload, DEFAULT_EPSILONS, "gaussian", DELTA)
    front = adaptive_front(workload, rows, DEFAULT_EPSILONS, "gaussian", DELTA, procedures=["aim"],
                           max_evaluations=points, seed=seed, limit=PlanningLimit(3600.0), linear=linear,
                           search=search)
    return [(p.epsilon, p.rmse) for p in front.curves.get("aim", [])]  # sorted by ε: compare whole runs only


def _log(points):
    return [(math.log(x), math.log(y)) for x, y in points if math.isfinite(y) and y > 0]


def compare(runs: dict, high: float, low: float, prefixes) -> dict:
    """Hypervolumes per search, seed and prefix, under one reference; BO − RS with its 95% t-interval."""
    ys = [y for by_seed in runs.values() for pts in by_seed.values() for _, y in _log(pts)]
    reference = (math.log(high) + 0.05 * math.log(high / low), max(ys) + 0.25 * (max(ys) - min(ys)))
    out = {"reference": reference, "by_points": {}}
    for n in prefixes:
        hv = {s: [hypervolume(_log(pts[:n]), reference) for _, pts in sorted(by_seed.items())]
              for s, by_seed in runs.items()}
        diff = np.array(hv[BAYES]) - np.array(hv[RANDOM])
        half = float(student.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else math.nan
        out["by_points"][str(n)] = {
            "bayes": hv[BAYES], "random": hv[RANDOM], "bayes_mean": float(np.mean(hv[BAYES])),
            "random_mean": float(np.mean(hv[RANDOM])), "difference_mean": float(diff.mean()),
            "difference_ci95": [float(diff.mean()) - half, float(diff.mean()) + half],
            "bayes_wins": int((diff > 0).sum()), "seeds": len(diff),
        }
    return out


def markdown(name: str, result: dict) -> str:
    out = (f"{name}: hypervolume in (log ε, log error), mean over seeds\n\n| points | BO | random search | BO − RS "
           "(95% CI) | BO wins |\n|---:|---:|---:|---|---:|\n")
    for n, r in result["by_points"].items():
        lo, hi = r["difference_ci95"]
        out += (f"| {n} | {r['bayes_mean']:.3f} | {r['random_mean']:.3f} | {r['difference_mean']:+.3f} "
                f"({lo:+.3f}, {hi:+.3f}) | {r['bayes_wins']}/{r['seeds']} |\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objectives", nargs="+", default=["svt", "aim"], choices=["svt", "aim"])
    parser.add_argument("--points", type=int, default=32)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--aim-points", type=int, default=16)
    parser.add_argument("--aim-seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report = {"command": "python -m benchmarks.dpareto " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, list) else v}" for k, v in vars(args).items()
        if k != "out")}
    for objective in args.objectives:
        started = time.perf_counter()
        points, seeds = (args.points, args.seeds) if objective == "svt" else (args.aim_points, args.aim_seeds)
        runs: dict = {BAYES: {}, RANDOM: {}}
        for seed in range(seeds):
            for search in (BAYES, RANDOM):
                if objective == "svt":
                    runs[search][seed] = svt_runs(points, seed, search)
                else:
                    runs[search][seed] = aim_runs(points, seed, search)
            print(f"{objective} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
        high, low = (100.0, 0.05) if objective == "svt" else (10.0, 0.01)
        prefixes = [n for n in PREFIXES if n <= points] if objective == "svt" else [points]
        result = compare(runs, high, low, prefixes)
        result.update(points=points, seeds=seeds, seconds=time.perf_counter() - started,
                      runs={s: {str(k): v for k, v in by.items()} for s, by in runs.items()})
        report[objective] = result
        print(markdown(objective, result), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
