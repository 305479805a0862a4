"""The ledger's storage failing: a full disk and a corrupt file are said as such, in `dpsql.connect`,
the ledger, `synthesize()` and `dpsql synth`; nothing is lost and no budget is ever reset."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import numpy as np
import pytest

import dpsql
import dpsql.budget.ledger
from dpsql.interfaces import cli
from dpsql.errors import OperationalError
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_file import StateFile
from dpsql.releases.synth import synthesize
from mechanisms.matrices import Prefix
from mechanisms.measurement import Measurement

CATALOG = """
[tables.people.columns]
age = { type = "integer", min = 0, max = 9 }
sex = { type = "categorical", values = ["F", "M"] }
"""
FULL = "the ledger's disk is full"
CORRUPT = "is corrupt (DuckDB could not read it): restore it from a backup"


def _measurement(i=0):
    return Measurement(("age",), "gaussian", 0.01, 2.5, np.arange(5, dtype=float) + i, strategy=Prefix(5))


@pytest.fixture
def data(tmp_path):
    database = tmp_path / "data.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute("CREATE TABLE people AS SELECT i % 10 AS age, CASE WHEN i % 3 = 0 THEN 'F' ELSE 'M' END AS sex "
                    "FROM range(2000) t(i)")
    (tmp_path / "catalog.toml").write_text(CATALOG)
    return str(database), str(tmp_path / "catalog.toml"), tmp_path / "data.duckdb.dpsql-state"  # the default


class _FullDisk:
    """A ledger connection on a full disk: its COMMIT fails as DuckDB's does on ENOSPC (the message
    below is DuckDB 1.x's, seen on a full tmpfs), after which the transaction is gone."""

    def __init__(self, con, path):
        self._con, self._path = con, path

    def execute(self, sql, *args):
        if sql.strip().upper() == "COMMIT":
            self._con.execute("ROLLBACK")
            raise duckdb.TransactionException(f'TransactionContext Error: Failed to commit: Could not write file '
                                              f'"{self._path}.wal": No space left on device')
        return self._con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._con, name)


class Disk:
    """Whether the ledger's disk is full (`full`): while it is, every ledger commit fails."""

    full = False


@pytest.fixture
def disk(monkeypatch):
    real, disk = StateFile._attached, Disk()

    def attached(self):
        con = real(self)
        return _FullDisk(con, self.path) if disk.full else con

    monkeypatch.setattr(StateFile, "_attached", attached)
    return disk


def test_a_full_disk_is_named_and_nothing_is_charged_or_lost(data, disk):
    database, catalog, state = data
    with dpsql.connect(database, catalog=catalog, epsilon=1.0, state=str(state)) as conn:
        first = conn.execute("SELECT COUNT(*) FROM people WHERE age < 5").fetchall()
        spent = conn.budget.spent.rho
    with dpsql.connect(database, catalog=catalog, state=str(state)) as conn:
        disk.full = True
        with pytest.raises(OperationalError, match=FULL) as failed:
            conn.execute("SELECT COUNT(*) FROM people WHERE sex = 'F'")
        assert "rollback" not in str(failed.value)
        assert conn.execute("SELECT COUNT(*) FROM people WHERE age < 5").fetchall() == first  # still free
        disk.full = False
        assert conn.budget.spent.rho == pytest.approx(spent)  # nothing charged, nothing reset
        conn.execute("SELECT COUNT(*) FROM people WHERE sex = 'F'")  # with room again, it goes on
        assert conn.budget.spent.rho > spent
    assert Ledger.existing(str(state)).verify() == []


