"""Tests for the deterministic demo table generator (dpsql.deployment.demo_data)."""

import tomllib

import duckdb
import pytest

from dpsql.tables.catalog import Catalog
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

ROWS = 20_000
COLUMNS = ["person_id", "age", "sex", "race", "education", "marital", "region",
           "hours_per_week", "income"]
EDUCATION = ["None", "Primary", "Some HS", "HS", "Some college", "Bachelors",
             "Masters", "Doctorate"]


def _fresh(rows=ROWS, seed=2026, table="people", threads=None):
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    if threads is not None:
        con.execute(f"SET threads = {threads}")
    create_people_table(con, rows=rows, table=table, seed=seed)
    return con


def _fingerprint(con, table="people"):
    cols = ", ".join(COLUMNS)
    unordered = con.execute(f"SELECT count(*), sum(hash({cols})) FROM {table}").fetchone()
    row_text = " || '|' || ".join(f"coalesce(CAST({c} AS VARCHAR), '<null>')" for c in COLUMNS)
    ordered = con.execute(
        f"SELECT md5(string_agg({row_text}, chr(10) ORDER BY person_id)) FROM {table}"
    ).fetchone()[0]
    return unordered, ordered


@pytest.fixture(scope="module")
def con():
    c = _fresh()
    yield c
    c.close()


def _one(con, sql):
    return con.execute(sql).fetchone()[0]


def test_same_seed_identical_table(con):
    again = _fresh(threads=1)
    assert _fingerprint(con) == _fingerprint(again)


def test_different_seed_differs(con):
    other = _fresh(seed=2027)
    fp_a, fp_b = _fingerprint(con), _fingerprint(other)
    assert fp_a[0] != fp_b[0] and fp_a[1] != fp_b[1]
    # Row by row, the two tables should agree on very few rows.
    sql = "SELECT age, sex, education, income FROM people ORDER BY person_id"
    a, b = con.execute(sql).fetchall(), other.execute(sql).fetchall()
    assert sum(x == y for x, y in zip(a, b)) < 0.01 * ROWS


def test_custom_table_name_and_replace():
    c = _fresh(rows=100, table="p small")
    create_people_table(c, rows=50, table="p small", seed=1)
    assert _one(c, 'SELECT count(*) FROM "p small"') == 50


def test_schema_types(con):
    described = con.execute("DESCRIBE people").fetchall()
    types = {r[0]: r[1] for r in described}
    assert list(types) == COLUMNS
    declared = Catalog.from_toml(PEOPLE_CATALOG_TOML).get("people").columns
    enums = {c: "ENUM(" + ", ".join(f"'{v}'" for v in declared[c].values) + ")"
             for c in ("sex", "race", "education", "marital", "region")}
    assert types == {"person_id": "BIGINT", "age": "INTEGER", **enums, "hours_per_week": "INTEGER", "income": "DOUBLE"}
    assert [r[0] for r in described if r[2] == "YES"] == ["hours_per_week"]  # the rest NOT NULL, as declared


def test_person_id_unique(con):
    n, distinct, lo, hi = con.execute(
        "SELECT count(*), count(DISTINCT person_id), min(person_id), max(person_id) FROM people"
    ).fetchone()
    assert n == distinct == ROWS and lo == 1 and hi == ROWS


def test_no_nulls_outside_hours(con):
    for c in COLUMNS:
        if c != "hours_per_week":
            assert _one(con, f"SELECT count(*) FROM people WHERE {c} IS NULL") == 0, c


def test_categorical_values_match_catalog(con):
    cols = tomllib.loads(PEOPLE_CATALOG_TOML)["tables"]["people"]["columns"]
    for name, spec in cols.items():
        if spec["type"] != "categorical":
            continue
        seen = {r[0] for r in con.execute(f"SELECT DISTINCT {name} FROM people").fetchall()}
        assert seen == set(spec["values"]), name
    assert cols["education"]["values"] == EDUCATION
    assert cols["education"].get("ordered") is True


def test_catalog_declaration():
    cat = tomllib.loads(PEOPLE_CATALOG_TOML)
    cols = cat["tables"]["people"]["columns"]
    assert list(cols) == ["age", "sex", "race", "education", "marital", "region",
                          "hours_per_week", "income"]
    assert "person_id" not in cols
    assert cols["age"] == {"type": "integer", "min": 0, "max": 99}
    assert cols["hours_per_week"] == {"type": "integer", "min": 0, "max": 99, "nullable": True}
    assert cols["income"] == {"type": "numeric", "min": 0, "max": 200000, "bins": 40}
    assert cols["sex"]["values"] == ["F", "M"]
    assert cols["race"]["values"] == ["White", "Black", "Asian", "Native", "Other"]
    assert cols["marital"]["values"] == ["Never married", "Married", "Divorced", "Widowed"]
    assert cols["region"]["values"] == ["Northeast", "Midwest", "South", "West"]


