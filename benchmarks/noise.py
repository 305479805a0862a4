"""Exact noise throughput: dpsql's batched samplers against its scalar ones and OpenDP's, in one run.

Each case draws `size` discrete Gaussian (or Laplace) samples at one noise scale in
integer units, three ways: dpsql's scalar CKS samplers (one Python draw at a time,
the path before the batched kernels), dpsql's batched int64 kernels (what
`discrete_gaussian_vector` now runs), and OpenDP's exact samplers
(`make_gaussian` / `make_laplace` on integer vectors, in OpenDP's own environment:
`python -m benchmarks.peer_envs install opendp`; skipped when absent). All use the
operating system's cryptographic randomness. Scales are rounded as the engine rounds
them (`gaussian_sigma2_upper`, `laplace_scale_upper`).

    python -m benchmarks.noise
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from benchmarks import peer_envs
from mechanisms.noise import (
    RandomSource,
    discrete_gaussian_vector,
    discrete_laplace_vector,
    gaussian_sigma2_upper,
    laplace_scale_upper,
)
from mechanisms.noise.exact import sample_discrete_gaussian, sample_discrete_laplace

RESULTS = Path(__file__).parent / "results" / "noise.json"
OPENDP_SIDE = Path(__file__).parent / "peer_sides" / "opendp_noise.py"
CASES = [(kind, scale, size) for kind in ("gaussian", "laplace") for scale in (2.0, 30.0, 1000.0)
         for size in (49_000, 1_000_000)]
SCALAR_DRAWS = 20_000  # the scalar path is timed on this many draws and reported per sample


def _ours(kind: str, scale: float, size: int) -> tuple[float, float]:
    """(scalar, batched) seconds per sample."""
    rng = RandomSource()
    if kind == "gaussian":
        param, vector, scalar = gaussian_sigma2_upper(scale**2), discrete_gaussian_vector, sample_discrete_gaussian
    else:
        param, vector, scalar = laplace_scale_upper(scale), discrete_laplace_vector, sample_discrete_laplace
    start = time.perf_counter()
    for _ in range(SCALAR_DRAWS):
        scalar(param, rng)
    per_scalar = (time.perf_counter() - start) / SCALAR_DRAWS
    start = time.perf_counter()
    vector(param, size, rng)
    return per_scalar, (time.perf_counter() - start) / size


def main() -> None:
    rows = []
    for kind, scale, size in CASES:
        scalar, batched = _ours(kind, scale, size)
        rows.append({"kind": kind, "scale": scale, "size": size, "scalar_us": scalar * 1e6, "batched_us": batched * 1e6})
    opendp = peer_envs.run("opendp", OPENDP_SIDE, {"cases": [{"kind": k, "scale": s, "size": n} for k, s, n in CASES]})
    for row, seconds in zip(rows, opendp["seconds"] if opendp else [None] * len(rows)):
        row["opendp_us"] = None if seconds is None else seconds / row["size"] * 1e6
    print(f"{'noise':9} {'scale':>7} {'draws':>9} {'scalar µs':>10} {'batched µs':>11} {'OpenDP µs':>10} "
          f"{'vs scalar':>10} {'vs OpenDP':>10}")
    for r in rows:
        vs_opendp = f"{r['opendp_us'] / r['batched_us']:9.1f}x" if r["opendp_us"] else "   skipped"
        opendp_us = f"{r['opendp_us']:10.2f}" if r["opendp_us"] else "         -"
        print(f"{r['kind']:9} {r['scale']:7g} {r['size']:9d} {r['scalar_us']:10.2f} {r['batched_us']:11.3f} "
              f"{opendp_us} {r['scalar_us'] / r['batched_us']:9.1f}x {vs_opendp}")
    RESULTS.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
