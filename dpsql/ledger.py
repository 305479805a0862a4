"""The budget ledger: a durable record of every charge, and of what it released.

State lives in a DuckDB database of its own (beside the data file by default).
A charge and the noisy measurements it paid for are written in one
transaction, before any answer derived from them is returned, so a crash can
lose a released-nothing charge but never release anything uncharged. Stored
measurements are noisy (already private), so later sessions answer from them
for free.
"""

from __future__ import annotations

import getpass
import json
from dataclasses import dataclass
from datetime import datetime, timezone

import duckdb
import numpy as np

from dpsql.errors import BudgetExceededError, OperationalError, ProgrammingError
from mechanisms.matrices import from_spec, to_spec
from mechanisms.measurement import Measurement

# Charges may exceed the total by this relative slack (floating-point sums).
_SLACK = 1e-9

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS dpsql_budget (
        noise VARCHAR NOT NULL, total DOUBLE NOT NULL, delta DOUBLE NOT NULL, created TIMESTAMP NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS dpsql_ledger (
        seq BIGINT PRIMARY KEY, charged_at TIMESTAMP NOT NULL, who VARCHAR NOT NULL, table_name VARCHAR,
        statement VARCHAR NOT NULL, cost DOUBLE NOT NULL, detail VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS dpsql_measurements (
        seq BIGINT NOT NULL, table_name VARCHAR NOT NULL, signature VARCHAR NOT NULL,
        clique VARCHAR NOT NULL, query_key VARCHAR, strategy VARCHAR, noise VARCHAR NOT NULL,
        cost DOUBLE NOT NULL, variance DOUBLE NOT NULL, vals DOUBLE[] NOT NULL)""",
]


@dataclass(frozen=True)
class Charge:
    seq: int
    at: datetime
    who: str
    table: str | None
    statement: str
    cost: float
    detail: str | None


class Ledger:
    """Total budget, charges and stored measurements of one state database.

    `noise` fixes the unit: "gaussian" budgets are ρ (zCDP), "laplace" budgets
    are ε (pure DP). The first connection sets the total; later ones must agree.
    """

    def __init__(self, path: str, noise: str, total: float | None, delta: float, who: str | None = None):
        self.path = path
        try:
            self.con = duckdb.connect(path)
        except duckdb.Error as e:
            raise OperationalError(f"cannot open the ledger state database {path!r}: {e}") from None
        for stmt in _SCHEMA:
            self.con.execute(stmt)
        self.who = who or _user()
        row = self.con.execute("SELECT noise, total, delta FROM dpsql_budget").fetchone()
        if row is None:
            if total is None:
                raise ProgrammingError("a new ledger needs a total budget: pass epsilon (and delta) or rho")
            self.con.execute(
                "INSERT INTO dpsql_budget VALUES (?, ?, ?, ?)", [noise, total, delta, _now()]
            )
            row = (noise, total, delta)
        stored_noise, stored_total, stored_delta = row
        if stored_noise != noise or (total is not None and not np.isclose(stored_total, total)) or (
            stored_noise == "gaussian" and not np.isclose(stored_delta, delta)
        ):
            unit = "ρ" if stored_noise == "gaussian" else "ε"
            raise ProgrammingError(
                f"the ledger at {path!r} already holds a {stored_noise} budget of {unit}={stored_total:g} "
                f"(δ={stored_delta:g}); connect with the same budget, or without one to use it"
            )
        self.noise, self.total, self.delta = stored_noise, float(stored_total), float(stored_delta)

    # --- budget ---------------------------------------------------------------------
    def spent(self) -> float:
        return float(self.con.execute("SELECT COALESCE(SUM(cost), 0) FROM dpsql_ledger").fetchone()[0])

    def remaining(self) -> float:
        return max(self.total - self.spent(), 0.0)

    def check(self, cost: float) -> None:
        """Raise BudgetExceededError if `cost` does not fit in what remains."""
        remaining = self.remaining()
        if cost > remaining + _SLACK * self.total:
            unit = "ρ" if self.noise == "gaussian" else "ε"
            raise BudgetExceededError(
                f"this statement needs {unit}={cost:.6g} but only {unit}={remaining:.6g} of "
                f"{unit}={self.total:.6g} remains; nothing was charged"
            )

    def charge(
        self,
        cost: float,
        statement: str,
        table: str | None,
        signature: str | None,
        measurements: list[Measurement],
        detail: str | None = None,
    ) -> Charge:
        """Record a charge and the measurements it pays for, atomically; refuse overspending."""
        try:
            self.con.execute("BEGIN TRANSACTION")
            self.check(cost)
            seq = int(self.con.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM dpsql_ledger").fetchone()[0])
            at = _now()
            self.con.execute(
                "INSERT INTO dpsql_ledger VALUES (?, ?, ?, ?, ?, ?, ?)",
                [seq, at, self.who, table, statement, cost, detail],
            )
            for m in measurements:
                self.con.execute(
                    "INSERT INTO dpsql_measurements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [seq, table, signature, json.dumps(list(m.clique)), m.key,
                     None if m.strategy is None else json.dumps(to_spec(m.strategy)), m.noise, m.cost,
                     m.variance, [float(v) for v in m.values]],
                )
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        return Charge(seq, at, self.who, table, statement, cost, detail)

    def measurements(self, table: str, signature: str) -> list[Measurement]:
        """Measurements stored for a table under the same catalog declaration."""
        rows = self.con.execute(
            "SELECT clique, query_key, strategy, noise, cost, variance, vals FROM dpsql_measurements "
            "WHERE table_name = ? AND signature = ? ORDER BY seq",
            [table, signature],
        ).fetchall()
        return [
            Measurement(
                tuple(json.loads(c)), noise, cost, var, np.asarray(vals, dtype=float), key,
                None if strategy is None else from_spec(json.loads(strategy)),
            )
            for c, key, strategy, noise, cost, var, vals in rows
        ]

    def charges(self) -> list[Charge]:
        rows = self.con.execute(
            "SELECT seq, charged_at, who, table_name, statement, cost, detail FROM dpsql_ledger ORDER BY seq"
        ).fetchall()
        return [Charge(*r) for r in rows]

    def close(self) -> None:
        self.con.close()


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "unknown"
