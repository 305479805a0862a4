"""The ledger: hash chain, tamper detection, `dpsql ledger`, concurrency across processes, crashes."""

import contextlib
import io
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import time

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.interfaces import cli
from dpsql.errors import BudgetExceededError, OperationalError
from dpsql.budget.ledger import Ledger
from mechanisms.accounting import Amount, epsilon_delta_to_zcdp
from mechanisms.matrices import Prefix
from mechanisms.measurement import Measurement


def _measurement(i=0):
    return Measurement(("age",), "gaussian", 0.01, 2.5, np.arange(5, dtype=float) + i, strategy=Prefix(5))


def _filled(path, charges=3):
    ledger = Ledger(path, "gaussian", 1.0, 1e-9, who="tester")
    for i in range(charges):
        ledger.charge(0.1, f"SELECT {i}", "people", "sig", [_measurement(i), _measurement(i + 1)])
    return ledger


def test_chain_verifies_and_round_trips(tmp_path):
    ledger = _filled(str(tmp_path / "state"))
    assert ledger.verify() == []
    assert [c.seq for c in ledger.charges()] == [1, 2, 3]
    stored = ledger.measurements("people", "sig")
    assert len(stored) == 6 and np.array_equal(stored[1].values, np.arange(5) + 1.0)
    assert np.array_equal(stored[0].strategy.dense(), Prefix(5).dense())


@pytest.mark.parametrize(
    "tamper, problem",
    [
        ("UPDATE dpsql_ledger SET cost = 0.01 WHERE seq = 2", "altered"),
        ("DELETE FROM dpsql_ledger WHERE seq = 2", "missing"),
        ("DELETE FROM dpsql_ledger WHERE seq = 3", "not in the ledger"),
        ("UPDATE dpsql_measurements SET vals = [0.0, 0.0, 0.0, 0.0, 0.0] WHERE seq = 1 AND position = 0", "altered"),
        ("UPDATE dpsql_budget SET total = 100.0", "budget declaration"),
        ("UPDATE dpsql_ledger SET statement = 'SELECT 42' WHERE seq = 1", "altered"),
    ],
)
def test_tampering_is_detected(tmp_path, tamper, problem):
    path = str(tmp_path / "state")
    _filled(path)
    con = duckdb.connect(path)
    con.execute(tamper)
    con.close()
    problems = Ledger.existing(path).verify()
    assert any(problem in p for p in problems), problems


def test_altered_tables_and_non_ledgers(tmp_path):
    path = str(tmp_path / "state")
    _filled(path)
    con = duckdb.connect(path)
    con.execute("ALTER TABLE dpsql_ledger DROP COLUMN detail")
    con.close()
    assert any("tables were altered" in p for p in Ledger.existing(path).verify())
    other = str(tmp_path / "data.duckdb")
    duckdb.connect(other).close()
    for missing in (other, str(tmp_path / "nothing"), ":memory:"):
        with pytest.raises(OperationalError):
            Ledger.existing(missing)
    assert not (tmp_path / "nothing").exists()  # opening to verify creates nothing


def test_overspending_is_refused_and_charges_nothing(tmp_path):
    ledger = _filled(str(tmp_path / "state"), charges=9)
    with pytest.raises(BudgetExceededError) as refused:
        ledger.charge(0.2, "SELECT too much", "people", "sig", [_measurement()])
    assert ledger.spent() == pytest.approx(0.9)
    # said in ε, as analysts are given budgets, with the ledger's ρ beside it
    assert re.search(r"needs ε=\d[\d.]* \(ρ=0\.2\) but only ε=[\d.]+ \(ρ=0\.1\)", str(refused.value))
    assert ledger.verify() == []


def test_status_is_read_again_when_another_ledger_charges(tmp_path):
    path = str(tmp_path / "state")
    mine = _filled(path, charges=2)
    other = Ledger(path, "gaussian", None, 1e-9, who="other")
    assert mine.status()[1] == pytest.approx(0.2) and mine.status()[1] == pytest.approx(0.2)  # second: cached
    other.charge(0.3, "SELECT elsewhere", "people", "sig", [_measurement(7)])
    assert mine.status()[1] == pytest.approx(0.5)


def _charge_loop(path, n, cost, out):
    ledger = Ledger(path, "gaussian", None, 1e-9, who=f"p{os.getpid()}")
    granted = 0
    for i in range(n):
        try:
            ledger.charge(cost, f"q{i}", "people", "sig", [_measurement(i)])
            granted += 1
        except BudgetExceededError:
            pass
    out.put(granted)


