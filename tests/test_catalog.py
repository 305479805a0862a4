"""Tests for the catalog (dpsql.tables.catalog): declarations, validation, binning SQL and comparisons.

The binning and fit conditions are checked by running the SQL the catalog emits in
DuckDB on tiny tables that hold out-of-domain values, so what is tested is what the
backend will actually compute.
"""

import datetime as dt
from decimal import Decimal

import duckdb
import numpy as np
import pytest

from dpsql import CatalogError, ProgrammingError
from dpsql.tables.catalog import Catalog
from dpsql.tables.column_declarations import boolean, categorical, date, integer, numeric, parse_column, presence, timestamp
from dpsql.tables.columns import Column

TOML = """
[tables.people]
[tables.people.columns]
age       = { type = "integer", min = 0, max = 99 }
hours     = { type = "integer", min = -2, max = 3, nullable = true }
income    = { type = "numeric", min = 0, max = 100, bins = 4 }
score     = { type = "numeric", min = -1.5, max = 2.5, bins = 4, nullable = true }
sex       = { type = "categorical", values = ["F", "M"] }
education = { type = "categorical", values = ["None", "HS", "College"], ordered = true }
region    = { type = "categorical", values = ["N", "S", "Other"], other = "Other", nullable = true }

[tables.visits]
[tables.visits.columns]
day = { type = "integer", min = 1, max = 7 }
"""


@pytest.fixture(scope="module")
def catalog():
    return Catalog.from_toml(TOML)


def col(decl: dict, name: str = "x") -> Column:
    return parse_column(name, decl)


# --- parsing the documented format -------------------------------------------------------


def test_toml_tables_and_domain_order(catalog):
    assert set(catalog.tables) == {"people", "visits"}
    people = catalog.get("people")
    assert list(people.columns) == ["age", "hours", "income", "score", "sex", "education", "region"]
    # The domain follows declaration order; nullable columns have one extra (last) bin.
    assert people.domain.attributes == tuple(people.columns)
    assert people.domain.sizes == (100, 7, 4, 5, 2, 3, 4)


def test_toml_integer_column(catalog):
    age, hours = catalog.get("people").column("age"), catalog.get("people").column("hours")
    assert (age.kind, age.low, age.high, age.nullable) == ("integer", 0, 99, False)
    assert age.value_bins == age.size == 100 and age.null_bin is None
    assert hours.value_bins == 6 and hours.size == 7 and hours.null_bin == 6
    assert hours.labels() == [-2, -1, 0, 1, 2, 3, None]
    np.testing.assert_array_equal(hours.bin_values(), [-2, -1, 0, 1, 2, 3, 0])
    np.testing.assert_array_equal(hours.not_null(), [1, 1, 1, 1, 1, 1, 0])
    np.testing.assert_array_equal(hours.is_null(), [0, 0, 0, 0, 0, 0, 1])


def test_toml_numeric_column(catalog):
    income, score = catalog.get("people").column("income"), catalog.get("people").column("score")
    assert (income.kind, income.bins, income.width) == ("numeric", 4, 25)
    assert income.edges() == [0, 25, 50, 75, 100]
    assert income.labels() == [0.0, 25.0, 50.0, 75.0]  # a bin shows its lower edge
    np.testing.assert_array_equal(income.bin_values(), [12.5, 37.5, 62.5, 87.5])  # midpoints
    assert score.size == 5 and score.labels() == [-1.5, -0.5, 0.5, 1.5, None]
    np.testing.assert_array_equal(score.bin_values(), [-1.0, 0.0, 1.0, 2.0, 0.0])


def test_toml_categorical_columns(catalog):
    people = catalog.get("people")
    sex, edu, region = people.column("sex"), people.column("education"), people.column("region")
    assert sex.values == ("F", "M") and not sex.ordered and sex.other is None and sex.size == 2
    assert edu.ordered and edu.labels() == ["None", "HS", "College"]
    assert region.other == "Other" and region.nullable and region.labels() == ["N", "S", "Other", None]
    with pytest.raises(CatalogError, match="categorical"):
        sex.bin_values()


