#!/usr/bin/env bash
# The GPU device check, run from the repository root on the lent machine (carry .whl and .devdata):
#
#   bash benchmarks/gpu_device.sh
#
# 1. installs the carried wheels (dpsql's dependencies the machine lacks) into /tmp/site;
# 2. runs the tests of the heavy array paths with DPSQL_ARRAY_MODULE=cupy (timeout 150 s);
#    every failure is also written at once, with its innermost frame in this repository,
#    to cupy_test_sites.txt, so mechanism bugs stand apart from tests that compare device
#    arrays with NumPy's assertions;
# 3. runs benchmarks/gpu.py on .devdata (timeout 200 s).
#
# Everything goes under $OUT (default /tmp/gpu-check): nvidia-smi.txt, install.log,
# cupy_tests.log, cupy_test_sites.txt, gpu.log, gpu.json. A failing step does not stop the next.
set -u
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

{ nvidia-smi -L && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; } > "$OUT/nvidia-smi.txt" 2>&1
cat "$OUT/nvidia-smi.txt"

if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/install.log" 2>&1; then
    echo "pip could not install the wheels (see install.log): unpacking them instead" | tee -a "$OUT/install.log"
    for wheel in .whl/*.whl; do python3 -m zipfile -e "$wheel" /tmp/site >> "$OUT/install.log" 2>&1; done
fi
export PYTHONPATH=/tmp/site:$PWD
python3 -c "import duckdb, sqlglot, prompt_toolkit, dpsql; print('dpsql imports; duckdb', duckdb.__version__)" \
    >> "$OUT/install.log" 2>&1 || echo "dpsql does not import: see install.log"

# tests/test_hdmm_adult.py and the benchmark's default read ../shared/data: point it at the carried copy
if [ ! -e ../shared/data/adult/adult.csv ]; then
    mkdir -p ../shared/data && ln -sfn "$PWD/.devdata/adult" ../shared/data/adult || echo "no ../shared/data link"
fi

# (a) the tests whose code asks mechanisms.arrays.xp() for its arrays (test_noise does not: NumPy kernels only)
TESTS=$(ls tests/test_hdmm.py tests/test_pgm.py tests/test_aim.py tests/test_rap_*.py tests/test_clique_lsq.py \
    tests/test_matrices.py tests/test_range_trees.py tests/test_reconstruction.py tests/test_factorization.py \
    tests/test_residual_planner.py tests/test_hdmm_adult.py tests/test_expected_error.py 2>/dev/null)
mkdir -p /tmp/dpsql_plugins
cat > /tmp/dpsql_plugins/dpsql_sites.py <<'EOF'
"""pytest plugin: each failure's innermost frame inside the repository, written as it happens."""
import collections
import os
import traceback

import pytest

ROOT = os.getcwd() + os.sep
SITES = collections.Counter()
LOG = open(os.path.join(os.environ["OUT"], "cupy_test_sites.txt"), "a", buffering=1)


def pytest_runtest_makereport(item, call):
    if call.excinfo is None or call.excinfo.errisinstance((pytest.skip.Exception, pytest.xfail.Exception)):
        return
    frames = [
        f for f in traceback.extract_tb(call.excinfo.tb)
        if f.filename.startswith(ROOT) and "-packages" not in f.filename  # not a venv inside the repository
    ]
    site = f"{frames[-1].filename[len(ROOT):]}:{frames[-1].lineno}" if frames else "?"
    SITES[site, call.excinfo.typename] += 1
    message = " ".join(str(call.excinfo.value).split())[:160]
    LOG.write(f"{item.nodeid} [{call.when}] | {site} | {call.excinfo.typename}: {message}\n")


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("=== failure sites under CuPy (innermost frame in the repository), mechanisms first ===")
    for (site, kind), n in sorted(SITES.items(), key=lambda x: (x[0][0].startswith("tests/"), -x[1])):
        terminalreporter.write_line(f"{n:4d}  {site}  {kind}")
EOF
if python3 -c "from mechanisms.arrays import set_array_module; set_array_module('cupy')" > "$OUT/cupy_tests.log" 2>&1; then
    : > "$OUT/cupy_test_sites.txt"
    OUT="$OUT" DPSQL_ARRAY_MODULE=cupy PYTHONPATH="$PYTHONPATH:/tmp/dpsql_plugins" timeout 150 \
        python3 -m pytest -q -o addopts="" -p no:cacheprovider -p dpsql_sites -m "not slow" --tb=short $TESTS \
        >> "$OUT/cupy_tests.log" 2>&1
    echo "pytest exit status $? (124 = timed out)" | tee -a "$OUT/cupy_tests.log"
else
    echo "CuPy tests skipped: no CuPy with a visible GPU (see cupy_tests.log)" | tee -a "$OUT/cupy_tests.log"
fi
sed -n '/=== failure sites/,/short test summary/p' "$OUT/cupy_tests.log"
tail -n 2 "$OUT/cupy_tests.log"

# (b) the benchmark (as a module: `python3 benchmarks/gpu.py` would put benchmarks/ first on sys.path,
# where benchmarks/planner.py shadows the planner package)
timeout 200 python3 -m benchmarks.gpu --data .devdata --out "$OUT/gpu.json" 2>&1 | tee "$OUT/gpu.log"
echo "benchmark exit status ${PIPESTATUS[0]} (124 = timed out)" | tee -a "$OUT/gpu.log"
