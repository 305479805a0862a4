"""Deployment profiles: the data owner decides where everything is and what each analyst may spend."""

import io
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql.budget.ledger import Ledger
from dpsql.interfaces.shell import Shell
from dpsql.releases.synth import synthesize

CATALOG = """
[tables.people.columns]
age = { type = "integer", min = 0, max = 9 }
sex = { type = "categorical", values = ["F", "M"] }
"""
PROFILE = """
[data]
database = "data.duckdb"
catalog = "catalog.toml"
ledger = "ledger.state"
log = "owner.log"
output_dir = "exports"

[budget]
epsilon = 3
delta = 1e-9
query_epsilon = 0.5

[engine]
threads = 1

[workspace]
memory_limit = "256MB"

[analysts.alice]
epsilon = 1

[analysts.bob]
"""


@pytest.fixture
def profile(tmp_path):
    with duckdb.connect(str(tmp_path / "data.duckdb")) as con:
        con.execute("CREATE TABLE people AS SELECT i % 10 AS age, CASE WHEN i % 3 = 0 THEN 'F' ELSE 'M' END AS sex "
                    "FROM range(1000) t(i)")
        con.execute("CREATE TABLE zips AS SELECT 1 AS zip")
    (tmp_path / "catalog.toml").write_text(CATALOG)
    (tmp_path / "exports").mkdir()
    path = tmp_path / "census.toml"
    path.write_text(PROFILE)
    return path


def test_an_analyst_spends_within_their_own_budget(profile):
    with dpsql.connect(profile=profile, analyst="alice") as alice:
        assert alice.budget.total.epsilon == pytest.approx(1)
        with pytest.raises(dpsql.BudgetExceededError, match="alice"):
            for i in range(9):  # ε = 0.5 each, the profile's share: 3 fit in ε = 1 under zCDP
                alice.execute(f"SELECT COUNT(*) FROM people WHERE age > {i}")
        assert 0 < alice.budget.remaining.rho < alice.budget.total.rho / 4
        assert alice.budget.spent.rho <= alice.budget.total.rho
    with dpsql.connect(profile=profile, analyst="bob") as bob:  # no own limit: up to the total
        assert bob.budget.total.epsilon == pytest.approx(3)
        bob.execute("SELECT COUNT(*) FROM people WHERE age > 4")
    charges = Ledger.existing(str(profile.parent / "ledger.state")).charges()
    assert [c.who for c in charges] == ["alice"] * 3 + ["bob"]


@pytest.mark.parametrize("override", [
    {"catalog": CATALOG}, {"state": ":memory:"}, {"epsilon": 100}, {"seed": 1}, {"database": "other.duckdb"},
    {"con": duckdb.connect()}, {"user": "bob"}, {"rho": 1.0}, {"backend": "spark"},
])
def test_a_profile_connection_takes_no_owner_settings(profile, override):
    with pytest.raises(dpsql.ProgrammingError, match="profile fixes"):
        dpsql.connect(profile=profile, analyst="alice", **override)


@pytest.mark.parametrize("analyst", [None, "", "mallory"])
def test_only_declared_analysts_connect(profile, analyst):
    with pytest.raises(dpsql.ProfileError):
        dpsql.connect(profile=profile, analyst=analyst)


@pytest.mark.parametrize("text,error", [
    ("", "no analysts"), ("[data]\ncatalog = 'catalog.toml'\n[analysts.a]", "needs database"),
    ("[data]\ndatabase = 'd'\ncatalog = 'c'\nwhatever = 1\n[analysts.a]", "unknown keys"),
    ("[data]\ndatabase = 'd'\ncatalog = 'c'\n[analysts.a]\nepsilon = -1", "epsilon must be"),
    ("[data]\ndatabase = 'd'\ncatalog = 'c'\n[analysts.a]\nepsilon = 1\nrho = 1", "not both"),
    ("[data]\ndatabase = 'd'\ncatalog = 'c'\n[budget]\ndelta = 1\n[analysts.a]", "delta must be"),
    ("[data\n", "not valid TOML"),
])
def test_bad_profiles_are_refused_with_a_reason(tmp_path, text, error):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(dpsql.ProfileError, match=error):
        dpsql.connect(profile=path, analyst="a")


def test_a_missing_or_binary_profile_is_refused(tmp_path):
    with pytest.raises(dpsql.ProfileError, match="does not exist"):
        dpsql.connect(profile=tmp_path / "nope.toml", analyst="a")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(dpsql.ProfileError, match="UTF-8"):
        dpsql.connect(profile=tmp_path / "bin.toml", analyst="a")


