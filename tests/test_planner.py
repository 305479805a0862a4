"""The planner: family choice, budget splits, objectives, accuracy targets, EXPLAIN."""

import numpy as np
import pytest

from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML
from mechanisms.workload import Workload
from planner.families import FAMILIES, PER_QUERY, PerQuery, split
from planner.plan import MAX_ERROR, TOTAL_SQUARED
from planner.planner import budget_for_accuracy, expected_rmse, plan_workload

CATALOG = Catalog.from_toml(PEOPLE_CATALOG_TOML)
TABLE = CATALOG.get("people")


def workload(*queries):
    blocks = [b for i, q in enumerate(queries) for b in compile_query(q, CATALOG, label=f"q{i}").blocks]
    return Workload(TABLE.domain, blocks)


def test_closed_form_split_minimizes_total_error():
    errors = [1.0, 4.0, 9.0]
    for noise, k in (("gaussian", 1), ("laplace", 2)):
        best = split(errors, noise)
        total = lambda f: sum(e / x**k for e, x in zip(errors, f))
        rng = np.random.default_rng(0)
        for _ in range(200):
            other = rng.dirichlet(np.ones(3))
            assert total(best) <= total(other) + 1e-12


def test_single_range_goes_per_query_and_marginals_win_for_group_by():
    plan = plan_workload(workload("SELECT COUNT(*) FROM people WHERE age BETWEEN 30 AND 39"), 0.01)
    assert plan.chosen == PER_QUERY and len(plan.measurements) == 1
    dash = workload(
        "SELECT sex, COUNT(*) FROM people GROUP BY sex",
        "SELECT race, COUNT(*) FROM people GROUP BY race",
        "SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race",
        "SELECT COUNT(*) FROM people",
    )
    plan = plan_workload(dash, 0.01)
    assert {m.clique for m in plan.measurements} >= {("sex", "race")}
    chosen = next(a for a in plan.alternatives if a.name == plan.chosen)
    # The least total error with no query above its even split: below the even split's own total.
    even = sum(b.weight * b.num_rows(TABLE.domain) * plan.even_split_rmse[b.name] ** 2 for b in dash.blocks)
    assert chosen.total_squared_error < even
    assert all(plan.expected_rmse[n] <= r * (1 + 1e-6) for n, r in plan.even_split_rmse.items())


def test_costs_and_errors_scale_with_the_budget():
    w = workload("SELECT education, COUNT(*) FROM people GROUP BY education", "SELECT COUNT(*) FROM people WHERE age < 18")
    small, large = plan_workload(w, 0.01), plan_workload(w, 0.04)
    assert small.cost == pytest.approx(0.01) and large.cost == pytest.approx(0.04)
    for name in small.expected_rmse:
        assert large.expected_rmse[name] == pytest.approx(small.expected_rmse[name] / 2, rel=1e-3)
    pure = plan_workload(w, 1.0, "laplace")
    assert pure.cost == pytest.approx(1.0)


def test_existing_measurements_lower_expected_error():
    w = workload("SELECT sex, education, COUNT(*) FROM people GROUP BY sex, education")
    alone = plan_workload(w, 0.01)
    helped = plan_workload(w, 0.01, existing=[(("sex", "education"), 100.0)])
    name = w.blocks[0].name
    assert helped.expected_rmse[name] < alone.expected_rmse[name]


def _worst(plan, w):
    return max(plan.expected_rmse[b.name] / b.sensitivity(TABLE.domain, 2) for b in w.blocks)


def test_max_objective_lowers_the_worst_error():
    w = workload(
        "SELECT age, COUNT(*) FROM people GROUP BY age",
        "SELECT COUNT(*) FROM people WHERE age BETWEEN 20 AND 60",
        "SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race",
        "SELECT region, SUM(income) FROM people GROUP BY region",
    )
    total = plan_workload(w, 0.01, objective=TOTAL_SQUARED)
    minmax = plan_workload(w, 0.01, objective=MAX_ERROR)
    assert minmax.objective == MAX_ERROR
    assert _worst(minmax, w) < _worst(total, w)


def test_budget_for_accuracy_is_the_least_that_meets_the_target():
    w = workload("SELECT race, COUNT(*) FROM people GROUP BY race", "SELECT COUNT(*) FROM people WHERE age >= 65")
    for noise in ("gaussian", "laplace"):
        budget, plan = budget_for_accuracy(w, 30.0, noise)
        assert plan.cost == pytest.approx(budget)
        assert _worst(plan, w) <= 30.0 * (1 + 1e-9)
        tighter = plan_workload(w, budget * 0.98, noise, objective=MAX_ERROR)
        assert _worst(tighter, w) > 30.0


def test_expected_rmse_of_per_query_plan_is_direct_noise():
    w = workload("SELECT COUNT(*) FROM people WHERE age < 18")
    fam = PerQuery(TABLE.domain, "gaussian")
    allocs = fam.allocate(w.blocks)
    plan = plan_workload(w, 0.02)
    assert expected_rmse(w, plan.measurements)[w.blocks[0].name] == pytest.approx(np.sqrt(1 / (2 * 0.02)), rel=1e-6)
    assert len(allocs) == 1


def test_explain_is_a_tree_with_groups_measurements_and_alternatives():
    w = workload("SELECT sex, COUNT(*) FROM people GROUP BY sex", "SELECT COUNT(*) FROM people WHERE age < 18")
    text = plan_workload(w, 0.01, delta=1e-9).explain()
    assert "group {sex}" in text and "group {age}" in text
    assert "measure" in text and "expected RMSE" in text and "alternatives" in text
    assert "ρ=" in text and "ε=" in text


