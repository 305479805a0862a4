"""Open-domain GROUP BY keys against OpenDP and Tumult at the same (ε, δ) (issue 33, item 4).

A table of `--rows` rows, one per privacy unit, whose key column is drawn from a Zipf(`--zipf`) law over
`--keys` keys (seeded: heavy-tailed, most keys rare), grouped by with no declared keys, one query
spending the whole (ε = 1, δ = 1e-6):

- dpsql: `SELECT k, COUNT(*) FROM events GROUP BY k` with `query_epsilon` = ε (the whole budget) on a
  ledger composed exactly (the default: the release buys discrete Laplace or the discrete Gaussian,
  whichever has the lower threshold, `dpsql.releases.keys.selection`), with the defaults (δ/2 of δ set
  apart for key releases, δ_τ = δ/10) and with δ_τ = 0.99 δ set apart and spent (the peers' pure
  modes spend all of δ on the threshold); and on a zCDP ledger (`accounting="zcdp"`: the discrete
  Gaussian) with δ/10 set apart and spent, its ρ = zCDP(ε, 0.9 δ);
- OpenDP (`peer_sides/opendp_keys.py`): its own partition selection, pure mode (Laplace) at (ε, δ) and
  zCDP mode at ρ = zCDP(ε, 0.9 δ) with δ_τ = δ/10 (dpsql's default split);
- Tumult Analytics (`peer_sides/tumult_keys.py`): its `auto_partition_selection` at ApproxDP (ε, δ).

Scored per draw: the keys released and the RMSE of their released counts against the true counts;
mean ± standard error over `--draws` draws. Peers run in their own environments
(`python -m benchmarks.peer_envs install opendp tumult`) and are skipped when absent.

    PYTHONPATH=. python -m benchmarks.keys_vs_peers [--draws 10] [--rows 200000] [--keys 20000] [--zipf 1.1]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import duckdb
import numpy as np

import dpsql
from benchmarks import peer_envs
from benchmarks.peers import SIDES
from mechanisms.accounting import epsilon_delta_to_zcdp

RESULTS = Path(__file__).parent / "results" / "keys_vs_peers.json"
EPSILON, DELTA = 1.0, 1e-6
CATALOG = """
[tables.events]
privacy_unit = "user_id"
max_rows_per_unit = 1
[tables.events.columns]
k = { type = "key" }
"""


def zipf_keys(rows: int, keys: int, exponent: float, seed: int = 0) -> np.ndarray:
    """`rows` keys drawn from P(i) ∝ i^−exponent over keys 1..`keys` (as strings `k<i>`)."""
    weights = np.arange(1, keys + 1, dtype=float) ** -exponent
    drawn = np.random.default_rng(seed).choice(keys, size=rows, p=weights / weights.sum()) + 1
    return np.char.add("k", drawn.astype(str))


def score(released: dict[str, float], truth: dict[str, int]) -> tuple[int, float]:
    """Keys released and the RMSE of their counts (a released key not in the data would count its whole count)."""
    errors = [value - truth.get(key, 0) for key, value in released.items()]
    return len(released), math.sqrt(float(np.mean(np.square(errors)))) if errors else math.nan


def dpsql_draws(db: str, work: Path, draws: int, set_apart: float, key_delta: float,
                accounting: str) -> list[dict[str, float]]:
    out = []
    for draw in range(draws):
        with dpsql.connect(db, catalog=CATALOG, state=str(work / f"{accounting}-{key_delta}-{draw}.state"),
                           epsilon=EPSILON, delta=DELTA, accounting=accounting, seed=100 + draw,
                           query_epsilon=EPSILON, key_release_delta=set_apart) as conn:
            cur = conn.cursor()
            cur.execute(f"SET dpsql.key_delta = {key_delta!r}")
            cur.execute("SELECT k, COUNT(*) FROM events GROUP BY k")
            out.append({str(k): float(n) for k, n in cur.fetchall()})
            if draw == 0:
                print(f"dpsql {accounting} δ_τ={key_delta:g}: {' '.join(cur.result.notes)[:200]}", flush=True)
    return out


def summary(runs: list[dict[str, float]], truth: dict[str, int]) -> dict:
    scored = [score(r, truth) for r in runs]
    keys, rmse = np.array([s[0] for s in scored], dtype=float), np.array([s[1] for s in scored])
    se = (lambda a: float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else 0.0)
    return {"keys": float(keys.mean()), "keys_se": se(keys), "rmse": float(rmse.mean()), "rmse_se": se(rmse),
            "draws": len(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--peers", nargs="+", default=["opendp", "tumult"], choices=peer_envs.PEERS[:2])
    args = parser.parse_args()
    keys = zipf_keys(args.rows, args.keys, args.zipf)
    names, counts = np.unique(keys, return_counts=True)
    truth = dict(zip(names.tolist(), counts.tolist()))
    rho_tau = epsilon_delta_to_zcdp(EPSILON, DELTA - DELTA / 10)
    systems = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db, csv = str(work / "events.duckdb"), work / "events.csv"
        con = duckdb.connect(db)
        con.execute("CREATE TABLE events (user_id INTEGER, k VARCHAR)")
        con.register("given", {"user_id": np.arange(args.rows), "k": keys})
        con.execute("INSERT INTO events SELECT * FROM given")
        con.execute(f"COPY events TO '{csv}' (HEADER)")
        con.close()
        for label, set_apart, key_delta, accounting in (
                ("dpsql", DELTA / 2, DELTA / 10, "exact"), ("dpsql_delta_tau_0.99", 0.99 * DELTA, 0.99 * DELTA, "exact"),
                ("dpsql_zcdp", DELTA / 10, DELTA / 10, "zcdp")):
            systems[label] = summary(dpsql_draws(db, work, args.draws, set_apart, key_delta, accounting), truth)
            print(label, systems[label], flush=True)
        for peer in args.peers:
            for mode in (("pure", "zcdp") if peer == "opendp" else ("approxdp",)):
                request = {"csv": str(csv), "draws": args.draws, "privacy": mode, "epsilon": EPSILON, "delta": DELTA,
                           "rho": rho_tau, "delta_tau": DELTA / 10}
                reply = peer_envs.run(peer, SIDES / f"{peer}_keys.py", request)
                if reply is None:
                    print(f"{peer}: not installed (python -m benchmarks.peer_envs install {peer}); skipped")
                    break
                systems[f"{peer}_{mode}"] = summary(reply["released"], truth)
                print(f"{peer}_{mode}", systems[f"{peer}_{mode}"], flush=True)
    RESULTS.write_text(json.dumps({"epsilon": EPSILON, "delta": DELTA, "rows": args.rows, "keys": args.keys,
                                   "keys_in_data": len(truth), "zipf": args.zipf, "systems": systems}, indent=1) + "\n")


if __name__ == "__main__":
    main()
