"""Synthetic data: release a DP synthetic copy of a protected table (AIM, MST or RAP).

`synthesize(conn, "people", epsilon=1, out_path="people.parquet")` runs the
mechanism on exact marginals computed inside the database (one GROUPING SETS
scan of every candidate marginal; only counts leave DuckDB), charges the ledger for
the whole budget with the noisy measurements (`Executor.charged`: noise is born
charged, so a failure from the first draw on is charged too), then samples rows from
the fitted model and writes them, with the catalog's value labels (integers, numeric
bins as their lower edges, categories, TRUE for a presence column's values, NULL), to a hidden file beside the output, and
moves it into place. A failed check or scan spends nothing; a failed write after the
charge says so and keeps the measurements.
The noisy measurements are stored in the ledger, so later queries on the table
can be answered from them for free. A table with a privacy unit of at most k
rows is measured bounded, and the mechanism runs at ρ/k² per row: by group
privacy for zCDP (ρ-zCDP for one row is k²ρ-zCDP for k rows; exact for the
Gaussian and exponential mechanisms AIM and MST consist of) that is ρ per unit.

RAP (`mechanism="rap"`) is fitted for queries that come later: to the attribute sets
of a `workload` (Avent 2023, §4.5's partial-knowledge setting) — "past", the DP queries
charged on the table so far (the ledger's statements, compiled again), or a SQL file of
queries (a declared query class) — with r-of-k thresholds over each set (`r`; default
the marginals) and every 1-way marginal, so its relaxed data answers any query. The
relaxed data is kept in the ledger (its SHA-256 in the hash chain), so it answers later
queries free, in any session.

`dpsql synth TABLE --epsilon 1 --out FILE.parquet [--mechanism rap --workload past|FILE.sql]
[--database DB --catalog FILE]` is the command line (without a database: the generated demo
`people` table).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np

from dpsql.tables.table import Table
from dpsql.tables.columns import PRESENCE, quote_identifier, quote_string
from dpsql.errors import NotSupportedError, OperationalError, ProgrammingError
from dpsql.executor import Pending, Release
from mechanisms.accounting import Amount
from mechanisms.aim import Progress, aim, workload_candidates
from mechanisms.measurement import GAUSSIAN, Measurement
from mechanisms.mst import mst
from mechanisms.rap import MarginalCounts, RelaxedData
from mechanisms.rap.future import fit_workload

MECHANISMS = ("aim", "mst", "rap")
PAST = "past"  # RAP's workload: the table's charged DP queries
MAX_ROWS = 100_000_000  # the most synthetic rows one release writes


@dataclass(frozen=True)
class SynthesisReport:
    """What a synthesis released and what it cost."""

    path: Path
    rows: int
    mechanism: str
    charged: Amount
    measurements: int
    model_cliques: tuple[tuple[str, ...], ...]
    seconds: float


def default_workload(table: Table, degree: int, max_cells: int) -> list[tuple[tuple[str, ...], float]]:
    """All `degree`-way marginals of the table's columns with at most `max_cells` cells, weight 1."""
    attrs = table.domain.attributes
    k = min(degree, len(attrs))
    cliques = [c for c in combinations(attrs, k) if table.domain.size(c) <= max_cells]
    if not cliques:
        raise ProgrammingError(
            f"no {k}-way marginal of {table.name!r} has at most {max_cells} cells; raise max_cells or lower degree"
        )
    return [(c, 1.0) for c in cliques]