def test_numeric_edges_exact_when_width_does_not_terminate():
    # 100 / 3 has no finite decimal expansion: the last edge must still be exactly max.
    v = col({"type": "numeric", "min": 0, "max": 100, "bins": 3})
    assert v.edges()[0] == 0 and v.edges()[-1] == 100
    np.testing.assert_array_equal(v.compare("<", 100), [1, 1, 1])
    np.testing.assert_array_equal(v.compare(">=", 0), [1, 1, 1])


def test_python_api_matches_toml(catalog):
    api = Catalog()
    api.add_table("people", {
        "age": integer(0, 99),
        "hours": integer(-2, 3, nullable=True),
        "income": numeric(0, 100, 4),
        "score": numeric(-1.5, 2.5, 4, nullable=True),
        "sex": categorical(["F", "M"]),
        "education": categorical(["None", "HS", "College"], ordered=True),
        "region": categorical(["N", "S", "Other"], other="Other", nullable=True),
    })
    assert api.get("people").signature() == catalog.get("people").signature()
    assert api.get("people").domain == catalog.get("people").domain


def test_load_sources(tmp_path, catalog):
    path = tmp_path / "catalog.toml"
    path.write_text(TOML)
    spec = {"tables": {"visits": {"columns": {"day": {"type": "integer", "min": 1, "max": 7}}}}}
    assert Catalog.load(None).tables == {}
    assert Catalog.load(catalog) is catalog
    assert "visits" in Catalog.load(spec)
    assert "people" in Catalog.load(TOML)
    assert "people" in Catalog.load(path)
    assert "people" in Catalog.load(str(path))
    with pytest.raises(CatalogError, match="does not exist"):
        Catalog.load(str(tmp_path / "missing.toml"))


def test_lookups_are_case_insensitive(catalog):
    assert "PEOPLE" in catalog and catalog.get("People") is catalog.get("people")
    assert catalog.get("nope") is None and "nope" not in catalog
    assert catalog.get("people").column("AGE").name == "age"
    with pytest.raises(CatalogError, match="'weight' is not declared .*declared columns: age"):
        catalog.get("people").column("weight")


def test_describe_and_signature(catalog):
    people = catalog.get("people")
    assert people.column("hours").describe() == "integer -2..3, nullable"
    assert "numeric [0, 100) in 4 bins of width 25" in people.column("income").describe()
    assert "other='Other'" in people.column("region").describe()
    changed = Catalog.from_toml(TOML.replace("max = 99", "max = 98")).get("people")
    assert changed.signature() != people.signature()


def test_categorical_values_may_be_numbers_as_strings():
    c = col({"type": "categorical", "values": ["1", "2", "2.5"]})
    assert c.labels() == ["1", "2", "2.5"]
    # A number is compared by value with the one declared value that reads as it.
    np.testing.assert_array_equal(c.compare("=", 1), [1, 0, 0])
    np.testing.assert_array_equal(c.one_of([2, 2.5]), [0, 1, 1])
    with pytest.raises(CatalogError, match="string literal \\(3: no declared value reads as it\\)"):
        c.compare("=", 3)
    ambiguous = col({"type": "categorical", "values": ["2", "02"]})
    with pytest.raises(CatalogError, match="several declared values read as it"):
        ambiguous.compare("=", 2)


# --- boolean, date and timestamp columns ------------------------------------------------------------

def test_boolean_column():
    married = col(boolean(nullable=True))
    assert (married.size, married.labels(), married.sql_type, married.describe()) == (3, [False, True, None],
                                                                                      "BOOLEAN", "boolean, nullable")
    np.testing.assert_array_equal(married.compare("=", True), [0, 1, 0])
    np.testing.assert_array_equal(married.compare("<>", "false"), [0, 1, 0])
    np.testing.assert_array_equal(married.bin_values(), [0, 1, 0])
    with pytest.raises(CatalogError, match="compare it with TRUE or FALSE, not 2"):
        married.compare("=", 2)


