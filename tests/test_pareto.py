"""Privacy–utility fronts (EXPLAIN PARETO): exact linear curves, the envelope, the BO search, budget_for_rmse."""

import math

import numpy as np
import pytest

from dpsql.tables.catalog import Catalog
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML
from dpsql.sql.compiler import compile_query
from mechanisms.workload import Workload
from planner.planning_limit import PlanningLimit
from planner.bayes_front import Knob, bayes_front, expected_improvement, hypervolume
from planner.pareto import (
    FRONT_COLUMNS,
    PLANNER,
    TIE,
    FrontPoint,
    adaptive_front,
    budget_for_rmse,
    dominates,
    envelope,
    front_table,
    linear_front,
    pareto_front,
    to_budget,
    workload_rmse,
)
from planner.plan import MAX_ERROR, TOTAL_SQUARED
from planner.planner import budget_for_accuracy, plan_workload

CATALOG = Catalog.from_toml(PEOPLE_CATALOG_TOML)
TABLE = CATALOG.get("people")
DELTA = 1e-6


def workload(*queries):
    blocks = [b for i, q in enumerate(queries) for b in compile_query(q, CATALOG, label=f"q{i}").blocks]
    return Workload(TABLE.domain, blocks)


MIXED_WORKLOAD = workload(
    "SELECT age, COUNT(*) FROM people GROUP BY age",
    "SELECT COUNT(*) FROM people WHERE age < 30",
    "SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race",
    "SELECT region, SUM(income) FROM people GROUP BY region",
)
SIMPLE = workload("SELECT race, COUNT(*) FROM people GROUP BY race", "SELECT COUNT(*) FROM people WHERE age >= 65")
MARGINALS = workload(
    "SELECT sex, COUNT(*) FROM people GROUP BY sex",
    "SELECT race, COUNT(*) FROM people GROUP BY race",
    "SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race",
    "SELECT region, COUNT(*) FROM people GROUP BY region",
    "SELECT education, COUNT(*) FROM people GROUP BY education",
)


@pytest.mark.parametrize("noise, delta", [("gaussian", DELTA), ("laplace", 0.0)])
def test_linear_front_is_the_planners_own_cost_at_every_epsilon(noise, delta):
    """One plan gives every curve: each family's and the planner's RMSE equal plan_workload's at ε (rel 1e-9)."""
    sampled = [0.05, 0.7, 4.0]
    front = linear_front(MIXED_WORKLOAD, sampled, noise, delta)
    assert set(front.curves) >= {PLANNER, "per-query", "marginals"}
    for eps in sampled + [0.3]:  # 0.3 is not sampled: the power law holds everywhere
        budget = to_budget(eps, noise, delta)
        plan = plan_workload(MIXED_WORKLOAD, budget, noise, delta)
        alternatives = {a.name: a.rmse for a in plan.alternatives}
        # The planner's plan meets its even-split floors on the exact (discrete) noise variances, which are not
        # quite a power law of the budget (discrete Laplace at ε = 4: 4%): the front scales one plan.
        rel = 1e-7 if noise == "gaussian" else 5e-2
        assert front.rmse_at(PLANNER, eps) == pytest.approx(alternatives[plan.chosen], rel=rel)
        for name in front.laws:
            if name not in (PLANNER, plan.chosen):  # the chosen family's line is its floored plan's
                assert front.rmse_at(name, eps) == pytest.approx(alternatives[name], rel=1e-9)
        if eps in sampled:
            point = next(p for p in front.curves[PLANNER] if p.epsilon == eps)
            assert point.rmse == pytest.approx(alternatives[plan.chosen], rel=rel) and point.budget == budget
            assert point.detail == plan.chosen
        if noise == "gaussian":  # the noise drawn: σ² rounded up by at most 2^-25 (relative)
            drawn = workload_rmse(MIXED_WORKLOAD, plan.expected_rmse, TOTAL_SQUARED)
            assert drawn == pytest.approx(front.rmse_at(PLANNER, eps), rel=1e-7)
    ratio = front.rmse_at(PLANNER, 1.0) / front.rmse_at(PLANNER, 2.0)
    assert ratio == pytest.approx(2.0 if noise == "laplace" else
                                  math.sqrt(to_budget(2.0, noise, delta) / to_budget(1.0, noise, delta)), rel=1e-12)


def _check_envelope(front):
    points = front.points
    assert points, "an empty front"
    assert [p.epsilon for p in points] == sorted(p.epsilon for p in points)
    assert all(b.rmse < a.rmse for a, b in zip(points, points[1:]))  # more ε, strictly less error
    for a in points:
        assert not any(dominates(b, a) for b in points if b is not a)
        for curve in front.curves.values():  # nothing any strategy reaches beats the front beyond a tie
            for q in curve:
                reached = [p.rmse for p in points if p.epsilon <= q.epsilon]
                assert reached and min(reached) <= q.rmse * (1 + TIE)


