"""The budget ledger: a durable, append-only, tamper-evident record of every charge.

State lives in a DuckDB database of its own (beside the data file by default).
A charge and the noisy measurements it paid for are written in one
transaction, before any answer derived from them is returned, so a crash can
lose a released-nothing charge but never release anything uncharged. Stored
measurements are noisy (already private), so later sessions answer from them
for free.

Many processes may share one state file: every operation holds an exclusive
lock on ``<state>.lock`` and opens the database only while holding it, so the
check-and-append of a charge is atomic across processes; a statement's operations
share one connection (`dpsql.budget.ledger_file.StateFile.holding`). Each ledger row
carries a SHA-256 hash chained to the previous row (the first to the budget
declaration) and covering the measurements it paid for; `verify` recomputes
the chain, so any edit, deletion or reordering is detected.

A charge may also carry a `Record`, a release that is not a measurement, hashed into the
chain with it: a key set (DP partition selection of a key column: the keys and δ_τ, the
chance its threshold allows that one unit's rare keys show), a continual query's definition,
one emit of it (its noisy values), or a released model too large to read on every change (RAP's
relaxed data, megabytes): its record holds the model's SHA-256 and the model itself lies in a
table of its own, read only when a table's models are (`models`). Records are unique by (kind, table, name), except
key sets: a key column's domain is every key its releases found, in release order (`key_sets`; how it grows:
`dpsql.tables.key_domains`), and a charge computed over a key domain that another connection has grown meanwhile is
refused (`Entry.key_counts`), so each stored measurement was taken over the keys released before it.

A zCDP ledger's δ is split when it is created, once: `events`, the most that key releases' δ_τ may add up
to, and δ − `events` at which the charges' ρ converts to the declared ε (`capacity`, the ρ whose ε at
δ − `events` is the declared ε). The split is fixed in advance because only then is it a privacy filter
(`mechanisms.privacy_filter`). A ledger written before the split was stored keeps the δ its key releases had
spent as its `events`: its capacity is what it was, and it releases no more keys.
"""

from __future__ import annotations

import getpass
import hashlib
import itertools
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from dpsql.errors import BudgetExceededError, OperationalError, ProgrammingError
from dpsql.budget.ledger_entries import KEYS, MODEL, Entry, Record, carried, chain_digest, released_keys
from dpsql.budget.ledger_accounting import (EXACT, PIECES_TABLE, accountant, chain_head, checked_events,
                                            covering_pieces, pieces_text, pure_epsilon, pure_pieces, read_history,
                                            stored_pieces)
from dpsql.budget.ledger_file import StateFile, events_column, has_table, insert_rows
from dpsql.budget.ledger_history import KnownHistory
from dpsql.budget.ledger_verification import chain_problems, chained_rows, measurement_row_digest
from dpsql.budget.units import Budget
from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.matrices import from_spec, to_spec
from mechanisms.measurement import Measurement
from mechanisms.privacy_filter import TOLERANCE, History, Piece, events_within, zcdp_total

