"""Noise is born charged: nothing computed from noise is seen before its charge, and a charged statement answers.

Two kinds of test, on every statement kind that draws noise (query, workload, key release, quantile,
continual EMIT, synthesis, graph, hybrid) and on local reports:

- **attacks**: outer expressions that pass on zeros (the pre-charge dry run) but fail on some noisy
  values (CAST overflow, division by zero, a math function's domain, string and date conversions,
  `error()`, huge LIMIT/OFFSET, failures inside workloads). Before, the failure came before the charge,
  quoted the noisy value and spent nothing, so retries averaged the noise away. Now each is charged
  before anything runs on the noise, the message quotes no value, and asking again is free and the same.
- **fault injection**: every step after the first draw is made to fail in turn (an exception whose
  message holds a "secret" number): the statement is charged (from the first draw on, a statement is
  paid for), the error is a dpsql error without the secret, and, where the failure came after the
  measurements were recorded, asking again is free and answers.
"""

import random
import re

import duckdb
import numpy as np
import pytest

import dpsql
import dpsql.executor
import dpsql.answers.result
import dpsql.releases.synth
from dpsql.errors import Error, OperationalError
from mechanisms.domain import Domain
from mechanisms.ldp.answering import client_protocol

FLAT = Domain(("a",), (8,))

SECRET = "98765.4321"

CATALOG = """
[tables.people]
[tables.people.columns]
age = { type = "integer", min = 0, max = 99 }
sex = { type = "categorical", values = ["F", "M"] }
income = { type = "numeric", min = 0, max = 100000, bins = 20 }

[tables.visits]
privacy_unit = "user_id"
max_rows_per_unit = 2
[tables.visits.columns]
url = { type = "key" }
age = { type = "integer", min = 0, max = 9 }

[tables.signups]
privacy_unit = "user_id"
max_rows_per_unit = 3
time = "signup_time"
append_only = true
[tables.signups.columns]
region = { type = "categorical", values = ["N", "S"] }

[tables.survey_optin]
rows = 400
[tables.survey_optin.columns]
a = { type = "integer", min = 0, max = 7 }

[tables.survey]
model = "local"
protocol = "grr"
epsilon = 1.0
opt_in = "survey_optin"
[tables.survey.columns]
a = { type = "integer", min = 0, max = 7 }

[tables.reports]
model = "local"
protocol = "grr"
epsilon = 1.0
[tables.reports.columns]
a = { type = "integer", min = 0, max = 7 }

[graphs.contacts]
source = "a"
target = "b"
max_degree = 4
degrees = "contact_degrees"
"""

CONTINUAL = ("CREATE CONTINUAL QUERY weekly AS SELECT region, COUNT(*) AS n FROM signups GROUP BY region "
             "EMIT EVERY INTERVAL '7 days' ON signup_time FROM '2025-01-06' FOR 4 RELEASES WITH (epsilon = 1)")


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("charge_order") / "data.duckdb")
    rng = np.random.default_rng(0)
    con = duckdb.connect(path)
    n = 3000
    con.execute("CREATE TABLE people AS SELECT unnest(?) AS age, unnest(?) AS sex, unnest(?) AS income",
                [rng.integers(0, 100, n).tolist(), rng.choice(["F", "M"], n).tolist(),
                 rng.uniform(0, 100000, n).tolist()])
    visits = [(u, "/home" if u % 3 else "/cart", u % 10) for u in range(3000)]
    con.execute("CREATE TABLE visits AS SELECT unnest(?) AS user_id, unnest(?) AS url, unnest(?) AS age",
                [list(c) for c in zip(*visits)])
    signups = [(u, int(d), "N" if u % 3 else "S") for u in range(600) for d in rng.integers(0, 28, 1 + u % 3)]
    con.execute("CREATE TABLE signups AS SELECT unnest(?) AS user_id, TIMESTAMP '2025-01-06' + unnest(?) * "
                "INTERVAL 1 DAY AS signup_time, unnest(?) AS region", [list(c) for c in zip(*signups)])
    con.execute("CREATE TABLE survey_optin AS SELECT unnest(?) AS a", [rng.integers(0, 8, 400).tolist()])
    grr, python_rng = client_protocol("grr", 1.0, FLAT), random.Random(0)
    for name in ("survey", "reports"):
        payloads = [grr.randomize(int(v), python_rng) for v in rng.integers(0, 8, 2000)]
        keys = list(payloads[0])
        columns = ", ".join(f"unnest(${i + 1}) AS {k}" for i, k in enumerate(keys))
        con.execute(f"CREATE TABLE {name} AS SELECT {columns}", [[p[k] for p in payloads] for k in keys])
    a, b = rng.integers(0, 60, 300), rng.integers(0, 60, 300)
    con.execute("CREATE TABLE contacts AS SELECT unnest(?) AS a, unnest(?) AS b", [a.tolist(), b.tolist()])
    con.close()
    return path


