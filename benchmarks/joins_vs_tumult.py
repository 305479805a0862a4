"""Joins of protected tables: dpsql's bounded join against Tumult Analytics' private join, at equal budget.

The two tables are a deterministic split of Adult (`shared/data/adult/adult.csv`, 48,842 rows, every
column an integer code): persons and their income records.

- `people`: one row per CSV row, `person_id` = the row's 0-based position in the file, with its
  sex (2 codes), race (5) and relationship (6);
- `records`: one row per income source of the person: a wage record (kind 0, amount = its
  hours_per_week code 0..98) for everyone, a capital-gain record (kind 1, amount = its capital_gain
  code) where that code is above 0, a capital-loss record (kind 2, amount = its capital_loss code)
  where above 0: 1 to 3 records per person (amount 0..99).

The privacy unit is the person: neighbours differ in one person's rows in both tables (dpsql: the
records' `privacy_unit = { foreign_key = "person_id", references = "people.person_id" }`; Tumult:
`AddRowsWithID("person_id")` on both in one ID space). Both bound a person's joined rows to K = 3
(dpsql: the product of the tables' bounds 1 × 3; Tumult: `MaxRowsPerID(3)` after `join_private`),
which keeps every joined row, so errors are noise only. The workload, over `records JOIN people USING
(person_id)`: COUNT by sex, COUNT by race × kind, COUNT, SUM(amount) by kind, SUM(amount) by sex, at
ρ = zCDP(ε = 1, δ = 1e-6) ≈ 0.0244 for the whole workload (`mechanisms.accounting`'s conversion). dpsql
runs it as one `BEGIN WORKLOAD WITH (rho = ...)` on a fresh ledger per draw; Tumult evaluates each
query with ρ / 5 (`peer_sides/tumult_joins.py`; skipped when its environment is not installed:
`python -m benchmarks.peer_envs install tumult`). Scored against the exact join in DuckDB: RMSE over
every answer cell of a kind (COUNT, SUM) and per query, with its standard error over the draws
(delta method on the per-draw mean squared errors).

    python -m benchmarks.joins_vs_tumult [--draws 10] [--epsilon 1]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

from benchmarks import peer_envs
from benchmarks.adult_dashboard import DATA, load
from benchmarks.peers import DELTA, Dataset, dpsql_answers, exact, sql
from dpsql.tables.catalog import Catalog
from mechanisms.accounting import epsilon_delta_to_zcdp

RESULTS = Path(__file__).parent / "results" / "joins_vs_tumult.json"
SIDE = Path(__file__).parent / "peer_sides" / "tumult_joins.py"
JOIN = "records JOIN people USING (person_id)"
K = 3  # the most records a person has: both systems keep every joined row
KEYS = {"sex": list(range(2)), "race": list(range(5)), "relationship": list(range(6)), "kind": list(range(3))}
BOUNDS = {"amount": [0, 99]}
CATALOG = """
[tables.people]
privacy_unit = "person_id"
max_rows_per_unit = 1
[tables.people.columns]
sex = { type = "integer", min = 0, max = 1 }
race = { type = "integer", min = 0, max = 4 }
relationship = { type = "integer", min = 0, max = 5 }

[tables.records]
privacy_unit = { foreign_key = "person_id", references = "people.person_id" }
max_rows_per_unit = 3
[tables.records.columns]
kind = { type = "integer", min = 0, max = 2 }
amount = { type = "integer", min = 0, max = 99 }
"""
QUERIES = [  # (kind, value column, GROUP BY columns, WHERE ranges), as benchmarks.peers writes them
    ("count", None, ["sex"], []),
    ("count", None, ["race", "kind"], []),
    ("count", None, [], []),
    ("sum", "amount", ["kind"], []),
    ("sum", "amount", ["sex"], []),
]


def tables(con: duckdb.DuckDBPyConnection, workdir: Path) -> Dataset:
    """`people` and `records` split from Adult (see the module docstring), also as CSVs for Tumult."""
    load(con)
    con.execute("CREATE TABLE people AS SELECT rowid AS person_id, sex, race, relationship FROM adult")
    con.execute("""CREATE TABLE records AS
        SELECT rowid AS person_id, 0 AS kind, hours_per_week AS amount FROM adult
        UNION ALL SELECT rowid, 1, capital_gain FROM adult WHERE capital_gain > 0
        UNION ALL SELECT rowid, 2, capital_loss FROM adult WHERE capital_loss > 0""")
    con.execute("DROP TABLE adult")
    for name in ("people", "records"):
        con.execute(f"COPY (SELECT * FROM {name} ORDER BY ALL) TO '{workdir / name}.csv' (HEADER)")
    rows = con.execute(f"SELECT COUNT(*) FROM {JOIN}").fetchone()[0]
    return Dataset("adult people ⋈ records", JOIN, Catalog.from_toml(CATALOG), workdir / "people.csv", {}, KEYS,
                   BOUNDS, rows, "amount", ("amount", 100), ["sex", "race", "relationship", "kind"])


def tumult_answers(data: Dataset, rho: float, draws: int) -> list[list[dict]] | None:
    """Tumult's answers (`peer_sides/tumult_joins.py`), or None when its environment is not installed."""
    request = {"people": str(data.csv), "records": str(data.csv.with_name("records.csv")), "id": "person_id",
               "max_rows_per_id": K, "keys": data.keys, "bounds": data.bounds, "rho": rho, "draws": draws,
               "queries": [{"kind": k, "column": c, "groups": g} for k, c, g, _ in QUERIES]}
    reply = peer_envs.run("tumult", SIDE, request)
    return None if reply is None else reply["answers"]


