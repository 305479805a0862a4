"""Routing batches of counting queries to RAP (planner.adaptive.rap), by simulated error."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from mechanisms.measurement import GAUSSIAN, LAPLACE
from mechanisms.rap import RAPConfig
from planner.adaptive import RAP_MIN_QUERIES, RAPProcedure, predict, synthetic_records
from planner.families import PerQuery

CATALOG = Catalog.from_toml(
    "[tables.t]\n[tables.t.columns]\n" + "\n".join(f'x{i} = {{ type = "integer", min = 0, max = 5 }}' for i in range(5))
)
DOMAIN = CATALOG.get("t").domain
CONFIG = RAPConfig(synthetic_rows=40, max_measured=60)


@pytest.fixture(scope="module")
def blocks():
    """8 GROUP BY blocks of 36 threshold counts each: 288 counting queries."""
    rng = np.random.default_rng(0)
    out = []
    for q in range(8):
        a, b, c, d = rng.choice(5, 4, replace=False)
        condition = f"(x{c} = {rng.integers(6)})::INT + (x{d} = {rng.integers(6)})::INT >= 1"
        sql = f"SELECT x{a}, x{b}, COUNT(*) FROM t WHERE {condition} GROUP BY x{a}, x{b}"
        out += compile_query(sql, CATALOG, label=f"q{q}").blocks
    assert sum(b.num_rows(DOMAIN) for b in out) >= RAP_MIN_QUERIES
    return out


def test_synthetic_records_are_public_and_in_domain():
    a, b = synthetic_records(DOMAIN, 500, seed=3), synthetic_records(DOMAIN, 500, seed=3)
    assert np.array_equal(a, b) and a.shape == (500, 5)
    assert np.all((a >= 0) & (a < 6))


def test_eligibility(blocks):
    rap = RAPProcedure(CONFIG)
    assert rap.eligible(DOMAIN, blocks, GAUSSIAN) is None
    assert rap.eligible(DOMAIN, blocks, LAPLACE) is not None
    assert rap.eligible(DOMAIN, blocks[:2], GAUSSIAN) is not None
    total = compile_query("SELECT SUM(x1) FROM t", CATALOG).blocks
    assert rap.eligible(DOMAIN, blocks + total, GAUSSIAN) is not None


def test_prediction_is_cached_and_routes_by_budget(blocks):
    rap = RAPProcedure(CONFIG)
    per_query = PerQuery(DOMAIN, GAUSSIAN).unit_error(blocks)
    low, high = 1e-4, 10.0
    prediction = predict(rap, DOMAIN, blocks, low, 5_000)
    assert predict(rap, DOMAIN, blocks, low, 5_000) is prediction
    rows = sum(b.num_rows(DOMAIN) for b in blocks)
    assert set(prediction.rmse) == {b.name for b in blocks} and all(v > 0 for v in prediction.rmse.values())
    assert prediction.total_squared_error == pytest.approx(
        sum(b.weight * b.num_rows(DOMAIN) * prediction.rmse[b.name] ** 2 for b in blocks), rel=1e-9) and rows == 288
    # a tight budget: noise per query dominates, RAP wins; a loose one: answering each query directly wins
    assert prediction.total_squared_error < per_query / low
    assert predict(rap, DOMAIN, blocks, high, 5_000).total_squared_error > per_query / high
