"""Adaptive procedures in the planner and the session: AIM for wide marginal workloads.

The planner costs AIM and RAP by simulation on public synthetic data once the
table's size is released; a wide workload of 3-way marginals at a small budget
goes to AIM, whose graphical model then answers later queries on the same
columns for free, also after reconnecting (refitted from the ledger).
"""

import itertools
import math

import duckdb
import numpy as np
import pytest

import dpsql
from mechanisms.domain import Domain
from mechanisms.workload import Block, Term, Workload
from planner.adaptive import AIM
from planner.planner import plan_workload

COLUMNS = [f"c{i}" for i in range(6)]
CATALOG = "[tables.t]\n[tables.t.columns]\n" + "\n".join(
    f'{c} = {{ type = "integer", min = 0, max = 5 }}' for c in COLUMNS
)
ROWS = 2000
MARGINALS = list(itertools.combinations(COLUMNS, 3))


def _table(con: duckdb.DuckDBPyConnection) -> np.ndarray:
    rng = np.random.default_rng(7)
    latent = rng.integers(0, 3, ROWS)
    data = np.stack([(latent * 2 + rng.integers(0, 2, ROWS) + i) % 6 for i in range(6)], axis=1)
    con.execute(f"CREATE TABLE t ({', '.join(c + ' INTEGER' for c in COLUMNS)})")
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * 6)})", data.tolist())
    return data


def test_the_planner_needs_the_size_to_cost_adaptive_procedures():
    domain = Domain(tuple(COLUMNS), (6,) * 6)
    workload = Workload(domain, [Block("m" + "".join(c), c, [Term(1.0, {})]) for c in MARGINALS])
    plan = plan_workload(workload, 0.005)
    assert plan.adaptive is None and any("size is unknown" in n for n in plan.notes)
    sized = plan_workload(workload, 0.005, rows=ROWS)
    names = {a.name for a in sized.alternatives}
    assert {"aim (simulated)", "rap (simulated)"} <= names
    assert sized.adaptive is not None and sized.adaptive.procedure.name == AIM
    assert sized.cost == pytest.approx(0.005)
    assert "run AIM on 20 queries" in sized.explain()
    # Laplace (pure DP) plans never use them: AIM and RAP are zCDP mechanisms.
    assert plan_workload(workload, 0.5, "laplace", rows=ROWS).adaptive is None


def test_wide_workload_runs_aim_and_later_queries_are_free(tmp_path):
    con = duckdb.connect()
    data = _table(con)
    state = str(tmp_path / "ledger.duckdb")
    conn = dpsql.connect(con=con, catalog=CATALOG, epsilon=2.0, delta=1e-6, state=state, seed=3)
    cur = conn.cursor()
    cur.execute("SET dpsql.planning_seconds = 0")  # the choice under test, on any machine's speed
    cur.execute("SELECT COUNT(*) FROM t")  # releases the size: AIM and RAP can now be costed
    rho = 0.005
    script = f"BEGIN WORKLOAD WITH (rho = {rho});\n" + "\n".join(
        f"SELECT {', '.join(c)}, COUNT(*) FROM t GROUP BY {', '.join(c)};" for c in MARGINALS
    ) + "\nEND WORKLOAD;"
    spent = conn.session.ledger.spent()
    cur.execute(script)
    assert "aim" in cur.result.plan.lower()
    assert conn.session.ledger.spent() - spent == pytest.approx(rho, rel=1e-12)  # exactly the plan's budget
    charge = conn.session.ledger.charges()[-1]
    assert charge.detail == AIM
    # The answers are the graphical model's: consistent, near the truth at this budget.
    rows = cur.fetchall()
    assert len(rows) == 216 and all(math.isfinite(r[-1]) for r in rows)
    # A later query on the same columns outside the measured span: free, from the model.
    before = conn.session.ledger.spent()
    cur.execute("SELECT c0, c5, COUNT(*) FROM t WHERE c1 >= 2 GROUP BY c0, c5")
    assert cur.result.charged == 0 and conn.session.ledger.spent() == before
    got = np.array([r[2] for r in cur.fetchall()])
    truth = np.zeros((6, 6))
    np.add.at(truth, (data[data[:, 1] >= 2, 0], data[data[:, 1] >= 2, 5]), 1)
    # The best linear plan's expected RMSE for the workload at this budget is ≈35 per cell; the
    # model beats it (seeds 0-7 give 15-26).
    assert np.sqrt(np.mean((got - truth.ravel()) ** 2)) < 35
    conn.close()
    # After reconnecting, the model is refitted from the ledger: still free.
    again = dpsql.connect(con=con, catalog=CATALOG, state=state, seed=4)
    cur = again.cursor()
    cur.execute("SELECT c2, c3, COUNT(*) FROM t WHERE c4 < 3 GROUP BY c2, c3")
    assert cur.result.charged == 0
    assert len(cur.fetchall()) == 36
    again.close()


@pytest.mark.slow
def test_threshold_batch_runs_rap_and_later_queries_are_free(tmp_path):
    columns = [f"d{i}" for i in range(10)]
    catalog = "[tables.u]\n[tables.u.columns]\n" + "\n".join(
        f'{c} = {{ type = "integer", min = 0, max = 3 }}' for c in columns
    )
    con = duckdb.connect()
    rng = np.random.default_rng(5)
    data = rng.integers(0, 4, (20_000, 10))
    con.register("generated", {c: data[:, i] for i, c in enumerate(columns)})
    con.execute("CREATE TABLE u AS SELECT * FROM generated")
    conn = dpsql.connect(con=con, catalog=catalog, epsilon=2.0, delta=1e-6, state=str(tmp_path / "l"), seed=1)
    cur = conn.cursor()
    cur.execute("SET dpsql.planning_seconds = 0")  # the choice under test, on any machine's speed
    cur.execute("SELECT COUNT(*) FROM u")
    queries = [
        f"SELECT COUNT(*) FROM u WHERE ({a} = 1)::INT + ({b} = 2)::INT + ({c} > 1)::INT + ({d} < 2)::INT >= {r}"
        for a, b, c, d in itertools.combinations(columns, 4) for r in (1, 2)
    ][:400]
    cur.execute("BEGIN WORKLOAD WITH (rho = 0.001);\n" + ";\n".join(queries) + ";\nEND WORKLOAD;")
    assert conn.session.ledger.charges()[-1].detail == "rap"
    answers = [cur.fetchone()[0]]
    while cur.nextset():
        answers.append(cur.fetchone()[0])
    assert len(answers) == 400
    # A new threshold query on the same columns: answered from the relaxed data, free.
    spent = conn.session.ledger.spent()
    cur.execute("SELECT COUNT(*) FROM u WHERE (d0 = 0)::INT + (d9 = 3)::INT >= 1")
    assert cur.result.charged == 0 and conn.session.ledger.spent() == spent
    truth = int(((data[:, 0] == 0) | (data[:, 9] == 3)).sum())
    answer = cur.fetchone()[0]
    assert abs(answer - truth) < 0.1 * len(data)
    # The relaxed data is kept in the ledger: another connection answers from it, free, the same.
    other = dpsql.connect(con=con, catalog=catalog, state=str(tmp_path / "l"), seed=2)
    again = other.cursor()
    again.execute("SELECT COUNT(*) FROM u WHERE (d0 = 0)::INT + (d9 = 3)::INT >= 1")
    assert again.result.charged == 0 and again.fetchone()[0] == pytest.approx(answer)