def test_date_column_days_months_and_years():
    day = col(date("2015-01-01", "2024-12-31"))
    assert (day.size, day.sql_type, day.binned) == (3653, "DATE", False)
    assert day.labels()[:2] == [dt.date(2015, 1, 1), dt.date(2015, 1, 2)] and day.labels()[-1] == dt.date(2024, 12, 31)
    assert day.describe() == "date from 2015-01-01 to 2024-12-31 by day (3653 periods)"
    np.testing.assert_array_equal(np.flatnonzero(day.compare("=", "2015-01-03")), [2])
    assert day.compare("<=", dt.date(2015, 1, 3)).sum() == 3 and day.compare(">", "2024-12-30").sum() == 1
    month = col({"type": "date", "min": dt.date(2015, 3, 17), "max": "2016-02-01", "granularity": "month"})
    assert month.size == 12 and month.labels()[0] == dt.date(2015, 3, 1) and month.binned
    assert month.compare(">=", "2015-06-01").sum() == 9
    assert month.nearest_edge("2015-06-20") == ("2015-07-01", "x is binned by month: the literal 2015-06-20 was "
                                                              "answered at the nearest period start, 2015-07-01")
    year = col(date("2015-06-01", "2024-01-01", granularity="year"))
    assert year.labels() == [dt.date(y, 1, 1) for y in range(2015, 2025)]


def test_timestamp_column():
    hour = col(timestamp("2020-01-01 00:30:00", "2020-01-02 23:59:59", nullable=True))
    assert (hour.size, hour.sql_type) == (49, "TIMESTAMP")
    assert hour.labels()[1] == dt.datetime(2020, 1, 1, 1) and hour.representatives()[-1] is None
    np.testing.assert_array_equal(np.flatnonzero(hour.compare("<", "2020-01-01 03:00:00")), [0, 1, 2])
    with pytest.raises(CatalogError, match="binned by hour: compare it with <"):
        hour.compare("=", "2020-01-01 03:00:00")
    with pytest.raises(CatalogError, match="outside the declared domain of 'x' \\[2020-01-01 00:00:00, 2020-01-03"):
        hour.compare("<", "2020-01-04")
    strict = col({**timestamp("2020-01-01", "2020-01-02", granularity="minute"), "strict": True})
    with pytest.raises(CatalogError, match="not a period start of 'x'.*declared strict\\): use 2020-01-01 00:01:00 or"):
        strict.nearest_edge("2020-01-01 00:01:30")


def test_temporal_and_boolean_bin_sql_in_duckdb_and_spark_sql():
    """Dates, timestamps and booleans bin in DuckDB, and their SQL transpiles to Spark's dialect."""
    import sqlglot
    con = duckdb.connect()
    cases = [
        (date("2020-01-01", "2020-12-31"), "DATE",
         [("2019-05-01", 0), ("2020-01-01", 0), ("2020-02-01", 31), ("2020-12-31", 365), ("2031-01-01", 365)]),
        (date("2020-01-15", "2021-06-30", granularity="month"), "DATE",
         [("2020-01-01", 0), ("2020-01-31", 0), ("2020-02-01", 1), ("2021-06-30", 17), ("2022-01-01", 17)]),
        (timestamp("2020-01-01", "2020-01-01 23:59:59"), "TIMESTAMP",
         [("2020-01-01 00:59:59", 0), ("2020-01-01 01:00:00", 1), ("2020-01-01 23:10:00", 23)]),
        (timestamp("2020-01-01", "2020-01-01 01:00:00", granularity="minute"), "TIMESTAMP",
         [("2020-01-01 00:10:30", 10), ("2020-01-01 01:00:00", 60)]),
        (boolean(nullable=True), "BOOLEAN", [(True, 1), (False, 0), (None, 2)]),
    ]
    for decl, sql_type, values in cases:
        column = col(decl, name="My Col")
        for value, expected in values:
            got = con.execute(f'SELECT {column.bin_sql()} FROM (SELECT CAST(? AS {sql_type}) AS "My Col")',
                              [value]).fetchone()[0]
            assert got == expected, (decl, value, got)
        assert sqlglot.transpile(column.bin_sql(), read="duckdb", write="spark")


