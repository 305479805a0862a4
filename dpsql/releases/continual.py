"""Continual queries: COUNT(*) per group over an append-only table, released window by window.

``CREATE CONTINUAL QUERY weekly AS SELECT region, COUNT(*) FROM signups GROUP BY region
EMIT EVERY INTERVAL '7 days' ON signup_time FROM '2025-01-06' FOR 52 RELEASES WITH (epsilon = 1)``
charges the whole horizon once. The planner's time strategy (`mechanisms.continual.choose`:
SENSDIFF, one measurement per window, or a tree over windows, costed exactly for running
totals and per-window counts answered causally) ⊗ the identity on the groups is calibrated
then, for a unit's k rows over the whole stream. Each ``EMIT weekly`` releases the next
window once it has closed: the rows of the strategy due then (for SENSDIFF the newest
window only; for a tree, the nodes ending there, counted again from the table), their
noise stored in the ledger as a record of the query, and shows the window's count and the
running total per group with exact standard errors (causal: what later releases cannot
change). ``SHOW CONTINUAL weekly`` shows every window so far from all releases (least squares).

The table declares ``time`` and ``append_only = true``: each unit then keeps its first k rows
*by time* (`dpsql.tables.streams.StreamTable.source_sql`), so rows that arrive later never change what
a released window counted. A row's window is given by its time; a *late* row (its time in a
window already released) is counted by later releases that cover its window (tree nodes),
never by the releases already made (SENSDIFF never counts it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np

from dpsql.tables.catalog import Catalog
from dpsql.tables.table import Table
from dpsql.tables.columns import quote_identifier
from dpsql.errors import ProgrammingError
from dpsql.executor import Executor, Pending, Release
from dpsql.budget.ledger_entries import CONTINUAL, EMIT, Entry, Record
from dpsql.answers.result import Result
from dpsql.sql.compiler import CellCounts, compile_cell_counts, parse_statement
from dpsql.sql.statements import CreateContinual
from mechanisms.continual import CAUSAL, OFFLINE, ContinualRelease, TimeWorkload, choose
from mechanisms.matrices import Identity

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_INTERVAL = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day|week)s?\s*$", re.I)
MAX_RELEASES = 100_000
_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class Schedule:
    """Windows [start + w·seconds, start + (w+1)·seconds) of `time_column`, w = 0 … releases − 1."""

    time_column: str
    start: datetime
    seconds: int
    releases: int

    def window_sql(self) -> str:
        """SQL of a row's window index (UTC)."""
        start = (self.start - _EPOCH).total_seconds()
        return (f"CAST(FLOOR((EPOCH(CAST({quote_identifier(self.time_column)} AS TIMESTAMP)) - {start!r}) / "
                f"{self.seconds}) AS BIGINT)")

    def bounds(self, window: int) -> tuple[datetime, datetime]:
        step = timedelta(seconds=self.seconds)
        return self.start + window * step, self.start + (window + 1) * step


def parse_schedule(st: CreateContinual) -> Schedule:
    m = _INTERVAL.match(st.interval)
    if not m or int(m.group(1)) < 1:
        raise ProgrammingError(f"INTERVAL {st.interval!r}: give a whole number of seconds, minutes, hours, days or "
                               "weeks (months vary in length)")
    try:
        start = datetime.fromisoformat(st.start)
    except ValueError:
        raise ProgrammingError(f"FROM {st.start!r}: give the first window's start as 'YYYY-MM-DD[ HH:MM:SS]'") from None
    if start.tzinfo is not None:
        start = start.astimezone(timezone.utc).replace(tzinfo=None)
    if not 1 <= st.releases <= MAX_RELEASES:
        raise ProgrammingError(f"FOR {st.releases} RELEASES: from 1 to {MAX_RELEASES}")
    return Schedule(st.time_column, start, int(m.group(1)) * _UNITS[m.group(2).lower()], st.releases)


@dataclass
class Continual:
    """A continual query as the ledger holds it: its definition, the counts it measures, and its releases."""

    name: str
    table: Table
    counts: CellCounts
    schedule: Schedule
    release: ContinualRelease
    label: str


