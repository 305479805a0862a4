"""Strategy optimizations are kept across planning calls, and a kept one announces the work it did."""

import duckdb
import pytest

import dpsql
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML
from mechanisms import factorization as factorization_module
from mechanisms.interruption import Interrupted, checkpoint, stopping_when
from mechanisms.work_cache import WorkCache, clear_all


def _counting(compute_work):
    calls = []

    def compute():
        calls.append(1)
        for w in compute_work:
            checkpoint(w)
        return len(calls)

    return compute, calls


def test_a_hit_announces_the_work_the_computation_announced():
    cache = WorkCache()
    compute, calls = _counting([5.0, 7.0, 11.0])
    seen: list[float] = []
    with stopping_when(seen.append):
        assert cache.get("k", compute) == 1
        assert cache.get("k", compute) == 1  # kept: not computed again
    assert calls == [1]
    assert seen == [5.0, 7.0, 11.0, 5.0, 7.0, 11.0]


def _budget(limit, seen):
    spent = [0.0]

    def check(w):
        seen.append(w)
        spent[0] += w
        if spent[0] > limit:
            raise Interrupted("over")
    return check


def test_a_stopped_computation_announces_its_work_again_and_runs_only_when_let_through():
    cache = WorkCache()
    compute, calls = _counting([5.0, 7.0, 11.0])
    seen: list[float] = []
    with stopping_when(_budget(6.0, seen)), pytest.raises(Interrupted):
        cache.get("k", compute)
    assert calls == [1] and seen == [5.0, 7.0]
    seen.clear()
    with stopping_when(_budget(6.0, seen)), pytest.raises(Interrupted):
        cache.get("k", compute)  # stopped again where it stopped, without computing
    assert calls == [1] and seen == [5.0, 7.0]
    seen.clear()
    with stopping_when(_budget(100.0, seen)):
        assert cache.get("k", compute) == 2  # let through: computed, each work checked once
    assert calls == [1, 1] and seen == [5.0, 7.0, 11.0]
    seen.clear()
    with stopping_when(_budget(20.0, seen)), pytest.raises(Interrupted):
        cache.get("k", compute)  # kept now, and a hit stops under the budget that would stop the computation
    assert calls == [1, 1] and seen == [5.0, 7.0, 11.0]


def test_entries_and_bytes_are_bounded():
    cache = WorkCache(entries=2, max_bytes=10, size=lambda v: v)
    for key, value in (("a", 4), ("b", 4), ("c", 4)):
        cache.get(key, lambda v=value: v)
    assert len(cache) == 2  # "a" went first
    cache.get("big", lambda: 11)  # larger than the bound: not kept
    assert len(cache) == 2
    cache.get("d", lambda: 6)  # 4 + 6 fits, 4 + 4 + 6 does not
    assert len(cache) == 2


def _connect():
    con = duckdb.connect()  # planning reads no data
    con.execute("CREATE TABLE people (age INT, sex VARCHAR, race VARCHAR, education VARCHAR, marital VARCHAR, "
                "region VARCHAR, hours_per_week INT, income DOUBLE)")
    return dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0)


def test_a_second_connection_explains_a_median_without_optimizing_again(monkeypatch):
    clear_all()
    first = _connect().execute("EXPLAIN SELECT MEDIAN(age) FROM people").fetchall()

    def refused(*args, **kwargs):
        raise AssertionError("optimized again")

    monkeypatch.setattr(factorization_module, "optimal_factorization", refused)
    monkeypatch.setattr("planner.families.factorization.optimal_factorization", refused)
    monkeypatch.setattr("planner.families.factorization.marginal_factorization", refused)
    monkeypatch.setattr("planner.families.hdmm.optimize", refused)
    monkeypatch.setattr("planner.families.hdmm.opt_kron", refused)
    monkeypatch.setattr("mechanisms.ranges.optimize.choose_range_strategy", refused)
    again = _connect().execute("EXPLAIN SELECT MEDIAN(age) FROM people").fetchall()
    assert _plan_lines(again) == _plan_lines(first)


# The median's optimizations come first: kept from an earlier statement, they would leave budget for more.
WORKLOAD = ("EXPLAIN BEGIN WORKLOAD; SELECT MEDIAN(age) FROM people; "
            "SELECT sex, SUM(hours_per_week) FROM people WHERE age BETWEEN 20 AND 40 GROUP BY sex; "
            "SELECT COUNT(*) FROM people WHERE age BETWEEN 20 AND 40 AND sex = 'F'; END WORKLOAD")


def _plan_lines(rows) -> list[str]:
    return [line for (line,) in rows if not line.strip().startswith("time:")]


@pytest.mark.parametrize("seconds", [0.02, 0.15])
def test_a_plan_under_a_binding_budget_does_not_depend_on_what_was_planned_before(seconds):
    """Kept optimizations announce their work again, so a budget that binds leaves out the same work (without
    the replay, both budgets here would consider more families once the median's pieces are kept)."""
    def planned():
        conn = _connect()
        conn.execute(f"SET dpsql.planning_seconds = {seconds}")
        return _plan_lines(conn.execute(WORKLOAD).fetchall())

    clear_all()
    cold = planned()
    assert any(f"planning budget of {seconds:g} s reached" in line for line in cold)  # the budget binds
    _connect().execute("EXPLAIN SELECT MEDIAN(age) FROM people").fetchall()  # the median's pieces kept
    assert planned() == cold
