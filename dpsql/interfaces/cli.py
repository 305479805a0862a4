"""The `dpsql` command line: `dpsql demo`, `shell`, `explain`, `catalog`, `ledger`, `synth`, `continual`,
`ldp-report`, `serve` and `passwd`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpsql.errors import Error
from dpsql.interfaces.formatting import MODES


def _demo(args: argparse.Namespace) -> int:
    if args.write:
        return _write_demo(Path(args.write), Path(args.catalog or Path(args.write).with_name("catalog.toml")),
                           args.rows)
    from dpsql.deployment.demo import run_demo

    run_demo(rows=args.rows, epsilon=args.epsilon, workload_epsilon=args.workload_epsilon, seed=args.seed)
    return 0


def _write_demo(database: Path, catalog: Path, rows: int) -> int:
    """`dpsql demo --write`: the demo's table in a new database file, and its catalog."""
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, write_people_database
    from dpsql.errors import ProgrammingError

    existing = [str(p) for p in (database, catalog) if p.exists()]
    if existing:
        raise ProgrammingError(f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: "
                               "name new files")
    write_people_database(database, rows)
    catalog.write_text(PEOPLE_CATALOG_TOML)
    print(f"wrote {database} (table people, {rows:,} rows) and its catalog {catalog}")
    return 0


def _shell(args: argparse.Namespace) -> int:
    from dpsql.interfaces.shell import main as shell_main

    return shell_main(args.database, catalog=args.catalog, epsilon=args.epsilon, delta=args.delta,
                      query_epsilon=args.query_epsilon, state=args.state, mode=args.mode, command=args.sql,
                      spark=args.spark, profile=args.profile, analyst=args.analyst)


def _explain(args: argparse.Namespace) -> int:
    import dpsql
    from dpsql.handlers import explain

    with dpsql.connect(args.database, catalog=args.catalog, state=":memory:", epsilon=args.epsilon) as conn:
        if args.pareto:
            from dpsql.interfaces.formatting import render

            front = explain.pareto(conn.session, [args.sql], conn.session.sizing(), chart=args.chart)
            print(render(front, "table"))
            print("\n".join(front.notes))
            return 0
        cur = conn.cursor()
        cur.execute(args.sql if args.sql.strip().upper().startswith("EXPLAIN") else "EXPLAIN " + args.sql)
        for (line,) in cur.fetchall():
            print(line)
        if args.chart:
            print(f"chart written to {explain.chart(conn.session, args.sql, args.chart)}")
    return 0


def _catalog(args: argparse.Namespace) -> int:
    """`dpsql catalog`: whether each protected table binds in the database as declared, and per column what
    every scan checks row by row (what the stored types do not already guarantee); reads the schema only."""
    import duckdb

    from dpsql.backends import DuckDBBackend
    from dpsql.tables.catalog import Catalog
    from dpsql.tables.columns import quote_identifier
    from dpsql.errors import OperationalError
    from dpsql.interfaces.formatting import render
    from dpsql.answers.result import Result

    catalog = Catalog.load(Path(args.catalog))
    con = duckdb.connect(args.database, read_only=True)
    if args.validate:
        return _validate(con, catalog, args.database, args.validate)
    backend, rows, broken = DuckDBBackend(con), [], 0
    for table in catalog.tables.values():
        if not table.scanned_by_rows:
            rows.append((table.name, "", "", "not scanned row by row (a graph's edges or local-DP reports)"))
            continue
        try:
            backend.check(table, "-")
        except OperationalError as e:
            broken += 1
            rows.append((table.name, "", "", f"DOES NOT BIND: {e}"))
            continue
        stored = backend.stored_types(table)
        for name, column in table.columns.items():
            kind = stored.get(name)
            check = column.fits_sql(kind)
            what = ("nothing (the stored type guarantees it)" if check is None and column.fits_sql() is not None
                    else "nothing" if check is None else "NULLs" if check == f"{quote_identifier(name)} IS NOT NULL"
                    else "declared values")
            rows.append((table.name, name, _stored_type_text(kind), what))
    print(render(Result(["table", "column", "stored as", "checked per row"], rows, kind="public"), "table"))
    print("A column declared categorical and stored as an ENUM of its declared values, and a column not "
          "declared nullable and stored NOT NULL, need no per-row check.")
    return 1 if broken else 0


