"""User-level privacy: privacy units, bounding in SQL, sensitivity scaled by the bound, dropped rows.

Bounding is checked against an independent Python implementation of the keyed-hash
order and against direct DuckDB counts; noise scaling by exact planned variances and
by sample variances (fixed seeds, tolerances of about five standard errors).
"""

from __future__ import annotations

import hashlib
import io
from collections import defaultdict

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.backends import DuckDBBackend

from dpsql.tables.catalog import Catalog
from dpsql.tables.unit_bounded import UnitBoundedTable
from dpsql.tables.column_declarations import integer
from dpsql.sql.compiler import compile_query
from dpsql.errors import CatalogError, OperationalError
from dpsql.budget.ledger import Ledger
from dpsql.interfaces.shell import Shell
from dpsql.releases.synth import synthesize
from mechanisms.measurement import GAUSSIAN, LAPLACE, calibrate, query_step
from mechanisms.noise import RandomSource
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Workload
from planner.planner import budget_for_accuracy, plan_workload

K = 3
UNITS = 60

VISITS = f"""
[tables.visits]
privacy_unit = "uid"
max_rows_per_unit = {K}
[tables.visits.columns]
a = {{ type = "integer", min = 0, max = 9 }}
s = {{ type = "categorical", values = ["x", "y"] }}
"""

SHOP = """
[tables.order_items]
privacy_unit = { foreign_key = "order_id", references = "orders.id" }
max_rows_per_unit = 4
[tables.order_items.columns]
qty = { type = "integer", min = 1, max = 5 }

[tables.orders]
privacy_unit = "customer_id"
max_rows_per_unit = 2
[tables.orders.columns]
status = { type = "categorical", values = ["new", "paid"] }
"""


def make_visits(con: duckdb.DuckDBPyConnection, seed: int = 0) -> list[tuple]:
    """Units with 1..10 rows, plus rows without a unit and rows outside the catalog (s = 'q')."""
    rng = np.random.default_rng(seed)
    rows = []
    for uid in range(UNITS):
        for _ in range(int(rng.integers(1, 11))):
            rows.append((uid, int(rng.integers(-2, 12)), str(rng.choice(["x", "y", "q"], p=[0.5, 0.4, 0.1]))))
    rows += [(None, 1, "x")] * 7
    con.execute("CREATE TABLE visits (uid INTEGER, a INTEGER, s VARCHAR)")
    con.executemany("INSERT INTO visits VALUES (?, ?, ?)", rows)
    return rows


def python_bounded(rows: list[tuple], key: str, k: int) -> np.ndarray:
    """The (a, s) marginal after bounding, by the documented rule, computed in Python."""
    kept = defaultdict(list)
    for uid, a, s in rows:
        if uid is None or s not in ("x", "y"):
            continue
        bins = (min(max(a, 0), 9), ("x", "y").index(s))
        digest = hashlib.sha256("|".join([key, str(uid), *map(str, bins)]).encode()).hexdigest()
        kept[uid].append((digest, bins))
    out = np.zeros((10, 2), dtype=np.int64)
    for unit_rows in kept.values():
        for _, (a, s) in sorted(unit_rows)[:k]:
            out[a, s] += 1
    return out.ravel()


@pytest.fixture
def visits():
    con = duckdb.connect()
    rows = make_visits(con)
    yield con, rows, Catalog.from_toml(VISITS)
    con.close()


# --- catalog -----------------------------------------------------------------------------------

