"""Planning is bounded in memory and time whatever the table's size, and stops when cancelled."""

import threading
import time
import tracemalloc

import duckdb
import pytest

import dpsql
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML

# Two queries on one clique: a single product query is measured as asked without costing
# the other families, so it would not exercise the simulations.
AGE_BY_INCOME = ("EXPLAIN BEGIN WORKLOAD; SELECT age, income, COUNT(*) FROM people GROUP BY age, income; "
                 "SELECT age, COUNT(*) FROM people WHERE income > 50000 GROUP BY age; END WORKLOAD")


def _connect(rows: int):
    catalog = PEOPLE_CATALOG_TOML.replace("[tables.people.columns]", f"rows = {rows}\n[tables.people.columns]")
    con = duckdb.connect()  # empty: planning reads no data
    con.execute("CREATE TABLE people (age INT, sex VARCHAR, race VARCHAR, education VARCHAR, marital VARCHAR, "
                "region VARCHAR, hours_per_week INT, income DOUBLE)")
    return dpsql.connect(con=con, catalog=catalog, epsilon=1.0)


def test_simulations_never_allocate_by_rows():
    """At 10^9 declared rows the adaptive simulations run on a capped stand-in (RAP's simulation once tried
    to allocate 14.9 GiB for 20M rows)."""
    conn = _connect(1_000_000_000)
    conn.execute("SET dpsql.planning_seconds = 2")
    tracemalloc.start()
    try:
        conn.execute(AGE_BY_INCOME)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 300 * 2**20


def test_the_time_budget_is_used_and_said():
    conn = _connect(20_000_000)
    conn.execute("SET dpsql.planning_seconds = 0.2")
    started = time.thread_time()
    plan = conn.execute(AGE_BY_INCOME).result.plan
    assert time.thread_time() - started < 10  # the RAP simulation alone takes about 20 s unbounded
    assert "planning budget of 0.2 s reached" in plan and "RAP (simulation)" in plan


def test_a_slow_or_busy_machine_gets_the_same_plan(monkeypatch):
    """The budget counts the work each iteration announces, not the clock: with every CPU second
    counted twenty times (a machine twenty times slower, or one whose CPU time is inflated; the old backstop
    stopped optional work there) the plan, and what the budget left out, are the same (a clock-based budget
    measured per query here, against HDMM unloaded)."""
    def planned():
        conn = _connect(20_000_000)
        conn.execute("SET dpsql.planning_seconds = 0.2")
        return _plan_lines(conn.execute(AGE_BY_INCOME).result.plan)

    quick = planned()
    assert any("planning budget of 0.2 s reached" in line for line in quick)  # the budget binds
    clock = time.thread_time
    monkeypatch.setattr(time, "thread_time", lambda: 20.0 * clock())
    assert planned() == quick


def _plan_lines(plan: str) -> list[str]:
    return [line for line in plan.splitlines() if not line.strip().startswith("time:")]


# A BI-style dashboard (COUNT, SUM, AVG; 0-2 GROUP BY columns; range filters) whose planning budget binds.
BI = ("EXPLAIN BEGIN WORKLOAD; SELECT COUNT(*) FROM people; SELECT AVG(hours_per_week) FROM people; "
      "SELECT sex, COUNT(*) FROM people GROUP BY sex; "
      "SELECT sex, SUM(hours_per_week) FROM people WHERE age BETWEEN 20 AND 40 GROUP BY sex; "
      "SELECT race, AVG(hours_per_week) FROM people GROUP BY race; "
      "SELECT COUNT(*) FROM people WHERE age BETWEEN 20 AND 40 AND sex = 'F'; "
      "SELECT sex, race, SUM(hours_per_week) FROM people GROUP BY sex, race; "
      "SELECT marital, COUNT(*) FROM people GROUP BY marital; END WORKLOAD")


def test_a_cpu_hog_beside_the_planner_leaves_the_plan_unchanged():
    """Plans do not depend on the machine's load: with a process busy-looping on every core beside it (load
    over 2 on 2 cores), the BI dashboard gets the same plan, and the same note of what the budget left out."""
    import os
    import subprocess
    import sys

    def planned():
        conn = _connect(1000)
        conn.execute("SET dpsql.planning_seconds = 0.3")
        return _plan_lines(conn.execute(BI).result.plan)

    quiet = planned()
    assert any("planning budget of 0.3 s reached" in line for line in quiet)  # the work budget decides
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        busy = planned()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert busy == quiet