def _race(path, processes, attempts, cost):
    """`processes` processes each try `attempts` charges of `cost` on one ledger; returns the charges granted."""
    Ledger(path, "gaussian", 1.0, 1e-9)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_charge_loop, args=(path, attempts, cost, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    granted = sum(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
    ledger = Ledger(path, "gaussian", None, 1e-9)
    assert granted == len(ledger.charges())
    assert ledger.spent() <= 1.0 + 1e-9
    assert ledger.verify() == []
    return granted


def test_many_processes_never_overspend(tmp_path):
    assert _race(str(tmp_path / "state"), 8, 25, 0.007) == 142  # floor(1 / 0.007): the budget, exactly used up


@pytest.mark.slow
def test_eight_processes_times_a_hundred_charges(tmp_path):
    assert _race(str(tmp_path / "state"), 8, 100, 0.0013) == 769  # floor(1 / 0.0013) of 800 attempts


_CHILD = """
import sys, numpy as np
from dpsql.budget.ledger import Ledger
from mechanisms.measurement import Measurement
ledger = Ledger(sys.argv[1], "gaussian", None, 1e-9)
i = 0
while True:
    ledger.charge(1e-6, f"q{i}", "people", "sig", [Measurement(("age",), "gaussian", 1e-6, 1.0, np.ones(50))])
    print(f"released {i}", flush=True)  # an answer leaves only after its charge is committed
    i += 1
"""


def test_killed_processes_never_under_charge(tmp_path):
    path = str(tmp_path / "state")
    Ledger(path, "gaussian", 1.0, 1e-9)
    rng = np.random.default_rng(0)
    released = 0
    for _ in range(4):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, path], stdout=subprocess.PIPE, text=True,
                                 cwd=os.path.dirname(os.path.dirname(__file__)))
        first = child.stdout.readline()  # started and charging
        time.sleep(rng.random() * 0.5)  # then killed at a random point of its loop
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        released += (first + out).count("released")
    ledger = Ledger(path, "gaussian", None, 1e-9)
    assert released > 0
    assert len(ledger.charges()) >= released
    assert ledger.verify() == []


def _cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(["ledger", *argv])
    return status, out.getvalue()


def test_ledger_verify_and_show_commands(tmp_path, capsys):
    database = str(tmp_path / "data.duckdb")
    con = duckdb.connect(database)
    con.execute("CREATE TABLE t AS SELECT (i % 10)::INT AS a, (i % 3)::INT AS b FROM range(100) r(i)")
    con.close()
    catalog = {"tables": {"t": {"columns": {"a": {"type": "integer", "min": 0, "max": 9},
                                            "b": {"type": "integer", "min": 0, "max": 2}}}}}
    with dpsql.connect(database, catalog=catalog, epsilon=1.0, query_epsilon=0.25, seed=1,
                       accounting="zcdp") as conn:  # Gaussian charges, composed in zCDP
        conn.execute("SELECT a, COUNT(*) FROM t GROUP BY a")
        conn.execute("SELECT b, COUNT(*) FROM t GROUP BY b")
    state = database + ".dpsql-state"
    head = Ledger.existing(state).head()
    status, out = _cli("verify", database)  # a database names the ledger beside it
    assert status == 0 and f"ledger {state}: intact (2 charges" in out and head in out
    status, out = _cli("show", state)
    lines = out.splitlines()
    rho = epsilon_delta_to_zcdp(0.25, 1e-9)
    assert status == 0 and lines[1].endswith(f"spent {Amount.zcdp(2 * rho, 1e-9)}")  # zCDP composition
    assert [c.strip() for c in lines[4].split("|")[3:6]] == ["t", "0.25", f"{rho:.6g}"] and "GROUP BY a" in lines[4]
    con = duckdb.connect(state)
    con.execute("UPDATE dpsql_ledger SET cost = cost / 2 WHERE seq = 2")  # hide half of a charge
    con.close()
    for action in ("verify", "show"):
        status, out = _cli(action, state)
        assert status == 1 and out.splitlines() == [
            f"ledger {state}: TAMPERED (1 problem found)", "  - charge 2 or its measurements were altered"]
    assert cli.main(["ledger", "verify", str(tmp_path / "nothing")]) == 1
    assert "no ledger state file" in capsys.readouterr().err
    done = subprocess.run([sys.executable, "-m", "dpsql.interfaces.cli", "ledger", "verify", state], capture_output=True,
                          text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert done.returncode == 1 and "TAMPERED" in done.stdout and "Traceback" not in done.stderr


def test_what_one_connection_paid_for_is_free_in_another_opened_before(tmp_path):
    db = tmp_path / "data.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE people AS SELECT (i % 100)::INTEGER AS age FROM range(5000) t(i)")
    con.close()
    catalog = {"tables": {"people": {"columns": {"age": {"type": "integer", "min": 0, "max": 99}}}}}
    first = dpsql.connect(str(db), catalog=catalog, epsilon=1, seed=1)
    second = dpsql.connect(str(db), catalog=catalog, seed=2)
    second.execute("SELECT COUNT(*) FROM people WHERE age < 50")  # second's model is read here
    query = "SELECT COUNT(*) FROM people WHERE age >= 90"
    paid = first.execute(query).fetchall()
    spent = first.budget.spent.rho
    assert second.execute(query).fetchall() == paid  # read from the ledger: the same answer, free
    assert second.budget.spent.rho == pytest.approx(spent) and first.budget.spent.rho == pytest.approx(spent)
    assert first.execute(query).fetchall() == paid  # first's own model stayed current
    first.close(), second.close()


