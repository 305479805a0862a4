"""Do the error bars hold where they used to fail? Local ±1-coefficient protocols, quantiles, distinct units.

- `ldp`: HRR and HaarHRR tables (`model = "local"`) at D = 16 … 1024, with enough reports and sparse
  (coefficients left without any report): the mean stated variance of random ranges and cells against
  their mean squared error over fresh reports (statistically equivalent simulation,
  `benchmarks.ldp_simulation`), how many stated variances are infinite, and the largest |bias| in sd.
- `quantiles`: MEDIAN/QUANTILE/PERCENTILE on the demo `people` table, each seed a fresh connection:
  how often `Result.ci(0.95)` and `ci(0.68)` cover the exact quantile, the mean error and 95% width.
- `distinct`: COUNT(DISTINCT unit) WHERE … on a table whose units have 5 times more rows than the
  bound: the mean error (in stated sd) over seeds and the coverage of the 95% interval.
- `pgm`: `SET dpsql.estimator = 'pgm'` against least squares on the demo `people` table (3,000 and 300
  rows): three 2-way marginals measured, then a 2-way marginal outside them, a 1-way marginal and a
  filtered count asked; how often `ci(0.95)` and `ci(0.68)` cover the exact counts, and the RMS of the
  errors in stated sd (1 when calibrated).

    python -m benchmarks.calibration_bars            # all four (each about 1-4 minutes on 2 cores)
    python -m benchmarks.calibration_bars ldp        # one part
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from statistics import NormalDist

import duckdb
import numpy as np

import dpsql
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from mechanisms.domain import Domain
from benchmarks import ldp_simulation as simulate
from mechanisms.ldp.answering import client_protocol, local_answers
from mechanisms.ldp.ranges import range_query
from mechanisms.ldp.stratified_answers import StratifiedAnswers, sign_strata
from mechanisms.ldp.tally import ReportTally
from mechanisms.matrices import Dense
from mechanisms.workload import Block, Term

RESULTS = Path(__file__).parent / "results" / "calibration_bars.json"
Z95 = NormalDist().inv_cdf(0.975)
LDP_CASES = [(16, 2000), (16, 60), (64, 5000), (64, 200), (256, 20000), (256, 600), (1024, 50000), (1024, 2500)]


def _tally(strata, reports: int) -> ReportTally:
    keep = [(s, np.flatnonzero(c), c, t) for s, c, t in strata]
    return ReportTally(reports, np.concatenate([np.full(len(k), s) for s, k, _, _ in keep]),
                       np.concatenate([k for _, k, _, _ in keep]), np.concatenate([c[k] for _, k, c, _ in keep]),
                       np.concatenate([t[k] for _, k, _, t in keep]), {s: int(c.sum()) for s, c, _ in strata})


def _draw(name, protocol, histogram, rng):
    truth = float(protocol.truth)
    if name == "hrr":
        counts, sums = simulate.hadamard_tallies(simulate.expand_histogram(histogram), protocol.size, truth, rng)
        return [(0, counts, sums)]
    leaves = np.pad(histogram, (0, (1 << protocol.height) - len(histogram)))
    plus, minus = simulate.haar_signs(simulate.level_split(leaves, protocol.height, rng), rng)
    return [(level, *simulate.flip_tallies(up, down, truth, rng))
            for level, (up, down) in enumerate(zip(plus, minus), 1)]


def ldp(repeats: int, epsilon: float = 1.0) -> list[dict]:
    rng = np.random.default_rng(2026)
    out = []
    for name in ("hrr", "haar"):
        for size, reports in LDP_CASES:
            domain = Domain(("a",), (size,))
            protocol = client_protocol(name, epsilon, domain)
            histogram = rng.multinomial(reports, rng.dirichlet(np.full(size, 0.3)))
            rows = np.array([range_query(size, a, rng.integers(a, size)) for a in rng.integers(0, size, 16)]
                            + [range_query(size, j, j) for j in rng.integers(0, size, 4)])
            block = Block("w", (), [Term(1.0, {"a": Dense(rows)})], mapped_rows={"a": len(rows)})
            first = 1 if name == "hrr" else 0
            model = local_answers(domain, protocol, _tally(_draw(name, protocol, histogram, rng), reports))
            answers, stated, empty = [], [], 0
            for _ in range(repeats if size < 1024 else max(repeats // 3, 20)):
                strata = _draw(name, protocol, histogram, rng)
                empty += sum(int((c[first:] == 0).sum()) for _, c, _ in strata)
                counts, sums = (np.concatenate([part[i][first:] for part in strata]) for i in (1, 2))
                group = np.concatenate([np.full(len(c) - first, i) for i, (_, c, _) in enumerate(strata)])
                strata = sign_strata(counts, sums, model.strata.p, group)
                fitted = StratifiedAnswers(domain, strata, reports, model.marginal)
                estimate, variance = fitted.answer(block)
                answers.append(estimate)
                stated.append(variance)
            answers, stated = np.array(answers), np.array(stated)
            error = answers - rows @ histogram
            mse = (error ** 2).mean(axis=0)
            finite = np.isfinite(stated).all(axis=0)
            out.append({"protocol": name, "D": size, "reports": reports, "draws": len(answers),
                        "empty_coefficients_per_draw": empty / len(answers),
                        "infinite_variances": int((~np.isfinite(stated)).sum()),
                        "stated_over_mse": float(stated[:, finite].mean(axis=0).sum() / mse[finite].sum()),
                        "max_abs_bias_sd": float(np.max(np.abs(error.mean(axis=0)) / np.sqrt(mse / len(answers))))})
            print(out[-1], flush=True)
    return out


QUANTILE_QUERIES = [
    ("SELECT region, MEDIAN(age) FROM people GROUP BY region",
     "SELECT region, quantile_disc(age, 0.5) FROM people WHERE age BETWEEN 0 AND 99 GROUP BY region"),
    ("SELECT sex, QUANTILE(income, 0.5) FROM people GROUP BY sex",
     "SELECT sex, quantile_cont(income, 0.5) FROM people WHERE income BETWEEN 0 AND 200000 GROUP BY sex"),
    ("SELECT sex, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) FROM people GROUP BY sex",
     "SELECT sex, quantile_cont(age, 0.9) FROM people WHERE age BETWEEN 0 AND 99 GROUP BY sex"),
]


def quantiles(repeats: int) -> list[dict]:
    con = duckdb.connect()
    create_people_table(con, rows=20_000, seed=7)
    out = []
    for sql, exact_sql in QUANTILE_QUERIES:
        truth = {key: value for key, value in con.execute(exact_sql).fetchall()}
        z = []
        widths = []
        for seed in range(repeats):
            conn = dpsql.connect(con=con.cursor(), catalog=PEOPLE_CATALOG_TOML, epsilon=1000.0, query_epsilon=0.1,
                                 seed=seed)
            result = conn.execute(sql).result
            for (key, value), (_, stderr) in zip(result.rows, result.stderr):
                if value is not None and stderr is not None:
                    z.append((abs(value - truth[key]), stderr))
                    widths.append(2 * Z95 * stderr)
            conn.close()
        error, stderr = np.array(z).T
        out.append({"query": sql, "values": len(error), "covered_95": float(np.mean(error <= Z95 * stderr + 1e-9)),
                    "covered_68": float(np.mean(error <= NormalDist().inv_cdf(0.84) * stderr + 1e-9)),
                    "mean_error": float(error.mean()), "mean_width_95": float(np.mean(widths))})
        print(out[-1], flush=True)
    return out


DISTINCT_CATALOG = """
[tables.visits]
privacy_unit = "customer"
max_rows_per_unit = 2
[tables.visits.columns]
region = { type = "categorical", values = ["N", "S"] }
amount = { type = "integer", min = 0, max = 9 }
"""


def distinct(repeats: int) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "visits.duckdb")
        con = duckdb.connect(path)
        con.execute("""CREATE TABLE visits AS SELECT c AS customer, j AS amount,
            CASE WHEN j < 3 OR c % 2 = 0 THEN 'N' ELSE 'S' END AS region FROM range(20000) t(c), range(10) s(j)
            WHERE (c * 7 + j) % 3 <> 0""")
        con.close()
        for where in ("WHERE amount = 7", "WHERE amount >= 5 AND region = 'S'"):
            sql = f"SELECT COUNT(DISTINCT customer) FROM visits {where}"
            con = duckdb.connect(path, read_only=True)
            exact = con.execute(sql).fetchall()[0][0]
            con.close()
            z = []
            for seed in range(repeats):
                conn = dpsql.connect(path, catalog=DISTINCT_CATALOG, state=str(Path(tmp) / f"l{seed}.duckdb"),
                                     epsilon=10.0, delta=1e-6, query_epsilon=0.5, seed=seed)
                cur = conn.cursor()
                cur.execute(sql)
                value, = cur.fetchone()
                z.append((value - exact) / cur.result.stderr[0][0])
                conn.close()
            z = np.array(z)
            out.append({"query": sql, "exact": exact, "seeds": len(z), "mean_error_sd": float(z.mean()),
                        "covered_95": float(np.mean(np.abs(z) <= Z95))})
            print(out[-1], flush=True)
    return out


PGM_MEASURED = ["SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race",
                "SELECT race, region, COUNT(*) FROM people GROUP BY race, region",
                "SELECT education, region, COUNT(*) FROM people GROUP BY education, region"]
PGM_ASKED = ["SELECT sex, region, COUNT(*) FROM people GROUP BY sex, region",
             "SELECT race, COUNT(*) FROM people GROUP BY race", "SELECT COUNT(*) FROM people WHERE sex = 'F'",
             "SELECT education, COUNT(*) FROM people GROUP BY education"]


def pgm(repeats: int) -> list[dict]:
    """Coverage of the graphical model's intervals against least squares' (see the module docstring)."""
    out = []
    for rows in (3000, 300):
        con = duckdb.connect()
        create_people_table(con, rows=rows)
        exact = [{tuple(r[:-1]): r[-1] for r in con.execute(q).fetchall()} for q in PGM_ASKED]
        for estimator in ("least_squares", "pgm"):
            errors, covered95, covered68 = [], 0, 0
            for seed in range(repeats):
                conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=2.0, delta=1e-9, seed=seed)
                conn.execute(f"SET dpsql.estimator = '{estimator}'")
                conn.execute("BEGIN WORKLOAD WITH (epsilon = 1.0); " + "; ".join(PGM_MEASURED) + "; END WORKLOAD")
                for sql, truth in zip(PGM_ASKED, exact):
                    result = conn.execute(sql).result
                    for row, wide, narrow, stderr in zip(result.rows, result.ci(0.95), result.ci(0.68), result.stderr):
                        value = truth.get(tuple(row[:-1]), 0)
                        errors.append((row[-1] - value) / stderr[-1])
                        covered95 += wide[-1][0] <= value <= wide[-1][1]
                        covered68 += narrow[-1][0] <= value <= narrow[-1][1]
            record = {"rows": rows, "estimator": estimator, "cells": len(errors), "cover95": covered95 / len(errors),
                      "cover68": covered68 / len(errors), "z_rms": float(np.sqrt(np.mean(np.square(errors))))}
            print(record)
            out.append(record)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", default=["ldp", "quantiles", "distinct", "pgm"])
    parser.add_argument("--repeats", type=int, default=0, help="draws/seeds per case (default: per part)")
    args = parser.parse_args()
    defaults = {"ldp": 150, "quantiles": 40, "distinct": 40, "pgm": 20}
    parts = {"ldp": ldp, "quantiles": quantiles, "distinct": distinct, "pgm": pgm}
    found = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for part in args.parts:
        found[part] = parts[part](args.repeats or defaults[part])
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
