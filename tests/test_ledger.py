"""The ledger: hash chain, tamper detection, concurrency across processes, crashes."""

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import duckdb
import numpy as np
import pytest

from dpsql.errors import BudgetExceededError
from dpsql.ledger import Ledger
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
    problems = Ledger(path, "gaussian", None, 1e-9).verify() if "budget" not in tamper else _raw_verify(path)
    assert any(problem in p for p in problems), problems


def _raw_verify(path):
    ledger = Ledger.__new__(Ledger)
    ledger.path, ledger._memory, ledger.total = path, None, 1.0
    return ledger.verify()


def test_overspending_is_refused_and_charges_nothing(tmp_path):
    ledger = _filled(str(tmp_path / "state"), charges=9)
    with pytest.raises(BudgetExceededError):
        ledger.charge(0.2, "SELECT too much", "people", "sig", [_measurement()])
    assert ledger.spent() == pytest.approx(0.9)
    assert ledger.verify() == []


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


def test_many_processes_never_overspend(tmp_path):
    path = str(tmp_path / "state")
    Ledger(path, "gaussian", 1.0, 1e-9)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_charge_loop, args=(path, 25, 0.007, out)) for _ in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    granted = sum(out.get() for _ in procs)
    ledger = Ledger(path, "gaussian", None, 1e-9)
    assert granted == len(ledger.charges()) == 142  # floor(1 / 0.007): the budget, exactly used up
    assert ledger.spent() <= 1.0 + 1e-9
    assert ledger.verify() == []


_CHILD = """
import sys, numpy as np
from dpsql.ledger import Ledger
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
