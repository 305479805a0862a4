"""Attacks on the privacy boundary, one class at a time, each through an analyst's surface.

Every attack here once released exact data, or destroyed the budget's record, for
free: analyst SQL ran in the database the DP scan then read, so it could redefine
what the scan calls, watch it, or starve it; the shell wrote wherever it was told;
a bad catalog switched protection off. Each test states what the attacker tries
and asserts it is refused or has no effect, with nothing charged for a refusal.
"""

import io
import math
import os

import duckdb
import pytest

import dpsql
from dpsql.interfaces.shell import Shell

SECRET_INCOME = 731.0625  # one row holds it; the attacks try to learn whether it exists
CATALOG = """
[tables.people.columns]
age = { type = "integer", min = 0, max = 19 }
sex = { type = "categorical", values = ["F", "M"] }
income = { type = "numeric", min = 0, max = 10000, bins = 4 }
"""
PEOPLE = (
    "CREATE TABLE people AS SELECT (i % 20)::INT AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, "
    f"CASE WHEN i = 7 THEN {SECRET_INCOME} ELSE i * 3.0 END AS income FROM range(300) t(i)"
)
QUERY = "SELECT income, COUNT(*) FROM people GROUP BY income"


@pytest.fixture
def files(tmp_path):
    database = tmp_path / "data.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute(PEOPLE)
        con.execute("CREATE TABLE notes AS SELECT 1 AS id, 'hello' AS txt")
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(CATALOG)
    return database, catalog, tmp_path / "state"


@pytest.fixture
def conn(files):
    database, catalog, state = files
    c = dpsql.connect(str(database), catalog=str(catalog), epsilon=100, query_epsilon=1, state=str(state), seed=1)
    yield c
    c.close()


def _refused_free(conn, sql: str) -> None:
    """`sql` is refused with a dpsql error, and nothing is charged."""
    spent = conn.budget.spent.rho
    with pytest.raises(dpsql.Error):
        conn.execute(sql)
    assert conn.budget.spent.rho == spent


def _answer(conn) -> list:
    return conn.execute(QUERY).fetchall()


# --- 1. overriding what the measurement calls ------------------------------------------------------

OVERRIDES = [  # each fails the scan exactly when the secret row exists
    f"CREATE OR REPLACE MACRO greatest(a, b) AS CASE WHEN a * 2500 = {SECRET_INCOME} THEN error('x') "
    "ELSE system.main.greatest(a, b) END",
    f"CREATE OR REPLACE MACRO floor(x) AS CASE WHEN x * 2500 = {SECRET_INCOME} THEN error('x') "
    "ELSE system.main.floor(x) END",
    f"CREATE OR REPLACE MACRO least(a, b) AS CASE WHEN a * 2500 = {SECRET_INCOME} THEN error('x') "
    "ELSE system.main.least(a, b) END",
    'CREATE OR REPLACE MACRO "-"(a, b) AS CASE WHEN a = 731.0625 THEN error(\'x\') ELSE system.main."-"(a, b) END',
    "CREATE OR REPLACE FUNCTION floor(x) AS 0",
]


@pytest.mark.parametrize("macro", OVERRIDES)
def test_analyst_cannot_define_functions_the_scan_calls(conn, macro):
    _refused_free(conn, macro)
    assert len(_answer(conn)) == 4  # the scan runs unaffected, and is charged


@pytest.mark.parametrize("macro", OVERRIDES[:4])
def test_macros_stored_in_the_database_do_not_reach_the_scan(files, macro):
    """A macro already in the data file (left by an earlier version, or by the owner) is not called."""
    database, catalog, state = files
    with duckdb.connect(str(database)) as owner:
        owner.execute(macro)
        owner.execute("CREATE OR REPLACE MACRO count_star() AS 0")
    with dpsql.connect(str(database), catalog=str(catalog), epsilon=100, query_epsilon=1, state=str(state),
                       seed=1) as conn:
        assert len(_answer(conn)) == 4


def test_a_sequence_cannot_count_the_scanned_rows(conn):
    _refused_free(conn, "CREATE SEQUENCE seen")
    _refused_free(conn, "CREATE OR REPLACE MACRO greatest(a, b) AS system.main.greatest(a, b) + 0 * nextval('seen')")
    _answer(conn)
    _refused_free(conn, "SELECT currval('seen')")


