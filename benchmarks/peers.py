"""Accuracy at equal budget against OpenDP and Tumult Analytics, per query kind and per workload.

Every system answers the same queries at the same zCDP budget, ρ = zCDP(ε = 1, δ = 1e-6)
≈ 0.0244 (`mechanisms.accounting`'s tight conversion) for the whole workload,
add/remove-one-row neighbours, on two tables declared the same way to all (dpsql's
catalog; the peers get its GROUP BY domains as public keys and the value column's range
as bounds):

- adult (`shared/data/adult`, 48,842 rows, every column an integer 0..size-1): SUM/AVG of
  hours_per_week (0..98);
- demo: the generated `people` table (100,000 rows; string categories): SUM/AVG of age (0..99).

Workloads, on each table:

- `bi`: a 10-query BI dashboard: COUNT, SUM and AVG with 0-2 GROUP BY columns and WHERE
  ranges on age;
- `ranges`: 128 COUNT queries over random age ranges;
- `marginals`: every 1- and 2-way GROUP BY count over five columns (15 queries);
- `reask`: the BI dashboard asked twice (20 queries; a repeat is a new query to the peers);
- `quantiles`: 8 quantiles (deciles and quartiles of the value column, its median per group
  and under a WHERE range, the median of the range column); scored against the exact
  discrete quantile (a data value) as value error, and as rank error (`rank_rmse`: how far, as a
  fraction of the rows, the answer's ranks are from q·n).

dpsql runs each workload as one `BEGIN WORKLOAD WITH (rho = ...)` through DB-API on a
fresh ledger; the peers run in their own environments (`python -m benchmarks.peer_envs
install opendp tumult`; a peer not installed is skipped) with their documented zCDP
configurations (see `peer_sides/*.py`). Scored against the exact answers from DuckDB:
RMSE over every answer cell of a kind (COUNT, SUM, AVG, quantile) in a workload, over `--draws`
independent runs; the ratio is dpsql's RMSE over the best peer's (below 1: dpsql better).

`--privacy` picks the privacy mode(s) every system runs in (default `zcdp`, as above):

- `zcdp`: ρ = zCDP(ε, δ = 1e-6) for the workload, Gaussian noise, split evenly by the peers;
- `pure`: pure ε-DP (which also satisfies (ε, 1e-6)-DP), Laplace noise: dpsql on a
  pure-ε ledger (`connect(epsilon=ε, delta=0)`, `BEGIN WORKLOAD WITH (epsilon = ε)`),
  OpenDP with `loss_of(epsilon=ε)`, Tumult with `PureDPBudget(ε)`, each query ε/queries;
- `both`: each system in both modes. A record then holds every system-mode RMSE
  (`dpsql`, `dpsql_pure`, `opendp`, `opendp_pure`, ...), each peer's better mode
  (`best_mode`), the best peer in its best mode (`best_peer`), and two ratios:
  `ratio_to_best_peer` (dpsql's zCDP ledger) and `ratio_best_dpsql_to_best_peer` (the
  better of dpsql's two ledgers, which the data owner picks when creating the ledger).

    python -m benchmarks.peers [--draws 5] [--datasets adult demo] [--workloads bi ranges marginals reask quantiles]
                               [--peers opendp tumult] [--epsilon 1] [--privacy zcdp|pure|both] [--jobs 1]
                               [--expected]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from benchmarks import peer_envs
from benchmarks.adult_dashboard import DATA, TABLE, catalog, column_name, domain_sizes, load
from dpsql.tables.catalog import Catalog
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from mechanisms.accounting import epsilon_delta_to_zcdp

RESULTS = Path(__file__).parent / "results" / "peers.json"
SIDES = Path(__file__).parent / "peer_sides"
EPSILON, DELTA = 1.0, 1e-6
DEMO_ROWS = 100_000
MODES = {"zcdp": ("zcdp",), "pure": ("pure",), "both": ("zcdp", "pure")}  # --privacy -> the modes run


def label(system: str, mode: str) -> str:
    """A system's name in a record: `dpsql`, `opendp`, ... in zCDP; `dpsql_pure`, ... in pure ε-DP."""
    return system if mode == "zcdp" else f"{system}_pure"


@dataclass(frozen=True)
class Dataset:
    """A protected table as every system sees it: dpsql's catalog, and the CSV, keys and bounds the peers get."""

    name: str
    table: str
    catalog: Catalog
    csv: Path  # the same rows as DuckDB's table, for the peers
    rename: dict[str, str]  # CSV header -> column name
    keys: dict[str, list]  # every GROUP BY column's public keys (its declared domain)
    bounds: dict[str, list[int]]  # the SUM/AVG column's declared range
    rows: int
    value: str  # the SUM/AVG column
    ordered: tuple[str, int]  # the range column and its size
    groups: list[str]  # five GROUP BY columns


