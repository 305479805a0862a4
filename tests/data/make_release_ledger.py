"""Writes `ledger-0.2.dpsql-state` and `ledger-0.2.answers.json`: a ledger of the release before
issue 32's house step (commit 80db78d, whose key releases stored their keys as a bare list), with
the answers it gave once every query had been asked. `tests/test_ledger_compatibility.py` re-asks them with today's code: free, and
the same. Run from a checkout of that release: `python tests/data/make_release_ledger.py OUT_DIR`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb

CATALOG = """
[tables.people]
[tables.people.columns]
age = { type = "integer", min = 0, max = 99 }
sex = { type = "categorical", values = ["F", "M"] }
city = { type = "key" }
"""
# The queries asked, in order: each kind of release whose measurements a later release must read.
QUERIES = [
    "SELECT COUNT(*) FROM people",
    "SELECT sex, AVG(age) FROM people GROUP BY sex",
    "SELECT city, COUNT(*) FROM people GROUP BY city",
    "BEGIN WORKLOAD; SELECT COUNT(*) FROM people WHERE age BETWEEN 10 AND 29; "
    "SELECT COUNT(*) FROM people WHERE age BETWEEN 30 AND 59; SELECT COUNT(*) FROM people WHERE age < 65; "
    "SELECT COUNT(*) FROM people WHERE age >= 5 AND age < 90; END WORKLOAD",
    "BEGIN WORKLOAD; SELECT sex, age, COUNT(*) FROM people GROUP BY sex, age; END WORKLOAD",
    "SELECT MEDIAN(age) FROM people",
    "SELECT city, AVG(age) FROM people GROUP BY city",
]


def write_people(path: str) -> None:
    """The protected table: 6,000 rows, generated (the same on every machine)."""
    con = duckdb.connect(path)
    con.execute("CREATE TABLE people AS SELECT (i * 37 % 100)::INTEGER AS age, "
                "CASE WHEN i % 3 = 0 THEN 'M' ELSE 'F' END AS sex, "
                "'city-' || CAST(i % 5 AS VARCHAR) AS city FROM range(6000) t(i)")
    con.close()


def ask(cur, sql: str) -> list[list[list]]:
    """Every result set of one statement, as lists."""
    cur.execute(sql)
    sets = [[list(row) for row in cur.fetchall()]]
    while cur.nextset():
        sets.append([list(row) for row in cur.fetchall()])
    return sets


def main(out: Path) -> None:
    import dpsql

    database = out / "people.duckdb"
    write_people(str(database))
    state = out / "ledger-0.2.dpsql-state"
    conn = dpsql.connect(str(database), catalog=CATALOG, state=str(state), epsilon=20.0, delta=1e-6,
                         query_epsilon=1.0, seed=2)
    cur = conn.cursor()
    for sql in QUERIES:
        ask(cur, sql)
    answers = [ask(cur, sql) for sql in QUERIES]  # asked again, free: from every measurement of the ledger
    conn.close()
    database.unlink()
    (out / "ledger-0.2.answers.json").write_text(json.dumps(answers, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
