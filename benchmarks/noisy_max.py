"""Report-noisy-max (MODE) against the argmax of the noisy histogram, at equal ρ.

Both release only which of m counts is largest; the histogram pays k²/(2σ²) for its noise, GNMax
k²(1 − 1/m)/(2σ²) (`mechanisms.noisy_max`), so at one ρ its noise is √(1 − 1/m) times smaller.
Counts: the mode at n, the m − 1 others tied at n − gap (the hardest shape for that gap); k = 1.
The table is P[the mode is picked] over `--runs` runs (exact discrete Gaussian noise, seed 0;
ties broken uniformly at random in both).

    python -m benchmarks.noisy_max [--runs 20000]

writes benchmarks/results/noisy_max.json and prints the table of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from mechanisms.measurement import GAUSSIAN
from mechanisms.noise import RandomSource, gaussian_sigma2_upper
from mechanisms.noisy_max import NoisyMax, noisy_max
from mechanisms.partition_selection import DiscreteGaussian

RHO = 0.01  # σ of the histogram's noise: 1/√(2ρ) ≈ 7.07 per count
CANDIDATES = (2, 4, 16, 64)
GAPS = (5, 10, 20)


def histogram_argmax(m: int, rho: float) -> NoisyMax:
    """The argmax of the noisy histogram: σ² = 1/(2ρ) per count on the counts themselves (lattice 1)."""
    return NoisyMax(GAUSSIAN, m, 1, DiscreteGaussian(gaussian_sigma2_upper(1 / (2 * rho))))


def run(runs: int) -> list[dict]:
    rows = []
    for m in CANDIDATES:
        for gap in GAPS:
            counts = np.full(m, 1000 - gap, dtype=np.int64)
            counts[0] = 1000
            mechanism = noisy_max("gaussian", RHO, m, 1)
            picked = mechanism.picks(counts, runs, RandomSource(0))
            baseline = histogram_argmax(m, RHO).picks(counts, runs, RandomSource(0))
            rows.append({"m": m, "gap": gap, "gnmax": float(np.mean(picked == 0)),
                         "histogram": float(np.mean(baseline == 0)), "gnmax_std": mechanism.std,
                         "histogram_std": math.sqrt(1 / (2 * RHO))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    args = parser.parse_args()
    rows = run(args.runs)
    out = Path(__file__).parent / "results" / "noisy_max.json"
    out.write_text(json.dumps({"rho": RHO, "runs": args.runs, "rows": rows}, indent=1))
    print(f"| m | gap | GNMax P[mode] | histogram argmax P[mode] | noise sd (GNMax / histogram) |")
    print("|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['m']} | {r['gap']} | {r['gnmax']:.3f} | {r['histogram']:.3f} | "
              f"{r['gnmax_std']:.2f} / {r['histogram_std']:.2f} |")


if __name__ == "__main__":
    main()
