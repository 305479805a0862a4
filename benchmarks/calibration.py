"""Are the error bars honest? Coverage of the stated confidence intervals against the truth.

On three tables — the generated demo `people` table, adult and nltcs (../shared/data) —
a set of queries (COUNT with GROUP BY and range filters, SUM, AVG and variances where a
column has values to add) is answered through the DB-API in three states of the ledger:

- *fresh*: each query on its own, spending the per-query share;
- *workload*: all of them as one `BEGIN WORKLOAD WITH (epsilon = ...)`;
- *after synthesis*: `dpsql synth` (MST) releases a synthetic copy first, then the
  queries are asked one by one — least squares answers those its measurements
  determine (free), the graphical model those it does not (free, no error bar),
  the rest are measured.

Every DP value that carries a standard error is compared with the true value
(computed from the table under the catalog's semantics); the benchmark reports
how often the 95% and 68% intervals cover it, and how many values came without an
interval (answered by a generative model, whose error is not bounded). Each
repetition uses fresh noise (a different seed).

    python -m benchmarks.calibration                              # 6 repetitions
    python -m benchmarks.calibration --repeats 2                  # quicker
    python -m benchmarks.calibration --after-synthesis-check 60   # one case, many seeds
    python -m benchmarks.calibration --variance-check 40          # the variance queries, many seeds
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from statistics import NormalDist

import duckdb
import numpy as np

import dpsql
from benchmarks.datasets import DATA, load
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.deployment.demo import true_result
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.releases.synth import synthesize

RESULTS = Path(__file__).parent / "results" / "calibration.json"
COMMAND = "python -m benchmarks.calibration"
LEVELS = (0.95, 0.68)
STATES = ("fresh", "workload", "after synthesis")


def people_queries(rng: random.Random) -> list[str]:
    low = rng.randint(18, 60)
    return [
        "SELECT sex, COUNT(*) FROM people GROUP BY sex",
        "SELECT education, COUNT(*) FROM people GROUP BY education",
        "SELECT region, race, COUNT(*) FROM people GROUP BY region, race",
        f"SELECT COUNT(*) FROM people WHERE age BETWEEN {low} AND {low + rng.randint(3, 15)}",
        f"SELECT marital, COUNT(*) FROM people WHERE age >= {low} GROUP BY marital",
        "SELECT sex, SUM(hours_per_week) FROM people GROUP BY sex",
        "SELECT education, AVG(income) FROM people GROUP BY education",
        "SELECT race, AVG(hours_per_week) FROM people WHERE age >= 25 GROUP BY race",
        *VARIANCE_QUERIES[:2],
    ]


VARIANCE_QUERIES = [
    "SELECT sex, VAR_SAMP(age) FROM people GROUP BY sex",
    "SELECT region, STDDEV_POP(hours_per_week) FROM people WHERE age >= 25 GROUP BY region",
    "SELECT education, VARIANCE(income) FROM people GROUP BY education",
]


def coded_queries(table: str, sizes: dict[str, int], rng: random.Random) -> list[str]:
    """Queries over an integer-coded table: small-domain GROUP BYs, ranges, and SUM/AVG of a wide column."""
    def q(name: str) -> str:
        return f'"{name}"'

    small = [c for c, n in sizes.items() if n <= 16]
    wide = [c for c, n in sizes.items() if n > 16] or small
    out = []
    for _ in range(3):
        a = rng.choice(small)
        out.append(f"SELECT {q(a)}, COUNT(*) FROM {table} GROUP BY {q(a)}")
    a, b = rng.sample(small, 2)
    out.append(f"SELECT {q(a)}, {q(b)}, COUNT(*) FROM {table} GROUP BY {q(a)}, {q(b)}")
    for _ in range(2):
        c = rng.choice(wide)
        low = rng.randrange(sizes[c])
        out.append(f"SELECT COUNT(*) FROM {table} WHERE {q(c)} BETWEEN {low} AND {min(low + 5, sizes[c] - 1)}")
    c, g = rng.choice(wide), rng.choice(small)
    out.append(f"SELECT {q(g)}, SUM({q(c)}) FROM {table} GROUP BY {q(g)}")
    out.append(f"SELECT {q(g)}, AVG({q(c)}) FROM {table} GROUP BY {q(g)}")
    out.append(f"SELECT {q(g)}, VAR_SAMP({q(c)}) FROM {table} GROUP BY {q(g)}")
    return out


def people() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    create_people_table(con, rows=100_000, seed=7)
    return con


def tables() -> list[tuple[str, duckdb.DuckDBPyConnection, object, callable]]:
    """(table, connection holding it, catalog, query generator) for each benchmark table."""
    out = [("people", people(), PEOPLE_CATALOG_TOML, people_queries)]
    for name in ("adult", "nltcs"):
        if not (DATA / name).exists():
            continue
        con = duckdb.connect()
        catalog = load(con, name)
        sizes = {c.name: c.size for c in catalog.get(name).columns.values()}
        out.append((name, con, catalog, lambda rng, name=name, sizes=sizes: coded_queries(name, sizes, rng)))
    return out


def answers(conn, con, sql: str, truth=None) -> list[dict]:
    """Each DP value of one executed query beside its truth (computed here unless given)."""
    cursor = conn.execute(sql)
    result = cursor.result
    truth = truth or true_result(compile_query(sql, conn.session.catalog), DuckDBBackend(con))
    out = []
    for row, errors, true_row in zip(result.rows, result.stderr, truth.rows):
        for value, error, true_value, dp in zip(row, errors, true_row, result.dp):
            if not dp:
                continue  # a group label
            if true_value is None or value is None:
                continue  # AVG over an empty group
            kind = "variance" if "VAR" in sql or "STDDEV" in sql else \
                "avg" if "AVG" in sql else "sum" if "SUM" in sql else "count"
            out.append({"estimate": float(value), "truth": float(true_value),
                        "stderr": None if error is None else float(error), "kind": kind,
                        "answered_by": ", ".join(result.answered_by), "charged": result.charged > 0})
    return out


def run_state(state: str, table: str, con, catalog, queries: list[str], seed: int) -> list[dict]:
    conn = dpsql.connect(con=con, catalog=catalog, epsilon=50.0, delta=1e-9, query_epsilon=0.2, seed=seed)
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        if state == "after synthesis":
            synthesize(conn, table, 1.0, Path(tmp) / "s.parquet", mechanism="mst", rows=1000)
        if state == "workload":
            script = "BEGIN WORKLOAD WITH (epsilon = 1.0);\n" + ";\n".join(queries) + ";\nEND WORKLOAD;"
            conn.execute(script)  # measured together; each query is then answered free
        for sql in queries:
            found += [dict(a, table=table, state=state, seed=seed) for a in answers(conn, con, sql)]
    conn.close()
    return found


def coverage(rows: list[dict]) -> dict:
    with_bar = [r for r in rows if r["stderr"] is not None]
    out = {"answers": len(rows), "with_interval": len(with_bar), "without_interval": len(rows) - len(with_bar)}
    for level in LEVELS:
        z = NormalDist().inv_cdf(0.5 + level / 2)
        hits = [abs(r["estimate"] - r["truth"]) <= z * r["stderr"] for r in with_bar if r["stderr"] > 0]
        out[f"covered_{int(level * 100)}"] = float(np.mean(hits)) if hits else None
    return out


def after_synthesis_check(seeds: int) -> None:
    """Many repetitions of one after-synthesis case (MST on adult, then six 1-way GROUP BYs), to pin
    down the calibration that the mixed benchmark above estimates from correlated values."""
    con = duckdb.connect()
    catalog = load(con, "adult")
    table = catalog.get("adult")
    columns = [c for c in table.columns if table.columns[c].size <= 16][:6]
    queries = [f'SELECT "{c}", COUNT(*) FROM adult GROUP BY "{c}"' for c in columns]
    truth = {q: [r[1] for r in true_result(compile_query(q, catalog), DuckDBBackend(con)).rows] for q in queries}
    z: dict[str, list[float]] = {q: [] for q in queries}
    for seed in range(seeds):
        conn = dpsql.connect(con=con, catalog=catalog, epsilon=50.0, delta=1e-9, seed=seed)
        with tempfile.TemporaryDirectory() as tmp:
            synthesize(conn, "adult", 1.0, Path(tmp) / "s.parquet", mechanism="mst", rows=100)
        for q in queries:
            result = conn.execute(q).result
            z[q] += [(row[1] - t) / e[1] for row, e, t in zip(result.rows, result.stderr, truth[q]) if e[1]]
        conn.close()
    for q, values in z.items():
        v = np.asarray(values)
        print(f"{q[:60]:60} n={v.size:5d} rms z={np.sqrt(np.mean(v**2)):.3f} "
              f"68% covers {np.mean(np.abs(v) <= NormalDist().inv_cdf(0.84)):.3f}")


def variance_check(seeds: int) -> None:
    """Many repetitions of the variance queries alone (people, a fresh ledger each): coverage of their
    delta-method intervals per query, at the default query share (ε = 0.2) and at a tenth of it."""
    con = people()
    for epsilon in (0.2, 0.02):
        for sql in VARIANCE_QUERIES:
            truth = true_result(compile_query(sql, Catalog.from_toml(PEOPLE_CATALOG_TOML)), DuckDBBackend(con))
            found = []
            for seed in range(seeds):
                conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=50.0, delta=1e-9,
                                     query_epsilon=epsilon, seed=seed)
                found += answers(conn, con, sql, truth)
                conn.close()
            c = coverage(found)
            z = np.asarray([(r["estimate"] - r["truth"]) / r["stderr"] for r in found if r["stderr"]])
            print(f"ε={epsilon:<5} {sql[:72]:72} n={c['with_interval']:4d} 95%: {c['covered_95']:.1%} "
                  f"68%: {c['covered_68']:.1%} rms z={np.sqrt(np.mean(z**2)):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--after-synthesis-check", type=int, metavar="SEEDS",
                        help="only: many seeds of one after-synthesis case (MST on adult)")
    parser.add_argument("--variance-check", type=int, metavar="SEEDS",
                        help="only: many seeds of the variance queries on people, fresh ledgers")
    args = parser.parse_args()
    if args.after_synthesis_check:
        after_synthesis_check(args.after_synthesis_check)
        return
    if args.variance_check:
        variance_check(args.variance_check)
        return
    found: list[dict] = []
    for table, con, catalog, generate in tables():
        for repeat in range(args.repeats):
            queries = generate(random.Random(repeat))
            for i, state in enumerate(STATES):
                found += run_state(state, table, con, catalog, queries, seed=1000 * repeat + i)
    groups = {"all": found}
    for key in ("table", "state", "kind"):
        for value in dict.fromkeys(r[key] for r in found):
            groups[f"{key}={value}"] = [r for r in found if r[key] == value]
    summary = {name: coverage(rows) for name, rows in groups.items()}
    print(f"{'answers':28} {'n':>6} {'with CI':>8} {'95% covers':>11} {'68% covers':>11}")
    for name, c in summary.items():
        cells = [f"{c[k]:.1%}" if c[k] is not None else "-" for k in ("covered_95", "covered_68")]
        print(f"{name:28} {c['answers']:>6} {c['with_interval']:>8} {cells[0]:>11} {cells[1]:>11}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"command": COMMAND, "repeats": args.repeats, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
