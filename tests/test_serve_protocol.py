"""The pieces of `dpsql serve`'s protocol that need no server: parameter types from their context,
COPY's options and formats, PostgreSQL's binary formats."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlglot

from dpsql.errors import NotSupportedError
from dpsql.answers.result import Result
from dpsql.interfaces.server import binary, copy_out, parameters, pgcompat

COLUMNS = {"people": {"age": "INTEGER", "sex": "VARCHAR", "income": "DOUBLE"},
           "notes": {"a": "BIGINT", "b": "VARCHAR", "c": "DATE"}}


def types_of(sql: str) -> dict[int, int]:
    return parameters.infer(sqlglot.parse_one(sql, read="duckdb"), COLUMNS)


def test_parameters_take_the_type_of_their_context():
    assert types_of("SELECT COUNT(*) FROM people p WHERE p.age > $1 AND $2 = sex AND income BETWEEN $3 AND $4") == \
        {1: pgcompat.INT4, 2: pgcompat.TEXT, 3: pgcompat.FLOAT8, 4: pgcompat.FLOAT8}
    assert types_of("SELECT COUNT(*) FROM people WHERE age IN ($1, $2) AND sex = $3::int LIMIT $4") == \
        {1: pgcompat.INT4, 2: pgcompat.INT4, 3: pgcompat.INT4, 4: pgcompat.INT8}
    assert types_of("INSERT INTO notes VALUES ($1, $2, $3)") == {1: pgcompat.INT8, 2: pgcompat.TEXT, 3: pgcompat.DATE}
    assert types_of("INSERT INTO notes (c, a) VALUES ($1, $2)") == {1: pgcompat.DATE, 2: pgcompat.INT8}
    assert types_of("SELECT $1, nosuch = $2 FROM people") == {}  # nothing tells: unknown (text)


def test_copy_options_and_formats():
    assert copy_out.parse("SELECT 1") is None and copy_out.parse("COPY people TO STDOUT") is None
    plain = copy_out.parse("COPY (SELECT a FROM t) TO STDOUT")
    assert (plain.query, plain.csv, plain.header, plain.delimiter, plain.null) == ("SELECT a FROM t", False, False,
                                                                                   "\t", "\\N")
    psql = copy_out.parse("COPY ( SELECT 1 ) TO STDOUT CSV HEADER")  # what psql's \copy sends
    assert psql.csv and psql.header and psql.delimiter == ","
    listed = copy_out.parse("COPY (SELECT 1) TO STDOUT WITH (FORMAT csv, HEADER false, DELIMITER ';', NULL 'NA')")
    assert listed.csv and not listed.header and listed.delimiter == ";" and listed.null == "NA"
    for bad in ("COPY (SELECT 1) TO STDOUT (FORMAT binary)", "COPY (SELECT 1) TO STDOUT (FREEZE)"):
        with pytest.raises(NotSupportedError):
            copy_out.parse(bad)
    result = Result(["x", "y"], [("a\tb", None), ('say "hi", ok', 1.5)])
    assert b"".join(copy_out.lines(result, plain)) == b"a\\tb\t\\N\nsay \"hi\", ok\t1.5\n"
    assert b"".join(copy_out.lines(result, psql)) == b'x,y\na\tb,\n"say ""hi"", ok",1.5\n'


@pytest.mark.parametrize("value, oid, back", [
    (decimal.Decimal("-1234567.891"), binary.NUMERIC, -1234567.891), (decimal.Decimal("0.0001"), binary.NUMERIC, 0.0001),
    (decimal.Decimal("10000"), binary.NUMERIC, 10000), (decimal.Decimal("0.00"), binary.NUMERIC, 0.0),
    (dt.date(1999, 12, 31), binary.DATE, "1999-12-31"), (dt.time(23, 59, 1, 5), binary.TIME, "23:59:01.000005"),
    (dt.datetime(2020, 1, 2, 3, 4, 5, 6), binary.TIMESTAMP, "2020-01-02 03:04:05.000006"),
])
def test_binary_formats_round_trip(value, oid, back):
    assert binary.decode(binary.encode(value, oid), oid) == back


def test_binary_numeric_is_postgres_layout():
    # 1234.5 = 1234 * 10000^0 + 5000 * 10000^-1: two base-10000 digits, weight 0, positive, scale 1
    assert binary.encode(decimal.Decimal("1234.5"), binary.NUMERIC) == bytes.fromhex("0002 0000 0000 0001 04d2 1388")


def test_columns_are_named_as_postgresql_names_them():
    from dpsql.sql.column_names import postgres_names

    sql = ("SELECT COUNT(*), sum(x), AVG(x) FILTER (WHERE y > 0), t.a, a AS \"Given\", 1 + 1, x::int, '1'::int, "
           "CASE WHEN a THEN 1 END, coalesce(a, b), pg_catalog.version(), current_setting('TimeZone'), "
           "(SELECT 2 AS two), row_number() OVER () FROM t")
    assert postgres_names(sql, ["?"] * 14) == ["count", "sum", "avg", "a", "Given", "?column?", "x", "int4", "case",
                                               "coalesce", "version", "current_setting", "two", "row_number"]
    by_sex = "SELECT sex, COUNT(*) FROM people GROUP BY sex"
    assert postgres_names(by_sex, ["sex", "COUNT(*)", "COUNT(*)_stderr"], [False, True, False]) == \
        ["sex", "count", "count_stderr"]  # a standard error column follows its column
    for sql, columns in (("SELECT * FROM t", ["a", "b"]), ("SHOW dpsql.budget", ["budget"]),
                         ("SELECT a, b FROM t", ["a"]), ("not sql at all", ["x"])):
        assert postgres_names(sql, columns) == columns  # cannot be matched to a select list: unchanged


def test_catalog_queries_of_bi_tools_are_rewritten_for_the_workspace():
    rewrite = pgcompat.rewrite_catalog_sql
    assert rewrite('SELECT "c"."relname" FROM "pg_catalog"."pg_class" AS "c" WHERE "c"."relname" = \'pg_class\'') == \
        'SELECT "c"."relname" FROM dpsql_pg_class AS "c" WHERE "c"."relname" = \'pg_class\''
    assert rewrite("SELECT col_description(CAST(CAST(FORMAT('%I.%I', s, t) AS REGCLASS) AS OID), 1) FROM pg_class") == \
        "SELECT col_description(CAST(to_regclass(printf('%s.%s', s, t)) AS BIGINT), 1) FROM dpsql_pg_class"
    assert rewrite("SELECT CAST($2::REGCLASS AS REGCLASS), CAST(c.oid AS regclass) FROM pg_class c") == \
        "SELECT CAST(to_regclass($2) AS BIGINT), CAST(c.oid AS BIGINT) FROM dpsql_pg_class c"
    assert rewrite("SELECT has_table_privilege('t', 'select') AS select, 1 AS x FROM pg_tables") == \
        "SELECT has_table_privilege('t', 'select') AS \"select\", 1 AS x FROM pg_tables"
    assert rewrite("SELECT pg_catalog.current_setting('TimeZone'), name FROM pg_catalog.pg_settings") == \
        "SELECT dpsql_current_setting('TimeZone'), name FROM dpsql_pg_settings"
    assert rewrite('SELECT system.main.current_setting(\'temp_directory\'), "current_setting"(\'x\') FROM pg_class') == \
        "SELECT dpsql_current_setting('temp_directory'), dpsql_current_setting('x') FROM dpsql_pg_class"
    assert pgcompat.reads_settings("select current_setting('x')") and not pgcompat.reads_settings("SELECT 1")


def test_dates_may_carry_a_zone_as_postgresql_reads_them():
    assert pgcompat.decode_parameter(b"2024-01-31 +00", pgcompat.DATE, False) == dt.date(2024, 1, 31)