class ContinualQueries:
    """CREATE CONTINUAL QUERY, EMIT and SHOW CONTINUAL for one session, through its executor and ledger."""

    def __init__(self, executor: Executor, dialect: str):
        self.executor, self.dialect = executor, dialect

    @property
    def ledger(self):
        return self.executor.ledger

    def create(self, st: CreateContinual, catalog: Catalog, share: float, statement: str) -> Result:
        """Define a continual query and charge its whole horizon (`share`) once."""
        counts = compile_cell_counts(parse_statement(st.sql, self.dialect), catalog)
        table = counts.table
        table.check_stream(st.time_column)
        schedule = parse_schedule(st)
        if any(n == st.name for _, n, _ in self.ledger.records(CONTINUAL, prefix=st.name)):
            raise ProgrammingError(f"a continual query named {st.name!r} exists already")
        noise = self.executor.budget.noise
        choice = choose(schedule.releases, noise, TimeWorkload(running=1.0, window=1.0, estimator=CAUSAL))
        release = ContinualRelease(choice.strategy, Identity(counts.cells), noise, share,
                                   table.stream_contribution(schedule.releases), self.executor.rng)
        self.executor.check_affordable(share)
        if table.owner_promises_bound:  # data that breaks the declared bound already would buy no emit: refuse now
            self.executor.backend.window_counts(table, counts.group, counts.where_sql, schedule.window_sql(), 0, 1,
                                                self.executor.bounding_key(table))
        payload = {"select": st.sql, "dialect": self.dialect, "signature": table.signature(),
                   "interval": st.interval, "seconds": schedule.seconds, "time": schedule.time_column,
                   "start": schedule.start.isoformat(sep=" "), "releases": schedule.releases,
                   "label": choice.strategy.label, "state": release.state()}
        self._charge(Entry(share, statement, table.name, table.signature(), [],
                           f"continual query {st.name}: {schedule.releases} releases, {choice.strategy.label}",
                           Record(CONTINUAL, st.name, payload)))
        window, running = release.largest_stderr(CAUSAL)
        rows = [("continual query", st.name), ("releases", str(schedule.releases)), ("every", st.interval),
                ("time strategy", choice.strategy.label), ("largest stderr of a window's count", f"{window:.4g}"),
                ("largest stderr of a running total", f"{running:.4g}")]
        result = Result(["continual", "value"], rows, kind="status", charged=share)
        result.charge_text = self.executor.charge_text(share)
        return result

    def emit(self, name: str, catalog: Catalog) -> Result:
        """Release the next window of a continual query (once it has closed); free: its horizon was charged."""
        query = self._load(name, catalog)
        release, schedule = query.release, query.schedule
        t = release.now + 1
        if t > schedule.releases:
            raise ProgrammingError(f"continual query {name!r} has made all its {schedule.releases} releases")
        start, end = schedule.bounds(t - 1)
        if end > datetime.now(timezone.utc).replace(tzinfo=None):
            raise ProgrammingError(f"window {t} of {name!r} closes at {end} (UTC): EMIT it after that")
        first = release.scan_from()
        key = self.executor.bounding_key(query.table)

        def draw() -> Release:
            counts = self.executor.backend.window_counts(query.table, query.counts.group, query.counts.where_sql,
                                                         schedule.window_sql(), first, t, key)
            release.draw(counts)
            return Release(query.table, 0.0, f"EMIT {name}", [], None, f"emit {t} of {name}",
                           Record(EMIT, f"{name}#{t}", {"t": t, "values": release.released(t).tolist()}))

        self.executor.charged([Pending(query.table, 0.0, f"EMIT {name}", f"emit {t} of {name}", draw)])
        report = self.executor.answered(release.shown)
        result = self._result(query, [(t - 1, report.window[0], report.running[0], report.window_variance[0],
                                       report.running_variance[0])])
        result.charge_text = "no charge (the continual query's horizon was charged when it was created); " \
            + self.executor.charge_text(0.0).split("; ", 1)[1]
        return result

    def show(self, name: str, catalog: Catalog) -> Result:
        """Every window released so far, each from all releases (least squares): free."""
        query = self._load(name, catalog)
        if query.release.now == 0:
            raise ProgrammingError(f"continual query {name!r} has released nothing yet: EMIT {name} first")
        report = query.release.answers(OFFLINE)
        result = self._result(query, [(w, report.window[w], report.running[w], report.window_variance[w],
                                       report.running_variance[w]) for w in range(query.release.now)])
        result.charge_text = self.executor.charge_text(0.0)
        return result

    # --- helpers -----------------------------------------------------------------------
    def _load(self, name: str, catalog: Catalog) -> Continual:
        found = [(t, p) for t, n, p in self.ledger.records(CONTINUAL, prefix=name) if n == name]
        if not found:
            raise ProgrammingError(f"no continual query named {name!r}: CREATE CONTINUAL QUERY {name} AS ... first")
        table_name, spec = found[0]
        counts = compile_cell_counts(parse_statement(spec["select"], spec["dialect"]), catalog)
        if counts.table.signature() != spec["signature"]:
            raise ProgrammingError(f"table {table_name!r} is declared otherwise than when {name!r} was created; its "
                                   "releases would not measure the same thing")
        emits = [p for _, _, p in self.ledger.records(EMIT, table_name, prefix=f"{name}#")]
        state = {**spec["state"], "releases": [e["values"] for e in sorted(emits, key=lambda e: e["t"])]}
        schedule = Schedule(spec["time"], datetime.fromisoformat(spec["start"]), spec["seconds"], spec["releases"])
        release = ContinualRelease.from_state(state, self.executor.rng)
        return Continual(name, counts.table, counts, schedule, release, spec["label"])

    def _charge(self, entry: Entry) -> None:
        if self.executor.hooks.before_charge is not None:
            self.executor.hooks.before_charge()
        self.ledger.charge_all([entry])

    def _result(self, query: Continual, windows: list[tuple]) -> Result:
        """One row per (window, group): its bounds, the group's values, the window's count and the running total."""
        labels = query.counts.labels()
        columns = ["window_number", "window_start", "window_end", *query.counts.group, query.counts.count_name,
                   "running_total"]
        rows, stderr = [], []
        for w, window, running, window_var, running_var in windows:
            start, end = query.schedule.bounds(w)
            for cell, label in enumerate(labels):
                rows.append((w + 1, start, end, *label, float(window[cell]), float(running[cell])))
                stderr.append((None, None, None, *(None,) * len(label), float(np.sqrt(window_var[cell])),
                               float(np.sqrt(running_var[cell]))))
        dp = [False] * (3 + len(query.counts.group)) + [True, True]
        types = ["BIGINT", "TIMESTAMP", "TIMESTAMP", *(query.table.columns[g].sql_type for g in query.counts.group),
                 "DOUBLE", "DOUBLE"]
        return Result(columns, rows, stderr, kind="dp", types=types, dp=dp,
                      notes=[f"continual query {query.name}: time strategy {query.label}"])