def test_units_and_foreign_key_paths_are_declared_and_signed():
    catalog = Catalog.from_toml(SHOP)
    items, orders = catalog.get("order_items"), catalog.get("orders")
    assert (orders.unit.column, orders.contribution, orders.unit.path) == ("customer_id", 2, ())
    assert items.contribution == 4 and items.unit.column == "customer_id"
    assert [(h.column, h.table, h.key) for h in items.unit.path] == [("order_id", "orders", "id")]
    assert "order_id -> orders.id, customer_id, at most 4 rows" in items.signature()
    # The declaration is part of the signature; a row-level table's signature is unchanged.
    plain = Catalog.from_dict({"tables": {"orders": {"columns": {"status": {"type": "categorical",
                                                                            "values": ["new", "paid"]}}}}})
    assert plain.get("orders").contribution == 1 and plain.get("orders").signature() != orders.signature()
    assert plain.get("orders").signature() == repr([("status", "categorical ['new', 'paid']")])
    again = Catalog.from_toml(SHOP.replace("max_rows_per_unit = 2", "max_rows_per_unit = 3"))
    assert again.get("orders").signature() != orders.signature()


BAD_UNITS = [
    ('privacy_unit = "uid"', "needs max_rows_per_unit"),
    ('max_rows_per_unit = 3', "needs a privacy_unit"),
    ('privacy_unit = "uid"\nmax_rows_per_unit = 0', "integer from 1"),
    ('privacy_unit = "uid"\nmax_rows_per_unit = true', "integer from 1"),
    ('privacy_unit = "uid"\nmax_rows_per_unit = 2.5', "integer from 1"),
    ('privacy_unit = ""\nmax_rows_per_unit = 2', "must name a column"),
    ('privacy_unit = 3\nmax_rows_per_unit = 2', "is a column name"),
    ('privacy_unit = { foreign_key = "o" }\nmax_rows_per_unit = 2', "is a column name"),
    ('privacy_unit = { foreign_key = "o", references = "orders" }\nmax_rows_per_unit = 2', "references must read"),
    ('privacy_unit = { foreign_key = "o", references = "nowhere.id" }\nmax_rows_per_unit = 2', "not a protected table"),
    ('privacy_unit = { foreign_key = "o", references = "plain.id" }\nmax_rows_per_unit = 2', "declares no privacy unit"),
    ('privacy_unit = { foreign_key = "o", references = "t.id" }\nmax_rows_per_unit = 2', "cycle"),
]


@pytest.mark.parametrize("declaration,message", BAD_UNITS)
def test_invalid_unit_declarations_are_refused(declaration, message):
    text = f"[tables.t]\n{declaration}\n[tables.t.columns]\na = {{ type = \"integer\", min = 0, max = 1 }}\n"
    text += "[tables.plain.columns]\nb = { type = \"integer\", min = 0, max = 1 }\n"
    with pytest.raises(CatalogError, match=message):
        Catalog.from_toml(text)


def test_python_api_declares_units_and_refuses_unresolved_links():
    catalog = Catalog()
    with pytest.raises(CatalogError, match="not a protected table"):
        catalog.add_table("items", {"q": integer(0, 3)}, {"foreign_key": "oid", "references": "orders.id"}, 5)
    assert "items" not in catalog  # a refused declaration leaves the catalog as it was
    catalog.add_table("orders", {"q": integer(0, 3)}, "cid", 2)
    items = catalog.add_table("items", {"q": integer(0, 3)}, {"foreign_key": "oid", "references": "orders.id"}, 5)
    assert items.contribution == 5 and items.unit.column == "cid"
    with pytest.raises(CatalogError, match="not both"):
        UnitBoundedTable("t", {"q": catalog.get("orders").columns["q"]}, unit_column="cid", unit_link=items.unit_link,
                         max_rows_per_unit=2)
    unresolved = UnitBoundedTable("t", {"q": catalog.get("orders").columns["q"]}, unit_link=items.unit_link,
                                  max_rows_per_unit=2)
    with pytest.raises(CatalogError, match="not resolved"):
        _ = unresolved.contribution


# --- bounding in SQL ---------------------------------------------------------------------------

