"""How a zCDP ledger's history is composed: the mechanisms its charges were, and the accounting mode.

Each charge is stored with its cost in ρ (its zCDP bound, which the zCDP mode adds up) and, since
this module exists, the mechanisms it was (`dpsql_pieces`: discrete Gaussians and discrete
Laplaces, `mechanisms.privacy_filter.Piece`); a charge without them (every charge written before,
a key release, a continual emit) is the Gaussian of its ρ, and a key release's δ is its record's.
In the EXACT mode (the default) a history fits when the zCDP filter or the pure filter accepts it
(`mechanisms.privacy_filter.Accountant`), so never less than the zCDP mode lets fit; ZCDP keeps the
zCDP filter alone.
"""

from __future__ import annotations

import json

from dpsql.errors import ProgrammingError
from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.privacy_filter import LAPLACE_PIECE, Accountant, History, Piece, zcdp_total

EXACT, ZCDP = "exact", "zcdp"
ACCOUNTING_MODES = (EXACT, ZCDP)

PIECES_TABLE = "CREATE TABLE IF NOT EXISTS dpsql_pieces (seq BIGINT NOT NULL, pieces VARCHAR NOT NULL)"


def accountant(total: float, delta: float, events: float = 0.0) -> Accountant:
    """The accountant of a zCDP ledger of ρ `total` at `delta` with `events` of δ set apart for δ events: its
    declared (ε, δ) is the one that ρ gives at δ."""
    return Accountant(zcdp_to_epsilon(total, delta), delta, zcdp_total(total, delta, events), events)


def checked_events(events: float, noise: str, delta: float) -> float:
    """The δ a new ledger sets apart for key releases: at least 0, and below δ on a zCDP ledger (all of it would
    leave the charges' ρ no δ to convert at); none on a pure-DP one."""
    if noise != "gaussian" or delta <= 0:
        if events:
            raise ProgrammingError("a pure ε-DP ledger has no δ to set apart for key releases")
        return 0.0
    if not 0 <= events < delta:
        raise ProgrammingError(f"key_release_delta must be at least 0 and below the ledger's δ ({delta:g}), "
                               f"got {events:g}")
    return float(events)


def pieces_text(pieces: tuple[Piece, ...]) -> str:
    return json.dumps([p.to_json() for p in pieces], separators=(",", ":"))


def stored_pieces(text: str | None) -> tuple[Piece, ...]:
    """The pieces a charge recorded (`dpsql_pieces.pieces`; none for a charge that recorded none)."""
    return () if text is None else tuple(Piece.from_json(spec) for spec in json.loads(text))


def covering_pieces(cost: float, pieces: tuple[Piece, ...] | None) -> list[Piece]:
    """A charge's pieces, and a Gaussian for any ρ of its `cost` they do not cover (all of it for none)."""
    out = list(pieces or ())
    uncovered = cost - sum(p.rho for p in out)
    if uncovered > 1e-12 * max(cost, 1e-300):
        out.append(Piece.gaussian(uncovered))
    return out


def charge_pieces(cost: float, text: str | None) -> list[Piece]:
    """The mechanisms of one stored charge (`covering_pieces` of what it recorded)."""
    return covering_pieces(cost, stored_pieces(text))


def chain_head(con) -> tuple:
    """The chain's head on `con`: the last charge's (seq, hash), (None, None) before the first charge."""
    return con.execute("SELECT max(seq), arg_max(hash, seq) FROM dpsql_ledger").fetchone()


def read_history(con, has_pieces: bool, has_records: bool) -> tuple[tuple, History]:
    """The history of the ledger open on `con` (every charge's mechanisms, every key release's δ), and the
    chain's head it was read at (`chain_head`)."""
    if has_pieces:
        # Only charges with pure pieces are read piece by piece: a Gaussian-only charge is the Gaussian of its ρ.
        rows = con.execute(f"SELECT l.cost, CASE WHEN p.pieces LIKE '%{LAPLACE_PIECE}%' THEN p.pieces END "
                           "FROM dpsql_ledger l LEFT JOIN dpsql_pieces p USING (seq) ORDER BY l.seq").fetchall()
    else:
        rows = [(cost, None) for (cost,) in con.execute("SELECT cost FROM dpsql_ledger ORDER BY seq").fetchall()]
    pieces = [p for cost, text in rows for p in charge_pieces(float(cost), text)]
    records = "(SELECT COALESCE(SUM(delta), 0) FROM dpsql_records)" if has_records else "0"
    *head, delta = con.execute(f"SELECT max(seq), arg_max(hash, seq), {records} FROM dpsql_ledger").fetchone()
    return tuple(head), History().plus(pieces, float(delta))


def pure_pieces(pieces: tuple[Piece, ...] | None) -> list[Piece]:
    return [p for p in pieces or () if p.kind == LAPLACE_PIECE]


def pure_epsilon(pieces: tuple[Piece, ...] | None) -> float:
    """The ε of a charge's discrete Laplace pieces, added up (0 for a charge without any)."""
    return sum(p.value for p in pure_pieces(pieces))