def test_envelope_is_monotone_non_dominated_and_prefers_the_planner_on_ties():
    front = linear_front(MIXED_WORKLOAD, np.geomspace(0.01, 10, 7), "gaussian", DELTA)
    _check_envelope(front)
    # A single family alone may have the lower total error: the planner keeps every query within its even split
    assert {p.strategy for p in front.points} <= set(front.curves)
    # a hand-made case: B wins at small ε, A at large, and a dominated C never shows
    curves = {
        "A": [FrontPoint(1, 10, "A", 1), FrontPoint(2, 4, "A", 2)],
        "B": [FrontPoint(1, 8, "B", 1), FrontPoint(2, 5, "B", 2)],
        "C": [FrontPoint(3, 6, "C", 3)],
    }
    assert [(p.epsilon, p.strategy) for p in envelope(curves)] == [(1, "B"), (2, "A")]


@pytest.fixture(scope="module")
def min_max_fronts():
    return {noise: linear_front(SIMPLE, [0.1, 1.0], noise, delta, objective=MAX_ERROR)
            for noise, delta in (("gaussian", DELTA), ("laplace", 0.0))}


def test_min_max_front_and_families_alone(min_max_fronts):
    front = min_max_fronts["gaussian"]
    _check_envelope(front)
    assert PLANNER in front.laws and len(front.laws) >= 3
    plan = plan_workload(SIMPLE, to_budget(1.0, "gaussian", DELTA), "gaussian", DELTA, objective=MAX_ERROR)
    # the min-max reweighting's iterative optimizers settle within ~1e-4 of each other at different budgets
    assert workload_rmse(SIMPLE, plan.expected_rmse, MAX_ERROR) == pytest.approx(
        front.rmse_at(PLANNER, 1.0), rel=1e-3)


def test_with_earlier_measurements_every_epsilon_is_planned_anew():
    existing = [(("sex", "race"), 50.0)]
    front = linear_front(MIXED_WORKLOAD, [0.1, 1.0], "gaussian", DELTA, existing)
    assert not front.laws
    for p in front.curves[PLANNER]:
        plan = plan_workload(MIXED_WORKLOAD, p.budget, "gaussian", DELTA, existing)
        assert p.rmse == pytest.approx(workload_rmse(MIXED_WORKLOAD, plan.expected_rmse, TOTAL_SQUARED), rel=1e-12)
    _check_envelope(front)
    hit = budget_for_rmse(front, front.curves[PLANNER][-1].rmse * 1.01)
    assert hit is not None and hit.epsilon == 1.0


@pytest.mark.parametrize("noise, delta, target", [("gaussian", DELTA, 5.0), ("laplace", 0.0, 30.0)])
def test_budget_for_rmse_agrees_with_budget_for_accuracy(min_max_fronts, noise, delta, target):
    """Accuracy-first planning, checked against the front: the same least budget for a max-RMSE target.

    The front is the planner's cost model (continuous noise); budget_for_accuracy checks the
    noise it draws, whose variance is never more (to 2^-25) and, for Laplace noise, lower by
    about 1/(12 b²) relative at scale b: 2e-4 here, 1% at b = 3. So the front's budget is
    never below budget_for_accuracy's, and equal to it up to that.
    """
    front = min_max_fronts[noise]
    point = budget_for_rmse(front, target, PLANNER)
    budget, plan = budget_for_accuracy(SIMPLE, target, noise, delta)
    assert point.budget == pytest.approx(budget, rel=1e-5 if noise == "gaussian" else 1e-3)
    assert point.budget >= budget * (1 - 1e-5)  # budget_for_accuracy nudges up by up to 1e-6
    assert point.rmse == pytest.approx(target, rel=1e-12)
    assert front.rmse_at(PLANNER, point.epsilon * 0.999) > target  # the least ε
    best = budget_for_rmse(front, target)  # over the whole front: never more
    assert best.epsilon <= point.epsilon * (1 + 1e-12)
    assert budget_for_rmse(front, target, "no such strategy") is None


def test_hypervolume_of_hand_made_fronts():
    assert hypervolume([(1, 3), (2, 1)], (4, 4)) == pytest.approx(3 * 1 + 2 * 2)  # [1,4]×[3,4] ∪ [2,4]×[1,4]
    assert hypervolume([(1, 3), (2, 1), (3, 3.5)], (4, 4)) == pytest.approx(7)  # a dominated point adds nothing  # a dominated point adds nothing
    assert hypervolume([(5, 1)], (4, 4)) == 0


def test_expected_improvement_matches_monte_carlo():
    front, reference = [(0.0, 2.0), (1.0, 1.0)], (3.0, 3.0)
    rng = np.random.default_rng(0)
    for x, m, s in ((0.5, 1.5, 0.5), (2.0, 0.5, 1.0), (-1.0, 2.5, 0.3)):
        exact = float(expected_improvement(front, x, m, s, reference))
        ys = rng.normal(m, s, 20000)
        base = hypervolume(front, reference)
        gains = [hypervolume(front + [(x, y)], reference) - base for y in ys[:4000]]
        assert exact == pytest.approx(np.mean(gains), abs=4 * np.std(gains) / np.sqrt(4000) + 1e-9)