def test_bounding_keeps_k_rows_per_unit_by_the_keyed_hash(visits):
    con, rows, catalog = visits
    table = catalog.get("visits")
    key = "0123abcd" * 8
    counts = DuckDBBackend(con).marginals(table, [("a", "s"), ()], key)
    assert np.array_equal(counts[("a", "s")], python_bounded(rows, key, K))
    per_unit = con.execute(f"SELECT __dpsql_unit, COUNT(*) FROM {table.source_sql(key)} GROUP BY 1").fetchall()
    direct = con.execute(
        f"SELECT COUNT(*), SUM(LEAST(n, {K})) FROM (SELECT uid, COUNT(*) AS n FROM visits "
        "WHERE uid IS NOT NULL AND s IN ('x', 'y') AND a IS NOT NULL GROUP BY uid)"
    ).fetchone()
    assert max(n for _, n in per_unit) == K and (len(per_unit), sum(n for _, n in per_unit)) == direct
    assert counts[()][0] == direct[1]  # rows without a unit (7 here) are dropped
    # Another key keeps other rows (same per-unit totals).
    other = DuckDBBackend(con).marginals(table, [("a", "s")], "f" * 64)[("a", "s")]
    assert other.sum() == direct[1] and not np.array_equal(other, counts[("a", "s")])


def test_one_unit_changes_any_marginal_by_at_most_k_rows(visits):
    con, rows, catalog = visits
    table, key = catalog.get("visits"), "k" * 64
    full = DuckDBBackend(con).marginals(table, [("a", "s")], key)[("a", "s")]
    for uid in (0, 7, 23):
        neighbour = duckdb.connect()
        neighbour.execute("CREATE TABLE visits (uid INTEGER, a INTEGER, s VARCHAR)")
        neighbour.executemany("INSERT INTO visits VALUES (?, ?, ?)", [r for r in rows if r[0] != uid])
        without = DuckDBBackend(neighbour).marginals(table, [("a", "s")], key)[("a", "s")]
        assert 0 < np.abs(full - without).sum() <= K
        neighbour.close()


def test_foreign_key_path_bounds_linked_rows_per_unit():
    con = duckdb.connect()
    con.execute("CREATE TABLE orders AS SELECT i AS id, CASE WHEN i % 10 = 9 THEN NULL ELSE i % 7 END AS customer_id, "
                "CASE WHEN i % 2 = 0 THEN 'new' ELSE 'paid' END AS status FROM range(40) t(i)")
    con.execute("CREATE TABLE order_items AS SELECT i % 45 AS order_id, 1 + i % 5 AS qty FROM range(300) t(i)")
    catalog = Catalog.from_toml(SHOP)
    items = catalog.get("order_items")
    counts = DuckDBBackend(con).marginals(items, [("qty",)], "s" * 64)[("qty",)]
    # Items of orders without a customer, or of no order at all (ids 40..44), are dropped;
    # each customer keeps at most 4 items.
    direct = con.execute(
        "SELECT SUM(LEAST(n, 4)) FROM (SELECT o.customer_id, COUNT(*) AS n FROM order_items i "
        "JOIN orders o ON i.order_id = o.id WHERE o.customer_id IS NOT NULL GROUP BY 1)"
    ).fetchone()[0]
    assert counts.sum() == direct == 7 * 4
    dropped = con.execute(
        "SELECT SUM(LEAST(n - 4, 3)) FROM (SELECT o.customer_id, COUNT(*) AS n FROM order_items i "
        "JOIN orders o ON i.order_id = o.id WHERE o.customer_id IS NOT NULL GROUP BY 1) WHERE n > 4"
    ).fetchone()[0]
    assert DuckDBBackend(con).dropped_rows(items, 3) == dropped == 7 * 3
    con.close()


# --- the key -----------------------------------------------------------------------------------

