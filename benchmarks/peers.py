"""Accuracy at equal budget against OpenDP and Tumult Analytics, per query kind and per workload.

Every system answers the same queries at the same zCDP budget, ρ = zCDP(ε = 1, δ = 1e-6)
≈ 0.0172 for the whole workload, add/remove-one-row neighbours, on two tables declared the
same way to all (dpsql's catalog; the peers get its GROUP BY domains as public keys and
the value column's range as bounds):

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
  discrete quantile (a data value) as value error.

dpsql runs each workload as one `BEGIN WORKLOAD WITH (rho = ...)` through DB-API on a
fresh ledger; the peers run in their own environments (`python -m benchmarks.peer_envs
install opendp tumult`; a peer not installed is skipped) with their documented zCDP
configurations (see `peer_sides/*.py`). Scored against the exact answers from DuckDB:
RMSE over every answer cell of a kind (COUNT, SUM, AVG, quantile) in a workload, over `--draws`
independent runs; the ratio is dpsql's RMSE over the best peer's (below 1: dpsql better).

    python -m benchmarks.peers [--draws 5] [--datasets adult demo] [--workloads bi ranges marginals reask quantiles]
                               [--peers opendp tumult] [--epsilon 1]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from benchmarks import peer_envs
from benchmarks.adult_dashboard import DATA, TABLE, catalog, column_name, domain_sizes, load
from dpsql.catalog import Catalog
from dpsql.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from mechanisms.accounting import epsilon_delta_to_zcdp

RESULTS = Path(__file__).parent / "results" / "peers.json"
SIDES = Path(__file__).parent / "peer_sides"
EPSILON, DELTA = 1.0, 1e-6
DEMO_ROWS = 100_000


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


def dpsql_answers(con, data: Dataset, queries, rho: float, draws: int) -> list[list[dict]]:
    out = []
    for _ in range(draws):
        cur = dpsql.connect(con=con, catalog=data.catalog, rho=rho).cursor()
        script = ";\n".join(sql(q, data.table) for q in queries)
        cur.execute(f"BEGIN WORKLOAD WITH (rho = {rho!r});\n{script};\nEND WORKLOAD;")
        answers = []
        for q in queries:
            answers.append(_keyed(q, cur.fetchall()))
            cur.nextset()
        out.append(answers)
    return out


def peer_answers(peer: str, data: Dataset, queries, rho: float, draws: int) -> list[list[dict]] | None:
    request = {
        "csv": str(data.csv), "rename": data.rename, "keys": data.keys, "bounds": data.bounds,
        "rho": rho, "draws": draws, "rows": data.rows,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--datasets", nargs="+", default=["adult", "demo"], choices=["adult", "demo"])
    parser.add_argument("--workloads", nargs="+", default=["bi", "ranges", "marginals", "reask", "quantiles"])
    parser.add_argument("--peers", nargs="+", default=list(peer_envs.PEERS))
    parser.add_argument("--epsilon", type=float, default=EPSILON, help=f"the workload's ε at δ={DELTA:g} (default 1)")
    args = parser.parse_args()
    rho = epsilon_delta_to_zcdp(args.epsilon, DELTA)
    records = []
    with tempfile.TemporaryDirectory() as workdir:
        for dataset in args.datasets:
            data, con = adult() if dataset == "adult" else demo(Path(workdir))
            for name in args.workloads:
                records += compare(con, data, name, workloads(data)[name], rho, args.draws, args.peers)
    done = {(r["dataset"], r["workload"], round(r["rho"], 12)) for r in records}
    kept = [r for r in (json.loads(RESULTS.read_text()) if RESULTS.exists() else [])
            if (r.get("dataset", "adult"), r["workload"], round(r["rho"], 12)) not in done]
    RESULTS.write_text(json.dumps(kept + records, indent=1) + "\n")  # other runs' records are kept


def compare(con, data: Dataset, name: str, queries, rho: float, draws: int, peer_names) -> list[dict]:
    """One workload through dpsql and each installed peer: a record per query kind."""
    truth = exact(con, data, queries)
    started = time.perf_counter()
    systems = {"dpsql": rmse_by_kind(queries, truth, dpsql_answers(con, data, queries, rho, draws))}
    seconds = {"dpsql": time.perf_counter() - started}
    for peer in peer_names:
        started = time.perf_counter()
        runs = peer_answers(peer, data, queries, rho, draws)
        if runs is None:
            print(f"{peer}: not installed (python -m benchmarks.peer_envs install {peer}); skipped")
            continue
        systems[peer] = rmse_by_kind(queries, truth, runs)
        seconds[peer] = time.perf_counter() - started
    records = []
    for kind in systems["dpsql"]:
        peers = {p: r[kind] for p, r in systems.items() if p != "dpsql"}
        best = min(peers.values()) if peers else None
        records.append({"dataset": data.name, "workload": name, "queries": len(queries), "kind": kind, "draws": draws,
                        "rho": rho, "dpsql": systems["dpsql"][kind], **peers,
                        "ratio_to_best_peer": _ratio(systems["dpsql"][kind], best)})
        shown = "  ".join(f"{p} {v:10.2f}" for p, v in peers.items())
        ratio = "" if records[-1]["ratio_to_best_peer"] is None else f"  dpsql/best {records[-1]['ratio_to_best_peer']:.3f}"
        print(f"{data.name:6} {name:10} {kind:6} dpsql {systems['dpsql'][kind]:10.2f}  {shown}{ratio}", flush=True)
    print(f"{data.name:6} {name:10} seconds: " + ", ".join(f"{p} {s:.1f}" for p, s in seconds.items()), flush=True)
    return records


def _ratio(mine: float, best: float | None) -> float | None:
    """dpsql's RMSE over the best peer's (1 when both are exact; None without a peer or against an exact one)."""
    if best is None or (best == 0 and mine > 0):
        return None
    return 1.0 if best == 0 else mine / best


if __name__ == "__main__":
    main()