def test_the_data_is_read_only_and_the_workspace_limited(profile):
    with dpsql.connect(profile=profile, analyst="bob") as conn:
        conn.execute("INSERT INTO zips VALUES (2)")  # the analyst's copy
        assert conn.execute("SELECT COUNT(*) FROM zips").fetchall() == [(2,)]
        assert conn.execute("SELECT current_setting('memory_limit')").fetchall() == [("244.1 MiB",)]
    with duckdb.connect(str(profile.parent / "data.duckdb"), read_only=True) as raw:
        assert raw.execute("SELECT COUNT(*) FROM zips").fetchall() == [(1,)]


def test_shell_output_stays_in_the_profiles_directory(profile):
    conn = dpsql.connect(profile=profile, analyst="bob")
    shell = Shell(conn, out=io.StringIO(), err=io.StringIO())
    conn.execute("SELECT COUNT(*) FROM people")  # the log file exists
    for target in (profile, profile.parent / "elsewhere.txt", profile.parent / "ledger.state",
                   profile.parent / "owner.log", profile.parent / "exports" / ".." / "owner.log",
                   profile.parent / "exports" / ".." / "site.pth"):
        assert not shell.handle(f".output --overwrite {target}")
    assert shell.handle(f".output {profile.parent / 'exports' / 'answers.csv'}")
    shell.handle("SELECT COUNT(*) FROM zips;")
    shell.close()
    assert "count_star()" in (profile.parent / "exports" / "answers.csv").read_text()
    assert profile.read_text() == PROFILE


def test_without_an_output_directory_analysts_write_no_files(profile):
    """Anywhere the service's account can write (its code, its keys) is not the analyst's: a profile
    without output_dir lets no file be written."""
    profile.write_text(PROFILE.replace('output_dir = "exports"\n', ""))
    conn = dpsql.connect(profile=profile, analyst="bob")
    shell = Shell(conn, out=io.StringIO(), err=io.StringIO())
    for command in (f".output {profile.parent / 'exports' / 'x.csv'}", f".once {profile.parent / 'evil.pth'}"):
        assert not shell.handle(command)
    assert "no output_dir" in shell.err.getvalue()
    with pytest.raises(dpsql.ProgrammingError, match="no output_dir"):
        synthesize(conn, "people", 0.1, profile.parent / "exports" / "s.parquet", mechanism="mst")
    shell.close()
    assert list((profile.parent / "exports").iterdir()) == [] and not (profile.parent / "evil.pth").exists()


def test_a_failed_scan_is_logged_for_the_owner_only(profile):
    with duckdb.connect(str(profile.parent / "data.duckdb")) as owner:  # a value that does not fit the catalog
        owner.execute("CREATE OR REPLACE TABLE people AS SELECT i % 10 AS age, 'F' AS sex, CASE WHEN i = 3 THEN "
                      "'SECRET-77' ELSE i::VARCHAR END AS income FROM range(100) t(i)")
    (profile.parent / "catalog.toml").write_text(CATALOG + 'income = { type = "numeric", min = 0, max = 100, bins = 4 }')
    with dpsql.connect(profile=profile, analyst="bob") as conn:
        with pytest.raises(dpsql.OperationalError) as failed:
            conn.execute("SELECT income, COUNT(*) FROM people GROUP BY income")
        assert "SECRET" not in str(failed.value) and conn.budget.spent.rho == 0
    assert "SECRET-77" in (profile.parent / "owner.log").read_text()