def test_the_key_is_stable_per_ledger_and_never_shown(visits, tmp_path):
    con, _, catalog = visits
    state = str(tmp_path / "state")
    with dpsql.connect(con=con, catalog=catalog, epsilon=1.0, state=state, seed=1) as c:
        key = c.ledger.bounding_key()
        first = c.execute("SELECT s, COUNT(*) FROM visits GROUP BY s").result
        plan = c.execute("EXPLAIN SELECT a, COUNT(*) FROM visits GROUP BY a").result.plan
    assert len(key) == 64 and Ledger(state, GAUSSIAN, None, 1e-9).bounding_key() == key
    assert Ledger(str(tmp_path / "other"), GAUSSIAN, 1.0, 1e-9).bounding_key() != key
    with dpsql.connect(con=con, catalog=catalog, state=state) as c:
        assert c.execute("SELECT s, COUNT(*) FROM visits GROUP BY s").fetchall() == first.rows  # reused: same signature
        shown = [first.plan, plan, *(str(x) for x in c.ledger.charges())]
        assert not any(key in text for text in shown)
        con.execute("ALTER TABLE visits RENAME COLUMN uid TO person")  # the engine now fails the scan
        spent = c.budget.spent.rho
        with pytest.raises(OperationalError) as info:
            c.execute("SELECT a, COUNT(*) FROM visits GROUP BY a")
        assert key not in str(info.value) and c.budget.spent.rho == spent


# --- sensitivity ------------------------------------------------------------------------------

WORKLOAD = [
    "SELECT s, COUNT(*) FROM visits GROUP BY s",
    "SELECT COUNT(*) FROM visits WHERE a BETWEEN 2 AND 6",
    "SELECT a, s, COUNT(*) FROM visits GROUP BY a, s",
]


def _workload(catalog: Catalog) -> Workload:
    blocks = [b for i, q in enumerate(WORKLOAD) for b in compile_query(q, catalog, label=f"q{i}").blocks]
    return Workload(catalog.get("visits").domain, blocks)


@pytest.mark.parametrize("noise", [GAUSSIAN, LAPLACE])
def test_planned_noise_and_accuracy_budgets_scale_with_the_bound(noise):
    """The noise is exactly that of k times the sensitivity; its variance is k² times (up to the
    discrete Laplace's departure from 2b² at small scales), and so are the accuracy budgets."""
    workload = _workload(Catalog.from_toml(VISITS))
    row, unit = (plan_workload(workload, 0.5, noise, 1e-9, contribution=k) for k in (1, K))
    close = 1e-6 if noise == GAUSSIAN else 0.05
    assert row.cost == pytest.approx(unit.cost)
    for m1, mk in zip(row.measurements, unit.measurements):
        assert mk.sensitivity == pytest.approx(K * m1.sensitivity) and mk.contribution == K
        step = query_step(mk.query(workload.domain))
        assert mk.variance == calibrate(noise, K * m1.sensitivity, mk.share, step).variance
        assert mk.variance == pytest.approx(K**2 * m1.variance, rel=close)
    for name, rmse in row.expected_rmse.items():
        assert unit.expected_rmse[name] == pytest.approx(K * rmse, rel=close)
    for a1, ak in zip(row.alternatives, unit.alternatives):  # the chosen one's line is its exact (discrete) noise
        assert ak.name == a1.name and ak.rmse == pytest.approx(K * a1.rmse, rel=close if a1.name == row.chosen else 1e-9)
    if noise == GAUSSIAN:  # accuracy first: k times the noise needs k² times the budget
        small = Workload(workload.domain, [b for b in workload.blocks if b.name.startswith("q1")])
        b1, _ = budget_for_accuracy(small, 20.0, noise, 1e-9)
        bk, plan = budget_for_accuracy(small, 20.0, noise, 1e-9, contribution=K)
        assert bk == pytest.approx(K**2 * b1, rel=1e-3)
        assert max(plan.expected_rmse.values()) <= 20.0 * (1 + 1e-9)