INVALID_TEMPORAL = [
    ({"type": "date", "min": "2020-01-01", "max": "2020-12-31", "granularity": "hour"}, "granularity must be one of"),
    ({"type": "date", "max": "2020-12-31"}, "date columns need min"),
    ({"type": "date", "min": "2021-01-01", "max": "2020-12-31"}, "min must not be after max"),
    ({"type": "date", "min": "soon", "max": "2020-12-31"}, "x.min must be a date or timestamp"),
    ({"type": "timestamp", "min": "2000-01-01", "max": "2020-12-31", "granularity": "minute"}, "more than 10\\^6"),
    ({"type": "boolean", "values": [True]}, "unknown keys \\['values'\\]"),
    ({"type": "numeric", "min": 0, "max": 1, "bins": 2, "strict": "yes"}, "strict must be true or false"),
]


@pytest.mark.parametrize("decl,message", INVALID_TEMPORAL)
def test_invalid_temporal_declarations(decl, message):
    with pytest.raises(CatalogError, match=message):
        parse_column("x", decl)


def test_toml_dates_are_declared_as_strings_or_toml_dates():
    text = """
        [tables.e.columns]
        d = { type = "date", min = 2015-01-01, max = "2015-12-31", granularity = "month" }
        t = { type = "timestamp", min = 2020-01-01T00:00:00, max = 2020-01-01T12:00:00, granularity = "hour" }
        m = { type = "boolean" }
    """
    table = Catalog.from_toml(text).get("e")
    assert table.domain.sizes == (12, 13, 2)
    assert "('d', 'date from 2015-01-01 to 2015-12-01 by month (12 periods)')" in table.signature()


def test_a_presence_column_declares_null_ness_only():
    catalog = Catalog.from_toml(
        '[tables.v.columns]\nage = { type = "integer", min = 0, max = 9 }\n'
        'device = { type = "presence", nullable = true }\nseen = { type = "presence" }')
    table = catalog.get("v")
    device, seen = table.column("device"), table.column("seen")
    assert (device.size, device.nullable, list(device.not_null())) == (2, True, [1.0, 0.0])
    assert (seen.size, seen.nullable) == (1, False)
    assert table.domain.attributes == ("age", "device", "seen")
    assert device.describe() == "presence only (NULL or not), nullable" and device == col(presence(), "device")
    for use in (lambda: device.labels(), lambda: device.bin_values(), lambda: device.compare("=", "a"),
                lambda: device.one_of(["a"])):
        with pytest.raises(CatalogError, match="'device' is declared for presence only"):
            use()


# --- validation ------------------------------------------------------------------------------