def test_objects_the_analyst_may_create_live_apart_from_the_data(conn, files):
    """Tables and views are the analyst's own: the data file never sees them."""
    conn.execute("CREATE TABLE mine AS SELECT 42 AS x")
    conn.execute("CREATE VIEW v AS SELECT x + 1 AS y FROM mine")
    assert conn.execute("SELECT y FROM v").fetchall() == [(43,)]
    conn.execute("INSERT INTO notes VALUES (2, 'mine')")  # a public table: the analyst's copy changes
    assert conn.execute("SELECT COUNT(*) FROM notes").fetchall() == [(2,)]
    conn.close()
    with duckdb.connect(str(files[0]), read_only=True) as owner:
        names = {r[0] for r in owner.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert names == {"people", "notes"}
        assert owner.execute("SELECT COUNT(*) FROM notes").fetchall() == [(1,)]


# --- 2. watching the scan: logging, profiling, progress ---------------------------------------------

WATCHES = [
    "SET enable_logging = true", "SET logging_level = 'debug'", "CALL enable_logging()",
    "PRAGMA enable_profiling = 'json'", "SET enable_profiling = 'query_tree'", "SET profiling_mode = 'detailed'",
    "PRAGMA enable_logging", "SET enable_progress_bar = true",
]


@pytest.mark.parametrize("sql", WATCHES)
def test_the_scan_cannot_be_logged_or_profiled(conn, sql):
    _refused_free(conn, sql)
    _answer(conn)
    for view in ("SELECT * FROM duckdb_logs", "SELECT * FROM duckdb_logs()"):
        try:
            shown = repr(conn.execute(view).fetchall())
        except dpsql.Error:
            continue
        assert "people" not in shown and "GROUP BY" not in shown.upper()


# --- 3. resource limits as a signal -------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "SET memory_limit = '1MB'", "SET threads = 1", "SET max_memory = '1MB'", "RESET memory_limit",
    "SET temp_directory = ''", "PRAGMA memory_limit = '1MB'", "SET GLOBAL memory_limit = '1MB'",
    "SET SESSION threads TO 1", "SET VARIABLE v = 1", "USE system", "ATTACH ':memory:' AS other",
    "INSTALL httpfs", "LOAD json", "CHECKPOINT", "VACUUM", "SET search_path = 'main'",
])
def test_engine_settings_are_not_the_analysts(conn, sql):
    _refused_free(conn, sql)
    assert len(_answer(conn)) == 4


# --- 4. the shell writes only where it may ----------------------------------------------------------

def _shell(files) -> Shell:
    database, catalog, state = files
    c = dpsql.connect(str(database), catalog=str(catalog), epsilon=100, query_epsilon=1, state=str(state), seed=1)
    return Shell(c, out=io.StringIO(), err=io.StringIO())


@pytest.mark.parametrize("target", ["state", "data.duckdb", "catalog.toml", "state.lock", "data.duckdb.wal",
                                    "state.wal.checkpoint", "data.duckdb.wal.recovery"])
def test_shell_output_cannot_touch_the_data_the_ledger_or_the_catalog(files, target):
    shell = _shell(files)
    shell.conn.execute(QUERY)  # a charge to lose
    base = files[2].parent
    path = base / target
    before = path.read_bytes() if path.exists() else None
    for command in (f".output {path}", f".once {path}", f".output --overwrite {path}",
                    f".output {base}/./{target}", f".output {os.path.relpath(path)}"):
        assert not shell.handle(command), command
        assert "error" in shell.err.getvalue()
    shell.handle("SELECT 1 AS x;")
    shell.conn.close()
    assert (path.read_bytes() if path.exists() else None) == before
    assert dpsql.budget.ledger.Ledger.existing(str(files[2])).verify() == []


def test_shell_output_through_a_link_to_the_ledger_is_refused(files):
    shell = _shell(files)
    shell.conn.execute(QUERY)
    link = files[2].parent / "innocent.txt"
    link.symlink_to(files[2])
    hard = files[2].parent / "hard.txt"
    os.link(files[2], hard)
    for path in (link, hard):
        assert not shell.handle(f".output --overwrite {path}")
    shell.conn.close()
    assert len(dpsql.budget.ledger.Ledger.existing(str(files[2])).charges()) == 1


def test_shell_output_does_not_overwrite_without_a_flag(files, tmp_path):
    shell = _shell(files)
    existing = tmp_path / "report.txt"
    existing.write_text("keep me")
    assert not shell.handle(f".output {existing}")
    assert existing.read_text() == "keep me"
    assert shell.handle(f".output --overwrite {existing}")
    shell.handle("SELECT 1 AS x;")
    shell.handle(".output")
    assert "keep me" not in existing.read_text()
    fresh = tmp_path / "fresh.txt"
    assert shell.handle(f".once {fresh}")
    shell.handle("SELECT 2 AS y;")
    shell.handle("SELECT 3 AS z;")
    assert "y" in fresh.read_text() and "z" not in fresh.read_text()


