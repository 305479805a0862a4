"""The HDMM planner family: exact unit errors, planner integration and EXPLAIN."""

import math

import numpy as np
import pytest

from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML
from mechanisms.domain import Domain
from mechanisms.matrices import Dense
from mechanisms.measurement import Measurement
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Block, Term, Workload
from planner.families import budget_exponent, noise_unit_variance
from planner.families.hdmm import HDMM, HDMMFamily
from planner.planner import plan_workload

CATALOG = Catalog.from_toml(PEOPLE_CATALOG_TOML)
TABLE = CATALOG.get("people")
RANGES = [(3, 40), (10, 20), (25, 64), (0, 17), (18, 99), (30, 39), (40, 49), (50, 59), (60, 99), (5, 80)]


def workload(*queries):
    blocks = [b for i, q in enumerate(queries) for b in compile_query(q, CATALOG, label=f"q{i}").blocks]
    return Workload(TABLE.domain, blocks)


AGE_RANGES = [f"SELECT COUNT(*) FROM people WHERE age BETWEEN {a} AND {b}" for a, b in RANGES]
DASHBOARD = [
    *[f"SELECT sex, COUNT(*) FROM people WHERE age BETWEEN {a} AND {b} GROUP BY sex" for a, b in RANGES[:5]],
    "SELECT sex, COUNT(*) FROM people GROUP BY sex",
    "SELECT COUNT(*) FROM people WHERE income < 50000 OR age >= 65",
    "SELECT education, AVG(income) FROM people WHERE age >= 25 GROUP BY education",
]


def model_error(family, blocks, noise):
    """Σ weight·Σ Var of the least-squares model fed the family's allocations at unit budget."""
    k = budget_exponent(noise)
    model = LeastSquaresModel(TABLE.domain)
    for a in family.allocate(blocks):
        variance = noise_unit_variance(noise, a.sensitivity) / a.fraction**k
        model.add(Measurement(a.clique, noise, a.fraction, variance, np.empty(0), None, a.strategy))
    return sum(b.weight * model.variance(b).sum() for b in blocks)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("queries", [AGE_RANGES, DASHBOARD], ids=["age ranges", "dashboard"])
def test_unit_error_is_the_exact_error_of_what_it_allocates(queries, noise):
    w = workload(*queries)
    family = HDMMFamily(TABLE.domain, noise)
    error = family.unit_error(w.blocks)
    assert math.isfinite(error)
    assert model_error(family, w.blocks, noise) == pytest.approx(error, rel=1e-9)
    again = HDMMFamily(TABLE.domain, noise)  # deterministic
    assert again.unit_error(w.blocks) == error


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_range_dashboards_are_planned_with_hdmm_and_explained(noise):
    w = workload(*AGE_RANGES, *[f"SELECT COUNT(*) FROM people WHERE age < {a}" for a in range(10, 100, 10)])
    plan = plan_workload(w, 0.5, noise)
    # HDMM, with direct top-ups for the few queries it would leave above their even split (planner.fairness)
    assert plan.chosen in (HDMM, "mixed") and {m.family for m in plan.measurements} <= {HDMM, "per-query"}
    assert sum(m.share for m in plan.measurements if m.family == HDMM) > 0.95 * plan.cost
    text = plan.explain()
    assert "HDMM OPT⊗" in text and "hdmm" in text and "range trees" in text
    chosen = next(a for a in plan.alternatives if a.name == plan.chosen)
    assert all(chosen.total_squared_error <= a.total_squared_error * 1.1 for a in plan.alternatives)  # 1% (Gaussian), 5%
    # The planner's per-query RMSE comes from the model: it reproduces the family's error.
    total = sum(b.weight * b.num_rows(w.domain) * plan.expected_rmse[b.name] ** 2 for b in w.blocks)
    assert total == pytest.approx(chosen.total_squared_error, rel=1e-6)


def test_marginal_workloads_can_use_weighted_marginals():
    domain = Domain(("a", "b", "c", "d"), (2, 5, 50, 100))  # the thesis' Example 4
    pairs = [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]
    blocks = [Block(f"{x}{y}", (x, y), [Term(1.0, {})]) for x, y in pairs]
    family = HDMMFamily(domain, "laplace")
    error = family.unit_error(blocks)
    allocations = family.allocate(blocks)
    assert all(a.strategy is None and a.label == "HDMM OPT_M weighted marginal" for a in allocations)
    assert error == pytest.approx(2 * 62_886.05, rel=1e-4)  # Example 4 at ε = 1 (noise variance 2)


def test_large_attributes_are_left_to_other_families():
    domain = Domain(("x",), (5000,))
    blocks = [Block(f"r{i}", (), [Term(1.0, {"x": Dense([np.r_[np.zeros(i), np.ones(5000 - i)]])})]) for i in (10, 2000)]
    assert HDMMFamily(domain, "gaussian").unit_error(blocks) == math.inf


def test_a_query_over_a_whole_attribute_domain_plans():
    # `age <= 99` reads no attribute (the range is the whole domain): its component has an
    # empty clique, whose strategy factor spans no attribute (a regression: IndexError).
    w = workload(*AGE_RANGES[:3], "SELECT COUNT(*) FROM people WHERE age <= 99")
    plan = plan_workload(w, 1.0, families=[HDMM])
    assert () in {m.clique for m in plan.measurements}
    assert all(math.isfinite(r) and r > 0 for r in plan.expected_rmse.values())
