"""The PostgreSQL JDBC driver (what DBeaver, DataGrip, Metabase and Superset's JDBC paths use) against
`dpsql serve` (tests/served.py): queries, parameters, a failing batch, error bars, and the DatabaseMetaData
schema browsers read. Needs javac and the driver (Debian's libpostgresql-jdbc-java, or DPSQL_JDBC_JAR)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from served import LARGE, LARGE_ROWS

SOURCE = Path(__file__).parent / "clients" / "JdbcClient.java"
JAR = os.environ.get("DPSQL_JDBC_JAR", "/usr/share/java/postgresql.jar")


@pytest.fixture(scope="module")
def jdbc_client(tmp_path_factory):
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("a Java development kit is not installed (javac)")
    if not Path(JAR).exists():
        pytest.skip(f"the PostgreSQL JDBC driver is not at {JAR} (apt-get install libpostgresql-jdbc-java)")
    classes = tmp_path_factory.mktemp("jdbc")
    subprocess.run(["javac", "-d", str(classes), str(SOURCE)], check=True, capture_output=True, timeout=180)
    return ["java", "-cp", os.pathsep.join([JAR, str(classes)]), "JdbcClient"]


def _run(command: list[str], *args: str) -> dict[str, str]:
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(line.split("\t", 1) for line in done.stdout.splitlines())


def test_jdbc_queries_parameters_errors_and_metadata(census_server, jdbc_client):
    # over TLS where the server requires it (sslmode=require: encrypted; the test certificate is self-signed)
    seen = _run(jdbc_client, str(census_server.port), "?sslmode=require" if census_server.tls else "", LARGE)
    assert seen["typed"] == "[F, M]" and seen["string"] == "true" and seen["untyped"] == "true"
    assert seen["named"] == "count" and seen["values"] == "3.0,2024-02-01,true"
    assert seen["large"] == f"{LARGE_ROWS} 1:row 1 {LARGE_ROWS}:row {LARGE_ROWS}"  # all of it, in portions
    assert seen["batch"] == "refused"  # the CHECK fails in the middle of the batch ...
    assert seen["error"] == "42601" and seen["after_error"] == "1"  # ... and the connection goes on
    assert seen["cancel"] == "57014"  # query_canceled, and the connection goes on
    assert seen["stderr_columns"] == "3:n_stderr" and float(seen["budget"].removeprefix("total=")) == pytest.approx(2)
    assert seen["catalogs"] == "[census]" and "main" in seen["schemas"]
    assert "people=protected" in seen["tables"] and "regions=public" in seen["tables"]  # told apart
    assert "notes=null" in seen["tables"]  # the analyst's own table: no remark
    assert seen["columns"] == "[age, sex]"  # declared columns only: never ssn
    assert seen["primary_keys"] == "[]" and seen["indexes"] == "[]" and seen["imported_keys"] == "[]"
    assert seen["types"] == "true" and seen["closed"] == "true"
