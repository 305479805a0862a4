"""`dpsql serve` under load: concurrent PostgreSQL clients against a tight budget.

A real server (`dpsql serve PROFILE`, a subprocess) serves the demo `people` table; N
psycopg clients (threads; 4 per analyst) send a mix of statements for D seconds:

- new DP queries (random range filters and GROUP BYs: each needs a new measurement),
- re-asks of a small pool of DP queries (free once any analyst has paid for them),
- public SQL, and `SHOW dpsql.budget`.

After each DP answer the client reads `SHOW dpsql.budget`'s `last_charge`, so it knows what
its answer cost. The budget is tight (the total binds long before the analysts' own limits add
up), so most clients run into refusals. Then the ledger is checked:

- no overspend: the ledger's total charge ≤ its total, each analyst's ≤ their limit;
- every answer covered and nothing charged without one: per analyst, the ledger's charges are
  exactly (count and sum of ρ) the charges the clients saw with their answers;
- the hash chain verifies.

p50/p95 latency per kind of statement are reported, for each number of server worker
processes asked for (run one after the other, on the same data); results go to
`benchmarks/results/serve_load.json`.

    python -m benchmarks.serve_load [--clients 32] [--seconds 60] [--rows 1000000] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import psycopg

from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, write_people_database
from dpsql.budget.ledger import Ledger
from dpsql.interfaces.server.auth import scram_verifier

RESULTS = Path(__file__).parent / "results" / "serve_load.json"
REASKED = [
    "SELECT sex, COUNT(*) FROM people GROUP BY sex",
    "SELECT region, COUNT(*) FROM people GROUP BY region",
    "SELECT education, AVG(income) FROM people GROUP BY education",
    "SELECT COUNT(*) FROM people WHERE age BETWEEN 30 AND 39",
]
PUBLIC = ["SELECT 42", "SELECT SUM(i) FROM range(100000) t(i)"]


def new_query(rng: random.Random) -> str:
    low = rng.randrange(0, 90)
    high = rng.randrange(low, 100)
    column = rng.choice(["sex", "region", "race", "marital"])
    return rng.choice([
        f"SELECT COUNT(*) FROM people WHERE age BETWEEN {low} AND {high}",
        f"SELECT {column}, COUNT(*) FROM people WHERE age >= {low} GROUP BY {column}",
        f"SELECT {column}, AVG(hours_per_week) FROM people WHERE age <= {high} GROUP BY {column}",
    ])


def write_profile(root: Path, analysts: int, total_epsilon: float, analyst_epsilon: float, workers: int) -> None:
    lines = ["[data]", 'database = "people.duckdb"', 'catalog = "catalog.toml"', f'ledger = "ledger-{workers}"',
             "[budget]", f"epsilon = {total_epsilon}", "delta = 1e-9", "query_epsilon = 0.1", "[server]",
             'listen = "127.0.0.1:0"', f"max_connections = {4 * analysts + 8}", f"workers = {workers}"]
    for i in range(analysts):
        lines += [f"[analysts.a{i}]", f"epsilon = {analyst_epsilon}", f'password = "{scram_verifier(f"pw{i}")}"']
    (root / "profile.toml").write_text("\n".join(lines) + "\n")


def client(port: int, analyst: int, seed: int, deadline: float, log: list) -> None:
    """One client's loop: (kind, seconds, outcome, charged ρ) per statement into `log`."""
    rng = random.Random(seed)
    dsn = f"host=127.0.0.1 port={port} user=a{analyst} password=pw{analyst} dbname=people"
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            roll = rng.random()
            kind, sql = (("new", new_query(rng)) if roll < 0.4 else ("reask", rng.choice(REASKED)) if roll < 0.75
                         else ("public", rng.choice(PUBLIC)) if roll < 0.9 else ("budget", "SHOW dpsql.budget"))
            start = time.perf_counter()
            try:
                conn.execute(sql).fetchall()
            except psycopg.Error as e:
                outcome = "refused: budget" if e.sqlstate == "53400" else f"error {e.sqlstate}: {e}".splitlines()[0]
                log.append((kind, time.perf_counter() - start, outcome, 0.0))
                continue
            seconds = time.perf_counter() - start
            charged = 0.0
            if kind in ("new", "reask"):
                rows = {r[0]: r for r in conn.execute("SHOW dpsql.budget").fetchall()}
                charged = rows["last_charge"][3]
            log.append((kind, seconds, "answered", charged))