def test_released_noise_variance_is_k_squared_times_larger():
    """Sample variances of 8,000 released zeros: each within ~5 standard errors (2.2%) of plan."""
    domain = _workload(Catalog.from_toml(VISITS)).domain
    samples = {}
    for k in (1, K):
        plan = plan_workload(_workload(Catalog.from_toml(VISITS)), 0.05, GAUSSIAN, 1e-9, contribution=k)
        pm = next(m for m in plan.measurements if m.clique == ("a", "s"))
        rng = RandomSource(11)
        values = np.concatenate([pm.release(np.zeros(20, dtype=np.int64), domain, GAUSSIAN, rng).values
                                 for _ in range(400)])
        assert values.var() == pytest.approx(pm.variance, rel=0.08)
        samples[k] = values.var()
    assert samples[K] / samples[1] == pytest.approx(K**2, rel=0.12)


def test_expected_rmse_matches_monte_carlo_with_k_above_one():
    """300 releases of a three-query plan at k = 3: empirical RMSE within 15% (>3 SE) of the plan's."""
    workload = _workload(Catalog.from_toml(VISITS))
    domain = workload.domain
    plan = plan_workload(workload, 0.02, GAUSSIAN, 1e-9, contribution=K)
    truth = np.random.default_rng(0).integers(0, 50, domain.size(domain.attributes)).astype(np.int64)
    table = truth.reshape(domain.shape(domain.attributes))

    def marginal(clique):
        axes = tuple(i for i, a in enumerate(domain.attributes) if a not in clique)
        return table.sum(axis=axes).ravel()

    rng = RandomSource(5)
    squared = defaultdict(float)
    reps = 300
    for _ in range(reps):
        model = LeastSquaresModel(domain, [pm.release(marginal(pm.clique), domain, GAUSSIAN, rng)
                                           for pm in plan.measurements])
        for b in workload.blocks:
            exact = b.matrix(domain).matvec(marginal(b.attributes(domain)).astype(float))
            squared[b.name] += float(np.mean((model.answer(b)[0] - exact) ** 2)) / reps
    for b in workload.blocks:
        assert np.sqrt(squared[b.name]) == pytest.approx(plan.expected_rmse[b.name], rel=0.15), b.name


def test_session_answers_carry_k_times_the_error_and_explain_says_so(visits):
    con, _, catalog = visits
    row_level = Catalog.from_toml(VISITS.replace('privacy_unit = "uid"\n', "").replace(f"max_rows_per_unit = {K}\n", ""))
    errors = {}
    for name, cat in (("unit", catalog), ("row", row_level)):
        with dpsql.connect(con=con, catalog=cat, epsilon=1.0, seed=2) as c:
            errors[name] = c.execute("SELECT s, COUNT(*) FROM visits GROUP BY s").result.stderr[0][1]
            if name == "unit":
                plan = c.execute("EXPLAIN SELECT a, COUNT(*) FROM visits GROUP BY a").result.plan
                assert f"({K} rows per unit)" in plan
    assert errors["unit"] == pytest.approx(K * errors["row"], rel=1e-6)


def test_synthetic_data_spends_the_budget_per_unit(visits, tmp_path):
    con, _, catalog = visits
    with dpsql.connect(con=con, catalog=catalog, epsilon=5.0, seed=3) as c:
        report = synthesize(c, "visits", rho=0.09, out_path=tmp_path / "v.parquet", mechanism="mst")
        measured = [m for m in c.session.executor.model(catalog.get("visits")).measurements]
        assert report.charged.rho == pytest.approx(0.09) and c.budget.spent.rho == pytest.approx(0.09)
        assert sum(m.cost for m in measured) <= 0.09 / K**2 * (1 + 1e-9)  # run at ρ/k² per row


# --- the dropped-row report ---------------------------------------------------------------------