def _cli(args) -> int:
    """`dpsql continual emit|show NAME`: on the owner's deployment (`--profile`/`--analyst`) or a database."""
    import dpsql
    from dpsql.interfaces.formatting import render

    if args.profile is not None:
        if args.database is not None or args.catalog is not None:
            raise ProgrammingError("the profile fixes the database and catalog: give --profile and --analyst only")
        conn = dpsql.connect(profile=args.profile, analyst=args.analyst)
    elif args.database is None or args.catalog is None:
        raise ProgrammingError("give --profile and --analyst, or a DATABASE with --catalog")
    else:
        conn = dpsql.connect(args.database, catalog=args.catalog, state=args.state)
    with conn:
        cursor = conn.cursor()
        cursor.execute(f"{'EMIT' if args.action == 'emit' else 'SHOW CONTINUAL'} {args.name}")
        print(render(cursor.result, "table"))
        print(cursor.result.charge_text)
    return 0


def add_parser(subparsers):
    """Register `dpsql continual emit|show NAME [--profile P --analyst A | --database DB --catalog C]`."""
    p = subparsers.add_parser("continual", help="release the next window of a continual query (emit), or show its "
                                                "windows so far (show)")
    p.add_argument("action", choices=["emit", "show"])
    p.add_argument("name", help="the continual query (CREATE CONTINUAL QUERY <name> ...)")
    p.add_argument("--profile", help="the data owner's deployment profile (analysts: with --analyst)")
    p.add_argument("--analyst", help="your analyst name in the profile")
    p.add_argument("--database", help="DuckDB database file")
    p.add_argument("--catalog", help="catalog TOML file (needed with --database)")
    p.add_argument("--state", help="budget ledger (default: <DATABASE>.dpsql-state)")
    p.set_defaults(run=_cli)
    return p


__all__ = ["ContinualQueries", "Schedule", "add_parser", "parse_schedule"]