def _validate(con, catalog, database: str, names: list[str]) -> int:
    """`dpsql catalog --validate TABLE`: check every row of each table against the catalog once; record the
    tables whose rows all fit (`dpsql.tables.validation`), so scans skip the per-row checks while they are unchanged."""
    from dpsql.backends import DuckDBBackend
    from dpsql.errors import CatalogError
    from dpsql.tables.validation import Validations

    validations, backend, failed = Validations.load(database), DuckDBBackend(con), 0
    for name in names:
        table = catalog.tables.get(name) or next((t for t in catalog.tables.values() if t.name.lower() == name.lower()),
                                                 None)
        if table is None or not table.scanned_by_rows:
            raise CatalogError(f"{name!r} is not a table of the catalog scanned row by row; name one of "
                               f"{', '.join(t.name for t in catalog.tables.values())}")
        backend.check(table, "-")
        rows, fit = con.execute(f"SELECT COUNT(*), COUNT(*) FILTER (WHERE {table.fits_sql()}) "
                                f"FROM {backend.relation(table.name)}").fetchone()
        if rows != fit:
            failed += 1
            print(f"{table.name}: {rows - fit:,} of {rows:,} rows do not fit the catalog (an undeclared value, or "
                  "NULL where none is declared): not validated; scans keep checking every row")
            continue
        validations.record(table, rows)
        print(f"{table.name}: all {rows:,} rows fit the catalog: validated (scans skip the per-row checks until the "
              f"database or the table's declaration changes)")
    return 1 if failed else 0


def _stored_type_text(kind) -> str:
    if kind is None:
        return "?"
    text = f"ENUM of {len(kind.enum_values)} values" if kind.enum_values is not None else \
        "an integer type" if kind.integral else "another type"
    return text + (", NOT NULL" if kind.not_null else "")


def _ledger_path(path: str | None) -> str:
    """A ledger state file, or the one beside a database file (`<DATABASE>.dpsql-state`); default: the demo's."""
    from dpsql.interfaces.dbapi import _state_path
    from dpsql.interfaces.shell import demo_paths

    if path is None:
        return _state_path(str(demo_paths()[0]), None)
    beside = _state_path(path, None)
    return beside if Path(beside).is_file() else path


def _ledger(args: argparse.Namespace) -> int:
    from dpsql.budget.ledger import Ledger

    path = _ledger_path(args.path)
    ledger = Ledger.existing(path)
    problems = ledger.verify()
    if problems:  # a tampered ledger's charges are not listed: they cannot be trusted
        print(f"ledger {path}: TAMPERED ({len(problems)} problem{'s' if len(problems) > 1 else ''} found)")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    charges = len(ledger.charges())
    print(f"ledger {path}: intact ({charges} charge{'' if charges == 1 else 's'}; hash chain and budget verified; "
          f"head {ledger.head()})")
    return _show_ledger(ledger) if args.action == "show" else 0


def _show_ledger(ledger) -> int:
    from dpsql.interfaces.formatting import render
    from dpsql.answers.result import Result

    amount = ledger.unit.amount
    rows = [(c.seq, c.at.strftime("%Y-%m-%d %H:%M:%S"), c.who, c.table,
             float(f"{c.epsilon(amount):.6g}"),
             float(f"{amount(c.cost).rho:.6g}"), " ".join(c.statement.split())) for c in ledger.charges()]
    print(f"budget {amount(ledger.capacity)}; spent {amount(ledger.spent())}")
    if rows:
        print(render(Result(["#", "charged at (UTC)", "who", "table", "epsilon", "rho", "statement"], rows,
                            kind="public"), "table"))
    else:
        print("no charges yet")
    return 0