def test_age_range_and_shape(con):
    lo, hi, over, kids, seniors = con.execute(
        "SELECT min(age), max(age), avg((age > 99)::INT), avg((age < 18)::INT),"
        " avg((age >= 65)::INT) FROM people"
    ).fetchone()
    assert lo == 0 and hi <= 104
    assert over < 0.001
    assert 0.19 < kids < 0.25 and 0.15 < seniors < 0.21


def test_deliberate_out_of_domain_ages():
    c = _fresh(rows=200_000, seed=5)
    n_over, lo, hi = c.execute(
        "SELECT count(*), min(age), max(age) FROM people WHERE age > 99"
    ).fetchone()
    assert 5 <= n_over <= 60 and lo >= 100 and hi <= 104


def test_hours_range_and_null_share(con):
    lo, hi, null_share = con.execute(
        "SELECT min(hours_per_week), max(hours_per_week),"
        " avg((hours_per_week IS NULL)::INT) FROM people"
    ).fetchone()
    assert lo == 0 and hi <= 99
    assert 0.035 < null_share < 0.07
    kids_null = _one(con, "SELECT avg((hours_per_week IS NULL)::INT) FROM people WHERE age < 14")
    prime_null = _one(con, "SELECT avg((hours_per_week IS NULL)::INT) FROM people"
                           " WHERE age BETWEEN 25 AND 54")
    assert kids_null > prime_null


def test_income_range(con):
    lo, hi, zeros, above = con.execute(
        "SELECT min(income), max(income), avg((income = 0)::INT), avg((income > 200000)::INT)"
        " FROM people"
    ).fetchone()
    assert lo == 0 and hi <= 300000
    assert 0.005 < zeros < 0.08
    assert 0.002 < above < 0.03
    assert _one(con, "SELECT count(*) FROM people WHERE income <> round(income)") == 0


def test_marginal_shares(con):
    male = _one(con, "SELECT avg((sex = 'M')::INT) FROM people")
    assert 0.46 < male < 0.52
    races = dict(con.execute("SELECT race, count(*) FROM people GROUP BY race").fetchall())
    assert races["White"] > races["Other"] > races["Black"] > races["Asian"] > races["Native"]
    south = _one(con, "SELECT avg((region = 'South')::INT) FROM people")
    assert 0.34 < south < 0.42


def test_income_rises_with_education(con):
    means = dict(con.execute(
        "SELECT education, avg(income) FROM people WHERE age >= 25 GROUP BY education"
    ).fetchall())
    below_hs = _one(con, "SELECT avg(income) FROM people WHERE age >= 25"
                         " AND education IN ('None', 'Primary', 'Some HS')")
    assert below_hs < means["HS"] < means["Some college"] < means["Bachelors"]
    assert means["Bachelors"] < means["Masters"] < means["Doctorate"]


def test_never_married_falls_with_age(con):
    shares = [r[1] for r in con.execute(
        "SELECT CASE WHEN age < 18 THEN 0 WHEN age < 30 THEN 1 WHEN age < 45 THEN 2"
        " WHEN age < 65 THEN 3 ELSE 4 END AS band,"
        " avg((marital = 'Never married')::INT) FROM people GROUP BY band ORDER BY band"
    ).fetchall()]
    assert all(a > b for a, b in zip(shares, shares[1:])), shares
    widowed = [r[1] for r in con.execute(
        "SELECT age >= 65, avg((marital = 'Widowed')::INT) FROM people"
        " WHERE age >= 18 GROUP BY 1 ORDER BY 1").fetchall()]
    assert widowed[1] > widowed[0] + 0.05


def test_children_have_low_education(con):
    top = _one(con, "SELECT count(*) FROM people WHERE age < 18 AND education IN"
                    " ('HS', 'Some college', 'Bachelors', 'Masters', 'Doctorate')")
    assert top == 0
    assert _one(con, "SELECT count(*) FROM people WHERE age < 22"
                     " AND education IN ('Bachelors', 'Masters', 'Doctorate')") == 0


def test_hours_depend_on_sex_and_age(con):
    by_sex = dict(con.execute(
        "SELECT sex, avg(hours_per_week) FROM people WHERE age BETWEEN 25 AND 64"
        " GROUP BY sex").fetchall())
    assert by_sex["M"] > by_sex["F"] + 2
    prime = _one(con, "SELECT avg(hours_per_week) FROM people WHERE age BETWEEN 25 AND 54")
    old = _one(con, "SELECT avg(hours_per_week) FROM people WHERE age >= 70")
    assert prime > 3 * old


@pytest.mark.parametrize("kwargs", [
    {"rows": -1}, {"rows": 1.5}, {"rows": True}, {"seed": "x"}, {"seed": 2 ** 63},
    {"table": ""},
])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        create_people_table(duckdb.connect(), **kwargs)


def test_zero_rows():
    c = _fresh(rows=0)
    assert _one(c, "SELECT count(*) FROM people") == 0