def test_cancelling_stops_planning_at_once():
    conn = _connect(20_000_000)
    conn.execute("SET dpsql.planning_seconds = 0")
    cancelled = {"at": None}
    conn.session.cancelled = lambda: cancelled["at"] is not None
    threading.Timer(0.2, lambda: cancelled.update(at=time.perf_counter())).start()
    with pytest.raises(dpsql.OperationalError, match="cancelled"):
        conn.execute(AGE_BY_INCOME)
    assert time.perf_counter() - cancelled["at"] < 1.0  # 0.5 s is the target (benchmarks/planning.py); slack for busy machines
    assert conn.ledger.charges() == []


@pytest.mark.parametrize("value", ["-1", "nan", "'soon'", "1e9"])
def test_bad_time_budgets_are_refused(value):
    with pytest.raises(dpsql.ProgrammingError, match="planning_seconds"):
        _connect(1000).execute(f"SET dpsql.planning_seconds = {value}")


def test_a_pool_that_runs_out_of_time_last_is_measured_per_query(monkeypatch):
    """Whichever pool of groups is costed for the first time when the planning budget is gone, the plan is
    complete: its groups fall back to per-query measurement (found with quantile blocks on adult)."""
    import duckdb

    import dpsql
    from planner import planner as planning

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT (i % 85)::INTEGER AS age, (i % 99)::INTEGER AS hours, (i % 2)::INTEGER "
                "AS sex FROM range(5000) r(i)")
    catalog = {"tables": {"t": {"columns": {"age": {"type": "integer", "min": 0, "max": 84},
                                             "hours": {"type": "integer", "min": 0, "max": 98},
                                             "sex": {"type": "integer", "min": 0, "max": 1}}}}}
    conn = dpsql.connect(con=con, catalog=catalog, epsilon=1, seed=1)
    domain = conn.session.catalog.get("t").domain
    real = planning._Costs._cost

    def out_of_time_when_pooled(self, name, blocks):
        if name not in planning.ESSENTIAL and len({b.attributes(domain) for b in blocks}) > 1:
            return float("inf")
        return real(self, name, blocks)

    monkeypatch.setattr(planning._Costs, "_cost", out_of_time_when_pooled)
    results = conn.workload(["SELECT QUANTILE(hours, 0.1) FROM t", "SELECT MEDIAN(age) FROM t",
                             "SELECT sex, MEDIAN(hours) FROM t GROUP BY sex",
                             "SELECT MEDIAN(hours) FROM t WHERE age BETWEEN 20 AND 40"], epsilon=0.5)
    assert all(r.rows and all(v is not None for v in r.rows[0]) for r in results)


def test_a_full_domain_group_by_is_refused_by_its_sizes_before_any_allocation(tmp_path):
    """Eight columns of the demo table span 517,120,000 cells (a raw numpy MemoryError of 30.8 GiB before):
    refused while compiling, from the declared domains alone, naming the sizes; nothing is charged. A
    GROUP BY that fits still plans."""
    import dpsql
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, write_people_database

    write_people_database(tmp_path / "people.duckdb", 500)
    (tmp_path / "catalog.toml").write_text(PEOPLE_CATALOG_TOML)
    columns = "age, sex, race, education, marital, region, hours_per_week, income"
    with dpsql.connect(str(tmp_path / "people.duckdb"), catalog=str(tmp_path / "catalog.toml"), epsilon=1.0,
                       state=":memory:") as conn:
        refusals = []
        for sql in (f"SELECT {columns}, COUNT(*) FROM people GROUP BY {columns}",
                    f"SELECT {columns}, AVG(age) FROM people GROUP BY {columns}",
                    "SELECT age, hours_per_week, income, education, COUNT(*) FROM people "
                    "WHERE marital = 'Married' GROUP BY 1, 2, 3, 4"):  # the WHERE's column is in the clique too
            with pytest.raises(dpsql.NotSupportedError, match=r"more than the 4,194,304 dpsql plans at once") as e:
                conn.execute(sql)
            refusals.append(str(e.value))
        assert "517,120,000 groups over 517,120,000 cells (age (100) × sex (2)" in refusals[0]
        assert all("nothing was charged" in r for r in refusals) and conn.budget.spent.rho == 0
        assert len(conn.execute("SELECT sex, race, education, COUNT(*) FROM people GROUP BY 1, 2, 3").fetchall()) == 80
