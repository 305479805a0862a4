"""DPSQL_ARRAY_MODULE: importing dpsql never fails; a GPU request this machine cannot meet is a clear dpsql error
where an array path first runs (nothing spent), and "auto" falls back to NumPy. Each case runs in a fresh
interpreter, since the variable is read at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mechanisms import arrays

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import json, duckdb
import dpsql  # must not raise, whatever DPSQL_ARRAY_MODULE says
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from mechanisms import arrays
con = duckdb.connect()
create_people_table(con, 500)
conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, delta=1e-9, seed=1)
out = {}
for query in ("SELECT COUNT(*) FROM people", "SELECT sex, AVG(hours_per_week) FROM people GROUP BY sex"):
    try:
        rows = conn.execute(query).fetchall()
        out.setdefault("rows", []).append(len(rows))
    except dpsql.Error as e:
        out.setdefault("errors", []).append([type(e).__name__, str(e)])
out["spent"] = conn.session.budget().spent.rho
out["module"] = arrays.xp().__name__ if "errors" not in out else None
print(json.dumps(out))
"""


def _run(module: str) -> dict:
    env = {**os.environ, "DPSQL_ARRAY_MODULE": module, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _gpu_present() -> bool:
    return arrays._load_cupy() is not None


@pytest.mark.skipif(_gpu_present(), reason="a GPU is usable here: cupy is granted")
def test_cupy_without_a_gpu_is_a_clear_error_at_first_use() -> None:
    out = _run("cupy")
    assert "rows" not in out and len(out["errors"]) == 2  # every use says so again, not only the first
    for kind, message in out["errors"]:
        assert kind == "NotSupportedError"
        assert "DPSQL_ARRAY_MODULE" in message and "no usable GPU" in message and "auto" in message
    assert out["spent"] == 0


@pytest.mark.skipif(_gpu_present(), reason="a GPU is usable here: auto picks cupy")
def test_auto_without_a_gpu_falls_back_to_numpy() -> None:
    out = _run("auto")
    assert "errors" not in out and out["rows"] == [1, 2] and out["module"] == "numpy" and out["spent"] > 0


def test_unknown_module_name_is_a_clear_error() -> None:
    out = _run("tpu")
    assert out["errors"][0][0] == "NotSupportedError" and "'tpu'" in out["errors"][0][1]
    assert out["spent"] == 0
