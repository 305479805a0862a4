"""psql's meta-commands against `dpsql serve` (tests/served.py): what they list is the catalog's (declared
columns only; protected tables remarked as such). Skipped where psql (postgresql-client) is missing."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql (postgresql-client) is not installed")


def psql(server, *commands: str, check: bool = True) -> str:
    args = ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "alice", "-d", "census", "-v",
            "ON_ERROR_STOP=1"]
    done = subprocess.run(args + [a for c in commands for a in ("-c", c)], env={**os.environ, "PGPASSWORD": "alice-pw"},
                          capture_output=True, text=True, timeout=60)
    assert not check or done.returncode == 0, done.stderr
    return done.stdout


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
