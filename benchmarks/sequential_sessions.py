"""Sequential interactive sessions: k COUNT queries at equal shares of one (ε = 1, δ = 1e-6) budget.

For k = 1, 3, 10, 30, 100, each draw opens a fresh ledger with `query_rho` = ρ_total / k and asks k
distinct COUNTs (`age < t`) of a generated `people` table, one statement each, as an analyst at a
shell would. The expected RMSE is exact (each answer's noise variance, as its standard error says);
the realized one is over every answer against DuckDB's exact count. dpsql runs with exact
accounting (the default: each statement may get discrete Laplace noise, `planner.noise_choice`)
and with `accounting="zcdp"` (Gaussian noise, as before). The peers' per-query noise for the same
session is exact and needs no run: a pure-DP peer (OpenDP or Tumult in Laplace mode) spends ε/k
per COUNT with discrete Laplace noise of scale k/ε; a zCDP peer spends ρ_total/k with a Gaussian
of σ² = k / (2 ρ_total).

`--kinds` runs the sessions for real against the peers on adult (`benchmarks.peers`' table and
declarations): for each kind (COUNT, SUM, AVG, a range COUNT, a 1-way marginal, MEDIAN) and k,
k distinct queries of that kind (`session_queries`) at equal shares, in dpsql (exact accounting,
`query_rho` = ρ_total / k, the noise it chooses) and in each installed peer (OpenDP, Tumult, SmartNoise SQL;
their environments from `python -m benchmarks.peer_envs install opendp tumult smartnoise`) in both its modes:
pure ε-DP (ε/k per query) and zCDP (ρ_total/k), the better mode per cell counting (SmartNoise: its one mode,
Laplace at (ε/k, δ/k) per query; no quantiles). A session is drawn
until it holds `--answers` answers (ceil(answers / k) draws). RMSE over every answer cell against
DuckDB's exact answer (MEDIAN: `quantile_disc`), with its delta-method standard error; the verdict
is a win or a loss where the ratio to the best peer is more than two standard errors from 1.
`--ledger-cost` times one charge and the status read after it (what an
interactive statement pays for accounting) with 1, 10 and 100 charges in the ledger; `--planning`
the CPU time of EXPLAIN for new queries with one noise planned (zCDP) and with both (exact).

    PYTHONPATH=. python -m benchmarks.sequential_sessions [--draws 1] [--k 1 3 10 30 100]
    PYTHONPATH=. python -m benchmarks.sequential_sessions --kinds count sum avg range marginal median
                 [--k 1 3 10 30] [--answers 20] [--peers opendp tumult smartnoise] [--cap tumult=10] [--out F]
    PYTHONPATH=. python -m benchmarks.sequential_sessions --ledger-cost | --planning
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_entries import Entry
from benchmarks import peer_envs
from benchmarks.peers import SIDES, Dataset, adult, exact, sql, _keyed
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.noise import discrete_laplace_variance, laplace_scale_upper
from mechanisms.privacy_filter import Piece

EPSILON, DELTA = 1.0, 1e-6
SESSIONS = (1, 3, 10, 30, 100)
KINDS = ("count", "sum", "avg", "range", "marginal", "median")
RESULTS = Path(__file__).parent / "results" / "sequential_sessions.json"


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


def session_queries(data: Dataset, kind: str, k: int) -> list[tuple]:
    """k distinct queries of one kind (`benchmarks.peers`' tuples): the i-th filtered by `age >= a_i` (a_i spread
    over the column; past its size a lower bound on the value column too), a range COUNT over a random age
    range, a marginal grouped by one of five columns in turn."""
    value, (ordered, size), groups = data.value, data.ordered, data.groups
    rng = np.random.default_rng(k)
    out, ranges = [], set()
    for i in range(k):
        where = [(ordered, i * size // k if k <= size else i % size, size - 1)]
        if k > size and i >= size:
            where.append((value, 10 * (i // size), data.bounds[value][1]))
        if kind == "range":
            while (low_high := tuple(sorted(int(v) for v in rng.choice(size, size=2, replace=False)))) in ranges:
                pass  # a repeated range would be a re-ask, not a new query
            ranges.add(low_high)
            out.append(("count", None, [], [(ordered, *low_high)]))
        elif kind == "marginal":
            out.append(("count", None, [groups[i % len(groups)]], where))
        else:
            aggregate = {"count": ("count", None), "sum": ("sum", value), "avg": ("avg", value),
                         "median": ("quantile 0.5", value)}[kind]
            out.append((*aggregate, [], where))
    return out


def _errors(queries, truth, runs) -> list[float]:
    out = []
    for run in runs:
        for true, got in zip(truth, run):
            for key, value in true.items():
                if value is not None:
                    answer = got.get(key)
                    if answer is None or math.isnan(answer):
                        raise ValueError(f"no answer for group {key!r}")
                    out.append(answer - value)
    return out


def rmse_se(errors: list[float]) -> tuple[float, float]:
    """RMSE and its delta-method standard error, sd(e²) / (2 RMSE √n)."""
    squares = np.square(np.asarray(errors, dtype=float))
    rmse = float(np.sqrt(squares.mean()))
    return rmse, float(squares.std(ddof=1) / (2 * rmse * math.sqrt(squares.size))) if rmse > 0 and squares.size > 1 \
        else 0.0


def dpsql_session(con, data: Dataset, queries, k: int, draws: int) -> tuple[list, list[str]]:
    """`draws` sessions of the queries on fresh ledgers of (ε, δ) with `query_rho` = ρ_total / k, one statement
    each; the answers and the noise each statement got ("free": answered from earlier measurements)."""
    total, runs, noises = epsilon_delta_to_zcdp(EPSILON, DELTA), [], []
    for draw in range(draws):
        cur = dpsql.connect(con=con, catalog=data.catalog, epsilon=EPSILON, delta=DELTA, query_rho=total / k,
                            seed=7919 * k + draw).cursor()
        answers = []
        for q in queries:
            cur.execute(sql(q, data.table))
            answers.append(_keyed(q, cur.fetchall()))
            text = cur.result.charge_text
            noises.append("free" if text.startswith("no charge") else "laplace" if "pure DP" in text else "gaussian")
        runs.append(answers)
    return runs, noises


def peer_modes(k: int, all_modes: bool) -> tuple[str, ...]:
    """The modes a peer runs a k-query session in: both with `all_modes`; else pure ε-DP up to k = 10 and zCDP
    from k = 10 (by the exact noise variances, a COUNT's Laplace std of ε/k is 0.30× the Gaussian's of ρ/k at
    k = 1, 0.54× at k = 3, 0.99× at k = 10 and 1.71× at k = 30)."""
    return ("pure", "zcdp") if all_modes else tuple(m for m, run in (("pure", k <= 10), ("zcdp", k >= 10)) if run)


def kinds_against_peers(kinds, ks, answers: int, peers, all_modes: bool = False, caps: dict[str, int] | None = None,
                        out_path: Path = RESULTS) -> None:
    """Every (kind, k) session in dpsql and each installed peer (in `peer_modes`, and only the modes it has:
    `peer_envs.MODES`; SmartNoise has no quantiles; `caps`: a peer's largest k); records to `out`. The peers'
    subprocesses run while dpsql runs its sessions; the load average is recorded before and after."""
    data, con = adult()
    total = epsilon_delta_to_zcdp(EPSILON, DELTA)
    cells = [(kind, k, session_queries(data, kind, k), max(1, math.ceil(answers / k))) for kind in kinds for k in ks]

    load = os.getloadavg()
    caps = caps or {}

    def peer_run(peer: str, mode: str):
        modes = peer_envs.MODES.get(peer)  # a peer of one mode runs it at every k
        mine = [c for c in cells if (mode in modes if modes else mode in peer_modes(c[1], all_modes))
                and c[1] <= caps.get(peer, c[1]) and not (peer == "smartnoise" and c[0] == "median")]
        if not mine:
            return mine, ({"sessions": []} if peer_envs.python(peer) else None), 0.0
        request = {"csv": str(data.csv), "rename": data.rename, "keys": data.keys, "bounds": data.bounds,
                   "rho": total, "epsilon": EPSILON, "delta": DELTA, "rows": data.rows, "privacy": mode,
                   "sessions": [{"draws": d, "queries": [{"kind": q[0], "column": q[1], "groups": q[2],
                                                          "where": q[3]} for q in qs]} for _, _, qs, d in mine]}
        started = time.perf_counter()
        reply = peer_envs.run(peer, SIDES / f"{peer}_queries.py", request, timeout=7200)
        return mine, reply, time.perf_counter() - started

    with ThreadPoolExecutor(2 * len(peers)) as pool:  # each peer run is a subprocess of its own environment
        ran = {(p, m): pool.submit(peer_run, p, m) for p in peers for m in ("pure", "zcdp")}
        records = {}
        for kind, k, queries, draws in cells:
            cpu = time.process_time()
            runs, noises = dpsql_session(con, data, queries, k, draws)
            truth = exact(con, data, queries)
            rmse, se = rmse_se(_errors(queries, truth, runs))
            records[(kind, k)] = {"kind": kind, "k": k, "draws": draws, "truth": truth, "dpsql": rmse, "dpsql_se": se,
                                  "dpsql_noises": {n: noises.count(n) for n in sorted(set(noises))},
                                  "dpsql_cpu_s": time.process_time() - cpu}
            print(f"dpsql {kind} k={k}: {rmse:.4g} ± {se:.2g} ({draws} draws)", flush=True)
        for (peer, mode), future in ran.items():
            mine, reply, seconds = future.result()
            if reply is None:
                print(f"{peer}: not installed (python -m benchmarks.peer_envs install {peer}); skipped")
                continue
            for (kind, k, queries, _), runs in zip(mine, reply["sessions"]):
                r = records[(kind, k)]
                r[f"{peer}_{mode}"], r[f"{peer}_{mode}_se"] = rmse_se(_errors(queries, r["truth"], runs))
            print(f"{peer} {mode}: {seconds:.0f} s", flush=True)
    out = []
    for r in records.values():
        r.pop("truth")
        ran = [(r[f"{p}_{m}"], r[f"{p}_{m}_se"], f"{p}_{m}") for p in peers for m in ("pure", "zcdp") if f"{p}_{m}" in r]
        if ran:
            best, best_se, name = min(ran)
            ratio = r["dpsql"] / best if best > 0 else math.nan
            ratio_se = ratio * math.hypot(r["dpsql_se"] / r["dpsql"] if r["dpsql"] else 0, best_se / best) \
                if best > 0 else math.nan
            verdict = "win" if ratio + 2 * ratio_se < 1 else "loss" if ratio - 2 * ratio_se > 1 else "within error"
            r.update(best_peer=name, ratio=ratio, ratio_se=ratio_se, verdict=verdict)
        out.append(r)
        peers_text = "  ".join(f"{n} {v:.4g}±{s:.2g}" for v, s, n in ran)
        print(f"| {r['kind']} | {r['k']} | {r['draws']} | {r['dpsql']:.4g} ± {r['dpsql_se']:.2g} | {peers_text} | "
              f"{r.get('ratio', math.nan):.3g} ± {r.get('ratio_se', math.nan):.2g} | {r.get('verdict')} |", flush=True)
    out_path.write_text(json.dumps({"epsilon": EPSILON, "delta": DELTA, "answers_per_cell": answers,
                                    "peer_modes": "both" if all_modes else "pure for k <= 10, zcdp for k >= 10",
                                    "peer_k_caps": caps, "load_before": load, "load_after": os.getloadavg(),
                                    "records": out}, indent=1) + "\n")


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
    parser.add_argument("--kinds", nargs="+", choices=KINDS, help="run these query kinds against the peers, on adult")
    parser.add_argument("--answers", type=int, default=20, help="answers per (kind, k) cell, at least (--kinds)")
    parser.add_argument("--peers", nargs="+", default=list(peer_envs.PEERS), choices=peer_envs.PEERS)
    parser.add_argument("--all-modes", action="store_true", help="each peer in both modes for every k (--kinds)")
    parser.add_argument("--cap", nargs="+", default=[], metavar="PEER=K", help="run PEER only up to k = K (--kinds)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON written (--kinds)")
    args = parser.parse_args()
    if args.kinds:
        caps = {peer: int(k) for peer, k in (c.split("=") for c in args.cap)}
        kinds_against_peers(args.kinds, tuple(args.k), args.answers, args.peers, args.all_modes, caps, args.out)
    elif args.ledger_cost:
        ledger_cost()
    elif args.planning:
        planning_cost()
    else:
        sessions(args.draws, tuple(args.k))


if __name__ == "__main__":
    main()
