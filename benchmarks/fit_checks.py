"""How to check that a row fits the catalog: SQL formulations of the scan's filter, timed side by side.

The scan keeps only rows whose every column fits its declaration (`Table.fits_sql`). On the demo
`people` table stored as plain strings (VARCHAR, nullable: `people`) that is a check of the five
string columns' declared values per row. This runs `SELECT sex, COUNT(*) ... GROUP BY sex` at 10M
rows with the filter written in several ways, each returning the same counts (asserted),
interleaved, and reports the median wall and CPU (process) time of each. The exact query (no check)
is the floor. The last line is the scan on the demo table as `create_people_table` stores it
(`people_typed`: ENUMs of the declared values, NOT NULL where the catalog has no NULLs), where the
engine's types prove every check and the scan leaves them out (`dpsql.tables.columns.StoredType`). The
tables are written to a database file and checkpointed, then (by default) the file is opened
again, as an owner's database is: its strings are then read as dictionary vectors and the checks
run once per distinct value. With `--same-connection` they are scanned on the connection that
wrote them, where the strings come back flat (checked row by row). Issue 17 asked which
formulation is fastest; the answer recorded in benchmarks/RESULTS.md ("Interactive latency
against plain DuckDB") comes from this script.

    python -m benchmarks.fit_checks [--rows 10000000] [--repeats 9] [--same-connection]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from dpsql.backends.base import marginal_sql
from dpsql.tables.catalog import Catalog
from dpsql.tables.columns import StoredType, quote_identifier, quote_string
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table


def variants(catalog: Catalog) -> dict[str, str]:
    table = catalog.get("people")
    strings = {c.name: c.values for c in table.columns.values() if c.values}
    rest = " AND ".join(p for c in table.columns.values() if not c.values and (p := c.fits_sql())) or "TRUE"

    def listed(name):
        return "[" + ", ".join(quote_string(v) for v in strings[name]) + "]"

    def case(name):
        whens = " ".join(f"WHEN {quote_string(v)} THEN {i}" for i, v in enumerate(strings[name]))
        return f"CASE {quote_identifier(name)} {whens} END"

    def position(name):
        return f"NULLIF(array_position({listed(name)}, {quote_identifier(name)}), 0)"

    def each(check):
        return f"{rest} AND " + " AND ".join(check(c) for c in strings)

    def grouped(where):
        return f"SELECT sex, COUNT(*) FROM people WHERE {where} GROUP BY sex"

    joins = " ".join(
        f"JOIN (VALUES {', '.join(f'({quote_string(v)}, {i})' for i, v in enumerate(vs))}) AS j_{c}(v, b) "
        f"ON people.{quote_identifier(c)} = j_{c}.v"
        for c, vs in strings.items()
    )
    flags = ", ".join(f"f_{c}" for c in strings)
    typed = {name: StoredType(tuple(c.values) if c.values else None, not c.nullable)
             for name, c in table.columns.items()}
    return {
        "exact (no check)": "SELECT sex, COUNT(*) FROM people GROUP BY sex",
        "the scan's SQL (marginal_sql)": marginal_sql(table, [("sex",)])[0],
        "CASE ... IS NOT NULL per column": grouped(each(lambda c: f"{case(c)} IS NOT NULL")),
        "array_position per column": grouped(each(lambda c: f"{position(c)} IS NOT NULL")),
        "IN (...) per column": grouped(each(lambda c: f"{quote_identifier(c)} IN ({', '.join(map(quote_string, strings[c]))})")),
        "list_contains per column": grouped(each(lambda c: f"list_contains({listed(c)}, {quote_identifier(c)})")),
        "one IS NOT NULL over the sum of CASEs": grouped(f"{rest} AND ({' + '.join(case(c) for c in strings)}) IS NOT NULL"),
        "one IS NOT NULL over the sum of positions": grouped(f"{rest} AND ({' + '.join(position(c) for c in strings)}) IS NOT NULL"),
        "COUNT(*) FILTER (WHERE checks)": f"SELECT sex, COUNT(*) FILTER (WHERE {table.fits_sql()}) FROM people GROUP BY sex",
        "joins to VALUES tables": f"SELECT j_sex.v, COUNT(*) FROM people {joins} WHERE {rest} GROUP BY 1",
        "GROUP BY the checks' flags, then filter": (
            f"SELECT sex, SUM(n) FROM (SELECT sex, {flags}, COUNT(*) AS n FROM (SELECT sex, "
            + ", ".join(f"{position(c)} IS NOT NULL AS f_{c}" for c in strings)
            + f" FROM people WHERE {rest}) GROUP BY sex, {flags}) WHERE {' AND '.join(f'f_{c}' for c in strings)} "
            "GROUP BY sex"
        ),
        "the scan's SQL on people_typed (no check needed)": marginal_sql(
            table, [("sex",)], relation=lambda name: "people_typed", stored=typed)[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--same-connection", action="store_true", help="scan on the connection that wrote the table")
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="dpsql-fit-")) / "people.duckdb"
    con = duckdb.connect(str(path))
    create_people_table(con, rows=args.rows, table="people_typed")
    create_people_table(con, rows=args.rows, typed=False)
    con.execute("CHECKPOINT")
    if not args.same_connection:
        con.close()
        con = duckdb.connect(str(path), read_only=True)
    queries = variants(Catalog.from_toml(PEOPLE_CATALOG_TOML))
    expected = sorted(con.execute(queries["CASE ... IS NOT NULL per column"]).fetchall())
    for name, sql in queries.items():
        got = sorted(con.execute(sql).fetchall())
        if not name.startswith("the scan's SQL"):  # it returns bins, not labels
            assert [n for _, n in got] == [n for _, n in expected], name
    wall = {name: [] for name in queries}
    cpu = {name: [] for name in queries}
    for _ in range(args.repeats):
        for name, sql in queries.items():
            w, c = time.perf_counter(), time.process_time()
            con.execute(sql).fetchall()
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
    state = "the connection that wrote it" if args.same_connection else "the file opened again"
    print(f"{args.rows:,} rows on {state}, DuckDB {duckdb.__version__}, median of {args.repeats} (interleaved)")
    print("| filter | wall ms | CPU ms |\n|---|---:|---:|")
    for name in queries:
        print(f"| {name} | {statistics.median(wall[name]) * 1e3:.1f} | {statistics.median(cpu[name]) * 1e3:.1f} |")
    con.close()
    path.unlink()


if __name__ == "__main__":
    main()