def run(clients: int, seconds: float, rows: int, workers: list[int]) -> list[dict]:
    analysts = max(1, clients // 4)
    total_epsilon, analyst_epsilon = 1.0, 0.5
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_people_database(root / "people.duckdb", rows)
        (root / "catalog.toml").write_text(PEOPLE_CATALOG_TOML)
        for count in workers:
            write_profile(root, analysts, total_epsilon, analyst_epsilon, count)
            server = subprocess.Popen([sys.executable, "-m", "dpsql.interfaces.cli", "serve", str(root / "profile.toml")],
                                      stdout=subprocess.PIPE, text=True)
            port = int(re.search(r":(\d+) ", server.stdout.readline()).group(1))
            logs: list[list] = [[] for _ in range(clients)]
            deadline = time.monotonic() + seconds
            threads = [threading.Thread(target=client, args=(port, i % analysts, i, deadline, logs[i]))
                       for i in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            server.terminate()
            server.wait(timeout=30)
            ledger = Ledger.existing(str(root / f"ledger-{count}"))
            results.append({"workers": count, **summarize(ledger, logs, analysts, clients, seconds, rows,
                                                          total_epsilon, analyst_epsilon)})
    return results


def summarize(ledger: Ledger, logs: list[list], analysts: int, clients: int, seconds: float, rows: int,
              total_epsilon: float, analyst_epsilon: float) -> dict:
    charges = ledger.charges()
    by_analyst_ledger: dict[str, list[float]] = defaultdict(list)
    for c in charges:
        by_analyst_ledger[c.who].append(c.cost)
    by_analyst_seen: dict[str, list[float]] = defaultdict(list)
    for i, log in enumerate(logs):
        by_analyst_seen[f"a{i % analysts}"] += [charged for _, _, outcome, charged in log if charged > 0]
    covered = all(len(by_analyst_ledger[a]) == len(by_analyst_seen[a])
                  and abs(sum(by_analyst_ledger[a]) - sum(by_analyst_seen[a])) <= 1e-12 + 1e-9 * sum(by_analyst_seen[a])
                  for a in set(by_analyst_ledger) | set(by_analyst_seen))
    limit = ledger.total
    analyst_limit = max((sum(v) for v in by_analyst_ledger.values()), default=0.0)
    from dpsql.budget.units import Budget

    unit = Budget(ledger.noise, ledger.delta)
    entries = [e for log in logs for e in log]
    kinds = {}
    for kind in ("new", "reask", "public", "budget"):
        answered = sorted(s * 1000 for k, s, o, _ in entries if k == kind and o == "answered")
        refused = [s for k, s, o, _ in entries if k == kind and o == "refused: budget"]
        kinds[kind] = {
            "answered": len(answered), "refused_budget": len(refused),
            "p50_ms": round(statistics.median(answered), 1) if answered else None,
            "p95_ms": round(answered[int(0.95 * (len(answered) - 1))], 1) if answered else None,
        }
    errors = defaultdict(int)
    for _, _, outcome, _ in entries:
        if outcome.startswith("error"):
            errors[outcome] += 1
    spent = ledger.spent()
    return {
        "clients": clients, "analysts": analysts, "seconds": seconds, "rows": rows,
        "budget": {"total_epsilon": total_epsilon, "analyst_epsilon": analyst_epsilon, "delta": ledger.delta,
                   "total_rho": limit, "spent_rho": spent, "spent_epsilon": unit.amount(spent).epsilon},
        "statements": len(entries), "charges": len(charges),
        "overspend": spent > limit * (1 + 1e-9) or analyst_limit > unit.share(analyst_epsilon) * (1 + 1e-9),
        "every_answer_covered_and_every_charge_answered": covered,
        "ledger_verifies": ledger.verify() == [],
        "by_kind": kinds, "errors": dict(errors),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="server worker processes to compare")
    args = parser.parse_args(argv)
    result = run(args.clients, args.seconds, args.rows, args.workers)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