def adult() -> tuple[Dataset, duckdb.DuckDBPyConnection]:
    """Adult as `benchmarks.adult_dashboard` loads and declares it; AVG/SUM of hours_per_week (0..98)."""
    con = duckdb.connect()
    load(con)
    sizes = domain_sizes()
    raw = json.loads((DATA / "adult-domain.json").read_text())
    data = Dataset("adult", TABLE, catalog(), DATA / "adult.csv", {k: column_name(k) for k in raw},
                   {c: list(range(n)) for c, n in sizes.items()}, {"hours_per_week": [0, 98], "age": [0, 84]}, 48_842,
                   "hours_per_week", ("age", 85), ["sex", "race", "relationship", "income_over_50k", "marital_status"])
    return data, con


def demo(workdir: Path, rows: int = DEMO_ROWS) -> tuple[Dataset, duckdb.DuckDBPyConnection]:
    """The generated `people` table (`rows` rows), exported to CSV for the peers; AVG/SUM of age (0..99)."""
    con = duckdb.connect()
    create_people_table(con, rows=rows)
    csv = workdir / "people.csv"
    con.execute(f"COPY people TO '{csv}' (HEADER)")
    declared = Catalog.from_toml(PEOPLE_CATALOG_TOML)
    groups = ["sex", "race", "education", "region", "marital"]
    keys = {c: list(declared.get("people").columns[c].values) for c in groups}
    data = Dataset("demo", "people", declared, csv, {}, keys, {"age": [0, 99]}, rows, "age", ("age", 100), groups)
    return data, con


def workloads(data: Dataset) -> dict[str, list[tuple]]:
    """(kind, value column, GROUP BY columns, WHERE ranges [(column, low, high)]) per query, by workload."""
    value, (ordered, size), g = data.value, data.ordered, data.groups
    bi = [
        ("count", None, [], []),
        ("sum", value, [], []),
        ("avg", value, [], []),
        ("count", None, [g[0]], []),
        ("sum", value, [g[0]], [(ordered, 20, 40)]),
        ("avg", value, [g[1]], []),
        ("count", None, [g[2]], [(ordered, 10, 30)]),
        ("sum", value, [g[0], g[1]], []),
        ("avg", value, [g[0], g[3]], [(ordered, 15, size - 1)]),
        ("count", None, [g[4]], []),
    ]
    rng = np.random.default_rng(0)
    ranges = []
    for _ in range(128):
        low, high = sorted(int(v) for v in rng.integers(0, size, size=2))
        ranges.append(("count", None, [], [(ordered, low, high)]))
    marginals = [("count", None, [c], []) for c in g]
    marginals += [("count", None, [a, b], []) for i, a in enumerate(g) for b in g[i + 1:]]
    quantiles = [(f"quantile {q}", value, [], []) for q in (0.1, 0.25, 0.5, 0.75, 0.9)]
    quantiles += [("quantile 0.5", ordered, [], []), ("quantile 0.5", value, [g[0]], []),
                  ("quantile 0.5", value, [], [(ordered, 20, 40)])]
    return {"bi": bi, "ranges": ranges, "marginals": marginals, "reask": bi + bi, "quantiles": quantiles}


def sql(query: tuple, table: str, exact: bool = False) -> str:
    """The query's SQL; a quantile is the discrete one (a data value) where `exact`."""
    kind, column, groups, where = query
    if kind.startswith("quantile"):
        aggregate = f"{'QUANTILE_DISC' if exact else 'QUANTILE'}({column}, {kind.split()[1]})"
    else:
        aggregate = {"count": "COUNT(*)", "sum": f"SUM({column})", "avg": f"AVG({column})"}[kind]
    text = f"SELECT {', '.join(groups + [aggregate])} FROM {table}"
    if where:
        text += " WHERE " + " AND ".join(f"{c} BETWEEN {lo} AND {hi}" for c, lo, hi in where)
    if groups:
        text += f" GROUP BY {', '.join(groups)}"
    return text


def _keyed(query: tuple, rows) -> dict[str, float | None]:
    width = len(query[2])
    return {"|".join(str(v) for v in row[:width]): (None if row[width] is None else float(row[width])) for row in rows}


def exact(con, data: Dataset, queries) -> list[dict]:
    return [_keyed(q, con.execute(sql(q, data.table, exact=True)).fetchall()) for q in queries]


