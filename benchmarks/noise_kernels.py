"""Exact noise per sample at every scale a query meets, seeded and not (issue 34, item 1).

For the discrete Gaussian (sigma as given, rounded as the engine rounds it) and the discrete
Laplace (scale = sigma), draws vectors of 2, 1,000 and 100,000 samples through
`discrete_gaussian_vector` / `discrete_laplace_vector` with a cryptographic and with a
seeded RandomSource, and reports CPU microseconds per sample (each case repeated for at
least 0.3 s of CPU). sigma = 1e6 and 1e9 are what SUM/AVG of wide-range columns need.
Then times the issue's query (`SELECT sex, COUNT(*), SUM(hours_per_week), AVG(income) ...
GROUP BY sex` on the 100,000-row demo table), seeded and not, with the CPU spent drawing
noise.

Run it from the checkout to measure (it imports whichever `mechanisms` is first on the
path, so the same file measures an older checkout too):

    PYTHONPATH=. python benchmarks/noise_kernels.py [--out results/noise_kernels.json]
"""

from __future__ import annotations

import argparse
import json
import time

import duckdb

import dpsql
import mechanisms.measurement as measurement
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from mechanisms.noise import (
    RandomSource,
    discrete_gaussian_vector,
    discrete_laplace_vector,
    gaussian_sigma2_upper,
    laplace_scale_upper,
)

SIGMAS = (2.0, 50.0, 1e6, 1e9)
SIZES = (2, 1_000, 100_000)
QUERY = "SELECT sex, COUNT(*), SUM(hours_per_week), AVG(income) FROM people GROUP BY sex"


def per_sample_us(kind: str, sigma: float, size: int, seed: int | None) -> float:
    """CPU microseconds per sample, over repeated vectors (at least 0.3 s of CPU or one vector)."""
    rng = RandomSource(seed)
    if kind == "gaussian":
        param, draw = gaussian_sigma2_upper(sigma**2), discrete_gaussian_vector
    else:
        param, draw = laplace_scale_upper(sigma), discrete_laplace_vector
    start, samples = time.process_time(), 0
    while samples == 0 or time.process_time() - start < 0.3:
        draw(param, size, rng)
        samples += size
    return (time.process_time() - start) / samples * 1e6


def query_cpu(seed: int | None) -> dict:
    """CPU seconds of the issue's GROUP BY query on a fresh ledger, and of its noise draws."""
    con = duckdb.connect()
    create_people_table(con, 100_000)
    spent = {"noise_s": 0.0, "samples": 0}
    gaussian, laplace = measurement.discrete_gaussian_vector, measurement.discrete_laplace_vector

    def timed(draw):
        def wrapper(param, size, rng=None):
            start = time.process_time()
            try:
                return draw(param, size, rng)
            finally:
                spent["noise_s"] += time.process_time() - start
                spent["samples"] += size
        return wrapper

    measurement.discrete_gaussian_vector, measurement.discrete_laplace_vector = timed(gaussian), timed(laplace)
    try:
        conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=10.0, delta=1e-9, query_epsilon=0.1,
                             seed=seed)
        start = time.process_time()
        conn.execute(QUERY).fetchall()
        return {"query_s": time.process_time() - start, **spent}
    finally:
        measurement.discrete_gaussian_vector, measurement.discrete_laplace_vector = gaussian, laplace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    rows = []
    print(f"{'noise':9} {'sigma':>6} {'draws':>7} {'unseeded µs':>12} {'seeded µs':>10}")
    for kind in ("gaussian", "laplace"):
        for sigma in SIGMAS:
            for size in SIZES:
                row = {"kind": kind, "sigma": sigma, "size": size,
                       "unseeded_us": per_sample_us(kind, sigma, size, None),
                       "seeded_us": per_sample_us(kind, sigma, size, 1)}
                rows.append(row)
                print(f"{kind:9} {sigma:6g} {size:7d} {row['unseeded_us']:12.3f} {row['seeded_us']:10.3f}", flush=True)
    queries = {"seeded": query_cpu(3), "unseeded": query_cpu(None)}
    for name, q in queries.items():
        print(f"query ({name}): {q['query_s']:.2f} s CPU, noise {q['noise_s'] * 1e3:.2f} ms for {q['samples']} samples")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"per_sample": rows, "query": queries}, f, indent=1)


if __name__ == "__main__":
    main()