def _people_db(tmp_path, rows=5000):
    db = tmp_path / "data.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE people AS SELECT (i % 100)::INTEGER AS age FROM range({rows}) t(i)")
    con.close()
    return str(db), {"tables": {"people": {"columns": {"age": {"type": "integer", "min": 0, "max": 99}}}}}


def _lock_is_free(state: str) -> bool:
    import fcntl

    with open(state + ".lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(lock, fcntl.LOCK_UN)
        return True


def test_a_statement_opens_the_ledger_once_and_lets_it_go(tmp_path, monkeypatch):
    db, catalog = _people_db(tmp_path)
    state = str(tmp_path / "state")
    c = dpsql.connect(db, catalog=catalog, rho=1.0, state=state, seed=1)
    opens = []
    locked = Ledger._locked
    monkeypatch.setattr(Ledger, "_locked", lambda self: opens.append(1) or locked(self))
    c.execute("SELECT COUNT(*) FROM people WHERE age < 50").fetchall()  # reads, plans, scans and charges
    assert len(opens) == 1 and _lock_is_free(state)
    c.execute("SELECT COUNT(*) FROM people WHERE age < 50").fetchall()  # a re-ask: nothing to read
    assert len(opens) == 1
    c.session.query_share = 10.0
    with pytest.raises(BudgetExceededError):
        c.execute("SELECT COUNT(*) FROM people WHERE age < 20")
    assert _lock_is_free(state)  # a refused statement lets the ledger go too
    Ledger(state, "gaussian", None, 1e-9).charge(0.01, "elsewhere", None, None, [])
    c.session.query_share, before = 0.01, len(opens)
    c.execute("SELECT COUNT(*) FROM people WHERE age < 20").fetchall()  # sees the other charge: reads once
    assert len(opens) == before + 1 and _lock_is_free(state)
    assert c.ledger.verify() == [] and len(c.ledger.charges()) == 3
    c.close()


def _query_loop(db, catalog, state, first, out):
    c = dpsql.connect(db, catalog=catalog, state=state, query_rho=0.07, seed=first)
    answered = 0
    for threshold in range(first, first + 6):
        try:
            c.execute(f"SELECT COUNT(*) FROM people WHERE age < {threshold}").fetchall()
            answered += 1
        except BudgetExceededError:
            pass
    c.close()
    out.put(answered)


def test_statements_racing_in_processes_never_overspend(tmp_path):
    db, catalog = _people_db(tmp_path)
    state = str(tmp_path / "state")
    Ledger(state, "gaussian", 1.0, 1e-9)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_query_loop, args=(db, catalog, state, 10 * i + 1, out)) for i in range(3)]
    for p in procs:
        p.start()
    answered = sum(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
    ledger = Ledger(state, "gaussian", None, 1e-9)
    assert answered == len(ledger.charges()) == 14  # floor(1 / 0.07) of 18 distinct queries
    assert ledger.spent() <= 1.0 + 1e-9 and ledger.verify() == []


def test_a_charge_of_many_measurements_round_trips_exactly(tmp_path):
    """Measurements are inserted many rows per statement (`ledger_file.insert_rows`): 150 of them (three
    statements), with and without strategies and keys, are read back bit for bit and verify."""
    rng = np.random.default_rng(1)
    made = [Measurement(("age",), "gaussian", 0.001, float(rng.random()), rng.normal(size=i % 7),
                        key=None if i % 3 else f"q{i}", strategy=Prefix(i % 7) if i % 2 and i % 7 else None)
            for i in range(150)]
    ledger = Ledger(str(tmp_path / "state"), "gaussian", 1.0, 1e-9)
    ledger.charge(0.15, "SELECT many", "people", "sig", made)
    stored = ledger.measurements("people", "sig")
    assert [(m.variance, m.key, m.values.tolist()) for m in stored] == \
        [(m.variance, m.key, m.values.tolist()) for m in made]
    assert [m.strategy is None for m in stored] == [m.strategy is None for m in made]
    assert ledger.verify() == []