def dpsql_answers(con, data: Dataset, queries, rho: float, draws: int,
                  epsilon: float | None = None) -> list[list[dict]]:
    """`draws` runs of the workload on fresh ledgers: a zCDP ledger of `rho`, or with `epsilon` a pure ε-DP one."""
    out = []
    for _ in range(draws):
        if epsilon is None:
            cur = dpsql.connect(con=con, catalog=data.catalog, rho=rho).cursor()
            budget = f"rho = {rho!r}"
        else:
            cur = dpsql.connect(con=con, catalog=data.catalog, epsilon=epsilon, delta=0).cursor()
            budget = f"epsilon = {epsilon!r}"
        script = ";\n".join(sql(q, data.table) for q in queries)
        cur.execute(f"BEGIN WORKLOAD WITH ({budget});\n{script};\nEND WORKLOAD;")
        answers = []
        for q in queries:
            answers.append(_keyed(q, cur.fetchall()))
            cur.nextset()
        out.append(answers)
    return out


def peer_answers(peer: str, data: Dataset, queries, rho: float, draws: int,
                 epsilon: float | None = None) -> list[list[dict]] | None:
    """The peer's answers in zCDP at `rho`, or with `epsilon` in pure ε-DP; None when it is not installed."""
    request = {
        "csv": str(data.csv), "rename": data.rename, "keys": data.keys, "bounds": data.bounds,
        "rho": rho, "draws": draws, "rows": data.rows,
        "privacy": "zcdp" if epsilon is None else "pure", "epsilon": epsilon,
        "queries": [{"kind": k, "column": c, "groups": g, "where": w} for k, c, g, w in queries],
    }
    reply = peer_envs.run(peer, SIDES / f"{peer}_queries.py", request)
    return None if reply is None else reply["answers"]


def rmse_by_kind(queries, truth, runs) -> dict[str, float]:
    """RMSE over every (draw, query of the kind, group) cell; a missing answer is an error."""
    squares: dict[str, list[float]] = {}
    for run in runs:
        for q, true, got in zip(queries, truth, run):
            for key, value in true.items():
                if value is None:
                    continue
                answer = got.get(key)
                if answer is None or (isinstance(answer, float) and math.isnan(answer)):
                    raise ValueError(f"no answer for query {q} group {key!r}")
                squares.setdefault(q[0].split()[0], []).append((answer - value) ** 2)
    return {kind: math.sqrt(sum(v) / len(v)) for kind, v in squares.items()}


def rank_rmse(con, data: Dataset, queries, runs) -> float | None:
    """RMS rank error of the quantile answers, as a fraction of the rows: the distance from q·n to the ranks
    [#{x < v}, #{x ≤ v}] the answer v spans among the query's n values (0 when v is an exact q-quantile);
    None without quantile queries."""
    squares = []
    for i, q in enumerate(queries):
        if not q[0].startswith("quantile"):
            continue
        kind, column, groups, where = q
        text = f"SELECT {', '.join(groups + [column])} FROM {data.table}"
        if where:
            text += " WHERE " + " AND ".join(f"{c} BETWEEN {lo} AND {hi}" for c, lo, hi in where)
        values: dict[str, list] = {}
        for row in con.execute(text).fetchall():
            values.setdefault("|".join(str(v) for v in row[:-1]), []).append(row[-1])
        level = float(kind.split()[1])
        for run in runs:
            for key, column_values in values.items():
                x = np.sort(np.asarray(column_values, dtype=float))
                v, target = run[i][key], level * x.size
                low, high = np.searchsorted(x, v, "left"), np.searchsorted(x, v, "right")
                squares.append((max(low - target, target - high, 0.0) / x.size) ** 2)
    return math.sqrt(sum(squares) / len(squares)) if squares else None


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--datasets", nargs="+", default=["adult", "demo"], choices=["adult", "demo"])
    parser.add_argument("--workloads", nargs="+", default=["bi", "ranges", "marginals", "reask", "quantiles"])
    parser.add_argument("--peers", nargs="+", default=["opendp", "tumult"])
    parser.add_argument("--epsilon", type=float, default=EPSILON, help=f"the workload's ε at δ={DELTA:g} (default 1)")
    parser.add_argument("--privacy", choices=list(MODES), default="zcdp",
                        help="zcdp: ρ = zCDP(ε, δ) (default); pure: pure ε-DP, Laplace noise; both: each in both")
    parser.add_argument("--jobs", type=int, default=1, help="peer runs at once (default 1; seconds depend on it)")
    parser.add_argument("--expected", action="store_true",
                        help="print the noise-free RMSE (COUNT, SUM) of dpsql's plans and the peers' even splits")
    return parser.parse_args(argv)


