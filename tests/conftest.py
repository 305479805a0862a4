"""Test-session setup: single-threaded BLAS, as `dpsql` itself defaults to.

Test modules import NumPy before dpsql, so the default must be set here, before
any import: on a shared 2-core machine, BLAS threads competing with other jobs
made small dense solves 30x slower (tests/test_hdmm_adult.py: 87 s against 3 s).
Machine speed calibrations are cached in a directory of this session's own, not the
user's ~/.cache (planner.speed_cache).
"""

import os
import tempfile

import pytest

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ["DPSQL_CACHE_DIR"] = tempfile.mkdtemp(prefix="dpsql-test-cache-")


@pytest.fixture(scope="session")
def census_server(tmp_path_factory):
    """A running `dpsql serve` of the census deployment (tests/served.py), shared by the client tests: with TLS
    required (a self-signed certificate) where openssl can make one, so that every client connects with TLS."""
    from served import census

    server = census(tmp_path_factory.mktemp("clients"))
    server.require_tls()
    server.start()
    yield server
    server.stop()