def test_dropped_rows_are_a_charged_dp_count(visits):
    con, _, catalog = visits
    table = catalog.get("visits")
    exact = {cap: con.execute(
        f"SELECT SUM(LEAST(n - {K}, {cap})) FROM (SELECT uid, COUNT(*) AS n FROM visits WHERE uid IS NOT NULL "
        f"AND s IN ('x', 'y') AND a IS NOT NULL GROUP BY uid) WHERE n > {K}").fetchone()[0] for cap in (1, K)}
    assert DuckDBBackend(con).dropped_rows(table, K) == exact[K]
    with dpsql.connect(con=con, catalog=catalog, epsilon=20.0, seed=4) as c:
        result = c.dropped_rows("visits", epsilon=5.0)
        charges = c.ledger.charges()
        assert len(charges) == 1 and charges[0].detail == "dropped rows"
        assert c.budget.spent.epsilon == pytest.approx(5.0)
        assert result.columns == ["dropped_rows"] and result.charged > 0
        (value,), (stderr,) = result.rows[0], result.stderr[0]
        assert abs(value - exact[K]) <= 5 * stderr
        units = c.dropped_rows("visits", epsilon=5.0, cap=1)  # the units that lost rows: sensitivity 1
        assert units.stderr[0][0] == pytest.approx(stderr / K, rel=1e-6)
        assert abs(units.rows[0][0] - exact[1]) <= 5 * units.stderr[0][0]


def test_dropped_rows_errors_charge_nothing(visits):
    con, _, _ = visits
    con.execute("CREATE TABLE plain_copy AS SELECT a, s FROM visits")
    cat = Catalog.from_toml(VISITS + "[tables.plain_copy.columns]\na = { type = \"integer\", min = 0, max = 9 }\n")
    with dpsql.connect(con=con, catalog=cat, epsilon=1.0) as c:
        for kwargs, error in [
            ({"table": "nowhere"}, "not a protected table"),
            ({"table": "plain_copy"}, "declares no privacy unit"),
            ({"table": "visits", "cap": 0}, "positive integer"),
            ({"table": "visits", "epsilon": -1.0}, "epsilon must be a number from"),
            ({"table": "visits", "epsilon": 5.0}, "remains"),
        ]:
            with pytest.raises(dpsql.Error, match=error):
                c.dropped_rows(**kwargs)
        assert c.ledger.charges() == []


def test_the_shell_reports_dropped_rows(visits):
    con, _, catalog = visits
    with dpsql.connect(con=con, catalog=catalog, epsilon=1.0, seed=6) as c:
        out, err = io.StringIO(), io.StringIO()
        shell = Shell(c, out=out, err=err)
        assert shell.handle(".dropped visits 0.5")
        assert "dropped_rows" in out.getvalue() and "charged ε=0.5" in out.getvalue()
        assert not shell.handle(".dropped visits lots") and "must be a number" in err.getvalue()
        assert len(c.ledger.charges()) == 1


# --- Spark --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_spark_bounds_exactly_as_duckdb(visits, tmp_path):
    """The transpiled bounding SQL (window, SHA-256, foreign-key join) keeps the same rows in Spark."""
    pytest.importorskip("pyspark")
    from dpsql.backends.spark import SparkBackend

    con, _, catalog = visits
    con.execute("CREATE TABLE orders AS SELECT i AS id, i % 7 AS customer_id, 'new' AS status FROM range(40) t(i)")
    con.execute("CREATE TABLE order_items AS SELECT i % 45 AS order_id, 1 + i % 5 AS qty FROM range(300) t(i)")
    spark = SparkBackend("local[1]").spark
    try:
        for name in ("visits", "orders", "order_items"):
            path = tmp_path / f"{name}.parquet"
            con.execute(f"COPY {name} TO '{path}' (FORMAT parquet)")
            spark.read.parquet(str(path)).createOrReplaceTempView(name)
        key = "9" * 64
        for table, cliques in ((catalog.get("visits"), [("a", "s"), ("s",)]),
                               (Catalog.from_toml(SHOP).get("order_items"), [("qty",)])):
            ours = DuckDBBackend(con).marginals(table, cliques, key)
            theirs = SparkBackend(spark).marginals(table, cliques, key)
            assert all(np.array_equal(ours[q], theirs[q]) for q in cliques)
            assert SparkBackend(spark).dropped_rows(table, 2) == DuckDBBackend(con).dropped_rows(table, 2)
    finally:
        spark.stop()