# --- 5. inputs that switch protection off --------------------------------------------------------------

@pytest.mark.parametrize("content", [b"", b"   \n# nothing\n", b"\xff\xfe[tables]", b"[tables]\n", b"tables = 3",
                                     b"[tables.people.columns]\nage = { type = 'integer', min = 0, max = \xff }"])
def test_a_catalog_that_protects_nothing_is_refused(files, content):
    database, catalog, state = files
    catalog.write_bytes(content)
    with pytest.raises(dpsql.CatalogError):
        dpsql.connect(str(database), catalog=str(catalog), state=str(state))


@pytest.mark.parametrize("catalog", [{}, {"tables": {}}, "", "  "])
def test_an_empty_catalog_object_is_refused(files, catalog):
    with pytest.raises(dpsql.CatalogError):
        dpsql.connect(str(files[0]), catalog=catalog, state=str(files[2]))


# --- errors never depend on the data ----------------------------------------------------------------

def test_a_failing_scan_says_one_fixed_thing_and_charges_nothing(files):
    """A stored value that does not fit the declared type fails the scan; the message never quotes it."""
    database, catalog, state = files
    with duckdb.connect(str(database)) as owner:
        owner.execute("CREATE TABLE people2 AS SELECT age, sex, income::VARCHAR AS income FROM people")
        owner.execute("UPDATE people2 SET income = 'SECRET-VALUE-9' WHERE income = '731.0625'")
    catalog.write_text(CATALOG + CATALOG.replace("people", "people2"))
    with dpsql.connect(str(database), catalog=str(catalog), epsilon=100, query_epsilon=1, state=str(state)) as conn:
        messages = set()
        for sql in ("SELECT income, COUNT(*) FROM people2 GROUP BY income", "SELECT SUM(income) FROM people2"):
            with pytest.raises(dpsql.OperationalError) as failed:
                conn.execute(sql)
            messages.add(str(failed.value))
            assert "SECRET" not in str(failed.value)
        assert len(messages) == 1
        assert conn.budget.spent.rho == 0


# --- raw exceptions from analyst input ----------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "SET dpsql.max_rmse = 1e-300", "SET dpsql.max_rmse = 1e300", "SET dpsql.max_rmse = 'nan'",
    "SET dpsql.query_epsilon = 1e-320", "SET dpsql.query_epsilon = 'inf'", "SET dpsql.objective = 'nosuch'",
    "SELECT /*+ WEIGHT(1e308) */ COUNT(*) FROM people", "SELECT /*+ WEIGHT(1e-320) */ COUNT(*) FROM people",
    "SELECT /*+ WEIGHT(nan) */ COUNT(*) FROM people", "SELECT /*+ WEIGHT(-1) */ COUNT(*) FROM people",
    "SELECT /*+ WEIGHT() */ COUNT(*) FROM people",
    "BEGIN WORKLOAD WITH (epsilon = 1, delta = 1); SELECT COUNT(*) FROM people; END WORKLOAD",
    "BEGIN WORKLOAD WITH (epsilon = 1, delta = 2); SELECT COUNT(*) FROM people; END WORKLOAD",
    "BEGIN WORKLOAD WITH (epsilon = 1e308); SELECT COUNT(*) FROM people; END WORKLOAD",
    "BEGIN WORKLOAD WITH (max_rmse = 1e-300); SELECT COUNT(*) FROM people; END WORKLOAD",
    "BEGIN WORKLOAD WITH (rho = 1e-300); SELECT COUNT(*) FROM people; END WORKLOAD",
])
def test_extreme_settings_are_dpsql_errors_or_answers(conn, sql):
    spent = conn.budget.spent.rho
    try:
        cursor = conn.execute(sql)
    except dpsql.Error:
        assert conn.budget.spent.rho == spent
        return
    while True:  # an answer: finite numbers, and what it charged fits the budget
        for row in cursor.fetchall() if cursor.description else []:
            assert all(not isinstance(v, float) or math.isfinite(v) for v in row)
        if not cursor.nextset():
            break
    assert conn.budget.spent.rho <= conn.budget.total.rho * (1 + 1e-9)


@pytest.mark.parametrize("kwargs", [{"delta": 1}, {"delta": 1.5}, {"delta": -1e-9}, {"epsilon": float("nan")},
                                    {"delta": float("nan")}, {"epsilon": -1}, {"query_epsilon": float("inf")}])
def test_invalid_budgets_at_connect_are_dpsql_errors(files, kwargs):
    database, catalog, state = files
    with pytest.raises(dpsql.Error):
        dpsql.connect(str(database), catalog=str(catalog), state=str(state), **kwargs).close()