def _ldp_report(args: argparse.Namespace) -> int:
    from mechanisms.ldp.client import main as client_main

    return client_main(args.options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dpsql", description="Differentially private SQL that plans.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the dashboard demo on a generated census-like table "
                                       "(--write: write that table and its catalog to files)")
    demo.add_argument("--rows", type=int, default=1_000_000, help="rows to generate (default 1,000,000)")
    demo.add_argument("--epsilon", type=float, default=1.0, help="total budget ε of the session (δ=1e-9)")
    demo.add_argument("--workload-epsilon", type=float, default=0.5, help="ε spent by the dashboard")
    demo.add_argument("--seed", type=int, default=None, help="noise seed (reproducible runs; testing only)")
    demo.add_argument("--write", metavar="DATABASE", help="instead of running the demo, write its table into a new "
                      "DuckDB file DATABASE and its catalog into catalog.toml beside it")
    demo.add_argument("--catalog", metavar="FILE", help="with --write: where the catalog goes")
    demo.set_defaults(run=_demo)
    shell = sub.add_parser("shell", help="interactive SQL shell (no DATABASE: the demo database)",
                           description="Interactive SQL shell with DP answers, error bars and the budget in view. "
                                       "Reads statements from standard input when it is not a terminal.")
    shell.add_argument("database", nargs="?", help="DuckDB database file (default: the generated demo database)")
    shell.add_argument("--profile", help="the data owner's deployment profile (TOML): it names the database, "
                       "catalog, ledger and budgets; analysts connect with it and --analyst only")
    shell.add_argument("--analyst", help="your analyst name in the profile")
    shell.add_argument("--catalog", help="catalog TOML file declaring the protected tables")
    shell.add_argument("--epsilon", type=float, help="total budget ε of a new ledger (default 1)")
    shell.add_argument("--delta", type=float, help="δ of the budget (default 1e-9; 0 for pure ε-DP)")
    shell.add_argument("--query-epsilon", type=float, help="ε each new query spends (default 0.1)")
    shell.add_argument("--state", help="budget ledger database (default: <DATABASE>.dpsql-state)")
    shell.add_argument("--spark", metavar="MASTER", help="measure protected tables in Spark "
                       "(a master URL such as spark://host:7077 or yarn; 'default': the configured one)")
    shell.add_argument("--mode", choices=MODES, default="table", help="output format (default table)")
    shell.add_argument("-c", dest="sql", metavar="SQL", help="run SQL (or a meta command) and exit")
    shell.set_defaults(run=_shell)
    explain = sub.add_parser("explain", help="show the plan for a query (reads no data, spends nothing)")
    explain.add_argument("database", help="DuckDB database file")
    explain.add_argument("--catalog", required=True, help="catalog TOML file")
    explain.add_argument("sql", help="query or BEGIN WORKLOAD ... END WORKLOAD script")
    explain.add_argument("--epsilon", type=float, default=1.0, help="budget to plan against (default 1)")
    explain.add_argument("--chart", metavar="PNG", help="also draw expected error vs budget to this file")
    explain.add_argument("--pareto", action="store_true", help="the (ε, expected RMSE) front of the planner's choice "
                         "and each strategy family instead (with --chart: drawn, PNG or SVG)")
    explain.set_defaults(run=_explain)
    catalog = sub.add_parser("catalog", help="check a catalog against a database's schema (reads no rows): "
                             "whether each table binds, and what scans check row by row")
    catalog.add_argument("database", help="DuckDB database file")
    catalog.add_argument("--catalog", required=True, help="catalog TOML file")
    catalog.add_argument("--validate", nargs="+", metavar="TABLE",
                         help="check every row of these tables once (reads them) and record those whose rows all fit "
                              "in <DATABASE>.dpsql-validated: scans then skip the per-row checks until the database "
                              "or the declaration changes")
    catalog.set_defaults(run=_catalog)
    ledger = sub.add_parser("ledger", help="check or list a budget ledger (reads it, changes nothing)")
    ledger.add_argument("action", choices=["verify", "show"],
                        help="verify: recompute the hash chain and budget (exit status 1 if tampered); "
                             "show: verify, then list every charge")
    ledger.add_argument("path", nargs="?", metavar="STATE",
                        help="ledger state file, or a database whose ledger is <DATABASE>.dpsql-state "
                             "(default: the demo database's)")
    ledger.set_defaults(run=_ledger)
    report = sub.add_parser("ldp-report", add_help=False, help="randomize one user's value under local DP and print "
                            "the report row (the collecting client: python -m mechanisms.ldp.client; --help for its options)")
    report.add_argument("options", nargs=argparse.REMAINDER)
    report.set_defaults(run=_ldp_report)
    from dpsql.releases.synth import add_parser as add_synth

    add_synth(sub)
    from dpsql.releases.continual import add_parser as add_continual

    add_continual(sub)
    from dpsql.interfaces.server import add_parsers as add_server

    add_server(sub)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ldp-report"]:  # its options are the client's own (argparse cannot pass `--x` through)
        return _ldp_report(argparse.Namespace(options=argv[1:]))
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