def test_the_shell_connects_by_profile_and_refuses_owner_flags(profile, capsys):
    from dpsql.interfaces import cli

    run = [sys.executable, "-m", "dpsql.interfaces.cli", "shell", "--profile", str(profile)]
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([*run, "--analyst", "alice", "-c", "SELECT COUNT(*) AS n FROM people"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "charged ε=0.5" in done.stdout, done.stderr
    done = subprocess.run([*run, "--analyst", "alice", "--epsilon", "100", "-c", "SELECT 1"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 1 and "profile fixes" in done.stderr, done.stderr
    for extra in (["--catalog", "x.toml"], ["--state", "fresh.state"], ["data.duckdb"]):  # the same CLI, in-process
        code = cli.main(["shell", "--profile", str(profile), "--analyst", "alice", *extra, "-c", "SELECT 1"])
        assert code == 1 and "profile fixes" in capsys.readouterr().err, extra


# --- owner files out of analysts' reach ---------------------------------------------------------------

def _another_deployment(folder: Path) -> None:
    """Another deployment's files: its profile, its database (a DuckDB file under any name), its ledger."""
    folder.mkdir(parents=True)
    (folder / "deploy.toml").write_text(PROFILE)
    with duckdb.connect(str(folder / "payroll.bin")) as con:
        con.execute("CREATE TABLE pay AS SELECT 1 AS amount")


@pytest.mark.parametrize("layout", ["dot", "log inside", "hard link to the ledger", "another profile deep down",
                                    "a database under another name", "a ledger", "a TLS key"])
def test_an_output_dir_holding_owner_or_deployment_files_refuses_to_start(profile, layout, capsys):
    """The README's old example (output_dir = ".") and every way owner or deployment files end up in
    the analysts' folder: the profile connection and the shell refuse to start, naming it (the shell as a
    process for the first layout, in-process through the same CLI entry for the others; the server:
    tests/test_serve.py)."""
    from dpsql.interfaces import cli

    exports, text = profile.parent / "exports", PROFILE
    with dpsql.connect(profile=profile, analyst="bob") as conn:
        conn.execute("SELECT COUNT(*) FROM people")  # the ledger exists
    if layout == "dot":
        text = PROFILE.replace('output_dir = "exports"', 'output_dir = "."')
    elif layout == "log inside":
        text = PROFILE.replace('log = "owner.log"', 'log = "exports/owner.log"')
    elif layout == "hard link to the ledger":
        (exports / "answers.csv").hardlink_to(profile.parent / "ledger.state")
    elif layout == "another profile deep down":
        (exports / "a" / "b").mkdir(parents=True)
        (exports / "a" / "b" / "other.toml").write_text(PROFILE)
    elif layout == "a database under another name":
        _another_deployment(profile.parent / "elsewhere")
        (exports / "sub").mkdir()
        (exports / "sub" / "numbers.csv").write_bytes((profile.parent / "elsewhere" / "payroll.bin").read_bytes())
    elif layout == "a ledger":
        (exports / "old.dpsql-state").write_bytes(b"")
    else:
        (exports / "server.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    profile.write_text(text)
    with pytest.raises(dpsql.ProfileError, match="output_dir .* holds the data owner's or a deployment's files"):
        dpsql.connect(profile=profile, analyst="bob")
    argv = ["shell", "--profile", str(profile), "--analyst", "bob", "-c", "SELECT 1"]
    if layout == "dot":
        env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        done = subprocess.run([sys.executable, "-m", "dpsql.interfaces.cli", *argv], capture_output=True, text=True, env=env,
                              timeout=120)
        code, err = done.returncode, done.stderr
    else:
        code, err = cli.main(argv), capsys.readouterr().err
    assert code == 1 and "holds the data owner's or a deployment's files" in err, err
    assert "Traceback" not in err


def test_analysts_never_read_or_write_a_deployments_files(profile):
    """Files that arrive in output_dir after the start, or that an analyst names: a profile or a DuckDB
    database (whatever its name) is neither read nor replaced, and no analyst makes one there."""
    exports = profile.parent / "exports"
    conn = dpsql.connect(profile=profile, analyst="bob")
    shell = Shell(conn, out=io.StringIO(), err=io.StringIO())
    _another_deployment(exports / "late")  # dropped in after the shell started
    disguised = exports / "late" / "towns.csv"
    disguised.write_bytes((exports / "late" / "payroll.bin").read_bytes())
    for path in (exports / "late" / "deploy.toml", exports / "late" / "payroll.bin", disguised):
        assert not shell.handle(f".import {path} t") and not shell.handle(f".read {path}")
        assert not shell.handle(f".once --overwrite {path}") and not shell.handle(f".output --overwrite {path}")
    for name in ("fresh.toml", "fresh.duckdb", "fresh.dpsql-state", "x.duckdb.wal", "server.key", "a.log"):
        assert not shell.handle(f".once {exports / name}")
        assert not (exports / name).exists()
    assert "named or made like a deployment's file" in shell.err.getvalue()
    assert (exports / "late" / "deploy.toml").read_text() == PROFILE
    assert shell.handle(f".once {exports / 'answers.csv'}")  # the analysts' own files still work
    shell.handle("SELECT COUNT(*) FROM zips;")
    shell.close()
    assert "count_star()" in (exports / "answers.csv").read_text()


def test_md5_verifiers_are_refused_at_load_and_passwd_makes_scram(profile, monkeypatch, capsys):
    import hashlib

    from dpsql.interfaces import cli

    md5 = "md5" + hashlib.md5(b"bob-pw" + b"bob").hexdigest()
    profile.write_text(PROFILE.replace("[analysts.bob]\n", f'[analysts.bob]\npassword = "{md5}"\n'))
    with pytest.raises(dpsql.ProfileError, match=r"md5 verifier.*dpsql passwd bob"):
        dpsql.connect(profile=profile, analyst="alice")  # the whole profile is refused, whoever connects
    monkeypatch.setattr(sys, "stdin", io.StringIO("bob-pw\n"))
    assert cli.main(["passwd", "bob"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith('password = "SCRAM-SHA-256$4096:')
    profile.write_text(PROFILE.replace("[analysts.bob]\n", f"[analysts.bob]\n{line}\n"))
    with dpsql.connect(profile=profile, analyst="bob") as conn:
        assert conn.budget.total.epsilon == pytest.approx(3)
    for bad in ("SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA", "hunter2"):
        profile.write_text(PROFILE.replace("[analysts.bob]\n", f'[analysts.bob]\npassword = "{bad}"\n'))
        with pytest.raises(dpsql.ProfileError, match="dpsql passwd bob"):
            dpsql.connect(profile=profile, analyst="bob")


# --- the workspace's statement timeout ----------------------------------------------------------------

def test_workspace_sql_stops_at_the_statement_timeout(profile):
    import time

    profile.write_text(PROFILE.replace('memory_limit = "256MB"', 'memory_limit = "256MB"\nstatement_timeout = 1'))
    with dpsql.connect(profile=profile, analyst="bob") as conn:
        started = time.monotonic()
        with pytest.raises(dpsql.OperationalError, match=r"statement_timeout \(1 s\)"):
            conn.execute("SELECT SUM(i * i) FROM range(100000000000) t(i)")
        assert time.monotonic() - started < 20
        assert conn.execute("SELECT 42").fetchall() == [(42,)]  # the connection goes on
        time.sleep(1.2)  # the stopped statement's timer never reaches a later one
        assert conn.execute("SELECT COUNT(*) FROM range(1000)").fetchall() == [(1000,)]
    for bad in ("-1", "'30s'", "true"):
        profile.write_text(PROFILE.replace('memory_limit = "256MB"', f"statement_timeout = {bad}"))
        with pytest.raises(dpsql.ProfileError, match="statement_timeout must be"):
            dpsql.connect(profile=profile, analyst="bob")


def test_the_statement_timeout_defaults_to_30_seconds(profile):
    from dpsql.deployment.workspace import Workspace

    with dpsql.connect(profile=profile, analyst="bob") as conn:
        assert conn.session.workspace.statement_timeout == 30
    assert Workspace(None, {}).statement_timeout == 30


def test_a_served_analyst_without_a_password_is_refused_at_load(tmp_path):
    from dpsql.errors import ProfileError
    from dpsql.deployment.profile import Profile

    from dpsql.interfaces.server.auth import scram_verifier

    spec = {"data": {"database": "d.duckdb", "catalog": "c.toml"}, "server": {"listen": "127.0.0.1:0"},
            "analysts": {"alice": {"password": scram_verifier("alice-pw")}, "carol": {"epsilon": 1}}}
    with pytest.raises(ProfileError, match=r"\[analysts.carol\] has no password.*dpsql passwd carol"):
        Profile.from_dict(spec, tmp_path / "p.toml")
    del spec["server"]  # not served: an analyst of shells needs no password
    assert Profile.from_dict(spec, tmp_path / "p.toml").analysts["carol"].password is None


def test_the_data_engine_is_checked(tmp_path):
    from dpsql.errors import ProfileError
    from dpsql.deployment.profile import Profile

    base = {"database": "d.duckdb", "catalog": "c.toml"}
    spark = Profile.from_dict({"data": {**base, "engine": "spark", "spark_master": "local[2]",
                                        "tables": {"people": "warehouse/people", "remote": "s3a://b/t"}},
                               "analysts": {"alice": {}}}, tmp_path / "p.toml")
    assert spark.data_engine == "spark" and spark.spark_master == "local[2]"
    assert spark.spark_tables == {"people": str(tmp_path / "warehouse" / "people"), "remote": "s3a://b/t"}
    for data, match in (({"engine": "oracle"}, "engine must be one of"),
                        ({"tables": {"people": "x"}}, "for engine = \"spark\""),
                        ({"engine": "spark", "tables": {"people": 3}}, "Parquet location")):
        with pytest.raises(ProfileError, match=match):
            Profile.from_dict({"data": {**base, **data}, "analysts": {"alice": {}}}, tmp_path / "p.toml")