def test_error_budget_chart(tmp_path):
    from planner.chart import draw_chart, error_curves

    w = workload("SELECT age, COUNT(*) FROM people GROUP BY age", "SELECT COUNT(*) FROM people WHERE age < 30")
    curves = error_curves(w, 0.01, "gaussian", 1e-9, points=5)
    assert set(curves) >= {"planner", "per-query", "marginals"}
    planner = [r for _, r in curves["planner"]]
    assert planner == sorted(planner, reverse=True)  # more budget, less error
    rows = sum(b.weight * b.num_rows(TABLE.domain) for b in w.blocks)
    for b, p in curves["planner"]:  # never worse than the even split (which no query's error exceeds)
        even = plan_workload(w, b, "gaussian", 1e-9).even_split_rmse
        assert p <= np.sqrt(sum(x.weight * x.num_rows(TABLE.domain) * even[x.name] ** 2 for x in w.blocks) / rows)
    path = draw_chart(curves, 0.01, "ρ", tmp_path / "chart.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM people WHERE age BETWEEN 30 AND 39",
        "SELECT education, COUNT(*) FROM people WHERE age BETWEEN 30 AND 39 GROUP BY education",
        "SELECT sex, SUM(hours_per_week) FROM people WHERE age >= 40 GROUP BY sex",
    ],
)
def test_one_product_query_is_measured_as_asked_without_costing_other_families(sql):
    plan = plan_workload(workload(sql), 0.01)
    assert plan.chosen == PER_QUERY and any("measured as asked" in n for n in plan.notes)
    # ... and no family would have done better: all of them costed, the same least error.
    full = plan_workload(workload(sql), 0.01, families=[f.name for f in FAMILIES])
    least = min(a.total_squared_error for a in full.alternatives)
    assert min(a.total_squared_error for a in plan.alternatives) == pytest.approx(least, rel=1e-9)


@pytest.mark.parametrize(
    "queries",
    [
        ("SELECT age, SUM(age) FROM people GROUP BY age",),  # unequal weights on one axis: not as asked
        ("SELECT age, COUNT(*) FROM people WHERE age < 30 GROUP BY age",),  # rows known to be zero
        ("SELECT sex, COUNT(*) FROM people GROUP BY sex", "SELECT COUNT(*) FROM people WHERE age < 18"),
        # disjoint rows in separate queries: measuring the identity once beats splitting the budget
        ("SELECT COUNT(*) FROM people WHERE sex = 'F'", "SELECT COUNT(*) FROM people WHERE sex = 'M'"),
        # a sum not centred and a count: correlated on the sum's largest value
        ("SELECT sex, SUM(hours_per_week) FROM people GROUP BY sex", "SELECT sex, COUNT(*) FROM people GROUP BY sex"),
        ("SELECT age, income, COUNT(*) FROM people GROUP BY age, income",
         "SELECT age, COUNT(*) FROM people WHERE income > 50000 GROUP BY age"),
    ],
)
def test_other_workloads_cost_every_family(queries):
    plan = plan_workload(workload(*queries), 0.01)
    assert not any("measured as asked" in n for n in plan.notes)


SEPARABLE = [
    ("SELECT sex, AVG(hours_per_week) FROM people GROUP BY sex",),
    ("SELECT AVG(hours_per_week) FROM people",),
    ("SELECT education, AVG(age) FROM people WHERE region = 'South' GROUP BY education",),
    ("SELECT sex, race, AVG(income) FROM people WHERE age BETWEEN 30 AND 39 GROUP BY sex, race",),
]


@pytest.mark.parametrize("queries", SEPARABLE)
def test_separable_blocks_are_measured_as_asked_and_nothing_beats_them(queries):
    """AVG's centred sum and its count: per query is certified optimal among linear strategies (no other
    family costed), and costing every family indeed finds nothing lower; the certificate's lower bound,
    computed independently here (the nuclear norm of the weighted workload under the uniform distribution
    on the extreme cells), equals the per-query error."""
    w, noise = workload(*queries), "gaussian"
    plan = plan_workload(w, 0.01, noise)
    assert plan.chosen == PER_QUERY and any("measured as asked" in n for n in plan.notes)
    assert {a.name for a in plan.alternatives} <= {PER_QUERY, "marginals"}
    full = plan_workload(w, 0.01, noise, families=[f.name for f in FAMILIES])
    least = min(a.total_squared_error for a in full.alternatives)
    chosen = next(a.total_squared_error for a in plan.alternatives if a.name == PER_QUERY)
    assert chosen == pytest.approx(least, rel=1e-9)
    assert plan_workload(w, 0.01, noise, objective=MAX_ERROR).chosen == PER_QUERY  # any weights: min-max too
    # Laplace noise (L1 sensitivity) has no such certificate: every family is costed.
    assert not any("measured as asked" in n for n in plan_workload(w, 0.1, "laplace").notes)
    domain = w.domain
    blocks = [b for b in w.blocks if b.terms]
    clique = domain.canonical(a for b in blocks for a in b.attributes(domain))
    mats = [b.matrix(domain, clique).dense() * np.sqrt(b.weight) for b in blocks]
    norms = [np.sqrt((m * m).sum(axis=0)) for m in mats]
    extreme = np.logical_and.reduce([n >= n.max() * (1 - 1e-9) for n in norms])
    p = extreme / extreme.sum()
    bound = np.linalg.svd(np.vstack(mats) * np.sqrt(p), compute_uv=False).sum() ** 2 / 2  # at ρ = 1
    per_query = PerQuery(domain, noise).unit_error(blocks)
    assert bound == pytest.approx(per_query, rel=1e-9)