def _connect(database, tmp_path, seed=3):
    return dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / "ledger.duckdb"), epsilon=50.0,
                         delta=1e-6, query_epsilon=0.45, seed=seed)


def _spent(conn) -> float:
    return conn.session.ledger.spent()


def _error(conn, sql) -> Error | None:
    try:
        conn.cursor().execute(sql)
    except Error as e:
        return e
    return None


# Outer expressions that pass on zeros but fail on some noisy values (people has about 3000 rows).
ATTACKS = [
    "SELECT CAST(COUNT(*) * 1000 AS TINYINT) FROM people WHERE age >= 70 AND sex = 'F'",
    "SELECT 1 // CAST(COUNT(*) - COUNT(*) + (COUNT(*) > 10)::INT - 1 AS INTEGER) FROM people",
    "SELECT LN(10 - COUNT(*)) FROM people WHERE age >= 20",
    "SELECT CAST(CASE WHEN COUNT(*) > 10 THEN 'x' ELSE '1' END AS INTEGER) FROM people",
    "SELECT CAST(CASE WHEN SUM(income) > 10 THEN '2020-13-45' ELSE '2020-01-01' END AS DATE) FROM people",
    "SELECT CASE WHEN AVG(age) > 10 THEN error('the average is ' || AVG(age)) END FROM people",
    "SELECT sex, COUNT(*) FROM people GROUP BY sex HAVING CAST(COUNT(*) AS TINYINT) > 0",
    "SELECT sex, COUNT(*) FROM people GROUP BY sex ORDER BY CAST(COUNT(*) AS UTINYINT) "
    "LIMIT 9223372036854775807 OFFSET 9223372036854775806",
    "SELECT CAST(MEDIAN(age) * 10 AS TINYINT) FROM people",
    "BEGIN WORKLOAD; SELECT COUNT(*) FROM people WHERE age < 50; "
    "SELECT CAST(COUNT(*) * 1000 AS SMALLINT) FROM people WHERE age >= 50; END WORKLOAD",
]


@pytest.mark.parametrize("sql", ATTACKS)
def test_an_outer_expression_failing_on_noise_is_charged_quotes_nothing_and_repeats_free(database, tmp_path, sql):
    with _connect(database, tmp_path) as conn:
        first = _error(conn, sql)
        spent = _spent(conn)
        assert spent > 0  # charged, whether it answered or not
        second = _error(conn, sql)
        assert _spent(conn) == spent  # free: no fresh noise to average
        assert (first is None) == (second is None)
        if first is not None:
            assert isinstance(first, OperationalError) and str(first) == str(second)
            assert not re.search(r"\d\d", str(first)), str(first)  # no value (a count, a sum, an average)


def test_the_cast_attack_no_longer_averages_to_the_count(database, tmp_path):
    """The issue's attack: 40 retries at ε = 0.45 charge once and show no number."""
    sql = ATTACKS[0]
    with _connect(database, tmp_path) as conn:
        messages = {str(_error(conn, sql)) for _ in range(40)}
        assert len(messages) == 1 and not re.search(r"\d", messages.pop())
        assert len(conn.session.ledger.charges()) == 1


