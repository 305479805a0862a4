"""Deployment latency of two revisions side by side: `benchmarks.latency` run alternately on each.

Each revision is exported (`git archive`) to a folder of its own and `python -m benchmarks.latency` runs
there in a process of its own (the after revision's `benchmarks/latency.py` in both trees: one harness),
the revisions alternating round by round (before, after, before, after, ...),
so both see the same periods of a shared machine; the load average is recorded around every run. Times are
CPU seconds of the process (`time.process_time`, DuckDB's threads included), as `benchmarks.latency` reports.

    python -m benchmarks.latency_revisions BEFORE AFTER [--rounds 3] [--out NAME] -- [benchmarks.latency args]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parent.parent


def export(revision: str, folder: Path) -> str:
    """The revision's tree, exported into `folder`; returns its commit."""
    commit = subprocess.run(["git", "rev-parse", revision], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.strip()
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return commit


def run(tree: Path, args: list[str]) -> list[dict]:
    """`benchmarks.latency` in `tree` (its own package imported); its rows."""
    out = tree / "benchmarks" / "results"
    for old in out.glob("latency*.json"):
        old.unlink()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-m", "benchmarks.latency", *args], cwd=tree, env=env, check=True)
    [written] = out.glob("latency*.json")
    return json.loads(written.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="latency-revisions.json", help="file name under benchmarks/results")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, latency_args = parser.parse_args(argv[:split]), argv[split + 1:]  # after --: benchmarks.latency's
    folder = Path(tempfile.mkdtemp(prefix="dpsql-revisions-"))
    try:
        trees = {side: folder / side for side in ("before", "after")}
        commits = {side: export(rev, trees[side]) for side, rev in (("before", args.before), ("after", args.after))}
        harness = "benchmarks/latency.py"
        (trees["before"] / harness).write_text((trees["after"] / harness).read_text())
        rows = []
        for r in range(args.rounds):
            for side in ("before", "after"):
                load = os.getloadavg()[0]
                print(f"round {r + 1}, {side} ({commits[side][:10]}), load {load:.1f}", flush=True)
                for row in run(trees[side], latency_args):
                    rows.append({**row, "side": side, "commit": commits[side], "round": r + 1, "load_before": load,
                                 "load_after": os.getloadavg()[0]})
    finally:
        shutil.rmtree(folder)  # the exported trees
    (RESULTS / args.out).write_text(json.dumps({"command": sys.argv, "rows": rows}, indent=1) + "\n")
    print("\nms CPU, median over rounds (min-max): first answer minus exact")
    keys = dict.fromkeys((row["rows"], row["storage"], row["query"]) for row in rows)
    for key in keys:
        line = f"{key[0]:>11,} {key[1]:9} {key[2]:17}"
        for side in ("before", "after"):
            over = [row["first_cpu_ms"] - row["exact_cpu_ms"] for row in rows
                    if (row["rows"], row["storage"], row["query"]) == key and row["side"] == side]
            line += f" | {side} {statistics.median(over):7.1f} ({min(over):6.1f}-{max(over):6.1f})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