@pytest.mark.parametrize("kwargs", [{"epsilon": 1e308, "delta": 1e-300}, {"epsilon": 1e-300}, {"rho": 1e300},
                                    {"epsilon": 5, "delta": 1e-320}])
def test_extreme_budgets_at_connect_open_or_fail_cleanly(files, kwargs):
    database, catalog, state = files
    try:
        dpsql.connect(str(database), catalog=str(catalog), state=str(state), **kwargs).close()
    except dpsql.Error:
        pass


# --- noise calibrated to the true sensitivity, whatever the coefficients ----------------------------

ZIP_CATALOG = '[tables.people.columns]\nzip = { type = "integer", min = 0, max = 49 }\n'


def _exact_l2_sensitivity(block, domain) -> float:
    """The block's largest column L2 norm in exact rationals, with each coefficient and entry read as
    its printed decimal, as the exact answer reads them."""
    from fractions import Fraction

    clique = block.attributes(domain)
    columns: dict[tuple, Fraction] = {}
    for term in block.terms:
        matrix = [[Fraction(1)]]
        for attribute in clique:
            f = block.term_factors(term, domain, (attribute,))[0].dense()
            factor = [[Fraction(repr(float(x))) for x in row] for row in f]
            matrix = [[a * b for a in r1 for b in r2] for r1 in matrix for r2 in factor]
        coef = Fraction(repr(float(term.coef)))
        for i, row in enumerate(matrix):
            for j, x in enumerate(row):
                columns[i, j] = columns.get((i, j), Fraction(0)) + coef * x
    norms: dict[int, Fraction] = {}
    for (i, j), x in columns.items():
        norms[j] = norms.get(j, Fraction(0)) + x * x
    return float(max(norms.values())) ** 0.5


def _cancelling(c: str, secret: str = "10000") -> str:
    return (f"SELECT SUM(CASE WHEN zip >= 7 THEN {c} ELSE 0 END - CASE WHEN zip >= 8 THEN {c} ELSE 0 END "
            f"+ CASE WHEN zip = 7 THEN {secret} - {c} ELSE 0 END + CASE WHEN zip = 1 THEN 1 ELSE 0 END) FROM people")


def test_huge_cancelling_coefficients_are_refused():
    """The red team's query: terms of 6e15 that cancel to a per-row effect of 10000 once passed with a
    computed sensitivity of 1 (noise std 11), so one ε=0.5 answer told whether a row existed."""
    from dpsql.sql.compiler import compile_query

    catalog = dpsql.Catalog.load(ZIP_CATALOG)
    with pytest.raises(dpsql.ProgrammingError, match="rescale"):
        compile_query(_cancelling("6060831286450125"), catalog)


@pytest.mark.parametrize("c", ["999999999999999", "606083128645012.5", "123456789012345.6", "1e15", "77777777.77",
                               "3", "0.1"])
def test_cancelling_terms_never_lower_the_sensitivity(c):
    from dpsql.sql.compiler import compile_query

    catalog = dpsql.Catalog.load(ZIP_CATALOG)
    block = compile_query(_cancelling(c), catalog).blocks[0]
    domain = catalog.get("people").domain
    assert block.sensitivity(domain, 2) >= _exact_l2_sensitivity(block, domain)
    assert block.sensitivity(domain, 1) >= _exact_l2_sensitivity(block, domain)  # L1 ≥ L2


def test_random_cancellations_never_lower_the_sensitivity():
    """The red team found working constants by random search in seconds; none may work now."""
    import random

    from dpsql.sql.compiler import compile_query

    catalog = dpsql.Catalog.load(ZIP_CATALOG)
    domain = catalog.get("people").domain
    rng = random.Random(7)
    for _ in range(150):
        c = repr(rng.uniform(1, 1e15) if rng.random() < 0.5 else float(rng.randrange(1, 10**15)))
        block = compile_query(_cancelling(c, repr(float(rng.randrange(1, 10**6)))), catalog).blocks[0]
        assert block.sensitivity(domain, 2) >= _exact_l2_sensitivity(block, domain), c


def test_an_ordinary_query_keeps_its_exact_sensitivity():
    """The margin is rounding-sized when nothing cancels: an OR of ranges still has sensitivity 1."""
    from dpsql.sql.compiler import compile_query

    catalog = dpsql.Catalog.load(ZIP_CATALOG)
    block = compile_query("SELECT COUNT(*) FROM people WHERE zip < 10 OR zip > 40 OR zip = 20", catalog).blocks[0]
    assert block.sensitivity(catalog.get("people").domain, 2) == pytest.approx(1.0, rel=1e-12)