def expected_rmse(con, data: Dataset, queries, rho: float, epsilon: float) -> dict[str, dict[str, float]]:
    """Noise-free RMSE per kind (COUNT and SUM; AVG, a ratio, has none) and system-mode, without a draw.

    dpsql's from its plan (EXPLAIN's expected RMSE of each query, a repeat that of its first
    ask), the peers' from their even split (OpenDP and Tumult add the same noise): zCDP
    σ² = Δ²·queries/(2ρ), pure ε-DP σ² = 2(Δ·queries/ε)² (Laplace), Δ = 1 for COUNT and the
    largest |bound| for SUM (the scales OpenDP's `summarize()` reports); pooled over the
    query's answer cells as `rmse_by_kind` pools them."""
    truth = exact(con, data, queries)
    script = ";\n".join(sql(q, data.table) for q in queries)
    per_query: dict[str, list[float]] = {}
    for system, mode in (("dpsql", "zcdp"), ("dpsql", "pure")):
        if mode == "zcdp":
            cur, budget = dpsql.connect(con=con, catalog=data.catalog, rho=rho).cursor(), f"rho = {rho!r}"
        else:
            cur = dpsql.connect(con=con, catalog=data.catalog, epsilon=epsilon, delta=0).cursor()
            budget = f"epsilon = {epsilon!r}"
        cur.execute(f"EXPLAIN BEGIN WORKLOAD WITH ({budget});\n{script};\nEND WORKLOAD;")
        plan = "\n".join(str(row[0]) for row in cur.fetchall())
        found = {int(m.group(1)): float(m.group(3)) for m in re.finditer(
            r"\bq(\d+): ([^\n]*?): expected RMSE ([0-9.e+]+)", plan) if "[" not in m.group(2)}
        per_query[label(system, mode)] = [found.get(i + 1, found.get(queries.index(q) + 1, math.nan))
                                          for i, q in enumerate(queries)]
    n, bound = len(queries), max(abs(b) for b in data.bounds[data.value])
    for mode in ("zcdp", "pure"):
        sigma = []
        for q in queries:
            sensitivity = 1 if q[0] == "count" else bound
            variance = sensitivity ** 2 * n / (2 * rho) if mode == "zcdp" else 2 * (sensitivity * n / epsilon) ** 2
            sigma.append(math.sqrt(variance))
        per_query[label("peer", mode)] = sigma
    out: dict[str, dict[str, float]] = {}
    for system, rmses in per_query.items():
        squares: dict[str, list[tuple[int, float]]] = {}
        for q, true, r in zip(queries, truth, rmses):
            if q[0] in ("count", "sum"):
                squares.setdefault(q[0], []).append((sum(v is not None for v in true.values()), r * r))
        for kind, cells in squares.items():
            out.setdefault(kind, {})[system] = math.sqrt(sum(c * v for c, v in cells) / sum(c for c, _ in cells))
    return out


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    rho = epsilon_delta_to_zcdp(args.epsilon, DELTA)
    with tempfile.TemporaryDirectory() as workdir:
        for dataset in args.datasets:
            data, con = adult() if dataset == "adult" else demo(Path(workdir))
            for name in args.workloads:
                if args.expected:  # print the noise-free comparison; run nothing, write nothing
                    for kind, e in expected_rmse(con, data, workloads(data)[name], rho, args.epsilon).items():
                        best = min(e["peer"], e["peer_pure"])
                        print(f"{data.name:6} {name:10} {kind:6} " + "  ".join(f"{k} {v:9.2f}" for k, v in e.items())
                              + f"  best dpsql/best peer {min(e['dpsql'], e['dpsql_pure']) / best:.3f}"
                              + f"  dpsql zCDP/best peer {e['dpsql'] / best:.3f}", flush=True)
                    continue
                records = compare(con, data, name, workloads(data)[name], rho, args.draws, args.peers,
                                  epsilon=args.epsilon, modes=MODES[args.privacy], jobs=args.jobs)
                old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
                RESULTS.write_text(json.dumps(merged(old, records), indent=1) + "\n")  # after each workload


def merged(old: list[dict], new: list[dict]) -> list[dict]:
    """`old` records but those this run replaces (same table, workload, ρ and --privacy), then `new`."""
    def key(r):
        return r.get("dataset", "adult"), r["workload"], round(r["rho"], 12), r.get("privacy", "zcdp")
    done = {key(r) for r in new}
    return [r for r in old if key(r) not in done] + new  # other runs' records are kept