def _toy(calls):
    def evaluate(s):
        calls.append(dict(s))
        return (1 + 30 * (s["x"] - 0.3) ** 2) / s["epsilon"]

    return evaluate


KNOBS = [Knob("epsilon", 0.1, 10.0), Knob("x", 0.0, 1.0, log=False)]


def test_bayes_front_is_bounded_deterministic_and_returns_non_dominated_points():
    calls: list = []
    done, stopped = bayes_front(_toy(calls), KNOBS, max_evaluations=9, initial=4, seed=3)
    assert not stopped and len(done) == len(calls) == 9
    again, _ = bayes_front(_toy([]), KNOBS, max_evaluations=9, initial=4, seed=3)
    assert [e.settings for e in again] == [e.settings for e in done]
    other, _ = bayes_front(_toy([]), KNOBS, max_evaluations=9, initial=4, seed=4)
    assert [e.settings for e in other] != [e.settings for e in done]
    points = envelope({"toy": [FrontPoint(e.epsilon, e.rmse, "toy", e.epsilon) for e in done]})
    assert all(not dominates(a, b) for a in points for b in points)
    # the search moves towards the knob's best value (x = 0.3) after its design
    assert min(abs(dict(e.settings)["x"] - 0.3) for e in done[4:]) < 0.1
    none, stopped = bayes_front(_toy([]), KNOBS, max_evaluations=5, limit=PlanningLimit(0.0))
    assert none == [] and stopped


def test_adaptive_front_searches_aim_on_stand_in_data():
    kwargs = dict(rows=1000, epsilons=[0.1, 10.0], noise="gaussian", delta=DELTA, procedures=["aim"],
                  max_evaluations=6)
    front = adaptive_front(MARGINALS, **kwargs)
    curve = front.curves["aim"]
    assert len(curve) == front.evaluations == 6
    assert all(not p.exact and 0.1 <= p.epsilon <= 10.0 for p in curve)
    assert any(dict(p.settings).get("rounds") == 16 * len(TABLE.domain) for p in curve)  # AIM's defaults first
    assert all(not dominates(a, b) for a in front.points for b in front.points)
    assert [p.settings for p in adaptive_front(MARGINALS, **kwargs).curves["aim"]] == [p.settings for p in curve]
    assert not adaptive_front(MARGINALS, None, [0.1, 1]).curves  # no public row count: nothing simulated
    assert "Gaussian" in adaptive_front(MARGINALS, 1000, [0.1, 1], "laplace").notes[0]


def test_pareto_front_table_and_chart(tmp_path):
    from planner.chart import draw_front

    front = pareto_front(MARGINALS, [0.1, 1.0, 10.0], "gaussian", DELTA, rows=1000, max_evaluations=3)
    assert "aim" in front.curves and PLANNER in front.curves
    _check_envelope(front)
    rows = front_table(front.points)
    assert len(rows[0]) == len(FRONT_COLUMNS) and rows == front.table()
    assert {r[5] for r in rows} <= {"exact", "simulated"}
    png = draw_front(front, tmp_path / "front.png", target=5.0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = draw_front(front, tmp_path / "front.svg")
    assert b"<svg" in svg.read_bytes()[:400]


def test_explain_pareto_in_sql_reads_no_data_and_spends_nothing():
    import duckdb

    import dpsql
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

    con = duckdb.connect()
    create_people_table(con, rows=2000)
    conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0)
    cur = conn.cursor()
    rows = cur.execute("EXPLAIN PARETO SELECT sex, education, COUNT(*) FROM people GROUP BY sex, education").fetchall()
    assert [d[0] for d in cur.description][:4] == ["table", "epsilon", "budget", "expected_rmse"]
    errors = [r[3] for r in rows if r[4] == "planner"]
    assert len(errors) >= 10 and errors == sorted(errors, reverse=True)  # more ε, less error
    cur.execute("EXPLAIN PARETO BEGIN WORKLOAD; SELECT age, COUNT(*) FROM people GROUP BY age; "
                "SELECT COUNT(*) FROM people WHERE age < 30; END WORKLOAD")
    assert cur.fetchall() and conn.budget.spent.rho == 0


@pytest.mark.parametrize("estimator", ["least_squares", "pgm"])
def test_explain_pareto_returns_a_front_when_every_query_is_answered_free(estimator):
    """After a query is measured, EXPLAIN PARETO of it (free now) is the front of measuring it again on top of the
    earlier measurements, under either estimator (it returned no rows before)."""
    import duckdb

    import dpsql
    from dpsql.deployment.demo_data import create_people_table

    con = duckdb.connect()
    create_people_table(con, rows=500)
    conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=5.0, delta=1e-9, seed=0)
    conn.execute(f"SET dpsql.estimator = '{estimator}'")
    cur = conn.cursor()
    cur.execute("SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race")
    spent = conn.budget.spent
    cur.execute("EXPLAIN PARETO SELECT sex, COUNT(*) FROM people GROUP BY sex")
    rows = cur.fetchall()
    assert len(rows) >= 5 and all(r[3] > 0 for r in rows)
    assert conn.budget.spent == spent  # reads no data, spends nothing
