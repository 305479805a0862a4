"""The history budget checks compose, read once per ledger state (`dpsql.budget.ledger_history`)."""

import duckdb
import numpy as np
import pytest

import dpsql
import dpsql.budget.ledger as ledger_module
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_accounting import read_history
from dpsql.budget.ledger_history import KnownHistory
from dpsql.errors import BudgetExceededError
from mechanisms.measurement import Measurement
from mechanisms.privacy_filter import History


def _measurement():
    return Measurement(("age",), "gaussian", 0.01, 2.5, np.arange(5, dtype=float))


def _counted(monkeypatch) -> list:
    """Every full read of the history, counted."""
    reads = []
    monkeypatch.setattr(ledger_module, "read_history", lambda *a: reads.append(1) or read_history(*a))
    return reads


def test_kept_within_a_lease_checked_by_head_across_leases():
    known, heads, reads = KnownHistory(), [], []
    state = {"head": (1, "a"), "history": History(0.1)}

    def head():
        heads.append(1)
        return state["head"]

    def read():
        reads.append(1)
        return state["head"], state["history"]

    assert known.read(1, 0, head, read) == History(0.1) and (len(heads), len(reads)) == (0, 1)
    assert known.read(1, 0, head, read) == History(0.1) and (len(heads), len(reads)) == (0, 1)  # same hold
    assert known.read(2, 0, head, read) == History(0.1) and (len(heads), len(reads)) == (1, 1)  # head unchanged
    state.update(head=(2, "b"), history=History(0.3))  # another process charged between the holds
    assert known.read(3, 0, head, read) == History(0.3) and (len(heads), len(reads)) == (2, 2)
    state.update(head=(3, "c"), history=History(0.4))  # this ledger appended within the hold: read again
    assert known.read(3, 1, head, read) == History(0.4) and (len(heads), len(reads)) == (2, 3)


def test_checks_in_one_hold_read_the_history_once(tmp_path, monkeypatch):
    path = str(tmp_path / "state")
    Ledger(path, "gaussian", 1.0, 1e-9).charge(0.1, "SELECT 1", "people", "sig", [_measurement()])
    ledger = Ledger(path, "gaussian", None, 1e-9)
    reads = _counted(monkeypatch)
    with ledger.holding():
        for _ in range(4):
            ledger.check(0.2)
    assert len(reads) == 1
    with ledger.holding():
        ledger.check(0.2)  # a new hold: the head is read, it has not moved
    assert len(reads) == 1
    ledger.charge(0.1, "SELECT 2", "people", "sig", [_measurement()])  # checked as known, then read after it
    assert len(reads) == 2 and ledger.spent() == pytest.approx(0.2) and len(reads) == 2


def test_another_ledgers_charge_is_seen_by_the_next_check(tmp_path):
    path = str(tmp_path / "state")
    mine, other = Ledger(path, "gaussian", 1.0, 1e-9), Ledger(path, "gaussian", None, 1e-9)
    mine.check(0.6)  # the history is kept
    other.charge(0.5, "SELECT elsewhere", "people", "sig", [_measurement()])
    with pytest.raises(BudgetExceededError):
        mine.check(0.6)
    with pytest.raises(BudgetExceededError):
        mine.charge(0.6, "SELECT too much", "people", "sig", [_measurement()])
    assert mine.spent() == pytest.approx(0.5) and len(mine.charges()) == 1 and mine.verify() == []


def test_an_in_memory_ledger_reads_again_after_its_own_charge():
    ledger = Ledger(":memory:", "gaussian", 1.0, 1e-9)
    ledger.check(0.6)
    ledger.charge(0.6, "SELECT 1", "people", "sig", [_measurement()])
    with pytest.raises(BudgetExceededError):
        ledger.check(0.6)


def test_a_first_answer_reads_the_history_at_most_twice(tmp_path, monkeypatch):
    db = tmp_path / "data.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE people AS SELECT (i % 100)::INTEGER AS age FROM range(5000) t(i)")
    con.close()
    catalog = {"tables": {"people": {"columns": {"age": {"type": "integer", "min": 0, "max": 99}}}}}
    c = dpsql.connect(str(db), catalog=catalog, epsilon=1, state=str(tmp_path / "state"), seed=1)
    reads = _counted(monkeypatch)
    c.execute("SELECT COUNT(*) FROM people WHERE age < 50").fetchall()  # checks share, noises, plan, charge
    assert len(reads) <= 2  # before the checks, and after its own charge (was one per check)
    before = c.budget.remaining.rho
    c.execute("SELECT COUNT(*) FROM people WHERE age < 20").fetchall()
    assert len(reads) <= 3 and c.budget.remaining.rho < before
    c.close()
