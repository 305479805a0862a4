"""Sequential interactive sessions: k COUNT queries at equal shares of one (ε = 1, δ = 1e-6) budget.

For k = 1, 3, 10, 30, 100, each draw opens a fresh ledger with `query_rho` = ρ_total / k and asks k
distinct COUNTs (`age < t`) of a generated `people` table, one statement each, as an analyst at a
shell would. The expected RMSE is exact (each answer's noise variance, as its standard error says);
the realized one is over every answer against DuckDB's exact count. dpsql runs with exact
accounting (the default: each statement may get discrete Laplace noise, `planner.noise_choice`)
and with `accounting="zcdp"` (Gaussian noise, as before). The peers' per-query noise for the same
session is exact and needs no run: a pure-DP peer (OpenDP or Tumult in Laplace mode) spends ε/k
per COUNT with discrete Laplace noise of scale k/ε; a zCDP peer spends ρ_total/k with a Gaussian
of σ² = k / (2 ρ_total). `--ledger-cost` times one charge and the status read after it (what an
interactive statement pays for accounting) with 1, 10 and 100 charges in the ledger; `--planning`
the CPU time of EXPLAIN for new queries with one noise planned (zCDP) and with both (exact).

    PYTHONPATH=. python -m benchmarks.sequential_sessions [--draws 1] [--k 1 3 10 30 100]
    PYTHONPATH=. python -m benchmarks.sequential_sessions --ledger-cost | --planning
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_entries import Entry
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.noise import discrete_laplace_variance, laplace_scale_upper
from mechanisms.privacy_filter import Piece

EPSILON, DELTA = 1.0, 1e-6
SESSIONS = (1, 3, 10, 30, 100)


def session_rmse(db: str, k: int, draws: int, accounting: str, truth: dict[int, int],
                 work: Path) -> tuple[float, float, str]:
    """Over `draws` sessions of k COUNTs: the expected RMSE (from each answer's exact noise variance, its
    standard error), the realized RMSE against the truth, and the noises the statements got."""
    total = epsilon_delta_to_zcdp(EPSILON, DELTA)
    variances, errors, noises = [], [], []
    for draw in range(draws):
        state = work / f"{accounting}-{k}-{draw}.state"
        with dpsql.connect(db, catalog=PEOPLE_CATALOG_TOML, epsilon=EPSILON, delta=DELTA, query_rho=total / k,
                           state=str(state), seed=1000 * k + draw, accounting=accounting) as c:
            for i in range(k):
                t = 1 + i * 99 // max(k, 1)
                cur = c.execute(f"SELECT COUNT(*) FROM people WHERE age < {t}")
                errors.append(cur.fetchall()[0][0] - truth[t])
                variances.append(cur.result.stderr[0][0] ** 2)
                noises.append("laplace" if "pure DP" in cur.result.charge_text else "gaussian")
    kinds = ", ".join(f"{noises.count(n)} {n}" for n in ("laplace", "gaussian") if n in noises)
    return float(np.sqrt(np.mean(variances))), float(np.sqrt(np.mean(np.square(errors)))), kinds


def sessions(draws: int, ks: tuple[int, ...]) -> None:
    total = epsilon_delta_to_zcdp(EPSILON, DELTA)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = str(work / "people.duckdb")
        con = duckdb.connect(db)
        create_people_table(con, rows=20_000)
        truth = {t: con.execute(f"SELECT COUNT(*) FROM people WHERE age < {t}").fetchone()[0] for t in range(1, 101)}
        con.close()
        print("| k | dpsql exact: expected RMSE (realized; noises) | dpsql zCDP: expected (realized) | "
              "pure-DP peer (Laplace ε/k) | zCDP peer (Gaussian ρ/k) | exact / best peer |", flush=True)
        print("|---|---|---|---|---|---|", flush=True)
        for k in ks:
            exact, exact_real, noises = session_rmse(db, k, draws, "exact", truth, work)
            zcdp, zcdp_real, _ = session_rmse(db, k, draws, "zcdp", truth, work)
            laplace = math.sqrt(discrete_laplace_variance(laplace_scale_upper(k / EPSILON)))
            gaussian = math.sqrt(k / (2 * total))
            print(f"| {k} | {exact:.3g} ({exact_real:.3g}; {noises}) | {zcdp:.3g} ({zcdp_real:.3g}) | {laplace:.3g} | "
                  f"{gaussian:.3g} | {exact / min(laplace, gaussian):.3g} |", flush=True)


def ledger_cost() -> None:
    """CPU milliseconds per charge (append + the status read after it) once a ledger holds n charges, exactly
    composed (Laplace or Gaussian pieces) and in zCDP (the accounting before exact composition)."""
    total = epsilon_delta_to_zcdp(EPSILON, DELTA)
    with tempfile.TemporaryDirectory() as tmp:
        for kind, accounting in (("laplace", "exact"), ("gaussian", "exact"), ("gaussian", "zcdp")):
            for n in (1, 10, 100):
                ledger = Ledger(str(Path(tmp) / f"{kind}-{accounting}-{n}.state"), "gaussian", total, DELTA)
                ledger.accounting = accounting
                share = EPSILON / 200 if kind == "laplace" else total / 200
                piece = Piece.laplace(share) if kind == "laplace" else Piece.gaussian(share)
                for _ in range(n - 1):
                    ledger.charge_all([Entry(piece.rho, "q", None, None, [], pieces=(piece,))])
                ledger.status()
                cpu, wall = time.process_time(), time.perf_counter()
                ledger.charge_all([Entry(piece.rho, "q", None, None, [], pieces=(piece,))])
                remaining = ledger.status()[2]
                cpu, wall = (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000
                print(f"| {kind} | {accounting} | {n} | {cpu:.1f} | {wall:.1f} | {remaining:.4g} |")


def planning_cost() -> None:
    """CPU ms of EXPLAIN for new queries (no earlier measurement), zCDP (one noise planned) against exact (both)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "people.duckdb")
        con = duckdb.connect(db)
        create_people_table(con, rows=20_000)
        con.close()
        for accounting, t in (("zcdp", 10), ("exact", 20), ("zcdp", 30), ("exact", 40)):
            with dpsql.connect(db, catalog=PEOPLE_CATALOG_TOML, epsilon=EPSILON, delta=DELTA, query_epsilon=EPSILON,
                               state=str(Path(tmp) / f"{accounting}-{t}.state"), seed=1, accounting=accounting) as c:
                c.execute("EXPLAIN SELECT COUNT(*) FROM people").fetchall()  # loads what the first plan loads
                for q in (f"SELECT COUNT(*) FROM people WHERE age < {t}",
                          f"SELECT COUNT(*) FROM people WHERE age >= {t} AND sex = 'F'"):
                    cpu = time.process_time()
                    c.execute("EXPLAIN " + q).fetchall()
                    print(f"| {q} | {accounting} | {(time.process_time() - cpu) * 1000:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1)
    parser.add_argument("--k", type=int, nargs="+", default=list(SESSIONS))
    parser.add_argument("--ledger-cost", action="store_true")
    parser.add_argument("--planning", action="store_true")
    args = parser.parse_args()
    if args.ledger_cost:
        ledger_cost()
    elif args.planning:
        planning_cost()
    else:
        sessions(args.draws, tuple(args.k))


if __name__ == "__main__":
    main()