def compare(con, data: Dataset, name: str, queries, rho: float, draws: int, peer_names,
            epsilon: float = EPSILON, modes=("zcdp",), jobs: int = 1) -> list[dict]:
    """One workload through dpsql and each installed peer, in each privacy mode of `modes`: a record per query kind.

    `jobs` peer runs (a peer in a mode, each a subprocess) go at once; RMSEs do not depend on it, seconds do."""
    truth = exact(con, data, queries)
    systems, seconds = {}, {}
    ranks = {}
    for mode in modes:
        started = time.perf_counter()
        runs = dpsql_answers(con, data, queries, rho, draws, epsilon=epsilon if mode == "pure" else None)
        systems[label("dpsql", mode)] = rmse_by_kind(queries, truth, runs)
        ranks[label("dpsql", mode)] = rank_rmse(con, data, queries, runs)
        seconds[label("dpsql", mode)] = time.perf_counter() - started

    def peer_run(peer: str, mode: str):
        started = time.perf_counter()
        runs = peer_answers(peer, data, queries, rho, draws, epsilon=epsilon if mode == "pure" else None)
        return runs, time.perf_counter() - started

    with ThreadPoolExecutor(max(1, jobs)) as pool:  # each peer run is a subprocess of its own environment
        ran = {(p, m): pool.submit(peer_run, p, m) for p in peer_names for m in modes}
        for (peer, mode), future in ran.items():
            runs, spent = future.result()
            if runs is None:
                if mode == modes[0]:
                    print(f"{peer}: not installed (python -m benchmarks.peer_envs install {peer}); skipped")
                continue
            systems[label(peer, mode)] = rmse_by_kind(queries, truth, runs)
            ranks[label(peer, mode)] = rank_rmse(con, data, queries, runs)
            seconds[label(peer, mode)] = spent
    privacy = "both" if len(modes) > 1 else modes[0]
    records = [record(data.name, name, len(queries), kind, draws, rho, epsilon, privacy, modes,
                      {s: r[kind] for s, r in systems.items()}, peer_names)
               for kind in next(iter(systems.values()))]
    for r in records:
        if r["kind"] == "quantile":  # the rank error beside the value error: the fraction of rows it is off by
            r.update({f"{s}_rank": ranks[s] for s in systems})
            print(f"{data.name:6} {name:10} rank   " + "  ".join(f"{s} {ranks[s]:.5f}" for s in systems), flush=True)
        shown = "  ".join(f"{s} {r[s]:10.2f}" for s in systems)
        ratios = "  ".join(f"{k} {r[k]:.3f}" for k in ("ratio_to_best_peer", "ratio_best_dpsql_to_best_peer")
                           if r.get(k) is not None)
        print(f"{data.name:6} {name:10} {r['kind']:6} {shown}  best peer {r['best_peer']}  {ratios}", flush=True)
    print(f"{data.name:6} {name:10} seconds: " + ", ".join(f"{p} {s:.1f}" for p, s in seconds.items()), flush=True)
    return records


def record(dataset: str, workload: str, queries: int, kind: str, draws: int, rho: float, epsilon: float,
           privacy: str, modes, rmse: dict[str, float], peer_names) -> dict:
    """One (workload, kind) record: every system-mode RMSE, each peer's better mode, the best peer and the ratios.

    `ratio_to_best_peer` is dpsql's zCDP ledger (its pure one with `--privacy pure`) over the best
    peer in its best mode; `ratio_best_dpsql_to_best_peer` the better of dpsql's ledgers over it."""
    best_mode = {}
    for peer in peer_names:
        ran = [(rmse[label(peer, m)], m) for m in modes if label(peer, m) in rmse]
        if ran:
            best_mode[peer] = min(ran)[1]
    best_peer = min(best_mode, key=lambda p: rmse[label(p, best_mode[p])], default=None)
    best = None if best_peer is None else rmse[label(best_peer, best_mode[best_peer])]
    mine = [rmse[label("dpsql", m)] for m in modes]
    out = {"dataset": dataset, "workload": workload, "queries": queries, "kind": kind, "draws": draws, "rho": rho,
           "privacy": privacy, **({"epsilon": epsilon} if "pure" in modes else {}), **rmse, "best_mode": best_mode,
           "best_peer": None if best_peer is None else label(best_peer, best_mode[best_peer]),
           "ratio_to_best_peer": _ratio(mine[0], best)}
    if len(mine) > 1:
        out["ratio_best_dpsql_to_best_peer"] = _ratio(min(mine), best)
    return out


def _ratio(mine: float, best: float | None) -> float | None:
    """dpsql's RMSE over the best peer's (1 when both are exact; None without a peer or against an exact one)."""
    if best is None or (best == 0 and mine > 0):
        return None
    return 1.0 if best == 0 else mine / best


if __name__ == "__main__":
    main()
