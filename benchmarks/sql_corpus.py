"""The SQL corpus (tests/corpus/dp_sql.sql): how much of what analysts and BI tools write dpsql answers.

Every statement runs through `dpsql.connect` against dpsql's demo table `people` (3,000 rows), a
`visits` table (one row per visit, privacy unit `user_id`, with a date column) and a public
`regions` table; each is either answered or refused with a dpsql error. The acceptance rate is
reported per category (`dp_engine`: the shapes of other DP SQL engines' docs and tests; `bi`:
dashboard SQL as Superset, Metabase, Looker and Tableau generate it).

The date column `visit_date` is declared as dates are declared once the catalog has them
(``{ type = "date", min = "2023-01-01", max = "2024-12-31", granularity = "day" }``); where the
catalog does not know that type yet, `visits` is declared without it, and queries on dates are
refused as reading an undeclared column.

    python -m benchmarks.sql_corpus [--record]   # --record appends the rates to benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import duckdb

import dpsql
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

CORPUS = Path(__file__).parents[1] / "tests" / "corpus" / "dp_sql.sql"
RESULTS = Path(__file__).parent / "RESULTS.md"
PEOPLE_ROWS = 3_000
VISITS_ROWS = 4_000
DATE_COLUMN = 'visit_date = { type = "date", min = "2023-01-01", max = "2024-12-31", granularity = "day" }\n'
VISITS_CATALOG = """
[tables.visits]
privacy_unit = "user_id"
max_rows_per_unit = 4
[tables.visits.columns]
region  = { type = "categorical", values = ["Northeast", "Midwest", "South", "West"] }
channel = { type = "categorical", values = ["web", "mobile", "store"] }
amount  = { type = "numeric", min = 0, max = 500, bins = 25 }
pages   = { type = "integer", min = 1, max = 50 }
"""
# What a refusal must never show: a database engine's own error text, or a Python crash.
ENGINE_TEXT = re.compile(r"Binder Error|Catalog Error|Parser Error|Conversion Error|Traceback|Error:")


@dataclass(frozen=True)
class Statement:
    category: str
    source: str
    sql: str


def load(path: Path = CORPUS) -> list[Statement]:
    """The corpus: statements end with ";" at a line's end; "-- == <category>: <source> ==" starts a section."""
    out, lines = [], []
    category = source = ""
    for line in path.read_text().splitlines():
        header = re.match(r"^-- == (\w+): (.*) ==$", line)
        if header:
            category, source = header.groups()
            continue
        if line.startswith("--") or not line.strip():
            continue
        lines.append(line)
        if line.rstrip().endswith(";"):
            out.append(Statement(category, source, " ".join(lines).rstrip().rstrip(";")))
            lines = []
    return out


def make_database(path: str) -> None:
    """people (the demo table), visits (with dates and a privacy unit) and the public regions."""
    con = duckdb.connect(path)
    create_people_table(con, rows=PEOPLE_ROWS)
    con.execute(f"""CREATE TABLE visits AS SELECT i % 1200 AS user_id,
        DATE '2023-01-01' + CAST(hash(i * 7 + 1) % 731 AS INTEGER) AS visit_date,
        ['Northeast', 'Midwest', 'South', 'West'][1 + CAST(hash(i * 7 + 2) % 4 AS INTEGER)] AS region,
        ['web', 'mobile', 'store'][1 + CAST(hash(i * 7 + 3) % 3 AS INTEGER)] AS channel,
        CAST(hash(i * 7 + 4) % 50000 AS DOUBLE) / 100 AS amount,
        1 + CAST(hash(i * 7 + 5) % 50 AS INTEGER) AS pages
        FROM range({VISITS_ROWS}) t(i)""")
    con.execute("CREATE TABLE regions AS SELECT * FROM (VALUES ('Northeast', 57, 'East'), ('Midwest', 68, 'Central'), "
                "('South', 125, 'South'), ('West', 78, 'West')) t(region, population, division)")
    con.close()


def connect(path: str, state: str) -> tuple[dpsql.Connection, bool]:
    """A connection to the corpus database, and whether `visit_date` is declared (as a date)."""
    with_dates = PEOPLE_CATALOG_TOML + VISITS_CATALOG + DATE_COLUMN
    options = dict(epsilon=1e6, delta=1e-6, query_epsilon=0.5, state=state, seed=1)
    try:
        return dpsql.connect(path, catalog=with_dates, **options), True
    except dpsql.Error:  # no date columns in the catalog yet
        return dpsql.connect(path, catalog=PEOPLE_CATALOG_TOML + VISITS_CATALOG, **options), False


@dataclass(frozen=True)
class Outcome:
    statement: Statement
    answered: bool
    error: str = ""  # the refusal's message
    crash: str = ""  # not a dpsql error, or engine text in the message: a defect


def run(conn: dpsql.Connection, statement: Statement) -> Outcome:
    """Run one statement: answered, refused with a dpsql error, or a crash."""
    try:
        conn.cursor().execute(statement.sql).fetchall()
    except dpsql.Error as e:
        message = str(e)
        return Outcome(statement, False, message, message if ENGINE_TEXT.search(message) else "")
    except Exception as e:  # noqa: BLE001 - what the corpus is for: none may reach here
        return Outcome(statement, False, "", f"{type(e).__name__}: {e}")
    return Outcome(statement, True)


def run_corpus(directory: Path) -> tuple[list[Outcome], bool]:
    path = str(directory / "corpus.duckdb")
    make_database(path)
    conn, dates = connect(path, str(directory / "state"))
    try:
        return [run(conn, s) for s in load()], dates
    finally:
        conn.close()


def rates(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
    """(answered, total) per category."""
    total, answered = Counter(), Counter()
    for o in outcomes:
        total[o.statement.category] += 1
        answered[o.statement.category] += o.answered
    return {c: (answered[c], total[c]) for c in sorted(total)}


def report(outcomes: list[Outcome], dates: bool, seconds: float) -> str:
    lines = ["| category | answered | statements | rate |", "|---|---:|---:|---:|"]
    for category, (yes, n) in rates(outcomes).items():
        lines.append(f"| {category} | {yes} | {n} | {yes / n:.0%} |")
    crashes = [o for o in outcomes if o.crash]
    lines.append("")
    lines.append(f"Date columns declared: {'yes' if dates else 'no (the catalog has no date type yet)'}; "
                 f"crashes (raw exceptions or engine text): {len(crashes)}; {seconds:.0f} s.")
    reasons = Counter(re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "…", o.error)[:90] for o in outcomes if not o.answered)
    lines.append("")
    lines.append("Most frequent refusals:")
    lines += [f"- {count} × {reason}" for reason, count in reasons.most_common(8)]
    return "\n".join(lines)


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="append the rates to benchmarks/RESULTS.md")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        outcomes, dates = run_corpus(Path(directory))
    text = report(outcomes, dates, time.perf_counter() - start)
    print(text)
    for o in outcomes:
        if o.crash:
            print(f"CRASH {o.statement.sql}\n    {o.crash[:300]}")
    if args.record:
        with RESULTS.open("a") as f:
            f.write(f"\n## The SQL corpus: acceptance rate (issue 29, item 11) (`python -m benchmarks.sql_corpus`)\n\n"
                    f"{len(outcomes)} statements of tests/corpus/dp_sql.sql (sources in its section headers).\n\n"
                    f"{text}\n")


if __name__ == "__main__":
    main()
