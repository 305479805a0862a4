"""HDMM's Laplace optimizers on small domains: error and CPU per solve, for comparing two trees.

The OPT₀ p-Identity solve (`opt0_laplace`, seed 0, 1000 iterations) on 1-D workloads at
n = 32, 64, 128 (ALL RANGE, PREFIX, WIDTH 16, the first two permuted, random 0/1 queries),
with 1 and 20 starts; OPT⊗ on the thesis' Example 2 (PREFIX ⊗ TOTAL + TOTAL ⊗ PREFIX, n = 100)
with 1, 3 and 20 starts; OPT_M on CPS's 1/2-way and 1/2/3-way marginals. Run it from each tree
and compare the JSON files (benchmarks/RESULTS.md, issue 34 item 2):

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python -m benchmarks.hdmm_small_domains --out small.json
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import time
from itertools import combinations
from pathlib import Path

import numpy as np

from mechanisms.hdmm.kron import opt_kron
from mechanisms.hdmm.marginals import opt_marginals
from mechanisms.hdmm.opt0 import opt0_laplace
from mechanisms.hdmm.workload import (
    KronGram,
    all_range_gram,
    marginals_workload,
    permuted,
    prefix_gram,
    total_gram,
    width_range_gram,
)

CPS = (50, 100, 7, 4, 2)


def cases() -> dict:
    """name -> () -> a result with `.error`."""
    rng = np.random.default_rng(5)
    out = {}
    for n in (32, 64, 128):
        queries = (rng.uniform(size=(2 * n, n)) < 0.2).astype(float)
        grams = {
            "ALL RANGE": all_range_gram(n), "PREFIX": prefix_gram(n), "WIDTH 16": width_range_gram(n, 16),
            "ALL RANGE permuted": permuted(all_range_gram(n), 1), "PREFIX permuted": permuted(prefix_gram(n), 2),
            "random 0/1 queries": queries.T @ queries,
        }
        for name, g in grams.items():
            for r in (1, 20):
                out[f"OPT0 {name} n={n} restarts={r}"] = lambda g=g, r=r: opt0_laplace(g, restarts=r, max_iter=1000)
    n = 100
    example2 = KronGram.from_terms((n, n), [(1.0, [prefix_gram(n), total_gram(n)]),
                                            (1.0, [total_gram(n), prefix_gram(n)])], 2 * n)
    for r in (1, 3, 20):
        out[f"OPT⊗ Example 2 restarts={r}"] = lambda r=r: opt_kron(example2, 1, restarts=r)
    for ways in ((1, 2), (1, 2, 3)):
        w = marginals_workload(CPS, [s for k in ways for s in combinations(range(len(CPS)), k)]).marginal_weights()
        out[f"OPT_M CPS {ways}"] = lambda w=w: opt_marginals(CPS, w, 1, restarts=20)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="write {case: [error, CPU seconds]} here")
    args = parser.parse_args()
    rows = {}
    for name, solve in cases().items():
        started = time.process_time()
        error = float(solve().error)
        rows[name] = [error, time.process_time() - started]
        print(f"{name:45} {error:14.6g} {rows[name][1]:8.3f} s", flush=True)
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
