"""The backend-agnostic integration suite, run on DuckDB and on Spark (local mode).

Binning and the protected-table row filter run inside the engine (Spark gets
DuckDB's marginal SQL transpiled by sqlglot), so the same catalog, plan and
noise seed must give the same answers on every backend: the exact marginals must
agree to the count on data that exercises every declaration rule (NULLs,
undeclared values, `other`, clamping, quoting), and a seeded session must give
identical rows. Spark tests skip where pyspark or Java is missing (CI installs
both: see .ci/run); `-k spark` selects them, `-k duckdb` the others.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest
import sqlglot

import dpsql
from dpsql.backends import DuckDBBackend, make_backend, marginal_sql
from dpsql.tables.catalog import Catalog
from dpsql.sql.compiler import compile_query
from dpsql.tables.column_declarations import categorical, integer, numeric
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

ROWS = 20_000
BACKENDS = ["duckdb", "spark"]
pytestmark = pytest.mark.timeout(300)  # Spark's start-up (~15 s on 2 cores) lands in the first test


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """The people table in a DuckDB file and in Parquet (what Spark reads), plus the
    hostile table in Parquet."""
    folder = tmp_path_factory.mktemp("backends")
    database, people, hostile = folder / "people.duckdb", folder / "people.parquet", folder / "hostile.parquet"
    con = duckdb.connect(str(database))
    create_people_table(con, rows=ROWS)
    con.execute(f"COPY people TO '{people}' (FORMAT parquet)")
    con.execute(f"CREATE TABLE hostile AS SELECT * FROM ({_hostile_sql()})")
    con.execute(f"COPY hostile TO '{hostile}' (FORMAT parquet)")
    con.close()
    return {"database": str(database), "people": str(people), "hostile": str(hostile)}


@pytest.fixture(scope="module")
def spark(files):
    """A local-mode Spark session with the tables registered as temporary views."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java (17+)")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]").appName("dpsql-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(Path(files["people"]).parent / "warehouse"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    for name in ("people", "hostile"):
        session.read.parquet(files[name]).createOrReplaceTempView(name)
    yield session
    session.stop()


def _connect(kind: str, files: dict, request, state: str, **kwargs) -> dpsql.Connection:
    """A connection measuring on `kind`. On Spark the DuckDB database is empty, so any
    answer must have been measured in Spark."""
    if kind == "spark":
        kwargs.update(backend="spark", spark=request.getfixturevalue("spark"))
        return dpsql.connect(":memory:", catalog=PEOPLE_CATALOG_TOML, state=state, **kwargs)
    return dpsql.connect(files["database"], catalog=PEOPLE_CATALOG_TOML, state=state, **kwargs)


@pytest.fixture(params=BACKENDS)
def conn(request, files, tmp_path):
    c = _connect(request.param, files, request, str(tmp_path / "state"), epsilon=1.0, seed=7)
    yield c
    c.close()


def _parquet_view(path: str, name: str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection reading a Parquet file as the view `name`."""
    con = duckdb.connect()
    con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}')")
    return con


@pytest.fixture(scope="module")
def truth(files):
    con = _parquet_view(files["people"], "people")
    yield con
    con.close()


# --- the integration suite, on each backend ------------------------------------------------


def test_group_by_answers_every_group_near_the_truth(conn, truth):
    cur = conn.cursor().execute("SELECT education, COUNT(*) AS n, AVG(income) FROM people GROUP BY education")
    rows = cur.fetchall()
    assert [r[0] for r in rows] == ["None", "Primary", "Some HS", "HS", "Some college", "Bachelors", "Masters", "Doctorate"]
    exact = dict(truth.execute("SELECT education, COUNT(*) FROM people GROUP BY education").fetchall())
    for row, err in zip(rows, cur.result.stderr):
        assert err[1] > 0 and abs(row[1] - exact[row[0]]) < 6 * err[1]


def test_reasking_and_the_span_are_free(conn):
    cur = conn.cursor()
    first = cur.execute("SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race").fetchall()
    spent = conn.budget.spent.rho
    assert spent > 0
    assert cur.execute("SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race").fetchall() == first
    cur.execute("SELECT COUNT(*) FROM people WHERE sex = 'F' AND race IN ('Asian', 'Other')")
    assert cur.result.charged == 0 and conn.budget.spent.rho == spent


def test_workload_is_measured_in_one_charge(conn):
    cur = conn.cursor().execute("""
        BEGIN WORKLOAD WITH (epsilon = 0.3);
        SELECT sex, COUNT(*) FROM people GROUP BY sex;
        SELECT COUNT(*) FROM people WHERE age < 18 AND hours_per_week IS NULL;
        SELECT region, AVG(income) FROM people GROUP BY region;
        END WORKLOAD;
    """)
    sizes = [len(cur.fetchall())]
    while cur.nextset():
        sizes.append(len(cur.fetchall()))
    assert sizes == [2, 1, 4]
    assert len(conn.ledger.charges()) == 1
    assert conn.budget.spent.epsilon == pytest.approx(0.3, rel=1e-6)


@pytest.mark.parametrize("sql", ["SELECT age FROM people", "SELECT COUNT(*) FROM people WHERE sex = 'X'"])
def test_errors_never_charge(conn, sql):
    with pytest.raises(dpsql.Error):
        conn.cursor().execute(sql)
    assert conn.budget.spent.rho == 0


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_table_the_engine_lacks_fails_without_charge(kind, files, request, tmp_path):
    catalog = PEOPLE_CATALOG_TOML + PEOPLE_CATALOG_TOML.replace("[tables.people", "[tables.absent")
    kwargs = {"backend": "spark", "spark": request.getfixturevalue("spark")} if kind == "spark" else {}
    with dpsql.connect(":memory:", catalog=catalog, state=str(tmp_path / "s"), epsilon=1.0, **kwargs) as c:
        with pytest.raises(dpsql.OperationalError, match="absent"):
            c.cursor().execute("SELECT COUNT(*) FROM absent")
        assert c.budget.spent.rho == 0


# --- the backends agree -----------------------------------------------------------------------


def test_same_seed_gives_the_same_answers_on_both_backends(files, request, tmp_path):
    script = """
        BEGIN WORKLOAD WITH (epsilon = 0.5);
        SELECT age, COUNT(*) FROM people GROUP BY age;
        SELECT sex, education, COUNT(*) FROM people GROUP BY sex, education;
        SELECT COUNT(*) FROM people WHERE income >= 100000 AND marital = 'Married';
        SELECT region, race, AVG(hours_per_week) FROM people GROUP BY region, race;
        END WORKLOAD;
    """
    answers = {}
    for kind in BACKENDS:
        with _connect(kind, files, request, str(tmp_path / kind), epsilon=1.0, seed=11) as c:
            cur = c.cursor().execute(script)
            sets = [(cur.fetchall(), cur.result.stderr)]
            while cur.nextset():
                sets.append((cur.fetchall(), cur.result.stderr))
            answers[kind] = sets
    assert answers["duckdb"] == answers["spark"]


def test_key_counts_and_distinct_units_agree_on_both_backends(files, request):
    """The partition-selection scan (keys as text) and the distinct-unit pairs give the same exact counts."""
    spec = PEOPLE_CATALOG_TOML.replace("[tables.people]", '[tables.people]\nprivacy_unit = "age"\nmax_rows_per_unit = 50')
    spec = spec.replace('race           = { type = "categorical", values = ["White", "Black", "Asian", "Native", "Other"] }',
                        'race           = { type = "key" }')
    table = Catalog.from_toml(spec).get("people")
    pairs = table.distinct_units(("region",), "TRUE")
    out = {}
    for kind in BACKENDS:
        backend = DuckDBBackend(duckdb.connect(files["database"], read_only=True)) if kind == "duckdb" else \
            make_backend("spark", request.getfixturevalue("spark"))
        keys, cells, counts = backend.key_counts(table, "race", ("sex",), "secret")
        found = sorted(zip(keys.tolist(), cells.tolist(), counts.tolist()))
        out[kind] = (found, backend.marginals(pairs, [("region",)], "secret")[("region",)].tolist())
    assert out["duckdb"] == out["spark"]
    assert {k for k, _, _ in out["duckdb"][0]} == {"White", "Black", "Asian", "Native", "Other"}
    assert sum(out["duckdb"][1]) <= 4 * 100  # at most one pair per (age, region)



def test_graph_edges_and_projected_degrees_agree_on_both_backends(files, request):
    """The cleaned, numbered edge list (and so the projection) is the same on both engines."""
    catalog = Catalog.from_toml('[graphs.people]\nsource = "age"\ntarget = "hours_per_week"\nmax_degree = 5\n'
                                'degrees = "people_degrees"\n')
    out = {}
    for kind in BACKENDS:
        backend = DuckDBBackend(duckdb.connect(files["database"], read_only=True)) if kind == "duckdb" else \
            make_backend("spark", request.getfixturevalue("spark"))
        out[kind] = [backend.marginals(catalog.get(name), [tuple(catalog.get(name).domain.attributes)])
                     for name in ("people", "people_degrees")]
        out[kind] = [next(iter(m.values())).tolist() for m in out[kind]]
    assert out["duckdb"] == out["spark"] and out["duckdb"][0][0] > 0

HOSTILE = {
    "My Col": (integer(-2, 3), "DOUBLE", [-5, -2, -1.5, 0.7, 2.9, 3, 10, 1e300, math.inf, math.nan, None]),
    "n": (integer(0, 2, nullable=True), "INTEGER", [-1, 0, 1, 2, 9, None]),
    "x": (numeric(0, 100, 4), "DOUBLE", [-1, 0, 24.99, 25, 50, 99.9, 100, 1e300, -math.inf, math.nan]),
    "z": (numeric(0, 100, 3), "DOUBLE", [0, 100 / 3, 33.3, 66.7, 100, None]),
    "s": (numeric(-1.5, 2.5, 4, nullable=True), "DOUBLE", [-7, -1.5, -0.5, 0.49, 0.5, 2.5, None]),
    "c": (categorical(["x", "y"]), "VARCHAR", ["x", "y", "x", "y", "w", "X"]),
    "o": (categorical(["x", "it's", "rest"], other="rest", nullable=True), "VARCHAR", ["x", "it's", "w", "", None]),
    "k": (categorical(["1", "2"]), "INTEGER", [1, 2, 1, 2, 3]),
}


def _hostile_sql(rows: int = 600) -> str:
    """Rows mixing every column's edge values (out of range, NULL, undeclared, quoted)."""
    rng = np.random.default_rng(5)

    def literal(value, sql_type: str) -> str:
        if value is None:
            return f"CAST(NULL AS {sql_type})"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return f"CAST('{value!r}' AS {sql_type})"

    lines = []
    for _ in range(rows):
        cells = [literal(values[rng.integers(len(values))], t) for _, t, values in HOSTILE.values()]
        lines.append("(" + ", ".join(cells) + ")")
    names = ", ".join('"' + n + '"' for n in HOSTILE)
    return f"SELECT * FROM (VALUES {', '.join(lines)}) AS t({names})"


HOSTILE_CLIQUES = [
    [("My Col", "n", "c")],
    [("x",), ("z", "k"), ("s", "o"), ()],
    [()],
    [("My Col",), ("n",), ("x",), ("z",), ("s",), ("c",), ("o",), ("k",), ("c", "o", "s")],
]


@pytest.mark.parametrize("cliques", HOSTILE_CLIQUES, ids=lambda q: f"{len(q)}-cliques")
def test_exact_marginals_agree_on_hostile_data(cliques, files, spark):
    from dpsql.backends.spark import SparkBackend

    table = Catalog.from_dict({"tables": {"hostile": {"columns": {n: d for n, (d, _, _) in HOSTILE.items()}}}}).get("hostile")
    con = _parquet_view(files["hostile"], "hostile")
    ours = DuckDBBackend(con).marginals(table, cliques)
    theirs = SparkBackend(spark).marginals(table, cliques)
    fitting = con.execute(f"SELECT COUNT(*) FROM hostile WHERE {table.fits_sql()}").fetchone()[0]
    assert 0 < fitting < 600
    for q in cliques:
        np.testing.assert_array_equal(ours[q], theirs[q], err_msg=f"clique {q}")
        assert ours[q].sum() == fitting and ours[q].shape == (table.domain.size(q),)


def test_spark_runs_one_scan_of_transpiled_sql(spark):
    table = Catalog.from_toml(PEOPLE_CATALOG_TOML).get("people")
    sql, _ = marginal_sql(table, [("age", "sex"), ("income",)])
    assert sql.count(' FROM "people"') == 1 and "GROUPING SETS" in sql
    plan = spark.sql(sqlglot.transpile(sql, read="duckdb", write="spark")[0])._jdf.queryExecution().executedPlan()
    assert plan.toString().count("FileScan parquet") == 1


# --- choosing a backend ----------------------------------------------------------------------


def test_backend_arguments_are_checked():
    with pytest.raises(dpsql.ProgrammingError, match="unknown backend"):
        dpsql.connect(backend="oracle")
    with pytest.raises(dpsql.ProgrammingError, match="only used with backend='spark'"):
        dpsql.connect(spark="local[1]")
    assert make_backend("duckdb") is None


def test_spark_by_master_url_joins_the_running_session(spark):
    backend = make_backend("spark", spark="local[2]")
    assert backend.spark is spark and backend.dialect == "spark"


def test_any_backend_object_is_accepted(files, tmp_path):
    con = _parquet_view(files["people"], "people")
    with dpsql.connect(":memory:", catalog=PEOPLE_CATALOG_TOML, state=str(tmp_path / "s"), epsilon=1.0,
                       backend=DuckDBBackend(con)) as c:
        assert len(c.cursor().execute("SELECT sex, COUNT(*) FROM people GROUP BY sex").fetchall()) == 2
    con.close()


# --- a deployment profile on Spark ------------------------------------------------------------------


def _spark_profile(folder: Path, people: str, served: bool) -> Path:
    """A profile whose protected table lives in Spark (Parquet); its DuckDB database holds no data."""
    from dpsql.interfaces.server.auth import scram_verifier

    duckdb.connect(str(folder / "public.duckdb")).close()
    (folder / "catalog.toml").write_text(PEOPLE_CATALOG_TOML)
    server = f'[server]\nlisten = "127.0.0.1:0"\n' if served else ""
    password = f'password = "{scram_verifier("alice-pw")}"\n' if served else ""
    profile = folder / "profile.toml"
    profile.write_text(f'[data]\ndatabase = "public.duckdb"\ncatalog = "catalog.toml"\nengine = "spark"\n'
                       f'spark_master = "local[2]"\n[data.tables]\npeople = "{people}"\n[budget]\nepsilon = 1\n'
                       f'{server}[analysts.alice]\nepsilon = 0.5\n{password}')
    return profile


def test_a_profile_measures_in_spark(files, spark, tmp_path):
    with dpsql.connect(profile=_spark_profile(tmp_path, files["people"], served=False), analyst="alice") as conn:
        count = conn.execute("SELECT COUNT(*) AS n FROM people").fetchone()[0]
    assert abs(count - ROWS) < 0.05 * ROWS  # measured in Spark: the profile's DuckDB file has no rows at all


def test_dpsql_serve_over_spark(files, spark, tmp_path):
    """`dpsql serve` of a Spark profile (its own local Spark, in the server's process)."""
    psycopg = pytest.importorskip("psycopg")
    from served import Served

    server = Served(tmp_path, _spark_profile(tmp_path, files["people"], served=True))
    server.start()
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            rows = conn.execute("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex").fetchall()
        assert [r[0] for r in rows] == ["F", "M"] and abs(sum(r[1] for r in rows) - ROWS) < 0.05 * ROWS
    finally:
        server.stop()


def test_a_join_of_protected_tables_runs_in_the_engine_with_the_same_counts(files, request):
    """A self-join on the privacy unit (`dpsql.tables.joined`) is one SQL join in each engine: the joined,
    bounded counts are the same on both."""
    spec = PEOPLE_CATALOG_TOML.replace("[tables.people]", '[tables.people]\nprivacy_unit = "age"\nmax_rows_per_unit = 3')
    table = compile_query("SELECT COUNT(*) FROM people a JOIN people b USING (age) GROUP BY a.sex, b.region",
                          Catalog.from_toml(spec)).table
    assert table.contribution == 9
    out = {}
    for kind in BACKENDS:
        backend = DuckDBBackend(duckdb.connect(files["database"], read_only=True)) if kind == "duckdb" else \
            make_backend("spark", request.getfixturevalue("spark"))
        out[kind] = backend.marginals(table, [("a.sex", "b.region")], "secret")[("a.sex", "b.region")].tolist()
    assert out["duckdb"] == out["spark"] and sum(out["duckdb"]) > 0
