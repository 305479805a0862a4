"""node-postgres (`pg`) against `dpsql serve` (tests/served.py): it sends every parameter untyped, as text.

Needs node and `npm install --prefix tests/clients` (`.ci/run` does it); skipped where either is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from served import LARGE, LARGE_ROWS, SLOW

CLIENTS = Path(__file__).parent / "clients"


def _node_env() -> dict[str, str]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (apt-get install nodejs npm)")
    env = {**os.environ, "NODE_PATH": os.pathsep.join(filter(None, [str(CLIENTS / "node_modules"),
                                                                     os.environ.get("NODE_PATH")]))}
    found = subprocess.run(["node", "-e", "require('pg')"], env=env, capture_output=True, timeout=60)
    if found.returncode != 0:
        pytest.skip("node-postgres is not installed: npm install --prefix tests/clients")
    return env


def test_node_postgres_untyped_parameters_errors_and_error_bars(census_server):
    env = _node_env()
    done = subprocess.run(["node", str(CLIENTS / "node_client.js"), str(census_server.port),
                           "tls" if census_server.tls else "plain", LARGE, SLOW], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["tls"] == census_server.tls
    assert [r["sex"] for r in seen["untyped"]] == ["F", "M"] and sum(r["n"] for r in seen["untyped"]) > 10000
    assert seen["cast"] > 0 and seen["category"] > 0 and seen["named"] == ["count"]
    assert seen["values"] == ["3", str(seen["values"][1]), "true"] and "2024" in seen["values"][1]
    first, failed, last = seen["queued"]
    assert first == {"one": 1} and "not declared" in failed["error"] and last == {"two": 2}
    assert seen["simple"] == [[{"a": 1}], [{"b": 2}]]
    assert list(seen["stderr"][0]) == ["sex", "n", "n_stderr"] and seen["stderr"][0]["n_stderr"] > 0
    budget = {r["budget"]: r for r in seen["budget"]}
    assert budget["total"]["epsilon"] == pytest.approx(2.0) and seen["closed"]
    assert seen["large"] == {"count": LARGE_ROWS, "first": {"i": 1, "label": "row 1"},
                             "last": {"i": LARGE_ROWS, "label": f"row {LARGE_ROWS}"}}
    assert seen["cancel"] == "57014" and seen["after_cancel"] == 3  # query_canceled; the connection goes on
