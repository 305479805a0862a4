"""psql against `dpsql serve` over TLS (tests/served.py): queries, errors in a script, cancel, error bars, the
budget, large results, and meta-commands, whose listings are the catalog's (declared columns only; protected
tables remarked as such). Skipped where psql (postgresql-client) is missing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
from served import LARGE, LARGE_ROWS, SLOW

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")


def _command(server, *options: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "PGPASSWORD": "alice-pw", "PGSSLMODE": "require" if server.tls else "disable"}
    return ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "alice", "-d", "census", *options], env


def psql(server, *commands: str, check: bool = True) -> str:
    args, env = _command(server, "-v", "ON_ERROR_STOP=1")
    done = subprocess.run(args + [a for c in commands for a in ("-c", c)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert not check or done.returncode == 0, done.stderr
    return done.stdout


def test_psql_queries_errors_cancel_and_large_results(census_server):
    args, env = _command(census_server, "-A", "-F", "|")  # unaligned output; a failing statement does not stop it
    script = "\n".join([
        "SELECT sex, COUNT(*) FROM people GROUP BY sex ORDER BY sex;",
        "SELECT COUNT(nosuch) FROM people;",  # an error, then the script goes on
        "SELECT 1 AS after_error;",
        "SELECT sex, COUNT(*) FROM people WHERE age > 25 GROUP BY sex \\gdesc",  # described by the extended protocol
        "SET dpsql.stderr = on;",
        "SELECT COUNT(*) FROM people;",
        "SHOW dpsql.budget;",
        LARGE + ";",
        "\\q",
    ])
    done = subprocess.run(args, input=script, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "not declared" in done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "sex|count" and [line.split("|")[0] for line in out[1:3]] == ["F", "M"]  # PostgreSQL's names
    assert out[out.index("after_error") + 1] == "1"
    described = out.index("Column|Type")
    assert out[described + 1:described + 3] == ["sex|text", "count|double precision"]
    assert out[out.index("count|count_stderr") + 1].count("|") == 1
    assert any(line.startswith("total|2") for line in out)
    large = out.index("i|label")
    assert out[large + 1] == "1|row 1" and out[large + LARGE_ROWS] == f"{LARGE_ROWS}|row {LARGE_ROWS}"
    assert out[large + LARGE_ROWS + 1] == f"({LARGE_ROWS} rows)"
    running = subprocess.Popen(args + ["-c", SLOW], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    running.send_signal(signal.SIGINT)  # psql's Ctrl-C: a cancel request for the running statement
    _, err = running.communicate(timeout=60)
    assert "canceling statement due to user request" in err


def test_describe_commands_show_the_catalog(census_server):
    described = psql(census_server, "\\d people")
    assert "age" in described and "sex" in described and "ssn" not in described  # declared columns only
    assert "not null" in psql(census_server, "\\d+ people")
    listing = psql(census_server, "\\dt+")
    assert "people" in listing and "protected: answered with differential privacy" in listing
    assert "regions" in listing and "public: a copy of the data owner" in listing
    assert "census" in psql(census_server, "\\l") and "main" in psql(census_server, "\\dn")


def test_backslash_copy_writes_the_dp_answer(census_server, tmp_path):
    target = tmp_path / "by_sex.csv"
    out = psql(census_server, f"\\copy (SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex) TO '{target}' "
                              "CSV HEADER")
    assert out.strip() == "COPY 2"
    header, *rows = target.read_text().splitlines()
    assert header == "sex,n" and [r.split(",")[0] for r in rows] == ["F", "M"]