def synthesize(
    connection,
    table: str,
    epsilon: float | None = None,
    out_path: str | Path = "synthetic.parquet",
    *,
    rho: float | None = None,
    rows: int | None = None,
    mechanism: str = "aim",
    degree: int = 3,
    max_cells: int = 100_000,
    progress: Callable[[Progress], None] | None = None,
    overwrite: bool = False,
    workload: str | Path | None = None,
    r: int | None = None,
) -> SynthesisReport:
    """Release a synthetic copy of protected `table`, spending ε (at the connection's δ) or ρ.

    `rows` defaults to the model's estimated table size; the AIM workload is all
    `degree`-way marginals with at most `max_cells` cells; RAP's is `workload` ("past" or a
    SQL file; see the module doc) with r-of-k thresholds (`r`). `out_path` may not be one
    of the owner's files, nor replace a file unless `overwrite`. Every check happens
    before the charge: an error there spends nothing.
    """
    started = time.perf_counter()
    session = connection.session
    protected = session.catalog.get(table)
    if protected is None:
        raise ProgrammingError(f"{table!r} is not a protected table of the catalog")
    if session.budget_unit.noise != GAUSSIAN:
        raise NotSupportedError("synthetic data needs a zCDP budget: connect with delta > 0 (not pure ε-DP)")
    if mechanism not in MECHANISMS:
        raise ProgrammingError(f"unknown mechanism {mechanism!r}: use one of {', '.join(MECHANISMS)}")
    if (epsilon is None) == (rho is None):
        raise ProgrammingError("give exactly one of epsilon and rho")
    if rows is not None and not 0 <= rows <= MAX_ROWS:
        raise ProgrammingError(f"rows must be from 0 to {MAX_ROWS:,}")
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
        raise ProgrammingError(f"degree must be a positive whole number, got {degree!r}")
    if (workload is not None or r is not None) and mechanism != "rap":
        raise ProgrammingError("workload and r are RAP's: use mechanism='rap'")
    if r is not None and (isinstance(r, bool) or not isinstance(r, int) or r < 1):
        raise ProgrammingError(f"r must be a positive whole number, got {r!r}")
    budget = session.share(epsilon, rho)
    out = connection.output_files.check(out_path, overwrite)
    domain = protected.domain
    cliques = future_cliques(connection, protected, workload, max_cells) if mechanism == "rap" else []
    workload = default_workload(protected, degree, max_cells) if mechanism == "aim" else []

    statement = f"SYNTH {protected.name} ({mechanism}, rho={budget:.6g})"
    executor = session.executor
    executor.check_affordable(budget)
    executor.answering(protected)  # earlier generative models load before this release joins the ledger
    per_row = budget / protected.contribution**2
    released: list = []  # the mechanism's result, out of sight until it is charged

    def draw() -> Release:
        if mechanism == "rap":
            def fetch(needed):
                return executor.backend.marginals(protected, needed, executor.bounding_key(protected))

            fitted = fit_workload(domain, cliques, per_row, MarginalCounts(domain, fetch), session.rng, r=r,
                                  rows=executor.rows(protected))
            result = RAPRelease(fitted.release.one_way_measurements(), fitted.model)
        else:
            needed = list(workload_candidates(domain, workload)) if mechanism == "aim" else _pairs(domain.attributes)
            counts = executor.backend.marginals(protected, needed, executor.bounding_key(protected))
            if mechanism == "aim":
                result = aim(domain, counts.__getitem__, per_row, workload, session.rng, progress=progress)
            else:
                result = mst(domain, counts.__getitem__, per_row, session.rng, progress=progress)
        released.append(result)
        # charged with its measurements; the model then answers later queries free
        return Release(protected, budget, statement, result.measurements, result.model, mechanism)

    executor.charged([Pending(protected, budget, statement, mechanism, draw)])
    result = released[0]
    partial = out.with_name(f".{out.stem}.{os.getpid()}.partial{out.suffix}")
    try:  # after the charge: sampling and writing are post-processing of the charged release
        if mechanism == "rap":
            sample = result.model.sample_rows(rows, session.rng.randbelow(2**63))
        else:
            sample = result.model.sample(rows, np.random.default_rng(session.rng.randbelow(2**63)))
        write_parquet(protected, sample, partial)
    except (OSError, OperationalError) as e:
        partial.unlink(missing_ok=True)
        cause = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
        raise OperationalError(
            f"the synthesis was charged and its measurements are kept (later queries on {protected.name!r} answer "
            f"from them), but the file {str(out)!r} could not be written: {cause}; free space or choose another "
            "path, then synthesize again") from None
    try:
        os.replace(partial, out)
    except OSError as e:  # charged: the paid file stays where it was written
        raise OperationalError(f"the synthetic data was written to {str(partial)!r} but could not be renamed to "
                               f"{str(out)!r} ({e.strerror}); it is paid for, move it by hand") from None
    cliques_of_model = getattr(result.model, "cliques", (tuple(domain.attributes),))
    return SynthesisReport(
        out, len(sample), mechanism, session.amount(budget), len(result.measurements),
        tuple(cliques_of_model), time.perf_counter() - started,
    )


@dataclass(frozen=True)
class RAPRelease:
    """What a RAP synthesis releases: the 1-way marginals (stored measurements) and the relaxed data."""

    measurements: list[Measurement]
    model: RelaxedData


def future_cliques(connection, table: Table, workload: str | Path | None, max_cells: int) -> list[tuple[str, ...]]:
    """The attribute sets RAP is fitted to: those of the table's blocks in `workload` — PAST (the DP
    queries charged on the table, compiled again; those that no longer compile are left out) or a SQL
    file of queries — each with at most `max_cells` cells (larger ones are refused, naming them)."""
    session = connection.session
    if workload is None:
        raise ProgrammingError("RAP needs workload='past' (the table's charged queries) or a SQL file of queries")
    if str(workload) == PAST:
        script = "; ".join(c.statement for c in session.ledger.charges() if c.table == table.name)
        queries = session.queries_of(script, skip_errors=True)
    else:
        with connection.output_files.open_read(workload) as f:  # the analyst's files only, never the owner's
            try:
                text = f.read().decode("utf-8")
            except UnicodeDecodeError:
                raise ProgrammingError(f"the workload file {str(workload)!r} is not UTF-8 text") from None
        queries = session.queries_of(text)
    cliques = list(dict.fromkeys(table.domain.canonical(b.attributes(table.domain))
                                 for q in queries if q.table.name == table.name for b in q.blocks))
    cliques = [c for c in cliques if c]
    if not cliques:
        raise ProgrammingError(f"the workload has no query on {table.name!r} that groups or filters by a column: "
                               "RAP has nothing to fit (its 1-way marginals alone are a product model)")
    large = [c for c in cliques if table.domain.size(c) > max_cells]
    if large:
        raise ProgrammingError(f"the workload's attribute sets {large} have more than {max_cells:,} cells: "
                               "raise max_cells or ask narrower queries")
    return cliques


