"""End to end on Adult: a SQL dashboard through DB-API, with error bars, against per-query noise.

The default test runs 20 of the dashboard's queries once; the full 200-query
dashboard over several noise draws is the benchmark (`benchmarks.adult_dashboard`)
and the slow test below.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.adult_dashboard import DATA, simulate

pytestmark = pytest.mark.skipif(not (DATA / "adult.csv").exists(), reason="shared/data/adult is not next to the repository")


def _check(result: dict) -> None:
    planned, baseline = result["planned"], result["per_query"]
    # error bars are honest: the reported standard errors match the realized errors
    assert 0.7 < planned["rmse_cells"] / planned["expected_rmse_cells"] < 1.3
    assert planned["coverage_95"] > 0.85
    # planning beats noise on each query at the same budget, in expectation and in fact
    assert planned["expected_rmse_cells"] < baseline["expected_rmse_cells"]
    assert result["rmse_ratio_per_query_over_planned"] > 1.0


def test_dashboard_through_dbapi(tmp_path):
    result = simulate(epsilon=1.0, draws=1, count=20, workdir=tmp_path)
    assert result["queries"] == 20 and result["planned"]["cells"] > 20
    assert "Plan:" in result["plan"]
    _check(result)


@pytest.mark.slow
def test_full_dashboard(tmp_path):
    result = simulate(epsilon=1.0, draws=3, count=200, workdir=tmp_path)
    _check(result)
    assert np.isfinite(result["workload_seconds"])
