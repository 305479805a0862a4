"""Routing batches of counting queries to RAP (planner.rap_family)."""

from __future__ import annotations

import numpy as np
import pytest

from dpsql.catalog import Catalog
from dpsql.compiler import compile_query
from mechanisms.measurement import GAUSSIAN, LAPLACE
from mechanisms.rap import RAPConfig
from planner.families import PerQuery
from planner.rap_family import RAP_MIN_QUERIES, RAPRoute, synthetic_records

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
    route = RAPRoute(DOMAIN, 5_000, CONFIG)
    assert route.eligible(blocks, GAUSSIAN)
    assert not route.eligible(blocks, LAPLACE)
    assert not route.eligible(blocks[:2], GAUSSIAN)
    total = compile_query("SELECT SUM(x1) FROM t", CATALOG).blocks
    assert not route.eligible(blocks + total, GAUSSIAN)


def test_prediction_is_cached_and_routes_by_budget(blocks):
    route = RAPRoute(DOMAIN, 5_000, CONFIG)
    per_query = PerQuery(DOMAIN, GAUSSIAN).unit_error(blocks)
    low, high = 1e-4, 10.0
    prediction = route.predict(blocks, low)
    assert route.predict(blocks, low) is prediction
    assert prediction.rows == sum(b.num_rows(DOMAIN) for b in blocks) and prediction.rmse > 0 and prediction.max_error >= prediction.rmse
    # a tight budget: noise per query dominates, RAP wins; a loose one: answering each query directly wins
    assert route.route(blocks, low, GAUSSIAN, per_query / low)
    plan = route.plan(blocks, low)
    assert plan.prediction is prediction and plan.share == low and "RAP over 288 counting queries" in plan.describe()
    assert not route.route(blocks, high, GAUSSIAN, per_query / high)
