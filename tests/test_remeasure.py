"""A block that earlier measurements determine far worse than the statement's share would is measured again
(`planner.remeasure`); a query asked again with nothing new stays free."""

from __future__ import annotations

import duckdb
import pytest

import dpsql

CATALOG = {"tables": {"people": {"columns": {
    "age": {"type": "integer", "min": 0, "max": 99},
    "sex": {"type": "categorical", "values": ["F", "M"]},
}}}}
MEDIAN = "SELECT MEDIAN(age) FROM people WHERE sex = 'M'"


@pytest.fixture(scope="module")
def data():
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT (i * 7919 % 100)::INTEGER AS age, "
                "CASE WHEN i % 3 = 0 THEN 'M' ELSE 'F' END AS sex FROM range(20000) t(i)")
    yield con
    con.close()


def _weakly_measured(data, epsilon=10.0, seed=3):
    """A connection whose (sex × age) prefix counts were measured at a tiny share (ε = 0.01)."""
    conn = dpsql.connect(con=data.cursor(), catalog=CATALOG, epsilon=epsilon, query_epsilon=1.0, seed=seed)
    conn.workload([MEDIAN], epsilon=0.01)
    return conn


def test_a_median_determined_by_a_weak_measurement_is_measured_again_as_well_as_a_fresh_share(data):
    conn = _weakly_measured(data)
    weak = conn.execute("EXPLAIN " + MEDIAN).fetchall()
    plan = "\n".join(row[0] for row in weak)
    assert "measured again: earlier measurements give expected RMSE" in plan, plan
    spent = conn.budget.spent.rho
    cur = conn.cursor()
    cur.execute(MEDIAN)
    assert conn.budget.spent.rho > spent  # charged: not answered free from the weak measurement
    again = cur.result.stderr[0][0]
    fresh = dpsql.connect(con=data.cursor(), catalog=CATALOG, epsilon=10.0, query_epsilon=1.0, seed=3).cursor()
    fresh.execute(MEDIAN)
    assert again <= 1.1 * fresh.result.stderr[0][0]  # combined with the weak one: no worse than a fresh share
    spent = conn.budget.spent.rho
    cur.execute(MEDIAN)  # asked again with nothing new: free
    assert conn.budget.spent.rho == spent and cur.result.charge_text.startswith("no charge")


def test_a_query_asked_again_at_its_own_share_stays_free(data):
    conn = dpsql.connect(con=data.cursor(), catalog=CATALOG, epsilon=10.0, query_epsilon=1.0, seed=4)
    conn.execute(MEDIAN)
    spent = conn.budget.spent.rho
    for sql in (MEDIAN, "SELECT QUANTILE(age, 0.9) FROM people WHERE sex = 'M'"):  # the same CDF
        cur = conn.cursor()
        cur.execute(sql)
        assert conn.budget.spent.rho == spent and cur.result.charge_text.startswith("no charge")
    assert "measured again" not in "\n".join(r[0] for r in conn.execute("EXPLAIN " + MEDIAN).fetchall())


def test_a_weak_answer_stays_free_when_the_share_does_not_fit(data):
    conn = _weakly_measured(data, epsilon=0.5)  # the query share ε = 1 exceeds what is left
    spent = conn.budget.spent.rho
    cur = conn.cursor()
    cur.execute(MEDIAN)  # answered free, as before the rule, rather than refused
    assert conn.budget.spent.rho == spent and cur.result.charge_text.startswith("no charge")