INVALID_COLUMNS = [
    ({}, "needs a type"),
    ("integer", "needs a type"),
    ({"type": "datetime"}, "unknown type 'datetime'"),
    ({"type": "integer", "min": 0, "max": 1, "bins": 3}, r"unknown keys \['bins'\]"),
    ({"type": "numeric", "min": 0, "max": 1, "bins": 3, "values": []}, r"unknown keys \['values'\]"),
    ({"type": "categorical", "values": ["a"], "min": 0}, r"unknown keys \['min'\]"),
    ({"type": "integer", "min": 0, "max": 1, "nullable": "yes"}, "nullable must be true or false"),
    ({"type": "categorical", "values": []}, "non-empty list of strings"),
    ({"type": "categorical", "values": "abc"}, "non-empty list of strings"),
    ({"type": "categorical", "values": ["a", 1]}, "non-empty list of strings"),
    ({"type": "categorical"}, "non-empty list of strings"),
    ({"type": "presence", "values": ["a"]}, r"unknown keys \['values'\]"),
    ({"type": "presence", "nullable": 1}, "nullable must be true or false"),
    ({"type": "categorical", "values": ["a", "a"]}, "distinct"),
    ({"type": "categorical", "values": ["a", "b"], "other": "c"}, "other = 'c' must be one of the declared values"),
    ({"type": "categorical", "values": ["a", "b"], "ordered": "yes"}, "ordered must be true or false"),
    ({"type": "integer", "max": 1}, "integer columns need min"),
    ({"type": "integer", "min": 1}, "integer columns need max"),
    ({"type": "numeric", "min": 0, "bins": 2}, "numeric columns need max"),
    ({"type": "integer", "min": "0", "max": 1}, "x.min must be a number"),
    ({"type": "integer", "min": 0, "max": True}, "x.max must be a number"),
    ({"type": "numeric", "min": 0, "max": float("inf"), "bins": 2}, "x.max must be finite"),
    ({"type": "numeric", "min": float("nan"), "max": 1, "bins": 2}, "x.min must be finite"),
    ({"type": "integer", "min": 0.5, "max": 3}, "integer bounds must be integers"),
    ({"type": "integer", "min": 3, "max": 2}, "min <= max"),
    ({"type": "integer", "min": 0, "max": 1_000_000}, "more than 10\\^6 values; declare it numeric"),
    ({"type": "numeric", "min": 0, "max": 1}, "need bins"),
    ({"type": "numeric", "min": 0, "max": 1, "bins": 0}, "need bins"),
    ({"type": "numeric", "min": 0, "max": 1, "bins": 2.0}, "need bins"),
    ({"type": "numeric", "min": 0, "max": 1, "bins": True}, "need bins"),
    ({"type": "numeric", "min": 0, "max": 1, "bins": 1_000_001}, "need bins"),
    ({"type": "numeric", "min": 1, "max": 1, "bins": 2}, "min < max"),
    ({"type": "numeric", "min": 2, "max": 1, "bins": 2}, "min < max"),
]


@pytest.mark.parametrize("decl,message", INVALID_COLUMNS)
def test_invalid_column_declarations(decl, message):
    with pytest.raises(CatalogError, match=message) as info:
        parse_column("x", decl)
    assert "column 'x'" in str(info.value) or "x.m" in str(info.value)


def test_catalog_error_is_a_programming_error():
    assert issubclass(CatalogError, ProgrammingError)


def test_boundary_declarations_are_accepted():
    assert col({"type": "integer", "min": 5, "max": 5}).size == 1
    assert col({"type": "integer", "min": 0, "max": 999_999}).size == 1_000_000
    assert col({"type": "integer", "min": 1.0, "max": 3.0}).labels() == [1, 2, 3]
    assert col({"type": "numeric", "min": 0, "max": 1, "bins": 1}).size == 1
    assert col({"type": "categorical", "values": ["a"], "ordered": False}).size == 1


INVALID_CATALOGS = [
    ("[tables\n", "not valid TOML"),
    ("tables = 3", r"needs a \[tables\] section"),
    ("extra = 1\n[tables]", r"unknown top-level catalog keys: \['extra'\]"),
    ("[tables]\nt = 3", r"only a \[tables.t.columns\] section"),
    ("[tables.t]\nowner = 'me'", r"only a \[tables.t.columns\] section"),
    ("[tables.t]\ncolumns = 3", "columns must be a table of declarations"),
    ("[tables.t]", "declares no columns"),
    ("[tables.t.columns]", "declares no columns"),
    ("[tables.t.columns]\na = { type = 'integer', min = 0, max = 1 }\nA = { type = 'integer', min = 0, max = 1 }",
     "differ only in case"),
    ("[tables.t.columns]\na = { type = 'integer', min = 0, max = 1 }\n"
     "[tables.T.columns]\na = { type = 'integer', min = 0, max = 1 }", "declared twice"),
    ("[tables.t.columns]\na = { type = 'numeric', min = 0, max = inf, bins = 2 }", "must be finite"),
    ("[tables.t.columns]\na = 'integer'", "needs a type"),
]


@pytest.mark.parametrize("text,message", INVALID_CATALOGS)
def test_invalid_catalogs(text, message):
    with pytest.raises(CatalogError, match=message):
        Catalog.from_toml(text)


def test_empty_catalog_is_allowed():
    assert Catalog.from_toml("").tables == {}
    assert Catalog.from_toml("[tables]").tables == {}


# --- bin_sql / fits_sql, run in DuckDB ---------------------------------------------------------