# Each statement kind that draws noise, and the SQL that runs it.
KINDS = {  # continual EMIT: `test_a_failed_emit_report_leaves_the_window_released_once`
    "query": "SELECT sex, COUNT(*), AVG(income) FROM people GROUP BY sex",
    "workload": "BEGIN WORKLOAD; SELECT COUNT(*) FROM people WHERE age < 30; "
                "SELECT sex, SUM(income) FROM people GROUP BY sex; END WORKLOAD",
    "key release": "SELECT url, COUNT(*) FROM visits GROUP BY url",
    "quantile": "SELECT MEDIAN(age) FROM people",
    "graph": "SELECT degree, COUNT(*) FROM contact_degrees GROUP BY degree",
    "hybrid": "SELECT a, COUNT(*) FROM survey GROUP BY a",
}
# Steps after the charge, each made to fail in turn: every kind's common steps, and the steps of one kind.
COMMON = [(dpsql.executor, "assemble"), (dpsql.executor, "aggregate_answers"), (dpsql.executor.Executor, "estimating")]
FAULTS = [(kind, module, name) for kind in KINDS if kind != "continual EMIT" for module, name in COMMON] + [
    ("query", dpsql.executor, "answered_by"),
    ("hybrid", dpsql.executor, "HybridAnswers"),
    ("quantile", dpsql.answers.result, "quantile_bins"),
]


def _fail(*args, **kwargs):
    raise RuntimeError(f"secret {SECRET}")


@pytest.mark.parametrize("kind, module, name", FAULTS, ids=[f"{k}-{n}" for k, _, n in FAULTS])
def test_a_failure_after_the_charge_is_a_dpsql_error_and_asking_again_is_free(database, tmp_path, monkeypatch,
                                                                              kind, module, name):
    sql = KINDS[kind]
    with _connect(database, tmp_path) as conn:
        before = _spent(conn)
        monkeypatch.setattr(module, name, _fail)
        error = _error(conn, sql)
        monkeypatch.undo()
        assert isinstance(error, OperationalError) and SECRET not in str(error)
        assert "12345" not in str(error)
        spent = _spent(conn)
        assert spent > before  # charged: a retry draws no fresh noise for free
        answer = conn.cursor().execute(sql).fetchall()
        assert _spent(conn) == spent and answer is not None  # free, and it answers


def test_a_failed_emit_report_leaves_the_window_released_once(database, tmp_path, monkeypatch):
    """EMIT's report is formed after its release is recorded: a failure there loses nothing, and the window is
    not released again (the next EMIT moves on)."""
    from mechanisms.continual.stream import ContinualRelease
    with _connect(database, tmp_path) as conn:
        conn.cursor().execute(CONTINUAL)
        monkeypatch.setattr(ContinualRelease, "shown", _fail)
        error = _error(conn, "EMIT weekly")
        monkeypatch.undo()
        assert isinstance(error, OperationalError) and SECRET not in str(error)
        rows = conn.cursor().execute("SHOW CONTINUAL weekly").fetchall()
        assert {r[0] for r in rows} == {1}  # the first window was released, once
        assert conn.cursor().execute("EMIT weekly").fetchall()[0][0] == 2


@pytest.mark.parametrize("kind", ["query", "key release", "synthesis"])
def test_a_failure_while_drawing_charges_and_keeps_nothing(database, tmp_path, monkeypatch, kind):
    """From the first draw a statement is paid for: a failure after it (here: right after the exact
    samplers return) charges the planned cost and shows no value; a retry pays again."""
    import mechanisms.measurement
    import mechanisms.partition_selection
    from mechanisms.noise import discrete_gaussian_vector

    def drawn_then_failing(*args, **kwargs):
        discrete_gaussian_vector(*args, **kwargs)
        raise RuntimeError(f"secret {SECRET}")

    with _connect(database, tmp_path) as conn:
        for module in (mechanisms.measurement, mechanisms.partition_selection):
            monkeypatch.setattr(module, "discrete_gaussian_vector", drawn_then_failing)
        if kind == "synthesis":
            with pytest.raises(OperationalError) as raised:
                dpsql.releases.synth.synthesize(conn, "people", epsilon=1.0, out_path=str(tmp_path / "s.parquet"))
            error = raised.value
        else:
            error = _error(conn, KINDS[kind])
        assert isinstance(error, OperationalError) and SECRET not in str(error), error
        assert "nothing was released" in str(error)
        assert _spent(conn) > 0 and not (tmp_path / "s.parquet").exists()


