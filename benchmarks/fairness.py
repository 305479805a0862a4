"""No query left behind: each block's expected RMSE against its even split, and the total, per workload.

`--dump FILE` writes the default plan's expected RMSE per block for the workloads of
`tests/test_fair_objective.py` (demo `people` domain; ρ = 0.01 and ε = 0.5; `PlanningLimit(1.0)`);
it runs on any tree (also one before `planner.fairness`, to compare). `--compare OLD NEW` prints,
per workload and noise, the worst RMSE over the even-split RMSE and the total weighted squared error
over the even split's, for both dumps.

    python -m benchmarks.fairness --dump new.json
    python -m benchmarks.fairness --compare old.json new.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mechanisms.workload import Workload
from planner.planner import plan_workload
from planner.planning_limit import PlanningLimit

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
CASES = (("gaussian", 0.01), ("laplace", 0.5))
NAMES = ["bi", "groupby+range", "marginals+cell", "ranges", "sums"]


def _workloads():
    import ast

    from dpsql.tables.catalog import Catalog
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML
    from dpsql.sql.compiler import compile_query

    source = (Path(__file__).parent.parent / "tests" / "test_fair_objective.py").read_text()
    found = {}
    for node in ast.parse(source).body:  # the test's BI and WORKLOADS, without importing it (older trees)
        if isinstance(node, ast.Assign) and node.targets[0].id in ("BI", "WORKLOADS"):
            found[node.targets[0].id] = eval(compile(ast.Expression(node.value), "test", "eval"), dict(found))
    catalog = Catalog.from_toml(PEOPLE_CATALOG_TOML)
    domain = catalog.get("people").domain
    for name, queries in zip(NAMES, found["WORKLOADS"]):
        compiled = [compile_query(q, catalog, label=f"q{i}") for i, q in enumerate(queries)]
        yield name, Workload(domain, [b for c in compiled for b in c.blocks]), [[b.name for b in c.blocks] for c in compiled]


def dump(path: str) -> None:
    out = {}
    for name, w, groups in _workloads():
        extra = {"queries": groups} if "queries" in plan_workload.__code__.co_varnames else {}
        for noise, budget in CASES:
            try:
                out[f"{name} {noise}"] = plan_workload(w, budget, noise, limit=PlanningLimit(1.0), **extra).expected_rmse
            except ZeroDivisionError:  # HDMM's model error before 7111a5a
                out[f"{name} {noise}"] = None
    Path(path).write_text(json.dumps(out))


def compare(old_path: str, new_path: str) -> None:
    from planner.fairness import even_split

    old, new = json.loads(Path(old_path).read_text()), json.loads(Path(new_path).read_text())
    print("| workload | noise | worst RMSE / even split, before | after | total / even split's, before | after |")
    print("|---|---|---:|---:|---:|---:|")
    for name, w, groups in _workloads():
        for noise, budget in CASES:
            ref = even_split(w.blocks, w.domain, budget, noise, 1, groups).rmse
            total = lambda r: sum(b.weight * b.num_rows(w.domain) * r[b.name] ** 2 for b in w.blocks if b.terms)
            worst = lambda r: max(r[n] / ref[n] for n in ref if ref[n] > 0)
            cells = [f"{f(r):.2f}" if r else "failed" for f, r in
                     ((worst, old[f"{name} {noise}"]), (worst, new[f"{name} {noise}"]))]
            totals = [f"{total(r) / total(ref):.2f}" if r else "–" for r in (old[f"{name} {noise}"], new[f"{name} {noise}"])]
            print(f"| {name} | {noise} | {cells[0]} | {cells[1]} | {totals[0]} | {totals[1]} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump")
    parser.add_argument("--compare", nargs=2)
    args = parser.parse_args()
    if args.dump:
        dump(args.dump)
    if args.compare:
        compare(*args.compare)
