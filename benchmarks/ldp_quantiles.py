"""LDP quantiles (the LDP thesis §5.4.4, §5.5.5, Fig. 5.5): value and quantile error of the deciles.

    python -m benchmarks.ldp_quantiles [--sizes 8 12 16 18] [--epsilons 0.4 0.8 1.0986 1.4] [--runs 5]

The thesis' setting for Fig. 5.5: N = 2²¹ users, D = 2¹⁸, e^ε = 3, the deciles by binary search over
prefix estimates of HH^c_4 (TreeOUE, B = 4, with consistency) and HaarHRR. MovieLens and
StackOverflow are not in shared/data, so the data are the thesis' synthetic ones for §5.5, Cauchy
(location D/2, scale D/32, truncated to [0, D)); the grid also varies ε and D.

Each run draws a fresh population and every user's report exactly in distribution (level choices a
multinomial split, OUE's support counts binomials, HaarHRR user by user: `benchmarks.ldp_simulation`),
estimates the leaves as a `model = "local"` table does (`mechanisms.ldp.ranges`), and finds each
decile with `mechanisms.quantiles.quantile_bins`, the post-processing SQL's MEDIAN/QUANTILE use
(running maximum of the prefix estimates, then the first bin reaching q·N̂). Def. 19's errors: the
value error Q̂ − Q in bins (Q the true q-quantile bin), and the quantile error |q − q′|, q′ the
nearest level whose quantile Q̂ truly is (0 when F(Q̂ − 1) < q ≤ F(Q̂), F the true CDF).

Writes benchmarks/results/ldp_quantiles.json (records per run and decile, and a summary).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from benchmarks import ldp_simulation as simulate
from benchmarks.ldp_tables import cauchy_population
from mechanisms.ldp import client, ranges
from mechanisms.quantiles import quantile_bins

RESULTS = Path(__file__).parent / "results" / "ldp_quantiles.json"
USERS = 1 << 21
DECILES = tuple(round(0.1 * k, 1) for k in range(1, 10))
METHODS = ("HH^c_4", "HaarHRR")
BRANCHING = 4


def true_quantile(cdf: np.ndarray, q: float) -> int:
    """The first bin whose true CDF (a fraction) reaches q."""
    return int(np.searchsorted(cdf, q - 1e-12))


def quantile_error(cdf: np.ndarray, found: int, q: float) -> float:
    """|q − q′| for the nearest q′ whose quantile is bin `found` (0 when F(found − 1) < q ≤ F(found))."""
    below = cdf[found - 1] if found > 0 else 0.0
    return float(max(below - q, q - cdf[found], 0.0))


def simulated_leaves(method: str, levels, epsilon: float, rng) -> np.ndarray:
    """The leaf frequency estimates of one population's reports at ε (levels drawn once per population)."""
    if method == "HaarHRR":
        truth = float(client.rr_truth(epsilon))
        plus, minus = levels
        tallies = [simulate.flip_tallies(u, d, truth, rng) for u, d in zip(plus, minus)]
        return ranges.haar_leaves([t[0] for t in tallies], [t[1] for t in tallies], truth)
    p, q = (float(x) for x in client.OptimizedUnaryEncoding(epsilon, 2).support_probabilities)
    ones, counts = simulate.hh_oue_tallies(levels, BRANCHING, p, q, rng)
    return ranges.consistent_leaves(ranges.oue_levels(ones, counts, p, q), BRANCHING)


def run(sizes, epsilons, runs: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    records = []
    for log_size in sizes:
        size = 1 << log_size
        started = time.perf_counter()
        for r in range(runs):
            histogram = cauchy_population(size, USERS, rng)
            cdf = np.cumsum(histogram) / USERS
            truths = {q: true_quantile(cdf, q) for q in DECILES}
            for method in METHODS:
                if method == "HaarHRR":
                    levels = simulate.haar_signs(simulate.level_split(histogram, log_size, rng), rng)
                else:
                    height = ranges.tree_height(size, BRANCHING)
                    levels = [simulate.node_histogram(leaves, BRANCHING ** level)
                              for level, leaves in enumerate(simulate.level_split(histogram, height, rng), start=1)]
                for epsilon in epsilons:
                    prefix = np.cumsum(simulated_leaves(method, levels, epsilon, rng)) * USERS
                    for q in DECILES:
                        found = int(quantile_bins(prefix[None, :], np.zeros((1, size)), q, 1.96).bin[0])
                        records.append({"log_size": log_size, "epsilon": epsilon, "method": method, "run": r,
                                        "q": q, "true_bin": truths[q], "found_bin": found,
                                        "value_error": found - truths[q],
                                        "quantile_error": quantile_error(cdf, found, q)})
        print(f"D = 2^{log_size}: {time.perf_counter() - started:.0f} s", flush=True)
    return records


def summary(records: list[dict]) -> list[dict]:
    """Per (D, ε, method): mean |value error| (bins and ÷ D), the largest, mean and largest quantile error."""
    out = []
    keys = sorted({(r["log_size"], r["epsilon"], r["method"]) for r in records})
    for log_size, epsilon, method in keys:
        rs = [r for r in records if (r["log_size"], r["epsilon"], r["method"]) == (log_size, epsilon, method)]
        value = np.abs([r["value_error"] for r in rs])
        quant = np.array([r["quantile_error"] for r in rs])
        median = [r for r in rs if r["q"] == 0.5]
        out.append({
            "log_size": log_size, "epsilon": epsilon, "method": method, "runs": len(median),
            "mean_abs_value_error": float(value.mean()), "max_abs_value_error": int(value.max()),
            "mean_value_error": float(np.mean([r["value_error"] for r in rs])),
            "max_value_error_fraction_of_D": float(value.max() / (1 << log_size)),
            "mean_quantile_error": float(quant.mean()), "max_quantile_error": float(quant.max()),
            "median_mean_quantile_error": float(np.mean([r["quantile_error"] for r in median])),
            "per_decile_mean_abs_value_error": {
                str(q): float(np.mean([abs(r["value_error"]) for r in rs if r["q"] == q])) for q in DECILES},
        })
    return out


def markdown(rows: list[dict]) -> str:
    out = ("| D | ε | method | mean \\|value err\\| (bins) | mean value err | max \\|value err\\| (÷ D) "
           "| mean quantile err | max quantile err | median: mean quantile err |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
    for s in rows:
        out += (f"| 2^{s['log_size']} | {s['epsilon']:.3g} | {s['method']} | {s['mean_abs_value_error']:.1f} "
                f"| {s['mean_value_error']:+.1f} "
                f"| {s['max_abs_value_error']} ({s['max_value_error_fraction_of_D']:.4f}) "
                f"| {s['mean_quantile_error']:.2e} | {s['max_quantile_error']:.2e} "
                f"| {s['median_mean_quantile_error']:.2e} |\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 12, 16, 18])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.4, 0.8, math.log(3), 1.4])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    started = time.perf_counter()
    records = run(args.sizes, args.epsilons, args.runs, args.seed)
    rows = summary(records)
    table = markdown(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "conditions": {"command": "python -m benchmarks.ldp_quantiles " + " ".join(
            f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items()
            if k != "out"), "users": USERS, "deciles": DECILES, "data": "Cauchy(D/2, D/32) truncated to [0, D)",
            "seconds": time.perf_counter() - started},
        "summary": rows, "table": table, "records": records}, indent=1) + "\n")
    print(table)


if __name__ == "__main__":
    main()