# Charges may exceed the total by this relative slack (floating-point sums); the exact certificates report
# their ρ less it (`mechanisms.privacy_filter.TOLERANCE`), so it never lets them overspend.
_SLACK = TOLERANCE

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS dpsql_budget (
        noise VARCHAR NOT NULL, total DOUBLE NOT NULL, delta DOUBLE NOT NULL, created TIMESTAMP NOT NULL,
        hash VARCHAR NOT NULL, events DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS dpsql_ledger (
        seq BIGINT PRIMARY KEY, charged_at TIMESTAMP NOT NULL, who VARCHAR NOT NULL, table_name VARCHAR,
        statement VARCHAR NOT NULL, cost DOUBLE NOT NULL, detail VARCHAR, prev_hash VARCHAR NOT NULL,
        hash VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS dpsql_measurements (
        seq BIGINT NOT NULL, position INTEGER NOT NULL, table_name VARCHAR NOT NULL, signature VARCHAR NOT NULL,
        clique VARCHAR NOT NULL, query_key VARCHAR, strategy VARCHAR, noise VARCHAR NOT NULL,
        cost DOUBLE NOT NULL, variance DOUBLE NOT NULL, vals DOUBLE[] NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS dpsql_records (
        seq BIGINT NOT NULL, kind VARCHAR NOT NULL, table_name VARCHAR NOT NULL, name VARCHAR NOT NULL,
        delta DOUBLE NOT NULL, payload VARCHAR NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS dpsql_models (
        seq BIGINT NOT NULL, table_name VARCHAR NOT NULL, signature VARCHAR NOT NULL, spec VARCHAR NOT NULL)""",
    PIECES_TABLE,
]


@dataclass(frozen=True)
class Charge:
    """One charge as the ledger holds it: its cost in the ledger's unit and, for discrete Laplace noise, the
    ε of its pure pieces (`pure_epsilon`; 0 for none)."""

    seq: int
    at: datetime
    who: str
    table: str | None
    statement: str
    cost: float
    detail: str | None
    pure_epsilon: float = 0.0

    def epsilon(self, amount) -> float:
        """The ε every surface shows for this charge: a Laplace charge's own ε, else its cost's ε at the
        ledger's δ (`amount` is the ledger's `Budget.amount`)."""
        return self.pure_epsilon or amount(self.cost).epsilon


class Ledger(StateFile):
    """Total budget, charges and stored measurements of one state database.

    `noise` fixes the unit: "gaussian" budgets are ρ (zCDP), "laplace" budgets
    are ε (pure DP). The first connection sets the total; later ones must agree.
    Charges are made in the name of `who`; with a `limit` (set by a deployment
    profile), `who`'s own charges may add up to at most that much. `events` is the part of a zCDP ledger's δ
    set apart for key releases, fixed by the connection that creates it (the module docstring); later ones
    that give one must agree (`default_events`: what a new one sets apart unless `events` is given).
    `accounting` is how a zCDP ledger composes its history (`dpsql.budget.ledger_accounting`: EXACT, the
    default, or ZCDP); per-analyst limits count every charge's ρ.
    """

    accounting: str = EXACT

    def __init__(self, path: str, noise: str, total: float | None, delta: float, who: str | None = None,
                 events: float | None = None, default_events: float = 0.0):
        self._open_state(path)
        self.who = who or _user()
        self.limit: float | None = None
        self._status_cache: tuple | None = None  # ((files' signature, limit), status): see `status`
        self._records_cache: tuple | None = None  # (files' signature, every record): see `records`
        self._models_cache: dict[str, tuple[str, dict]] = {}  # SHA-256 -> (signature, model): see `models`
        self._tables: set[str] = set()  # state tables known to exist (tables are never dropped): see `_has`
        self._appends = itertools.count(1)  # appends begun: an in-memory state's cache version (`_cache_version`)
        self._generation, self._known_history = 0, KnownHistory()  # see `_history`
        with self._open() as con:
            for stmt in _SCHEMA:
                con.execute(stmt)
            con.execute("ALTER TABLE dpsql_budget ADD COLUMN IF NOT EXISTS events DOUBLE")  # older ledgers
            self._tables.update(("dpsql_records", "dpsql_models", "dpsql_pieces"))
            row = con.execute("SELECT noise, total, delta, events FROM dpsql_budget").fetchone()
            if row is None:
                if total is None:
                    raise ProgrammingError("a new ledger needs a total budget: pass epsilon (and delta) or rho")
                reserved = checked_events(default_events if events is None else events, noise, delta)
                created = _now()
                con.execute(
                    "INSERT INTO dpsql_budget VALUES (?, ?, ?, ?, ?, ?)",
                    [noise, total, delta, created, chain_digest(noise, total, delta, created, reserved), reserved],
                )
                row = (noise, total, delta, reserved)
            stored_events = row[3] if row[3] is not None else self._delta_spent(con)
        stored_noise, stored_total, stored_delta = row[:3]
        # Opened without a budget (total None), a ledger keeps whatever it holds.
        if total is not None and (
            stored_noise != noise
            or not np.isclose(stored_total, total)
            or (stored_noise == "gaussian" and not np.isclose(stored_delta, delta))
        ):
            unit = "ρ" if stored_noise == "gaussian" else "ε"
            raise ProgrammingError(
                f"the ledger at {path!r} already holds a {stored_noise} budget of {unit}={stored_total:g} "
                f"(δ={stored_delta:g}); connect with the same budget, or without one to use it"
            )
        if events is not None and not np.isclose(events, stored_events, rtol=1e-9, atol=0.0):
            raise ProgrammingError(
                f"the ledger at {path!r} set apart δ={stored_events:g} for key releases " + (
                    "when it was created" if row[3] is not None else "(the δ its releases spent before the split "
                    "was stored)") + f"; the split is fixed (connect without key_release_delta, or with "
                f"{stored_events:g})")
        self.noise, self.total, self.delta = stored_noise, float(stored_total), float(stored_delta)
        self.events = float(stored_events)

    @classmethod
    def existing(cls, path: str) -> "Ledger":
        """The ledger stored at `path`, opened to read: nothing is created or changed."""
        if path == ":memory:" or not Path(path).is_file():
            raise OperationalError(f"no ledger state file at {path!r}")
        ledger = cls.__new__(cls)
        ledger._open_state(path)
        ledger.who, ledger.limit = _user(), None
        ledger._status_cache = ledger._records_cache = None
        ledger._models_cache, ledger._tables = {}, set()
        ledger._appends, ledger._generation, ledger._known_history = itertools.count(1), 0, KnownHistory()
        with ledger._open() as con:
            try:
                rows = con.execute(f"SELECT noise, total, delta, {events_column(con)} FROM dpsql_budget").fetchall()
            except duckdb.Error:
                raise OperationalError(f"{path!r} is not a dpsql ledger (it has no budget declaration)") from None
            if len(rows) != 1:
                raise OperationalError(f"{path!r} holds {len(rows)} budget declarations, not one: it was altered")
            events = rows[0][3] if rows[0][3] is not None else ledger._delta_spent(con)
        ledger.noise, ledger.total, ledger.delta = rows[0][0], float(rows[0][1]), float(rows[0][2])
        ledger.events = float(events)
        return ledger

    # --- budget ---------------------------------------------------------------------
    def _spent(self, con, who: str | None = None) -> float:
        """Everything charged, or what `who`'s charges add up to."""
        if who is None:
            return float(con.execute("SELECT COALESCE(SUM(cost), 0) FROM dpsql_ledger").fetchone()[0])
        return float(con.execute("SELECT COALESCE(SUM(cost), 0) FROM dpsql_ledger WHERE who = ?", [who]).fetchone()[0])

    def spent_by(self, who: str) -> float:
        """What `who`'s charges add up to."""
        with self._open() as con:
            return self._spent(con, who)

    def releases(self) -> list[tuple[int, str, str, str, float, Any]]:
        """Every record (key sets, continual queries and their emits, models) with its charge:
        (seq, kind, table, name, δ, payload), in charge order."""
        with self._open() as con:
            if not self._has(con, "dpsql_records"):
                return []
            rows = con.execute("SELECT seq, kind, table_name, name, delta, payload FROM dpsql_records "
                               "ORDER BY seq").fetchall()
        return [(seq, kind, table, name, float(delta), json.loads(payload)) for seq, kind, table, name, delta, payload
                in rows]

    def spent(self) -> float:
        """Everything charged to the ledger, by anyone (composed exactly: the ρ of the total it took)."""
        with self._open() as con:
            return self._budget(con)[1] if self.exact and self.limit is None else self._spent(con)

    def status(self) -> tuple[float, float, float]:
        """(total, spent, remaining) as `who` sees them: the ledger's, or within `who`'s limit.

        For display only (a charge re-checks under the lock): read again only when the state
        files changed since the last read, so a free re-ask does not open the ledger."""
        return self._state()[0]

    def delta_spent(self) -> float:
        """The δ key releases spent, in all (read as `status` is)."""
        return self._state()[1]

    def _state(self) -> tuple[tuple[float, float, float], float]:
        signature = self._cache_version()
        cached = self._status_cache
        if signature is not None and cached is not None and cached[0] == (signature, self.limit, self.accounting):
            return cached[1]
        with self._open() as con:
            state = self._status(con), self._delta_spent(con)
        self._status_cache = ((signature, self.limit, self.accounting), state) if signature is not None else None
        return state

    def _status(self, con) -> tuple[float, float, float]:
        total, spent, remaining = self._budget(con)
        return total, spent, max(remaining, 0.0)

    @property
    def exact(self) -> bool:
        """Whether the history is composed exactly (`dpsql.budget.ledger_accounting`): a zCDP ledger in EXACT mode."""
        return self.accounting == EXACT and self.noise == "gaussian" and self.delta > 0

    def _budget(self, con, pieces=(), delta: float = 0.0) -> tuple[float, float, float]:
        """(total, spent, remaining) in ρ as if `pieces` (a charge's mechanisms, `covering_pieces`) and δ events
        of `delta` were charged too; remaining may be negative (over). Exactly composed, remaining is what the
        history leaves (`Accountant.remaining`) and spent the rest of the total; the per-analyst limit counts
        ρ as charged."""
        more = sum(p.rho for p in pieces)
        capacity = self.capacity
        if self.exact:
            remaining = self._accountant().remaining(self._history(con).plus(pieces, delta))
            spent = capacity - remaining
        else:
            spent = self._spent(con)
            remaining = capacity - spent - more
        if self.limit is None:
            return capacity, spent, remaining
        mine = self._spent(con, self.who) + more
        return self.limit, mine, min(self.limit - mine, remaining)

    def _accountant(self):
        return accountant(self.total, self.delta, self.events)

    @property
    def capacity(self) -> float:
        """The ledger's total in its unit once δ `events` are set apart: ρ(ε(total, δ), δ − events), the zCDP
        filter's ρ (`mechanisms.privacy_filter.zcdp_total`); a pure-DP ledger's ε."""
        return zcdp_total(self.total, self.delta, self.events) if self.noise == "gaussian" else self.total

    @property
    def unit(self) -> Budget:
        """The ledger's unit, converting ε and ρ at δ − `events` (`capacity`'s δ)."""
        return Budget(self.noise, self.delta - self.events if self.noise == "gaussian" else self.delta)

    def _delta_spent(self, con) -> float:
        if not self._has(con, "dpsql_records"):
            return 0.0
        return float(con.execute("SELECT COALESCE(SUM(delta), 0) FROM dpsql_records").fetchone()[0])

    def key_sets(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """Every released key set: {(table, column): keys}, the keys of all the column's releases in release
        order. Releases that found no key leave an unreleased column unreleased (a later release may find keys)."""
        out: dict[tuple[str, str], tuple[str, ...]] = {}
        for table, name, payload in self.records(KEYS):
            out[(table, name)] = out.get((table, name), ()) + tuple(released_keys(payload))
        return {k: keys for k, keys in out.items() if keys}

    def records(self, kind: str, table: str | None = None, prefix: str = "") -> list[tuple[str, str, Any]]:
        """(table, name, payload) of the records of one kind (of one table, names starting with `prefix`),
        in charge order; read again only when the state files changed (as `status`)."""
        return [(t, n, p) for k, t, n, p in self._records() if k == kind and n.startswith(prefix)
                and (table is None or t.lower() == table.lower())]

    def _records(self) -> list[tuple[str, str, str, Any]]:
        signature = self._cache_version()
        if signature is not None and self._records_cache is not None and self._records_cache[0] == signature:
            return self._records_cache[1]
        with self._open() as con:
            records = self._read_records(con)
        self._records_cache = (signature, records) if signature is not None else None
        return records

    def _read_records(self, con) -> list[tuple[str, str, str, Any]]:
        rows = con.execute("SELECT kind, table_name, name, payload FROM dpsql_records ORDER BY seq").fetchall() \
            if self._has(con, "dpsql_records") else []
        return [(k, t, n, json.loads(p)) for k, t, n, p in rows]

    def remaining(self) -> float:
        return self.status()[2]

    def _refuse_if_over(self, con, pieces: list[Piece], delta: float = 0.0) -> None:
        """Refuse a charge of `pieces` (and δ events of `delta`) that the budget does not accept: `_budget` with
        them must leave nothing negative (an exact ledger's filters, `mechanisms.privacy_filter`)."""
        if delta > 0:
            self._refuse_events_over(con, delta)
        total, _, remaining = self._budget(con, pieces, delta)
        if remaining >= -_SLACK * total:
            return
        whose = "" if self.limit is None else f" of {self.who}'s budget"
        pure = pure_pieces(pieces)
        gaussian = sum(p.rho for p in pieces) - sum(p.rho for p in pure)
        if pure:
            needs = f"ε={sum(p.value for p in pure):.6g} of pure DP" + \
                (f" and {self._in_epsilon(gaussian)}" if gaussian else "")
            raise BudgetExceededError(f"this statement needs {needs}, more than remains{whose} of "
                                      f"{self._in_epsilon(total)}; nothing was charged")
        before = self._budget(con)[2]
        raise BudgetExceededError(
            f"this statement needs {self._in_epsilon(gaussian)} but only {self._in_epsilon(max(before, 0.0))}"
            f"{whose} of {self._in_epsilon(total)} remains; nothing was charged"
        )

    def _refuse_events_over(self, con, delta: float) -> None:
        """Refuse δ events of `delta` past the δ set apart for them (`events`)."""
        spent = self._delta_spent(con)
        if events_within(spent + delta, self.events):
            return
        if self.events <= 0:
            raise BudgetExceededError(
                "this ledger set apart no δ for key releases when it was created (a profile's [budget] "
                "key_release_delta, or connect(key_release_delta=...), fixes that for a new ledger); declare the "
                "column's values instead; nothing was charged")
        raise BudgetExceededError(
            f"this key release needs δ={delta:g}, but key releases have spent δ={spent:g} of the δ={self.events:g} "
            "this ledger set apart for them; nothing was charged")

    def _in_epsilon(self, share: float) -> str:
        """An amount of this ledger's unit as analysts are given budgets: ε (at `unit`'s δ), with ρ beside it."""
        if self.noise != "gaussian":
            return f"ε={share:.6g}"
        if self.delta - self.events <= 0 or share <= 0:
            return f"ρ={share:.6g}"
        return f"ε={zcdp_to_epsilon(share, self.delta - self.events):.6g} (ρ={share:.6g})"

    def check(self, cost: float, pieces=None) -> None:
        """Raise BudgetExceededError if `cost` (a charge made of `pieces`: `Entry.pieces`) does not fit."""
        with self._open() as con:
            self._refuse_if_over(con, covering_pieces(cost, pieces))

    def charge(
        self,
        cost: float,
        statement: str,
        table: str | None,
        signature: str | None,
        measurements: list[Measurement],
        detail: str | None = None,
    ) -> Charge:
        """Append a charge and the measurements it pays for, atomically; refuse overspending."""
        return self.charge_all([Entry(cost, statement, table, signature, measurements, detail)])[0]

    def charge_all(self, entries: list["Entry"]) -> list[Charge]:
        """Append several charges (one statement's, e.g. one per table) in one transaction: all or none."""
        done = []
        with self._open() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                self._refuse_if_over(con, [p for e in entries for p in covering_pieces(e.cost, e.pieces)],
                                     self._delta_after(con, entries))
                for e in entries:
                    done.append(self._append(con, e))
                con.execute("COMMIT")
                if self._held is not None:  # held open: write the state to its file now, as closing would,
                    con.execute("CHECKPOINT state")  # so the version read next is the one the hold leaves
            except BaseException:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:  # a failed COMMIT (a full disk) has already ended the transaction
                    pass
                raise
            state = self._status(con), self._delta_spent(con)
            records = self._read_records(con)
        if self.written_version is not None:  # the state just left, as `status` and `records` would read it
            self._status_cache = ((self.written_version, self.limit), state)
            self._records_cache = (self.written_version, records)
        return done

    def _delta_after(self, con, entries: list["Entry"]) -> float:
        """The δ the entries' records spend (of `events`). A record that exists already (another
        connection released it meanwhile) is refused, and so is an entry computed over key domains that
        another connection has grown meanwhile (a key release included)."""
        for e in entries:
            if e.record is not None and e.record.kind != KEYS and e.table is not None and self._has(
                    con, "dpsql_records") and con.execute(
                    "SELECT 1 FROM dpsql_records WHERE kind = ? AND lower(table_name) = lower(?) AND name = ?",
                    [e.record.kind, e.table, e.record.name]).fetchone():
                raise OperationalError(f"{e.table}'s {e.record.kind} {e.record.name!r} was released meanwhile (by "
                                       "another connection); nothing was charged: ask again to use it")
            if e.key_counts and e.table is not None:
                now = self._key_counts(con, e.table)
                grown = [c for c, n in e.key_counts if now.get(c, 0) != n]
                if grown:
                    raise OperationalError(f"keys of {e.table}.{grown[0]} were released meanwhile (by another "
                                           "connection); nothing was charged: ask again")
        return sum(e.record.delta for e in entries if e.record is not None)

    def _key_counts(self, con, table: str) -> dict[str, int]:
        """{column: keys released} of a table's key columns, as the state holds them now."""
        if not self._has(con, "dpsql_records"):
            return {}
        counts: dict[str, int] = {}
        for name, payload in con.execute("SELECT name, payload FROM dpsql_records WHERE kind = ? AND "
                                         "lower(table_name) = lower(?)", [KEYS, table]).fetchall():
            counts[name] = counts.get(name, 0) + len(released_keys(json.loads(payload)))
        return counts

    def check_delta(self, cost: float, delta: float, pieces=None) -> None:
        """Raise BudgetExceededError if a charge of `cost` (made of `pieces`: `Entry.pieces`) with δ events of
        `delta` does not fit."""
        with self._open() as con:
            self._refuse_if_over(con, covering_pieces(cost, pieces), self._delta_after(con, [Entry(
                0.0, "", None, None, [], None, Record(KEYS, "", [], delta))]))

    def _append(self, con, e: "Entry") -> Charge:
        self._generation = next(self._appends)  # before writing: a rolled-back append only makes caches read again
        last, prev = chain_head(con)
        seq = 1 if last is None else int(last) + 1
        prev = prev if last is not None else con.execute("SELECT hash FROM dpsql_budget").fetchone()[0]
        rows = [
            (i, e.table, e.signature, json.dumps(list(m.clique)), m.key,
             None if m.strategy is None else json.dumps(to_spec(m.strategy)), m.noise, m.cost,
             m.variance, [float(v) for v in m.values])
            for i, m in enumerate(e.measurements)
        ]
        at = _now()
        entry = (seq, at, self.who, e.table, e.statement, e.cost, e.detail)
        parts = [prev, *entry, [measurement_row_digest(r) for r in rows]]
        pieces = pieces_text(e.pieces) if e.pieces else None
        digest = chain_digest(*parts, *carried(e.record.digest() if e.record is not None else None, pieces))
        con.execute("INSERT INTO dpsql_ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [*entry, prev, digest])
        if pieces is not None:
            con.execute("INSERT INTO dpsql_pieces VALUES (?, ?)", [seq, pieces])
        insert_rows(con, "dpsql_measurements", [(seq, *r) for r in rows])
        if e.record is not None:
            r = e.record
            con.execute("INSERT INTO dpsql_records VALUES (?, ?, ?, ?, ?, ?)", [seq, r.kind, e.table, r.name, r.delta,
                                                                              r.text])
        if e.model is not None:
            con.execute("INSERT INTO dpsql_models VALUES (?, ?, ?, ?)", [seq, e.table, e.signature, e.model])
        return Charge(seq, at, self.who, e.table, e.statement, e.cost, e.detail, pure_epsilon(e.pieces))

    def bounding_key(self) -> str:
        """The secret keying the hash that orders a privacy unit's rows for bounding.

        Made once per state database (256 random bits from `secrets`), kept beside
        the charges, never shown: it only ever goes into the SQL that measures.
        """
        if getattr(self, "_bounding_key", None) is None:  # made once, never changed: read once
            with self._open() as con:
                con.execute("CREATE TABLE IF NOT EXISTS dpsql_secret (bounding_key VARCHAR NOT NULL)")
                row = con.execute("SELECT bounding_key FROM dpsql_secret").fetchone()
                if row is None:
                    row = (secrets.token_hex(32),)
                    con.execute("INSERT INTO dpsql_secret VALUES (?)", list(row))
            self._bounding_key = row[0]
        return self._bounding_key

    def measurements(self, table: str, signature: str) -> list[Measurement]:
        """Measurements stored for a table under the same catalog declaration."""
        return [m for m, _ in self.stored_measurements(table, signature)]

    def stored_measurements(self, table: str, signature: str) -> list[tuple[Measurement, dict[str, int]]]:
        """Measurements stored for a table under the same catalog declaration, each with the number of keys
        its key columns had released when it was taken ({column: keys}: the releases charged up to it)."""
        with self._open() as con:
            rows = con.execute(
                "SELECT seq, clique, query_key, strategy, noise, cost, variance, vals FROM dpsql_measurements "
                "WHERE table_name = ? AND signature = ? ORDER BY seq, position",
                [table, signature],
            ).fetchall()
            releases = con.execute(
                "SELECT seq, name, payload FROM dpsql_records WHERE kind = ? AND lower(table_name) = lower(?) "
                "ORDER BY seq", [KEYS, table]).fetchall() if rows and self._has(con, "dpsql_records") else []
        out, counts, pending = [], {}, iter(releases)
        upcoming = next(pending, None)
        for seq, c, key, strategy, noise, cost, var, vals in rows:
            while upcoming is not None and upcoming[0] <= seq:
                _, name, payload = upcoming
                counts = {**counts, name: counts.get(name, 0) + len(released_keys(json.loads(payload)))}
                upcoming = next(pending, None)
            m = Measurement(tuple(json.loads(c)), noise, cost, var, np.asarray(vals, dtype=float), key,
                            None if strategy is None else from_spec(json.loads(strategy)))
            out.append((m, counts))
        return out

    def models(self, table: str, signature: str) -> list[dict]:
        """The models released for a table under the same catalog declaration, in charge order, each
        checked against the SHA-256 its record put in the chain; read from disk once per model."""
        wanted = {p["sha256"] for _, _, p in self.records(MODEL, table)}
        cache = self._models_cache
        if not wanted.issubset(cache):
            with self._open() as con:
                rows = con.execute("SELECT spec FROM dpsql_models WHERE lower(table_name) = lower(?) AND "
                                   "signature = ? ORDER BY seq", [table, signature]).fetchall()
            for (text,) in rows:
                digest = hashlib.sha256(text.encode()).hexdigest()
                if digest in wanted:
                    cache[digest] = (signature, json.loads(text))
        return [cache[p["sha256"]][1] for _, _, p in self.records(MODEL, table)
                if p["sha256"] in cache and cache[p["sha256"]][0] == signature]

    def charges(self) -> list[Charge]:
        with self._open() as con:
            rows = con.execute(
                "SELECT seq, charged_at, who, table_name, statement, cost, detail FROM dpsql_ledger ORDER BY seq"
            ).fetchall()
            pieces = dict(con.execute("SELECT seq, pieces FROM dpsql_pieces").fetchall()) \
                if self._has(con, "dpsql_pieces") else {}
        return [Charge(*r, pure_epsilon(stored_pieces(pieces.get(r[0])))) for r in rows]

    def head(self) -> str:
        """The hash at the head of the chain: record it elsewhere to detect a rewrite of the whole chain."""
        with self._open() as con:
            row = con.execute("SELECT hash FROM dpsql_ledger ORDER BY seq DESC LIMIT 1").fetchone()
            return (row or con.execute("SELECT hash FROM dpsql_budget").fetchone())[0]

    def verify(self) -> list[str]:
        """Recompute the hash chain and the budget; returns the problems found (empty: intact)."""
        with self._open() as con:
            try:
                budget, ledger, stored, records, models, pieces = chained_rows(con)
            except duckdb.Error as e:
                return [f"the ledger tables were altered ({str(e).splitlines()[0]})"]
        problems, spent, charged = chain_problems(budget, ledger, stored, records, models, pieces)
        if len(budget) != 1:
            return problems
        delta_spent = sum(delta for _, _, _, delta, _ in records)
        if not events_within(delta_spent, self.events):
            problems.append(f"key releases spent δ={delta_spent:g}, over the δ={self.events:g} set apart for them")
        if self.exact:
            if not self._accountant().fits(History().plus(charged, delta_spent), slack=_SLACK):
                problems.append(f"the charges' exact composition is over the total budget ρ={self.capacity:g}")
        elif spent > self.capacity * (1 + _SLACK):
            problems.append(f"charges add up to {spent:g}, over the total budget {self.capacity:g}")
        return problems

    def _cache_version(self) -> tuple | None:
        """What keys this object's own caches of the state (`status`, `records`): the `version`, or in
        memory (only this object writes it, every change through `_append`) how many appends began."""
        return ("memory", self._generation) if self._memory is not None else self.version()

    def _history(self, con) -> History:  # read again only when the state may have changed: `ledger_history`
        return self._known_history.read(self.lease, self._generation, lambda: chain_head(con), lambda: read_history(
            con, self._has(con, "dpsql_pieces"), self._has(con, "dpsql_records")))

    def _has(self, con, table: str) -> bool:
        """Whether the state holds `table` (ledgers written before it existed do not); a table once seen is
        remembered, as none is ever dropped (asking DuckDB's catalog costs about a millisecond)."""
        if table not in self._tables and has_table(con, table):
            self._tables.add(table)
        return table in self._tables



def _now() -> datetime:
    """UTC, without tzinfo (DuckDB TIMESTAMP); microseconds kept for the hash chain."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "unknown"
