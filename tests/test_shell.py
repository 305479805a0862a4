"""The shell: rendering, statement boundaries, meta commands, scripts, cancellation, and a real terminal."""

import io
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

import dpsql
from dpsql.interfaces import cli
from dpsql.interfaces.shell import app as shell_module
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.interfaces.formatting import footer, render
from dpsql.answers.result import Result
from dpsql.interfaces.shell import Shell, demo_database
from dpsql.interfaces.shell.input import SqlCompleter, SqlLexer, is_complete
from dpsql.interfaces.shell.runner import Cancelled, CancelToken
from dpsql.interfaces.shell.schema import describe_tables

ROWS = 20_000
# A protected table whose scan takes minutes: something to cancel.
SLOW_VIEW = ("CREATE VIEW big AS SELECT (range % 100)::INTEGER AS age, "
             "CASE WHEN range % 2 = 0 THEN 'F' ELSE 'M' END AS sex FROM range(20000000000)")
CATALOG = PEOPLE_CATALOG_TOML + """
[tables.big]
[tables.big.columns]
age = { type = "integer", min = 0, max = 99 }
sex = { type = "categorical", values = ["F", "M"] }
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("shell")
    database = base / "people.duckdb"
    con = duckdb.connect(str(database))
    create_people_table(con, rows=ROWS)
    con.execute(SLOW_VIEW)
    con.execute("CREATE TABLE cities AS SELECT * FROM (VALUES ('Oslo', 709000), ('Lima', 10000000)) t(city, pop)")
    con.close()
    catalog = base / "catalog.toml"
    catalog.write_text(CATALOG)
    return str(database), str(catalog)


@pytest.fixture
def conn(files, tmp_path):
    database, catalog = files
    c = dpsql.connect(database, catalog=catalog, epsilon=1.0, state=str(tmp_path / "state"), seed=3)
    yield c
    c.close()


def make_shell(conn, mode="table"):
    out, err = io.StringIO(), io.StringIO()
    return Shell(conn, mode=mode, out=out, err=err), out, err


# --- rendering --------------------------------------------------------------------------------

def test_table_shows_value_plus_minus_half_width_aligned():
    result = Result(["sex", "n"], [("F", 10123.4), ("M", 9876.6)], [(None, 75.1), (None, 75.1)], kind="dp")
    text = render(result, "table")
    lines = text.splitlines()
    assert lines[0].split("|")[0].strip() == "sex"
    assert "10123 ± 147" in lines[2] and " 9877 ± 147" in lines[3]  # 1.96 * 75.1 = 147.2, 2 digits of it
    assert lines[2].index("±") == lines[3].index("±")
    assert footer(result).startswith("(2 rows, value ± 95% confidence half-width)")


def test_precision_follows_the_half_width_and_nulls_show():
    result = Result(["g", "avg"], [("a", 0.51234), ("b", None)], [(None, 0.0123), (None, None)], kind="dp")
    text = render(result, "table")
    assert "0.512 ± 0.024" in text and "NULL" in text


def test_machine_modes_add_stderr_columns():
    result = Result(["sex", "n"], [("F", 10.5)], [(None, 2.0)], kind="dp")
    assert render(result, "csv").splitlines() == ["sex,n,n_stderr", "F,10.5,2.0"]
    assert json.loads(render(result, "json")) == [{"sex": "F", "n": 10.5, "n_stderr": 2.0}]
    markdown = render(result, "markdown").splitlines()
    assert markdown[0] == "| sex | n |" and markdown[1] == "|---|---:|" and "± 3.9" in markdown[2]


def test_public_results_and_truncation():
    result = Result(["x"], [(i,) for i in range(5)], kind="public")
    text = render(result, "table", max_rows=2)
    assert text.endswith("... 3 more rows (.maxrows to show more)")
    assert footer(result) == "(5 rows)"


# --- statement boundaries, highlighting, completion ----------------------------------------------

@pytest.mark.parametrize("text, complete", [
    ("SELECT 1;", True), ("SELECT 1", False), ("SELECT ';'", False), ("SELECT ';", False),
    ("SELECT 1; -- done", True), ("SELECT 1 /* ; ", False), (".tables", True), ("", True),
    ("SELECT 1;\nSELECT 2", False), ("quit", True),
])
def test_statement_is_complete(text, complete):
    assert is_complete(text) is complete


def test_lexer_highlights_keywords_strings_and_protected_tables():
    lexer = SqlLexer(lambda: {"people"})
    lines = lexer.fragments("SELECT COUNT(*) FROM people\nWHERE sex = 'F' -- note")
    styles = {text: style for line in lines for style, text in line}
    assert styles["SELECT"] == "class:keyword" and styles["people"] == "class:protected"
    assert styles["'F'"] == "class:string" and styles["-- note"] == "class:comment"
    assert len(lines) == 2


def test_completer_offers_tables_columns_values_and_commands(conn):
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    tables = describe_tables(conn)
    completer = SqlCompleter(lambda: tables, lambda: {".tables": "", ".timer": ""}, lambda name: ["on", "off"])

    def complete(text):
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]

    assert "people" in complete("SELECT COUNT(*) FROM peo")
    assert complete("SELECT educ") == ["education"]
    assert complete("SELECT COUNT(*) FROM people WHERE education = 'Ba") == ["Bachelors'"]
    assert complete(".ta") == [".tables"]
    assert complete(".timer o") == ["on", "off"]
    assert "cities" in complete("SELECT * FROM cit")


# --- running statements and meta commands --------------------------------------------------------

def test_dp_query_prints_table_and_charge(conn):
    shell, out, _ = make_shell(conn)
    assert shell.handle("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex;")
    text = out.getvalue()
    assert " F   |" in text and "±" in text
    assert "charged ε=0.1" in text and "remaining ε=" in text
    assert shell.handle("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex;")
    assert "no charge (answered from earlier measurements)" in out.getvalue()


def test_errors_are_one_line_and_never_charge(conn):
    shell, out, err = make_shell(conn)
    for bad in ["SELECT * FROM people;", "SELECT COUNT(*) FROM people WHERE sex = 'X';",
                "SELECT COUNT(*) FROM nowhere;", ".frobnicate", ".schema nowhere", ".mode fancy"]:
        assert not shell.handle(bad)
    lines = err.getvalue().splitlines()
    assert len(lines) == 6 and all(line.startswith("error: ") for line in lines)
    assert "Traceback" not in err.getvalue()
    assert conn.budget.spent.rho == 0


def test_meta_commands(conn, tmp_path):
    shell, out, err = make_shell(conn)
    shell.handle(".tables")
    assert "people | protected (DP answers only)" in out.getvalue()
    assert "cities | public table" in out.getvalue()
    shell.handle(".schema people")
    assert "categorical ['F', 'M']" in out.getvalue() and "numeric [0, 200000) in 40 bins" in out.getvalue()
    shell.handle(".budget")
    assert "no charges yet" in out.getvalue()
    shell.handle("SELECT COUNT(*) FROM people WHERE age >= 65;")
    shell.handle(".budget")
    assert "| people |" in out.getvalue() and "SELECT COUNT(*) FROM people WHERE age >= 65" in out.getvalue()
    shell.handle(".explain SELECT region, COUNT(*) FROM people GROUP BY region")
    assert "Plan:" in out.getvalue()
    shell.handle(".timer on")
    shell.handle("SELECT 1 AS one;")
    assert "Run Time:" in out.getvalue()
    target = tmp_path / "out.csv"
    shell.handle(".mode csv")
    shell.handle(f".output {target}")
    shell.handle("SELECT city, pop FROM cities ORDER BY city;")
    shell.handle(".output")
    assert target.read_text().splitlines() == ["city,pop", "Lima,10000000", "Oslo,709000"]
    assert err.getvalue().count("error") == 0
    assert shell.handle(".help") and ".budget" in err.getvalue()
    shell.handle(".quit")
    assert shell.done


def test_workload_in_the_shell(conn):
    shell, out, _ = make_shell(conn)
    script = ("BEGIN WORKLOAD WITH (epsilon = 0.2);\nSELECT sex, COUNT(*) FROM people GROUP BY sex;\n"
              "SELECT COUNT(*) FROM people WHERE marital = 'Married';\nEND WORKLOAD;\n")
    assert shell.run_lines(io.StringIO(script)) == 0
    text = out.getvalue()
    assert "queued as q2" in text and "-- q1: SELECT sex" in text and "-- q2: SELECT COUNT(*)" in text
    assert text.count("workload: charged ε=0.2") == 1
    assert not shell.handle("BEGIN WORKLOAD; SELECT nope FROM people; END WORKLOAD;")
    assert shell.workload is None  # a workload that failed at END is closed
    assert shell.handle("SELECT sex, COUNT(*) FROM people GROUP BY sex;")


def test_script_stops_at_the_first_error(conn):
    shell, out, err = make_shell(conn, mode="csv")
    script = ".mode csv\nSELECT region, COUNT(*) AS n\nFROM people GROUP BY region;\nSELECT oops FROM people;\nSELECT 1;\n"
    assert shell.run_lines(io.StringIO(script)) == 1
    assert out.getvalue().splitlines()[0] == "region,n,n_stderr"
    assert "SELECT 1" not in out.getvalue() and err.getvalue().count("error:") == 1


# --- files: .read and .import -------------------------------------------------------------------

def test_read_runs_a_file_and_stops_at_its_first_error(conn, tmp_path):
    shell, out, err = make_shell(conn)
    script = tmp_path / "script.sql"
    script.write_text(".mode csv\nSELECT 6 * 7 AS answer;\nCREATE TABLE t AS\nSELECT 1 AS x;\n")
    assert shell.handle(f".read {script}")
    assert "answer\n42" in out.getvalue() and shell.mode == "csv"
    assert shell.handle("SELECT x FROM t;")
    script.write_text("SELECT 1 AS one;\nSELECT * FROM people;\nSELECT 2 AS two;\n")
    assert not shell.handle(f".read {script}")  # a script that reads it stops here too
    assert "one" in out.getvalue() and "two" not in out.getvalue()
    assert err.getvalue().count("error:") == 1
    loop = tmp_path / "loop.sql"
    loop.write_text(f".read {loop}\n")
    assert not shell.handle(f".read {loop}")
    assert "already being read" in err.getvalue()
    assert shell.run_lines(io.StringIO(f".read {script}\nSELECT 3 AS three;\n")) == 1
    assert "three" not in out.getvalue()


def test_import_loads_a_csv_into_a_public_table(conn, tmp_path):
    shell, out, err = make_shell(conn)
    (tmp_path / "towns.csv").write_text("town,pop\nBergen,285000\nCusco,430000\n")
    (tmp_path / "more.csv").write_text("pop,town\n1,Nowhere\n")
    assert shell.handle(f".import {tmp_path / 'towns.csv'} towns")
    assert shell.handle(f".import '{tmp_path / 'more.csv'}' towns")  # appended by column name
    assert "2 rows imported into towns" in out.getvalue() and "1 row imported into towns" in out.getvalue()
    assert conn.execute("SELECT town, pop FROM towns ORDER BY pop").fetchall() == [
        ("Nowhere", 1), ("Bergen", 285000), ("Cusco", 430000)]
    (tmp_path / "cities.csv").write_text("pop,city\n1,Nowhere\n")
    assert shell.handle(f".import {tmp_path / 'cities.csv'} cities")  # the owner's public table: its workspace copy
    assert conn.execute("SELECT COUNT(*) FROM cities").fetchall() == [(3,)]
    assert "towns" in [t.name for t in shell.tables()]
    (tmp_path / "bad.csv").write_text("a,b\n1,2,3\n")
    for bad in (f".import {tmp_path / 'towns.csv'} people", f".import {tmp_path / 'towns.csv'} PEOPLE",
                f".import {tmp_path / 'towns.csv'} main.people", f".import {tmp_path / 'bad.csv'} t",
                f".import {tmp_path / 'nope.csv'} t", f".import {tmp_path / 'towns.csv'}", ".import 'open t"):
        assert not shell.handle(bad), bad
    lines = err.getvalue().splitlines()
    assert len(lines) == 7 and all(line.startswith("error: ") for line in lines)
    assert "protected table" in lines[0] and "protected table" in lines[1] and "CSV parse error" in lines[3]


def test_read_and_import_refuse_the_owners_files(files, tmp_path):
    database, catalog = files
    state = tmp_path / "state"
    conn = dpsql.connect(database, catalog=catalog, epsilon=1.0, state=str(state), seed=3)
    shell, _, err = make_shell(conn)
    conn.execute("SELECT COUNT(*) FROM people")  # the ledger exists
    link = tmp_path / "innocent.csv"
    link.symlink_to(state)
    for path in (database, catalog, state, link, f"{database}.wal", "/dev/zero", tmp_path):
        assert not shell.handle(f".read {path}")
        assert not shell.handle(f".import {path} t")
    assert err.getvalue().count("error: ") == 14 and "owner's files" in err.getvalue()
    conn.close()


def test_under_a_profile_files_are_read_from_its_output_dir_only(tmp_path):
    data = tmp_path / "data.duckdb"
    with duckdb.connect(str(data)) as con:
        create_people_table(con, rows=1_000)
    (tmp_path / "catalog.toml").write_text(PEOPLE_CATALOG_TOML)
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "towns.csv").write_text("town\nBergen\n")
    (tmp_path / "outside.csv").write_text("town\nCusco\n")
    profile = tmp_path / "profile.toml"
    text = ('[data]\ndatabase = "data.duckdb"\ncatalog = "catalog.toml"\nlog = "owner.log"\n'
            'output_dir = "exports"\n[budget]\nepsilon = 1\n[analysts.bob]\n')
    profile.write_text(text)
    (tmp_path / "owner.log").write_text("town\nsecret\n")
    with dpsql.connect(profile=profile, analyst="bob") as conn:
        shell, out, err = make_shell(conn)
        assert shell.handle(f".import {tmp_path / 'exports' / 'towns.csv'} towns")
        for path in (tmp_path / "outside.csv", tmp_path / "exports" / ".." / "outside.csv", profile,
                     tmp_path / "owner.log", tmp_path / "catalog.toml"):
            assert not shell.handle(f".import {path} t") and not shell.handle(f".read {path}")
        assert "may only be read under" in err.getvalue() and "secret" not in out.getvalue()
    profile.write_text(text.replace('output_dir = "exports"\n', ""))
    with dpsql.connect(profile=profile, analyst="bob") as conn:
        shell, _, err = make_shell(conn)
        assert not shell.handle(f".read {tmp_path / 'exports' / 'towns.csv'}")
        assert "lets analysts read no files" in err.getvalue()


# --- the pager ------------------------------------------------------------------------------------

def test_the_pager_is_off_without_a_terminal(conn, monkeypatch):
    monkeypatch.setattr(shell_module, "page", lambda text, stream: pytest.fail("paged without a terminal"))
    shell, out, _ = make_shell(conn)
    assert shell.pager is False
    assert shell.handle(".pager on") and shell.pager is True
    assert shell.handle("SELECT range AS n FROM range(500);")  # standard output is no terminal: not paged
    assert out.getvalue().count("\n") > 500
    assert not shell.handle(".pager maybe")


def test_page_runs_the_pager_command(tmp_path, monkeypatch):
    target = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"cat > {target}")
    assert shell_module.page("a\nb", sys.stdout) and target.read_text() == "a\nb\n"
    monkeypatch.setenv("PAGER", "no-such-pager-dpsql")
    assert not shell_module.page("a", sys.stdout)  # the caller then prints the text itself


# --- the budget: ε does not add up under zCDP ------------------------------------------------------

def test_budget_explains_why_epsilon_does_not_add_up(conn, files, tmp_path):
    shell, out, _ = make_shell(conn)
    why = "ε figures do not add up: charges compose in ρ (zCDP), and each ε is its ρ converted at δ=1e-09"
    assert shell.handle("SELECT COUNT(*) FROM people WHERE age >= 65;")
    assert shell.handle("SELECT COUNT(*) FROM people WHERE age < 18;")
    assert out.getvalue().count(why) == 1  # after the first charge only
    assert shell.handle(".budget")
    assert out.getvalue().count(why) == 2
    assert "spent ε=0.2" not in out.getvalue() and "(ρ=0.0003543)" in out.getvalue()  # ρ adds up, ε does not
    assert "(ρ=" in shell.banner("db") and "left of ρ=" in shell._toolbar()
    database, catalog = files
    with dpsql.connect(database, catalog=catalog, epsilon=1.0, delta=0, state=str(tmp_path / "pure"), seed=3) as pure:
        shell, out, _ = make_shell(pure)
        assert shell.handle("SELECT COUNT(*) FROM people WHERE age >= 65;") and shell.handle(".budget")
        assert "do not add up" not in out.getvalue() and "spent ε=0.1" in out.getvalue()
        assert "ρ" not in shell.banner("db")


# --- cancellation ------------------------------------------------------------------------------

def test_cancel_token_has_a_point_of_no_return():
    token = CancelToken()
    token.before_charge()
    assert token.cancel() is False  # charging began: the statement finishes
    token = CancelToken()
    assert token.cancel() is True
    with pytest.raises(Cancelled):
        token.before_charge()


def test_a_cancelled_statement_is_refused_before_it_charges(conn):
    token = CancelToken()
    token.cancel()
    conn.session.before_charge = token.before_charge
    try:
        with pytest.raises(Cancelled):
            conn.session.execute("SELECT race, COUNT(*) FROM people GROUP BY race")
    finally:
        conn.session.before_charge = None
    assert conn.budget.spent.rho == 0 and conn.ledger.charges() == []


def test_ctrl_c_cancels_a_running_statement_without_charging(conn):
    shell, out, err = make_shell(conn)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    assert not shell.handle("SELECT sex, COUNT(*) FROM big GROUP BY sex;")
    assert time.monotonic() - started < 20
    assert "statement cancelled; nothing was charged" in out.getvalue()
    assert conn.budget.spent.rho == 0
    assert shell.handle("SELECT sex, COUNT(*) FROM people GROUP BY sex;")  # the session still works


# --- the command line ------------------------------------------------------------------------------

def test_cli_command_and_stdin(files, tmp_path, monkeypatch, capsys):
    database, catalog = files
    common = ["shell", database, "--catalog", catalog, "--state", str(tmp_path / "state")]
    assert cli.main(common + ["--mode", "json", "-c", "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex"]) == 0
    out, err = capsys.readouterr()
    assert [r["sex"] for r in json.loads(out)] == ["F", "M"]
    assert "charged" in err
    monkeypatch.setattr(sys, "stdin", io.StringIO("SELECT 1 AS one;\nSELECT * FROM people;\nSELECT 2;\n"))
    assert cli.main(common) == 1
    out, err = capsys.readouterr()
    assert "one" in out and "2" not in out
    assert err.strip() == "error: SELECT * would release raw rows of a protected table; select aggregates " \
                          "(COUNT, SUM, AVG) and GROUP BY columns"


def test_missing_database_is_one_line(tmp_path, capsys):
    assert shell_module.main(str(tmp_path / "nope.duckdb"), command="SELECT 1") == 1
    assert capsys.readouterr().err.strip() == f"error: database file {str(tmp_path / 'nope.duckdb')!r} does not exist"


def test_demo_database_is_generated_once_and_cached(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(shell_module, "DEMO_ROWS", 2_000)
    database, catalog = demo_database(2_000)
    stamp = os.stat(database).st_mtime_ns
    assert demo_database(2_000) == (database, catalog) and os.stat(database).st_mtime_ns == stamp
    assert Path(database).parent == tmp_path / "dpsql" and catalog.read_text() == PEOPLE_CATALOG_TOML
    assert shell_module.main(None, state=str(tmp_path / "state"),
                             command="SELECT COUNT(*) AS n FROM people") == 0
    assert "±" in capsys.readouterr().out


def test_demo_write_makes_the_readmes_database_and_catalog(tmp_path, capsys):
    database = tmp_path / "census.duckdb"
    assert cli.main(["demo", "--write", str(database), "--rows", "1000"]) == 0
    assert (tmp_path / "catalog.toml").read_text() == PEOPLE_CATALOG_TOML
    with duckdb.connect(str(database), read_only=True) as con:
        assert con.execute("SELECT COUNT(*) FROM people").fetchall() == [(1000,)]
    assert cli.main(["demo", "--write", str(database), "--catalog", str(tmp_path / "other.toml")]) == 1
    assert "already exists" in capsys.readouterr().err and not (tmp_path / "other.toml").exists()


# --- a real terminal ---------------------------------------------------------------------------------

pexpect = pytest.importorskip("pexpect")
ENTER = "\r"


@pytest.fixture
def terminal(files, tmp_path):
    """Start `dpsql shell` in a pseudo-terminal; returns a function that spawns one (keywords: environment)."""
    database, catalog = files
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "xdg-state"), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1",
               PAGER="cat")  # never an interactive pager that would wait for a key
    children = []

    def spawn(**extra_env):
        child = pexpect.spawn(sys.executable, ["-m", "dpsql.interfaces.cli", "shell", database, "--catalog", catalog,
                                               "--state", str(tmp_path / "state")],
                              env={**env, **extra_env}, encoding="utf-8", timeout=60, dimensions=(40, 150))
        child.expect("dpsql>")
        children.append(child)
        return child

    yield spawn
    for child in children:
        child.close(force=True)


def test_terminal_typing_completion_errors_and_ctrl_c(terminal):
    child = terminal()
    child.send("SELECT COUNT(*) AS n FROM peo")
    child.expect("peo")
    child.send("\t")
    child.expect("ple")  # the completion is drawn: typing on is safe
    child.send(ENTER + "WHERE education = 'Bach")  # Enter inside a statement starts a new line
    child.expect("Bach")
    child.send("\t")
    child.expect("elors'")
    child.send(";" + ENTER)
    child.expect("charged ε=0.1")
    assert "±" in child.before
    child.send("SELECT * FROM people;" + ENTER)
    child.expect("would release raw rows")
    child.send("SELECT garbage")
    child.send("\x03")  # Ctrl-C at the prompt drops the line
    child.send("SELECT 6 * 7 AS answer;" + ENTER)
    child.expect("42")
    child.send("SELECT sex, COUNT(*) FROM big GROUP BY sex;" + ENTER)
    child.expect("Ctrl-C cancels")  # the progress line of a long statement
    child.send("\x03")
    child.expect("nothing was charged")
    child.send(".budget" + ENTER)
    child.expect(r"charged at \(UTC\)")
    child.expect("dpsql>")
    assert "big" not in child.before  # one charge, for people; none for the cancelled statement
    assert "Traceback" not in child.before
    child.send("\x04")  # Ctrl-D quits
    child.expect(pexpect.EOF)
    child.wait()
    assert child.exitstatus == 0


def test_terminal_history_persists(terminal, tmp_path):
    child = terminal()
    child.send("SELECT 40 + 2 AS answer;" + ENTER)
    child.expect("42")
    child.send(".quit" + ENTER)
    child.expect(pexpect.EOF)
    history = (tmp_path / "xdg-state" / "dpsql" / "history").read_text()
    assert "SELECT 40 + 2 AS answer;" in history
    child = terminal()
    child.send("\x1b[A")  # Up: the previous session's statements
    child.expect(".quit")
    child.send("\x1b[A")
    child.expect("answer")
    child.send(ENTER)
    child.expect("42")


def test_terminal_pages_results_that_do_not_fit(terminal):
    child = terminal(PAGER="sed 's/^/PAGED /'")
    child.send("SELECT range AS n FROM range(60);" + ENTER)
    child.expect(r"PAGED +59")
    child.expect(r"\(60 rows\)")
    child.send("SELECT 'short' AS fits;" + ENTER)
    child.expect(r"\(1 row\)")
    assert "PAGED" not in child.before
    child.send(".pager off" + ENTER)
    child.send("SELECT range AS n FROM range(61);" + ENTER)
    child.expect(r"\(61 rows\)")
    assert "PAGED" not in child.before
