"""Marginal planning at scale: CPU seconds and peak memory of planning all ≤k-way marginals over d attributes.

Each d runs in a fresh process: it builds the workload (every clique of 1..k of d attributes of 10
values, as rows of attribute indices: `ResidualTable.from_codes`'s input), then plans it in the
residual basis (`ResidualTable.from_codes` and `sum_variance_plan`). Reported: the planning's CPU
seconds, the process's peak resident memory (`ru_maxrss`: the interpreter, the workload's rows and
the planning together) and the peak before planning (the interpreter and the rows alone).

Goals (issue 34): d = 300, all ≤3-way: <= 1 GiB peak, <= 10 s CPU; d = 1000: <= 2 GiB, <= 30 s CPU.

    python -m benchmarks.marginal_memory [--dims 100 300] [--ways 3]
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


def all_k_way(d: int, ways: int) -> np.ndarray:
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


def one(d: int, ways: int) -> dict:
    """Plan all ≤`ways`-way marginals at d (in this process)."""
    from mechanisms.domain import Domain
    from mechanisms.residual import ResidualTable, sum_variance_plan

    domain = Domain.from_dict({f"x{i}": 10 for i in range(d)})
    codes = all_k_way(d, ways)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu = time.process_time()
    table = ResidualTable.from_codes(domain, codes, np.ones(len(codes)))
    plan = sum_variance_plan(table, 0.5)
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"d": d, "ways": ways, "marginals": len(codes), "residuals": len(table.weight), "plan_cpu_s": cpu,
            "peak_mb": peak, "peak_before_planning_mb": before, "rmse": plan.rmse()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--ways", type=int, default=3)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process: one d
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one(args.one, args.ways)))
        return
    out = []
    for d in args.dims:
        child = subprocess.run([sys.executable, "-m", "benchmarks.marginal_memory", "--one", str(d), "--ways",
                                str(args.ways)], capture_output=True, text=True, check=True)
        r = json.loads(child.stdout.strip().splitlines()[-1])
        out.append(r)
        print(f"d={d:5} all ≤{args.ways}-way: {r['marginals']:>12,} marginals, {r['residuals']:>12,} residuals | "
              f"plan {r['plan_cpu_s']:6.2f} s CPU | peak {r['peak_mb']:7.0f} MB "
              f"(before planning {r['peak_before_planning_mb']:5.0f} MB)", flush=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
