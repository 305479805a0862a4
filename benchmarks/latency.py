"""Interactive latency: dpsql's answers against the exact DuckDB query, side by side in one run.

Measured as deployments run: each connection is an analyst's, made from a deployment profile
(`dpsql.connect(profile=..., analyst=...)`) with its ledger in a state file, as the shell and
`dpsql serve` make them. On the demo `people` table (1M and 10M rows, generated deterministically
into a DuckDB database file, checkpointed, opened read-only by the profile), stored as
`create_people_table` stores it: categoricals as ENUMs of the declared values and NOT NULL where
the catalog has no NULLs, so the scan needs no per-row checks of the catalog (see
`dpsql.tables.columns.StoredType`); with `--strings`, as a CSV import stores it (VARCHAR, nullable:
the checks run, once per distinct value of the dictionary-compressed strings); with
`--strings --validated`, so stored and validated by the owner (`dpsql catalog --validate`),
so the scans skip the checks. For single queries (COUNT, filtered COUNT, AVG, MEDIAN):

- exact: the same query in plain DuckDB SQL (the catalog's clamping and NULL rules
  written out), best of 5;
- first answer: a fresh profile connection with a fresh ledger file, the query measured and
  answered (ledger read, plan, scan, noise, charge), median of 5 fresh connections; with
  `--ledger-charges N`, each fresh ledger file starts as a copy of one holding N earlier charges
  (of 1e-7 ρ each, on another table), as a ledger in use does;
- re-ask: the same query again on that connection (answered free from the model), median of 20;
- EXPLAIN: a fresh connection, the plan with its expected error and predicted time (no data
  read), median of 5;

and a 10-query BI workload (`BEGIN WORKLOAD ... END WORKLOAD`) the same way (exact: the ten
queries). Each is timed in wall-clock and in process CPU seconds (DuckDB's threads included), the
machine being shared.

Goals (issue 34): first answer <= exact + 50 ms, re-ask <= 5 ms (workload: <= 10 ms), EXPLAIN
<= 30 ms, the workload's first answer <= 0.5 s CPU at 1M rows.

    python -m benchmarks.latency [--rows 1000000 10000000] [--strings [--validated]] [--fresh 5]
                                 [--ledger-charges N]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

import dpsql
from dpsql.budget.ledger_entries import Entry
from dpsql.interfaces import cli
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

RESULTS = Path(__file__).parent / "results" / "latency{}.json"  # "-strings", "-validated"
HOURS = "LEAST(GREATEST(hours_per_week, 0), 99)"  # the catalog's clamping, written out
# (name, DP query, the exact query with the catalog's semantics: hours_per_week clamped to 0..99, NULLs left out)
QUERIES = [
    ("COUNT", "SELECT sex, COUNT(*) FROM people GROUP BY sex", "SELECT sex, COUNT(*) FROM people GROUP BY sex"),
    ("filtered COUNT", "SELECT education, COUNT(*) FROM people WHERE age BETWEEN 30 AND 39 GROUP BY education",
     "SELECT education, COUNT(*) FROM people WHERE age BETWEEN 30 AND 39 GROUP BY education"),
    ("AVG", "SELECT sex, AVG(hours_per_week) FROM people GROUP BY sex",
     f"SELECT sex, AVG({HOURS}) FROM people GROUP BY sex"),
    ("MEDIAN", "SELECT MEDIAN(age) FROM people", "SELECT MEDIAN(age) FROM people"),
]
# A BI dashboard: COUNT, SUM and AVG with 0-2 GROUP BY columns and WHERE ranges (as benchmarks.peers' `bi`).
BI = [
    ("SELECT COUNT(*) FROM people", "SELECT COUNT(*) FROM people"),
    ("SELECT SUM(hours_per_week) FROM people", f"SELECT SUM({HOURS}) FROM people"),
    ("SELECT AVG(hours_per_week) FROM people", f"SELECT AVG({HOURS}) FROM people"),
    ("SELECT sex, COUNT(*) FROM people GROUP BY sex", "SELECT sex, COUNT(*) FROM people GROUP BY sex"),
    ("SELECT sex, SUM(hours_per_week) FROM people WHERE age BETWEEN 20 AND 40 GROUP BY sex",
     f"SELECT sex, SUM({HOURS}) FROM people WHERE age BETWEEN 20 AND 40 GROUP BY sex"),
    ("SELECT race, AVG(hours_per_week) FROM people GROUP BY race",
     f"SELECT race, AVG({HOURS}) FROM people GROUP BY race"),
    ("SELECT education, COUNT(*) FROM people WHERE age BETWEEN 10 AND 30 GROUP BY education",
     "SELECT education, COUNT(*) FROM people WHERE age BETWEEN 10 AND 30 GROUP BY education"),
    ("SELECT sex, race, SUM(hours_per_week) FROM people GROUP BY sex, race",
     f"SELECT sex, race, SUM({HOURS}) FROM people GROUP BY sex, race"),
    ("SELECT sex, region, AVG(hours_per_week) FROM people WHERE age >= 15 GROUP BY sex, region",
     f"SELECT sex, region, AVG({HOURS}) FROM people WHERE age >= 15 GROUP BY sex, region"),
    ("SELECT marital, COUNT(*) FROM people GROUP BY marital", "SELECT marital, COUNT(*) FROM people GROUP BY marital"),
]
WORKLOAD = "BEGIN WORKLOAD; " + "; ".join(q for q, _ in BI) + "; END WORKLOAD"


def _timed(action) -> tuple[float, float]:
    """(wall, CPU) seconds of `action()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


class Deployment:
    """A profile over the database, each connection made with a ledger file of its own (so each first
    answer is a first answer), as an analyst's surface connects."""

    def __init__(self, folder: Path, database: Path, catalog: Path, earlier_charges: int = 0):
        self.folder, self.database, self.catalog, self.made = folder, database, catalog, 0
        self.seed: Path | None = None  # a ledger file holding the earlier charges, copied for each connection
        if earlier_charges:
            with self.connect() as c:
                c.session.ledger.charge_all([Entry(1e-7, f"SELECT {i}", "earlier", "sig", [])
                                             for i in range(earlier_charges)])
            self.seed = self.folder / f"state{self.made}.dpsql-state"

    def connect(self):
        self.made += 1
        profile, state = self.folder / f"profile{self.made}.toml", self.folder / f"state{self.made}.dpsql-state"
        if self.seed is not None:
            shutil.copyfile(self.seed, state)
        profile.write_text(f'[data]\ndatabase = "{self.database}"\ncatalog = "{self.catalog}"\n'
                           f'ledger = "{state}"\n'
                           '[budget]\nepsilon = 10\ndelta = 1e-9\nquery_epsilon = 0.1\n[analysts.bench]\n')
        return dpsql.connect(profile=str(profile), analyst="bench")


def measure(deployment: Deployment, con: duckdb.DuckDBPyConnection, dp_sql: str, exact_sqls: list[str],
            fresh: int, reasks: int = 4) -> dict:
    exact = [_timed(lambda: [con.execute(e).fetchall() for e in exact_sqls]) for _ in range(5)]
    first, reask, explain = [], [], []
    for _ in range(fresh):
        with deployment.connect() as c:
            cur = c.cursor()
            first.append(_timed(lambda: (cur.execute(dp_sql), cur.fetchall())))
            reask += [_timed(lambda: (cur.execute(dp_sql), cur.fetchall())) for _ in range(reasks)]
        if not dp_sql.startswith("BEGIN"):
            with deployment.connect() as c:
                cur = c.cursor()
                explain.append(_timed(lambda: (cur.execute("EXPLAIN " + dp_sql), cur.fetchall())))
    out = {"exact_ms": min(w for w, _ in exact) * 1e3, "exact_cpu_ms": min(c for _, c in exact) * 1e3}
    for name, times in (("first", first), ("reask", reask), ("explain", explain)):
        if times:
            out[f"{name}_ms"] = statistics.median(w for w, _ in times) * 1e3
            out[f"{name}_cpu_ms"] = statistics.median(c for _, c in times) * 1e3
    return out


def _validate(database: Path, catalog: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        if cli.main(["catalog", str(database), "--catalog", str(catalog), "--validate", "people"]) != 0:
            raise SystemExit("the generated table did not validate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--strings", action="store_true",
                        help="store the categoricals as nullable VARCHAR (as a CSV import does), not typed")
    parser.add_argument("--validated", action="store_true", help="with --strings: the owner validated the table")
    parser.add_argument("--fresh", type=int, default=5, help="fresh connections per query (default 5)")
    parser.add_argument("--no-workload", action="store_true", help="skip the 10-query workload")
    parser.add_argument("--ledger-charges", type=int, default=0,
                        help="earlier charges each fresh ledger holds (default 0: an empty ledger)")
    args = parser.parse_args()
    storage = ("validated" if args.validated else "strings") if args.strings else "typed"
    rows_out = []
    for rows in args.rows:
        folder = Path(tempfile.mkdtemp(prefix="dpsql-latency-"))
        database, catalog = folder / "people.duckdb", folder / "catalog.toml"
        catalog.write_text(PEOPLE_CATALOG_TOML)
        con = duckdb.connect(str(database))
        create_people_table(con, rows=rows, typed=not args.strings)
        con.execute("CHECKPOINT")
        con.close()
        if args.validated:
            _validate(database, catalog)
        con = duckdb.connect(str(database), read_only=True)  # opened as an owner's database is
        deployment = Deployment(folder, database, catalog, args.ledger_charges)
        with deployment.connect() as c:
            c.cursor().execute(QUERIES[0][1])  # warm imports and DuckDB once
        cases = [(name, dp, [exact]) for name, dp, exact in QUERIES]
        if not args.no_workload:
            cases.append(("10-query workload", WORKLOAD, [e for _, e in BI]))
        for name, dp_sql, exact_sqls in cases:
            r = {"rows": rows, "storage": storage, "query": name, "sql": dp_sql, "ledger_charges": args.ledger_charges,
                 **measure(deployment, con, dp_sql, exact_sqls, args.fresh)}
            rows_out.append(r)
            explain = f" | EXPLAIN {r['explain_ms']:6.1f} ms ({r['explain_cpu_ms']:6.1f} CPU)" if "explain_ms" in r else ""
            print(f"{rows:>10,} {storage:9} {name:17} exact {r['exact_ms']:7.1f} ms ({r['exact_cpu_ms']:7.1f} CPU) | "
                  f"first {r['first_ms']:7.1f} ms ({r['first_cpu_ms']:7.1f} CPU: exact + "
                  f"{r['first_cpu_ms'] - r['exact_cpu_ms']:6.1f}) | re-ask {r['reask_ms']:5.1f} ms "
                  f"({r['reask_cpu_ms']:5.1f} CPU){explain}", flush=True)
        con.close()
        shutil.rmtree(folder)
    suffix = "" if storage == "typed" else f"-{storage}"
    Path(str(RESULTS).format(suffix)).write_text(json.dumps(rows_out, indent=1) + "\n")


if __name__ == "__main__":
    main()