# (declaration, DuckDB column type, [(value, expected bin or None when the row does not fit)])
BINNING = [
    pytest.param(
        integer(-2, 3), "DOUBLE",
        [(-5, 0), (-2, 0), (-1.5, 0), (0.7, 2), (2.9, 4), (3, 5), (10, 5), (None, None)],
        id="integer-clamps-and-floors",
    ),
    pytest.param(
        integer(0, 2, nullable=True), "INTEGER",
        [(-1, 0), (0, 0), (1, 1), (2, 2), (9, 2), (None, 3)],
        id="integer-nullable",
    ),
    pytest.param(
        numeric(0, 100, 4), "DOUBLE",
        [(-1, 0), (0, 0), (24.99, 0), (25, 1), (50, 2), (99.9, 3), (100, 3), (1e9, 3), (None, None)],
        id="numeric-clamps-into-end-bins",
    ),
    pytest.param(
        numeric(-1.5, 2.5, 4, nullable=True), "DOUBLE",
        [(-7, 0), (-1.5, 0), (-0.5, 1), (0.49, 1), (0.5, 2), (2.5, 3), (None, 4)],
        id="numeric-nullable-negative-low",
    ),
    pytest.param(
        categorical(["x", "y"]), "VARCHAR",
        [("x", 0), ("y", 1), ("w", None), ("X", None), (None, None)],
        id="categorical-undeclared-excluded",
    ),
    pytest.param(
        categorical(["x", "y", "rest"], other="rest"), "VARCHAR",
        [("x", 0), ("y", 1), ("rest", 2), ("w", 2), ("", 2), (None, None)],
        id="categorical-other-fallback",
    ),
    pytest.param(
        categorical(["x", "y"], nullable=True), "VARCHAR",
        [("x", 0), ("y", 1), ("w", None), (None, 2)],
        id="categorical-nullable",
    ),
    pytest.param(
        categorical(["x", "rest"], other="rest", nullable=True), "VARCHAR",
        [("x", 0), ("w", 1), (None, 2)],
        id="categorical-other-nullable",
    ),
    pytest.param(
        presence(), "VARCHAR",
        [("a", 0), ("", 0), (None, 1)],
        id="presence-nullable",
    ),
    pytest.param(
        presence(nullable=False), "INTEGER",
        [(7, 0), (None, None)],
        id="presence-not-null",
    ),
    pytest.param(
        categorical(["1", "2"]), "INTEGER",
        [(1, 0), (2, 1), (3, None)],
        id="categorical-over-integer-column",
    ),
]


@pytest.mark.parametrize("decl,sql_type,cases", BINNING)
def test_bin_sql_and_fits_sql_in_duckdb(decl, sql_type, cases):
    column = col(decl, name="My Col")  # a name that needs quoting
    con = duckdb.connect()
    con.execute(f'CREATE TABLE r (id INTEGER, "My Col" {sql_type})')
    con.executemany("INSERT INTO r VALUES (?, ?)", [(i, v) for i, (v, _) in enumerate(cases)])
    fits = column.fits_sql() or "TRUE"
    rows = con.execute(f"SELECT id, {fits}, {column.bin_sql()} FROM r ORDER BY id").fetchall()
    for (i, fit, b), (value, expected) in zip(rows, cases):
        assert bool(fit) == (expected is not None), f"fits_sql wrong for {value!r}"
        if expected is not None:
            assert b == expected, f"bin of {value!r}: got {b}, expected {expected}"
            assert 0 <= b < column.size


def test_fits_sql_is_none_when_every_row_fits():
    assert col(integer(0, 1, nullable=True)).fits_sql() is None
    assert col(numeric(0, 1, 2, nullable=True)).fits_sql() is None
    assert col(categorical(["a", "b"], other="b", nullable=True)).fits_sql() is None
    assert col(integer(0, 1)).fits_sql() == '"x" IS NOT NULL'