def test_local_reports_fail_after_answering_with_a_dpsql_error_and_spend_nothing(database, tmp_path, monkeypatch):
    with _connect(database, tmp_path) as conn:
        monkeypatch.setattr(dpsql.executor, "assemble", _fail)
        error = _error(conn, "SELECT a, COUNT(*) FROM reports GROUP BY a")
        monkeypatch.undo()
        assert isinstance(error, OperationalError) and SECRET not in str(error) and _spent(conn) == 0
        assert len(conn.cursor().execute("SELECT a, COUNT(*) FROM reports GROUP BY a").fetchall()) == 8


def test_a_synthesis_whose_file_cannot_be_written_is_charged_and_keeps_its_measurements(database, tmp_path,
                                                                                        monkeypatch):
    import errno

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    with _connect(database, tmp_path) as conn:
        monkeypatch.setattr(dpsql.releases.synth, "write_parquet", full)
        out = tmp_path / "synthetic.parquet"
        with pytest.raises(OperationalError, match="No space left on device") as raised:
            dpsql.releases.synth.synthesize(conn, "people", epsilon=1.0, out_path=str(out), mechanism="mst")
        assert "charged" in str(raised.value) and not out.exists()
        spent = _spent(conn)
        assert spent > 0 and conn.session.executor.model(conn.session.catalog.get("people")).measurements
        conn.cursor().execute("SELECT sex, COUNT(*) FROM people GROUP BY sex")
        assert _spent(conn) == spent  # answered from the synthesis's measurements


# --- from the analyst's side: a profile connection, the shell, the server -------------------------------------
from test_profile import profile  # noqa: E402,F401 - the profile fixture (owner files, analysts alice and bob)
from test_serve import served  # noqa: E402,F401 - a running `dpsql serve`

CAST_ATTACK = "SELECT CAST(COUNT(*) * 1000 AS TINYINT) FROM people WHERE age >= 7"


def test_the_cast_attack_through_a_profile_connection_and_the_shell(profile):
    import subprocess
    import sys
    from pathlib import Path

    with dpsql.connect(profile=str(profile), analyst="alice") as conn:
        messages = {str(_error(conn, CAST_ATTACK)) for _ in range(3)}
        assert len(messages) == 1 and not re.search(r"\d{3}", messages.pop())
        assert len(conn.session.ledger.charges()) == 1
    run = [sys.executable, "-m", "dpsql.interfaces.cli", "shell", "--profile", str(profile), "--analyst", "bob", "-c"]
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    outputs = [subprocess.run([*run, CAST_ATTACK], capture_output=True, text=True, env=env, timeout=120)
               for _ in range(2)]
    for done in outputs:
        assert "Traceback" not in done.stderr and not re.search(r"\d{3}", done.stdout + done.stderr), done
    assert outputs[0].stderr == outputs[1].stderr
    with dpsql.connect(profile=str(profile), analyst="bob") as conn:
        assert len(conn.session.ledger.charges()) == 1  # bob asked what alice paid for: free, and the same


def test_the_cast_attack_over_the_wire(served):
    import psycopg

    messages = []
    spent = []
    for _ in range(2):
        with psycopg.connect(served.dsn(), autocommit=True) as conn:
            with pytest.raises(psycopg.Error) as raised:
                conn.execute("SELECT CAST(COUNT(*) * 1000 AS TINYINT) FROM people WHERE age >= 90")
            messages.append(str(raised.value))
        spent.append(served.ledger().spent())
    assert messages[0] == messages[1] and not re.search(r"\d{3}", messages[0])
    assert spent[0] == spent[1] > 0