def _pairs(attrs: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The marginals MST reads: every 1-way and 2-way marginal."""
    return [(a,) for a in attrs] + list(combinations(attrs, 2))


def write_parquet(table: Table, bins: np.ndarray, path: Path) -> None:
    """Write rows of bin indices as Parquet, each bin shown as its catalog label (NULL bin: NULL)."""
    con = duckdb.connect()
    try:
        data = {f"b{i}": np.ascontiguousarray(bins[:, i]) for i in range(bins.shape[1])}
        con.register("synthetic_bins", data)
        selects, joins = [], []
        for i, column in enumerate(table.columns.values()):
            # A presence column declares no values: its synthetic rows hold TRUE where it is not NULL.
            labels = [True] if column.kind == PRESENCE else [v for v in column.labels() if v is not None]
            con.register(f"labels_{i}", {"bin": np.arange(len(labels)), "v": np.asarray(labels)})
            selects.append(f"l{i}.v AS {quote_identifier(column.name)}")
            joins.append(f"LEFT JOIN labels_{i} l{i} ON l{i}.bin = s.b{i}")
        query = f"SELECT {', '.join(selects)} FROM synthetic_bins s {' '.join(joins)}"
        con.execute(f"COPY ({query}) TO {quote_string(str(path))} (FORMAT PARQUET)")
    except duckdb.Error as e:
        raise OperationalError(f"cannot write {str(path)!r}: {str(e).splitlines()[0]}") from None
    finally:
        con.close()


# --- command line -----------------------------------------------------------------------------


def _bar(stream) -> Callable[[Progress], None]:
    def show(p: Progress) -> None:
        done = int(30 * p.fraction)
        stream.write(f"\r[{'#' * done}{'.' * (30 - done)}] {100 * p.fraction:5.1f}%  {p.elapsed:6.1f}s  {p.message[:60]:60s}")
        stream.flush()

    return show


def _run(args: argparse.Namespace) -> int:
    import dpsql

    if args.profile is not None:
        if args.database is not None or args.catalog is not None:
            raise ProgrammingError("the profile fixes --database and --catalog: give --profile and --analyst only")
        conn = dpsql.connect(profile=args.profile, analyst=args.analyst)
    elif args.database is None:
        from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

        con = duckdb.connect()
        create_people_table(con, rows=args.demo_rows)
        conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=args.epsilon, delta=args.delta)
    elif args.catalog is None:
        raise ProgrammingError("--catalog is required with --database")
    else:
        conn = dpsql.connect(args.database, catalog=args.catalog)
    with conn:
        report = synthesize(
            conn, args.table, args.epsilon, args.out, rows=args.rows, mechanism=args.mechanism,
            degree=args.degree, progress=None if args.quiet else _bar(sys.stderr), overwrite=args.overwrite,
            workload=args.workload, r=args.r,
        )
        if not args.quiet:
            sys.stderr.write("\n")
        print(
            f"wrote {report.rows:,} synthetic rows to {report.path} ({report.mechanism}, "
            f"{len(report.model_cliques)} model cliques) in {report.seconds:.1f} s; charged {report.charged}; "
            f"remaining {conn.budget.remaining}"
        )
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `dpsql synth TABLE --epsilon E --out FILE.parquet [--database DB --catalog FILE]`."""
    p = subparsers.add_parser("synth", help="release a DP synthetic copy of a protected table as Parquet")
    p.add_argument("table", help="protected table to synthesize")
    p.add_argument("--epsilon", type=float, required=True, help="budget ε to spend (at the ledger's δ)")
    p.add_argument("--out", required=True, help="output Parquet file (a new file unless --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    p.add_argument("--profile", help="the data owner's deployment profile (analysts: with --analyst)")
    p.add_argument("--analyst", help="your analyst name in the profile")
    p.add_argument("--database", help="DuckDB database file (default: the generated demo table `people`)")
    p.add_argument("--catalog", help="catalog TOML file (needed with --database)")
    p.add_argument("--rows", type=int, default=None, help="rows to write (default: the estimated table size)")
    p.add_argument("--mechanism", choices=MECHANISMS, default="aim", help="aim (default), mst or rap")
    p.add_argument("--workload", help="rap: fit to 'past' (the table's charged queries) or a SQL file of queries")
    p.add_argument("--r", type=int, help="rap: r-of-k thresholds over each attribute set (default: marginals)")
    p.add_argument("--degree", type=int, default=3, help="AIM workload: all marginals of this degree (default 3)")
    p.add_argument("--delta", type=float, default=1e-9, help="δ of the demo session's budget")
    p.add_argument("--demo-rows", type=int, default=100_000, help="rows of the generated demo table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_run)
    return p