def test_table_fits_sql_combines_columns():
    cat = Catalog.from_dict({"tables": {"t": {"columns": {
        "a": integer(0, 3), "c": categorical(["x", "y"]), "n": integer(0, 1, nullable=True),
    }}}})
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER, a INTEGER, c VARCHAR, n INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [
        (0, 1, "x", None),    # fits (n nullable)
        (1, None, "x", 1),    # a NULL, not nullable: out
        (2, 7, "y", 0),       # out of range: clamped, still fits
        (3, 2, "w", 0),       # undeclared category without fallback: out
        (4, 2, None, 0),      # NULL category, not nullable: out
    ])
    kept = con.execute(f"SELECT id FROM t WHERE {cat.get('t').fits_sql()} ORDER BY id").fetchall()
    assert kept == [(0,), (2,)]
    only_nullable = Catalog.from_dict({"tables": {"u": {"columns": {"n": integer(0, 1, nullable=True)}}}})
    assert only_nullable.get("u").fits_sql() == "TRUE"


# --- compare: indicators over bins -----------------------------------------------------------


@pytest.mark.parametrize("op,literal,expected", [
    ("=", 1, [0, 0, 0, 1, 0, 0, 0]),
    ("<>", 1, [1, 1, 1, 0, 1, 1, 0]),
    ("<", 1, [1, 1, 1, 0, 0, 0, 0]),
    ("<=", 1, [1, 1, 1, 1, 0, 0, 0]),
    (">", 1, [0, 0, 0, 0, 1, 1, 0]),
    (">=", 1, [0, 0, 0, 1, 1, 1, 0]),
    ("=", -2, [1, 0, 0, 0, 0, 0, 0]),
    (">=", 3, [0, 0, 0, 0, 0, 1, 0]),
    ("<", -2, [0, 0, 0, 0, 0, 0, 0]),
    ("<", 0.5, [1, 1, 1, 0, 0, 0, 0]),   # non-integer literals compare with the integer bins
    ("=", 0.5, [0, 0, 0, 0, 0, 0, 0]),
    (">", -1.5, [0, 1, 1, 1, 1, 1, 0]),
])
def test_compare_integer(op, literal, expected):
    hours = col(integer(-2, 3, nullable=True))  # bins -2..3 and NULL (never true)
    np.testing.assert_array_equal(hours.compare(op, literal), expected)


@pytest.mark.parametrize("op,edge,expected", [
    ("<", 50, [1, 1, 0, 0]),
    ("<=", 50, [1, 1, 0, 0]),   # bins are [lo, hi): <= an edge is < that edge
    (">", 50, [0, 0, 1, 1]),
    (">=", 50, [0, 0, 1, 1]),
    ("<", 0, [0, 0, 0, 0]),
    (">=", 0, [1, 1, 1, 1]),
    ("<", 100, [1, 1, 1, 1]),
    (">=", 100, [0, 0, 0, 0]),
    ("<", 25.0, [1, 0, 0, 0]),
])
def test_compare_numeric_at_edges(op, edge, expected):
    income = col(numeric(0, 100, 4))
    np.testing.assert_array_equal(income.compare(op, edge), expected)


def test_compare_numeric_null_bin_never_true():
    score = col(numeric(-1.5, 2.5, 4, nullable=True))
    np.testing.assert_array_equal(score.compare(">=", -0.5), [0, 1, 1, 1, 0])
    np.testing.assert_array_equal(score.compare("<", -0.5), [1, 0, 0, 0, 0])


def test_compare_numeric_refusals():
    income = col(numeric(0, 100, 4))
    with pytest.raises(CatalogError, match="30 is not a bin edge of 'x'.*use 25 or 50"):
        income.compare("<", 30)
    for op in ("=", "<>"):
        with pytest.raises(CatalogError, match=f"binned.*instead of {op}"):
            income.compare(op, 25)
    with pytest.raises(CatalogError, match="outside the declared domain"):
        income.compare("<", 125)
    with pytest.raises(CatalogError, match="must be a number"):
        income.compare("<", "50")


