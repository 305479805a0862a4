"""Verifying a ledger's hash chain: every charge, its measurements, records, models and mechanisms.

`chain_problems` walks the rows a ledger stores (`chained_rows` reads them for `dpsql.budget.ledger.Ledger.verify`) and
recomputes each digest; the budget check against the total stays with the ledger.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from dpsql.budget.ledger_accounting import charge_pieces
from dpsql.budget.ledger_entries import MODEL, carried, chain_digest
from dpsql.budget.ledger_file import events_column, has_table


def measurement_row_digest(row: tuple) -> str:
    """Digest of one stored measurement row (everything but its seq)."""
    *fields, vals = row
    return chain_digest(*fields, np.asarray(vals, dtype=np.float64).tobytes().hex())


def chained_rows(con) -> tuple[list, list, list, list, list, dict]:
    """Every row the chain covers, as `chain_problems` takes them (raises duckdb.Error when a table was altered):
    the budget declaration, the charges, measurements, records, models and mechanisms."""
    budget = con.execute(f"SELECT noise, total, delta, created, hash, {events_column(con)} "
                         "FROM dpsql_budget").fetchall()
    ledger = con.execute("SELECT seq, charged_at, who, table_name, statement, cost, detail, prev_hash, hash "
                         "FROM dpsql_ledger ORDER BY seq").fetchall()
    stored = con.execute("SELECT seq, position, table_name, signature, clique, query_key, strategy, noise, cost, "
                         "variance, vals FROM dpsql_measurements ORDER BY seq, position").fetchall()
    records = con.execute("SELECT seq, kind, name, delta, payload FROM dpsql_records ORDER BY seq").fetchall() \
        if has_table(con, "dpsql_records") else []
    models = con.execute("SELECT seq, spec FROM dpsql_models ORDER BY seq").fetchall() \
        if has_table(con, "dpsql_models") else []
    pieces = dict(con.execute("SELECT seq, pieces FROM dpsql_pieces").fetchall()) \
        if has_table(con, "dpsql_pieces") else {}
    return budget, ledger, stored, records, models, pieces


def chain_problems(budget: list, ledger: list, stored: list, records: list, models: list, pieces: dict
                   ) -> tuple[list[str], float, list]:
    """The problems found in the stored rows (empty: the chain is intact), the charges' total cost and their
    pieces (`dpsql.budget.ledger_accounting.charge_pieces`)."""
    if len(budget) != 1:
        return [f"expected one budget declaration, found {len(budget)}"], 0.0, []
    problems = []
    noise, total, delta, created, prev, events = budget[0]
    declared = (noise, total, delta, created) if events is None else (noise, total, delta, created, events)
    if chain_digest(*declared) != prev:  # a ledger written before `events` existed has none in its digest
        problems.append("the budget declaration was altered")
    measured: dict[int, list[str]] = {}
    for row in stored:
        measured.setdefault(row[0], []).append(measurement_row_digest(row[1:]))
    released = {seq: (kind, name, delta, payload) for seq, kind, name, delta, payload in records}
    for seq, text in models:  # a model is in the chain through its record's SHA-256
        record = released.get(seq)
        if record is None or record[0] != MODEL or \
                json.loads(record[3]).get("sha256") != hashlib.sha256(text.encode()).hexdigest():
            problems.append(f"the model stored for charge {seq} was altered or has no record")
    spent, charged = 0.0, []
    for expected_seq, (seq, at, who, table, statement, cost, detail, prev_hash, digest) in enumerate(ledger, 1):
        if seq != expected_seq:
            problems.append(f"charge {expected_seq} is missing (found {seq})")
        if prev_hash != prev:
            problems.append(f"charge {seq} does not follow the previous one (chain broken)")
        parts = [prev_hash, seq, at, who, table, statement, cost, detail, measured.pop(seq, [])]
        record, text = released.pop(seq, None), pieces.pop(seq, None)
        if chain_digest(*parts, *carried(chain_digest(*record) if record is not None else None, text)) != digest:
            problems.append(f"charge {seq} or its measurements were altered")
        prev = digest
        spent += cost
        charged += charge_pieces(float(cost), text)
    for seq in measured:
        problems.append(f"measurements stored for charge {seq}, which is not in the ledger")
    for seq in released:
        problems.append(f"a record stored for charge {seq}, which is not in the ledger")
    for seq in pieces:
        problems.append(f"mechanisms stored for charge {seq}, which is not in the ledger")
    return problems, spent, charged