def squared_errors(truth: list[dict], run: list[dict]) -> list[list[float]]:
    """Per query, the squared error of every answer cell of one draw (a missing answer is an error)."""
    out = []
    for q, true, got in zip(QUERIES, truth, run):
        if set(got) != set(true):
            raise ValueError(f"query {q}: answered groups {sorted(got)} are not the true groups {sorted(true)}")
        out.append([(got[key] - value) ** 2 for key, value in true.items()])
    return out


def rmse(draws: list[list[list[float]]], which: list[int]) -> tuple[float, float]:
    """RMSE over the cells of queries `which` and every draw, and its standard error over the draws."""
    per_draw = np.array([np.mean([e for i in which for e in draw[i]]) for draw in draws])
    value = math.sqrt(per_draw.mean())
    if len(per_draw) < 2:
        return value, math.nan
    return value, 0.0 if value == 0 else float(per_draw.std(ddof=1) / math.sqrt(len(per_draw)) / (2 * value))


def scores(truth: list[dict], runs: list[list[dict]]) -> dict[str, list[float]]:
    """[RMSE, standard error] per kind (count, sum) and per query (q1..q5)."""
    errors = [squared_errors(truth, run) for run in runs]
    out = {kind: list(rmse(errors, [i for i, q in enumerate(QUERIES) if q[0] == kind])) for kind in ("count", "sum")}
    out.update({f"q{i + 1}": list(rmse(errors, [i])) for i in range(len(QUERIES))})
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--epsilon", type=float, default=1.0, help=f"the workload's ε at δ={DELTA:g} (default 1)")
    args = parser.parse_args(argv)
    rho = epsilon_delta_to_zcdp(args.epsilon, DELTA)
    with tempfile.TemporaryDirectory() as workdir:
        con = duckdb.connect()
        data = tables(con, Path(workdir))
        truth = exact(con, data, QUERIES)
        systems, seconds = {}, {}
        started = time.perf_counter()
        systems["dpsql"] = scores(truth, dpsql_answers(con, data, QUERIES, rho, args.draws))
        seconds["dpsql"] = time.perf_counter() - started
        started = time.perf_counter()
        runs = tumult_answers(data, rho, args.draws)
        if runs is None:
            print("tumult: not installed (python -m benchmarks.peer_envs install tumult); skipped")
        else:
            systems["tumult"] = scores(truth, runs)
            seconds["tumult"] = time.perf_counter() - started
    record = {"dataset": data.name, "join": JOIN, "joined_rows": data.rows, "max_rows_per_unit": K,
              "queries": [sql(q, JOIN) for q in QUERIES], "epsilon": args.epsilon, "delta": DELTA, "rho": rho,
              "draws": args.draws, "rmse_and_se": systems, "seconds": seconds}
    if "tumult" in systems:
        record["ratio_dpsql_to_tumult"] = {k: systems["dpsql"][k][0] / systems["tumult"][k][0]
                                           for k in systems["dpsql"]}
    for key in systems["dpsql"]:
        shown = "  ".join(f"{s} {v[key][0]:9.2f} ± {v[key][1]:.2f}" for s, v in systems.items())
        ratio = record.get("ratio_dpsql_to_tumult", {}).get(key)
        print(f"{key:6} {shown}" + (f"  dpsql/tumult {ratio:.3f}" if ratio is not None else ""), flush=True)
    print("seconds: " + ", ".join(f"{s} {t:.1f}" for s, t in seconds.items()))
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