def test_compare_integer_refusals():
    age = col(integer(0, 99))
    with pytest.raises(CatalogError, match=r"literal 100 is outside the declared domain of 'x' \[0, 99\]"):
        age.compare("=", 100)
    with pytest.raises(CatalogError, match="outside the declared domain"):
        age.compare(">", -1)
    with pytest.raises(CatalogError, match="must be a number, got 'ten'"):
        age.compare("=", "ten")
    with pytest.raises(CatalogError, match="must be a number"):
        age.compare("=", True)
    with pytest.raises(CatalogError, match="must be finite"):
        age.compare("<", float("nan"))
    with pytest.raises(CatalogError, match="unsupported comparison 'LIKE'"):
        age.compare("LIKE", 1)


@pytest.mark.parametrize("op,literal,expected", [
    ("=", "HS", [0, 1, 0, 0]),
    ("<>", "HS", [1, 0, 1, 0]),
    ("<", "HS", [1, 0, 0, 0]),
    ("<=", "HS", [1, 1, 0, 0]),
    (">", "HS", [0, 0, 1, 0]),
    (">=", "HS", [0, 1, 1, 0]),
    # Declared order, not alphabetical: "College" is the highest level.
    (">", "None", [0, 1, 1, 0]),
    ("<", "College", [1, 1, 0, 0]),
])
def test_compare_ordered_categorical(op, literal, expected):
    edu = col(categorical(["None", "HS", "College"], ordered=True, nullable=True))
    np.testing.assert_array_equal(edu.compare(op, literal), expected)


def test_compare_unordered_categorical():
    region = col(categorical(["N", "S", "Other"], other="Other", nullable=True))
    np.testing.assert_array_equal(region.compare("=", "S"), [0, 1, 0, 0])
    np.testing.assert_array_equal(region.compare("<>", "S"), [1, 0, 1, 0])
    np.testing.assert_array_equal(region.compare("=", "Other"), [0, 0, 1, 0])
    for op in ("<", "<=", ">", ">="):
        with pytest.raises(CatalogError, match="unordered categorical.*ordered = true"):
            region.compare(op, "S")
    with pytest.raises(CatalogError, match="'W' is not a declared value of 'x' .*'N', 'S', 'Other'"):
        region.compare("=", "W")
    with pytest.raises(CatalogError, match="compare it with a string literal"):
        region.compare("=", 3)


def test_undeclared_value_message_is_truncated():
    many = col(categorical([f"v{i}" for i in range(20)]))
    with pytest.raises(CatalogError, match=r"'v11', \.\.\.\)"):
        many.compare("=", "zz")


def test_one_of():
    hours = col(integer(-2, 3, nullable=True))
    np.testing.assert_array_equal(hours.one_of([-2, 3, 3]), [1, 0, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(hours.one_of([]), [0] * 7)
    region = col(categorical(["N", "S", "Other"], nullable=True))
    np.testing.assert_array_equal(region.one_of(["N", "Other"]), [1, 0, 1, 0])
    with pytest.raises(CatalogError, match="not a declared value"):
        region.one_of(["N", "E"])
    with pytest.raises(CatalogError, match="outside the declared domain"):
        hours.one_of([0, 4])


def test_decimal_bounds_are_exact():
    v = col(numeric(0.1, 0.5, 4))
    assert v.width == Decimal("0.1")
    np.testing.assert_array_equal(v.compare("<", 0.3), [1, 1, 0, 0])
    np.testing.assert_allclose(v.bin_values(), [0.15, 0.25, 0.35, 0.45])


def test_a_public_size_is_declared_and_validated():
    text = '[tables.t]\nrows = 48842\n[tables.t.columns]\nx = { type = "integer", min = 0, max = 3 }\n'
    assert Catalog.from_toml(text).get("t").public_rows == 48842
    assert Catalog.from_toml(text.replace("rows = 48842\n", "")).get("t").public_rows is None
    for bad in ("0", "-5", "1.5", "true", '"many"'):
        with pytest.raises(CatalogError, match="rows"):
            Catalog.from_toml(text.replace("48842", bad))
    # The size is planning input, not part of what measurements mean: the signature ignores it.
    assert Catalog.from_toml(text).get("t").signature() == Catalog.from_toml(text.replace("48842", "7")).get("t").signature()