def test_synthesize_and_dpsql_synth_on_a_full_disk(data, disk, tmp_path, capsys):
    database, catalog, state = data
    Ledger(str(state), "gaussian", 0.5, 1e-9)  # made while there is room
    out = tmp_path / "synthetic.parquet"
    disk.full = True
    with dpsql.connect(database, catalog=catalog, state=str(state)) as conn:
        with pytest.raises(OperationalError, match=FULL):
            synthesize(conn, "people", 0.5, out, mechanism="mst")
        assert conn.budget.spent.rho == 0 and not out.exists()
        assert list(tmp_path.glob("*.partial*")) == []
    code = cli.main(["synth", "people", "--epsilon", "0.5", "--out", str(out), "--database", str(database),
                     "--catalog", str(catalog), "--mechanism", "mst", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and f"error: {FULL}" in err and "Traceback" not in err and not out.exists()


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare to mount a small tmpfs")
def test_a_really_full_disk(tmp_path):
    """The same on a real full file system (a 3 MB tmpfs in a private mount namespace, where allowed)."""
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=3m tmpfs {tmp_path}"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("no private mount namespace here")
    script = textwrap.dedent(f"""
        import numpy as np
        from dpsql.errors import OperationalError
        from dpsql.budget.ledger import Ledger
        from mechanisms.matrices import Prefix
        from mechanisms.measurement import Measurement
        m = lambda i: [Measurement(("age",), "gaussian", 0.01, 2.5, np.arange(5.0) + i, strategy=Prefix(5))]
        ledger = Ledger("{tmp_path}/state", "gaussian", 1.0, 1e-9, who="a")
        ledger.charge(0.1, "SELECT 0", "people", "sig", m(0))
        try:
            with open("{tmp_path}/filler", "wb", buffering=0) as f:
                while True:
                    f.write(b"x" * 4096)
        except OSError:
            pass
        for i in range(3):
            try:
                ledger.charge(0.1, f"SELECT {{i + 1}}", "people", "sig", m(i + 1) * 200)
                print("CHARGED")
            except OperationalError as e:
                print(e)
        import os
        os.remove("{tmp_path}/filler")
        again = Ledger("{tmp_path}/state", "gaussian", 1.0, 1e-9, who="a")
        print("charges", len(again.charges()), "problems", again.verify())
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=3m tmpfs {tmp_path} && '
                           f'"{sys.executable}" -c "$0"', script], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [lines[0]] * 3 and lines[0].startswith(FULL), done.stdout
    assert lines[3] == "charges 1 problems []"


def _corruptions(path: Path) -> list[int]:
    """Offsets to damage: DuckDB's three header blocks, and the start and payload of each storage block."""
    size = path.stat().st_size
    blocks = range(12288, size, 262144)
    return [0, 8, 16, 4096, 8232] + [b + d for b in blocks for d in (0, 100) if b + d < size]


def test_a_corrupt_ledger_is_named_never_replaced_nor_reset(data, capsys):
    database, catalog, state = data
    ledger = Ledger(str(state), "gaussian", 1.0, 1e-9, who="tester")
    for i in range(3):
        ledger.charge(0.1, f"SELECT {i}", "people", "sig", [_measurement(i), _measurement(i + 1)])
    intact = state.read_bytes()
    named = 0
    for offset in _corruptions(state):
        damaged = bytearray(intact)
        damaged[offset:offset + 16] = bytes(b ^ 0xA5 for b in damaged[offset:offset + 16])
        state.write_bytes(bytes(damaged))
        for companion in state.parent.glob(state.name + ".*"):
            companion.unlink()
        try:  # whatever DuckDB can still read is read; what it cannot is refused, naming the cause
            opened = Ledger(str(state), "gaussian", 1.0, 1e-9, who="tester")
            assert opened.total == 1.0 and opened.spent() == pytest.approx(0.3)  # never a fresh budget
            opened.verify()
            opened.measurements("people", "sig")
        except OperationalError as e:
            assert CORRUPT in str(e) and str(state) in str(e), (offset, e)
            assert state.read_bytes() == bytes(damaged)  # neither replaced nor rewritten
            named += 1
    assert named >= 6
    state.write_bytes(bytes(b ^ 0xA5 if 4096 <= i < 4112 else b for i, b in enumerate(intact)))
    with pytest.raises(OperationalError, match=re.escape(CORRUPT)):  # the analyst's side: connecting says so
        dpsql.connect(database, catalog=catalog, state=str(state))
    code = cli.main(["synth", "people", "--epsilon", "0.5", "--out", str(state.parent / "s.parquet"),
                     "--database", str(database), "--catalog", str(catalog), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and CORRUPT in err and "Traceback" not in err
