"""Marginal planning at scale: CPU seconds and peak memory of planning all ≤k-way marginals over d attributes.

Each (d, path) runs in a fresh process, the two paths one after the other for each d. `rows`: the
workload as rows of attribute indices (every clique of 1..k of d attributes of 10 values, or of `--sizes` in turn:
`ResidualTable.from_codes`'s input), planned row by row (`from_codes`, `sum_variance_plan`); it runs
only up to --rows-max attributes (at d = 1000 its input alone is 4 GB). `classes`: the same workload
described by its structure (`marginal_classes.all_k_way`: residual classes by size), the same
`sum_variance_plan`. Reported: the planning's CPU seconds (building the rows is not counted), the
process's peak resident memory (`ru_maxrss`: the interpreter, the workload's rows and the planning
together) and the peak before planning (the interpreter and the rows alone), and the plan's RMSE.

Goals (issue 34): d = 300, all ≤3-way: <= 1 GiB peak, <= 10 s CPU; d = 1000: <= 2 GiB, <= 30 s CPU.

    python -m benchmarks.marginal_memory [--dims 100 300 1000] [--ways 3] [--rows-max 300] [--sizes 10] [--out F]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results" / "marginal_memory.json"


def all_k_way_rows(d: int, ways: int) -> np.ndarray:
    """Every clique of 1..`ways` of d attributes: rows of ascending indices, −1 padded (int64)."""
    parts = [np.arange(d, dtype=np.int64)[:, None]]
    for _ in range(1, ways):
        prev = parts[-1]
        counts = d - 1 - prev[:, -1]
        rows = np.repeat(prev, counts, axis=0)
        starts = np.repeat(prev[:, -1] + 1 - np.cumsum(counts) + counts, counts)
        parts.append(np.hstack([rows, (starts + np.arange(rows.shape[0]))[:, None]]))
    out = np.full((sum(p.shape[0] for p in parts), ways), -1, dtype=np.int64)
    at = 0
    for p in parts:
        out[at:at + p.shape[0], :p.shape[1]] = p
        at += p.shape[0]
    return out


def one(d: int, ways: int, path: str, sizes: list[int]) -> dict:
    """Plan all ≤`ways`-way marginals at d (in this process), by rows or by classes."""
    from mechanisms.domain import Domain
    from mechanisms.marginal_classes import all_k_way
    from mechanisms.residual import ResidualTable, sum_variance_plan

    domain = Domain.from_dict({f"x{i}": sizes[i % len(sizes)] for i in range(d)})
    codes = all_k_way_rows(d, ways) if path == "rows" else None
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu = time.process_time()
    if codes is not None:
        table = ResidualTable.from_codes(domain, codes, np.ones(len(codes)))
    else:
        table = all_k_way(domain, range(1, ways + 1))
    plan = sum_variance_plan(table, 0.5)
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    marginals = len(table.cells) if table.marginal_count is None else int(table.marginal_count.sum())
    residuals = len(table.weight) if table.count is None else int(table.count.sum())
    return {"d": d, "ways": ways, "sizes": sizes, "path": path, "marginals": marginals, "residuals": residuals,
            "table_rows": len(table.weight),
            "plan_cpu_s": cpu, "peak_mb": peak, "peak_before_planning_mb": before, "rmse": plan.rmse()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--ways", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10], help="attribute i has sizes[i %% len(sizes)] values")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--rows-max", type=int, default=300, help="the largest d planned by rows")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process: one d
    parser.add_argument("--path", choices=["rows", "classes"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one(args.one, args.ways, args.path, args.sizes)))
        return
    out = []
    for d in args.dims:
        for path in ["rows", "classes"] if d <= args.rows_max else ["classes"]:
            child = subprocess.run([sys.executable, "-m", "benchmarks.marginal_memory", "--one", str(d), "--ways",
                                    str(args.ways), "--path", path, "--sizes", *map(str, args.sizes)],
                                   capture_output=True, text=True, check=True)
            r = json.loads(child.stdout.strip().splitlines()[-1])
            out.append(r)
            print(f"d={d:5} all ≤{args.ways}-way by {path:7}: {r['marginals']:>12,} marginals, {r['residuals']:>12,} "
                  f"residuals in {r['table_rows']:>10,} rows | plan {r['plan_cpu_s']:7.3f} s CPU | peak "
                  f"{r['peak_mb']:7.0f} MB (before planning {r['peak_before_planning_mb']:5.0f} MB) | "
                  f"RMSE {r['rmse']:.10g}", flush=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
